"""Packed run files: the runs of a results directory in two files, exact.

A runs directory holds one record `<run_id>.json` and one per-example CSV `<run_id>.csv` per run
(`robench.core.records`). `pack` stores them in the results directory as `records.jsonl` (one record per line,
in run-id order) and `examples.parquet` (every CSV row as text, with its run id; the CSV headers in the file's
metadata). `unpack` writes the runs directory back, byte for byte, into a cache folder named by the packed
files' SHA-256, reused while they are unchanged; so the records verify against their manifests, and every
reader works on a packed results directory as on any other (`runs_to_read`). `pack` refuses runs it could not
give back exactly. A packed directory's blind readings (`robench.report.readings`) sit beside the packed files in
`<results_dir>/readings/`; the unpacked copy carries them in its `runs/readings/` (its folder name includes their
SHA-256), so every reader of the runs finds them as in a loose directory.
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from robench.core.errors import RobenchError
from robench.core.files import atomic_write
from robench.core.hashing import file_sha256
from robench.core.paths import default_cache_dir

RECORDS = "records.jsonl"
EXAMPLES = "examples.parquet"
PACK_FORMAT = 1
METADATA_KEY = b"robench.pack"
RUN_ID_COLUMN = "run_id"
READINGS_DIR = "readings"  # the blind readings' folder: `<runs_dir>/readings/`, or `<results_dir>/readings/` packed


@dataclass(frozen=True)
class RunFiles:
    record: bytes  # `<run_id>.json`
    examples: bytes | None  # `<run_id>.csv` (None: the run has none)


def is_packed(results_dir: Path) -> bool:
    return (Path(results_dir) / RECORDS).is_file()


def read_runs_dir(runs_dir: Path) -> dict[str, RunFiles]:
    """The run files of `runs_dir`, by run id (a CSV without its record is not a run, and is left out)."""
    return {path.stem: RunFiles(path.read_bytes(), _bytes_or_none(path.with_suffix(".csv")))
            for path in sorted(Path(runs_dir).glob("*.json"))}


def pack(runs: dict[str, RunFiles], results_dir: Path) -> None:
    """Write `runs` as `<results_dir>/records.jsonl` and `examples.parquet`, after checking that they unpack to
    exactly these bytes (a file robench did not write that way is refused, naming it)."""
    try:
        records, examples = _encode(runs)
    except (UnicodeDecodeError, ValueError) as exc:
        raise RobenchError(f"cannot pack the runs: a record or CSV is not robench's ({exc}); nothing was "
                           "written") from exc
    back = _decode(records, examples)
    if wrong := next((run_id for run_id in runs if back.get(run_id) != runs[run_id]), None):
        raise RobenchError(f"run {wrong} cannot be packed exactly (its .json or .csv is not as robench writes "
                           "them); nothing was written")
    atomic_write(Path(results_dir) / RECORDS, records)
    atomic_write(Path(results_dir) / EXAMPLES, examples)


def unpack(results_dir: Path, cache_dir: Path | None = None) -> Path:
    """The runs directory packed in `results_dir`, unpacked (once per content) under `<cache_dir>/unpacked/`."""
    results_dir = Path(results_dir)
    paths = [results_dir / RECORDS, results_dir / EXAMPLES]
    if missing := [p.name for p in paths if not p.is_file()]:
        raise RobenchError(f"{results_dir} is not a packed results directory: {', '.join(missing)} missing")
    readings = {p.name: p.read_bytes() for p in sorted((results_dir / READINGS_DIR).glob("*.json"))}
    key = hashlib.sha256("".join([file_sha256(p) for p in paths] + [hashlib.sha256(data).hexdigest() + name
                                                                    for name, data in readings.items()]).encode())
    home = Path(cache_dir or default_cache_dir()) / "unpacked"
    target = home / key.hexdigest()[:20]
    if not (target / "runs").is_dir():
        runs = _decode(paths[0].read_bytes(), paths[1].read_bytes())
        _write_once(runs, readings, home, target)
    return target / "runs"


def refuse_writing_into(results_dir: Path) -> None:
    """A run about to be written into `results_dir` (before any work): refused while the directory is packed,
    whose finished runs `run` and `grid` would not see."""
    if is_packed(results_dir):
        raise RobenchError(f"{results_dir} holds packed records ({RECORDS}): `robench unpack {results_dir}` first "
                           f"(so finished runs are skipped and new ones land beside them), then `robench pack "
                           f"{results_dir}`; or pass another --results-dir")


def runs_to_read(results_dir: Path, cache_dir: Path | None = None) -> Path:
    """The runs directory to read for `results_dir`: its `runs/`, or, packed, the unpacked copy. A packed
    directory whose `runs/` holds records too is refused (pack them, or write them elsewhere)."""
    results_dir = Path(results_dir)
    runs = results_dir / "runs"
    if not is_packed(results_dir):
        return runs
    if loose := sorted(runs.glob("*.json")):
        raise RobenchError(f"{results_dir} holds packed records ({RECORDS}) and {len(loose)} run record(s) in "
                           f"{runs}: add them to the pack with `robench pack {results_dir}`, or move them to "
                           "another results directory")
    return unpack(results_dir, cache_dir)


def pack_results_dir(results_dir: Path, cache_dir: Path | None = None) -> tuple[int, int]:
    """Pack `<results_dir>/runs` into `results_dir`, with the runs already packed there (a loose run replaces
    the packed run of the same id); then remove the loose files the pack now holds. Returns (runs packed, loose
    runs added)."""
    results_dir = Path(results_dir)
    loose = read_runs_dir(results_dir / "runs")
    if not loose and not is_packed(results_dir):
        raise RobenchError(f"no run records in {results_dir / 'runs'} to pack")
    runs = read_runs_dir(unpack(results_dir, cache_dir)) if is_packed(results_dir) else {}
    runs = dict(sorted({**runs, **loose}.items()))
    pack(runs, results_dir)
    for run_id in loose:
        for suffix in (".json", ".csv"):
            (results_dir / "runs" / f"{run_id}{suffix}").unlink(missing_ok=True)
    for path in sorted((results_dir / "runs" / READINGS_DIR).glob("*.json")):  # the readings go beside the pack
        atomic_write(results_dir / READINGS_DIR / path.name, path.read_bytes())
        path.unlink()
    return len(runs), len(loose)


def unpack_into(results_dir: Path, runs_dir: Path, cache_dir: Path | None = None) -> int:
    """Write the packed runs of `results_dir` into `runs_dir` as loose files (a study adding runs to them); a
    different file of the same name there is refused before anything is written. Returns the runs written."""
    runs = read_runs_dir(unpack(results_dir, cache_dir))
    runs_dir = Path(runs_dir)
    for run_id, files in runs.items():
        for suffix, data in ((".json", files.record), (".csv", files.examples)):
            path = runs_dir / f"{run_id}{suffix}"
            if data is not None and path.is_file() and path.read_bytes() != data:
                raise RobenchError(f"{path} differs from the packed run of the same id; move it away first")
    runs_dir.mkdir(parents=True, exist_ok=True)
    for run_id, files in runs.items():
        atomic_write(runs_dir / f"{run_id}.json", files.record)
        if files.examples is not None:
            atomic_write(runs_dir / f"{run_id}.csv", files.examples)
    return len(runs)


def unpack_results_dir(results_dir: Path, cache_dir: Path | None = None) -> int:
    """The inverse of `pack_results_dir`: the packed runs back as loose files in `<results_dir>/runs`, the packed
    files removed. Returns the runs unpacked."""
    count = unpack_into(results_dir, Path(results_dir) / "runs", cache_dir)
    for name in (RECORDS, EXAMPLES):
        (Path(results_dir) / name).unlink()
    for path in sorted((Path(results_dir) / READINGS_DIR).glob("*.json")):  # the readings back beside the runs
        atomic_write(Path(results_dir) / "runs" / READINGS_DIR / path.name, path.read_bytes())
        path.unlink()
    return count


def _bytes_or_none(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


def _encode(runs: dict[str, RunFiles]) -> tuple[bytes, bytes]:
    lines = [json.dumps(json.loads(runs[run_id].record), separators=(",", ":")) for run_id in sorted(runs)]
    headers: list[list[str]] = []
    header_of: dict[str, int] = {}
    columns: dict[str, list[str | None]] = {RUN_ID_COLUMN: []}
    for run_id in sorted(runs):
        if runs[run_id].examples is None:
            continue
        header, *rows = list(csv.reader(io.StringIO(runs[run_id].examples.decode("utf-8"), newline="")))
        if header not in headers:
            headers.append(header)
        header_of[run_id] = headers.index(header)
        for name in header:
            columns.setdefault(name, [None] * len(columns[RUN_ID_COLUMN]))
        for row in rows:
            values = dict(zip(header, row))  # a short or long row does not unpack exactly: `pack` refuses it
            for name, column in columns.items():
                column.append(run_id if name == RUN_ID_COLUMN else values.get(name))
    meta = {"format": PACK_FORMAT, "headers": headers, "header_of": header_of}
    return ("\n".join(lines) + "\n").encode("utf-8"), _parquet(columns, meta)


def _parquet(columns: dict[str, list[str | None]], meta: dict) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.table({name: pa.array(values, pa.string()) for name, values in columns.items()})
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(meta, separators=(",", ":"))})
    buffer = pa.BufferOutputStream()
    pq.write_table(table, buffer, compression="zstd", compression_level=19)
    return buffer.getvalue().to_pybytes()


def _decode(records: bytes, examples: bytes) -> dict[str, RunFiles]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(pa.BufferReader(examples))
        meta = json.loads(table.schema.metadata[METADATA_KEY])
        rows: dict[str, list[list[str | None]]] = {}
        data = table.to_pydict()
        for i, run_id in enumerate(data[RUN_ID_COLUMN]):
            rows.setdefault(run_id, []).append([data[name][i] for name in data])
        names = list(data)
        runs = {}
        for line in records.decode("utf-8").splitlines():
            record = json.loads(line)
            run_id = record["run_id"]
            header = meta["headers"][meta["header_of"][run_id]] if run_id in meta["header_of"] else None
            runs[run_id] = RunFiles(json.dumps(record, indent=2).encode("utf-8"),
                                    None if header is None else _csv(header, names, rows.get(run_id, [])))
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as exc:
        raise RobenchError(f"the packed records are damaged ({exc}); restore {RECORDS} and {EXAMPLES}") from exc
    return runs


def _csv(header: list[str], names: list[str], rows: list[list[str | None]]) -> bytes:
    at = [names.index(name) for name in header]
    buffer = io.StringIO()
    writer = csv.writer(buffer)
    writer.writerow(header)
    writer.writerows([row[i] for i in at] for row in rows)
    return buffer.getvalue().encode("utf-8")


def _write_once(runs: dict[str, RunFiles], readings: dict[str, bytes], home: Path, target: Path) -> None:
    """Write `runs` (and the `readings` files) into `<target>/runs` through a temporary folder renamed into place,
    so a reader never sees a half-written copy; another process that got there first wins."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=home, prefix=f".{target.name}-"))
    except OSError as exc:
        raise RobenchError(f"cannot unpack packed records into {home} ({exc.strerror}); point --cache-dir or "
                           "ROBENCH_CACHE_DIR at a writable directory") from exc
    try:
        (tmp / "runs").mkdir()
        for run_id, files in runs.items():
            (tmp / "runs" / f"{run_id}.json").write_bytes(files.record)
            if files.examples is not None:
                (tmp / "runs" / f"{run_id}.csv").write_bytes(files.examples)
        if readings:
            (tmp / "runs" / READINGS_DIR).mkdir()
            for name, data in readings.items():
                (tmp / "runs" / READINGS_DIR / name).write_bytes(data)
        if target.exists() and not (target / "runs").is_dir():  # a copy someone emptied
            shutil.rmtree(target)
        os.replace(tmp, target)
    except OSError:
        if not (target / "runs").is_dir():
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
