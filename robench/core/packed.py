"""Packed run files: the runs of a results directory in two files, exact.

A runs directory holds one record `<run_id>.json` and one per-example CSV `<run_id>.csv` per run
(`robench.core.records`). `pack` stores them in the results directory as `records.jsonl` (one record per line,
in run-id order) and `examples.parquet` (every CSV row as text, with its run id; the CSV headers in the file's
metadata). `unpack` writes the runs directory back, byte for byte, into a cache folder named by the packed
files' SHA-256 and the directory's path, reused while they are unchanged; so the records verify against their
manifests, and every reader works on a packed results directory as on any other (`runs_to_read`). `pack`
refuses runs it could not give back exactly. A packed directory's blind readings (`robench.report.readings`)
sit beside the packed files in `<results_dir>/readings/`; the unpacked copy carries them in its `runs/readings/`
(its folder name includes their SHA-256), so every reader of the runs finds them as in a loose directory.

Nothing is lost to a stop (a kill, a full disk) at any point:

* `pack` writes the new pack whole into a staging folder, renames it (the commit), then moves its files into
  place; a stop before the commit leaves the old pack, after it `settle` finishes the move on the next call.
  The loose files are removed only after. A loose run replaces a packed one only if it verifies.
* `unpack` writes each run's CSV before its record, each atomically, and removes the packed files last; loose
  runs that are byte-for-byte copies of packed ones are what a stopped unpack leaves: `unpack` again goes on,
  `pack` drops them, and readers read the pack (with a warning).
* Every read checks the pack's records against its rows, and its cache copy against the pack, one to one,
  and names in a warning any run missing from either.
"""
from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import logging
import os
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from robench.core.errors import RobenchError
from robench.core.files import NO_SPACE, atomic_write, disk_full_error
from robench.core.hashing import file_sha256
from robench.core.paths import default_cache_dir

RECORDS = "records.jsonl"
EXAMPLES = "examples.parquet"
PACK_FORMAT = 1
METADATA_KEY = b"robench.pack"
RUN_ID_COLUMN = "run_id"
READINGS_DIR = "readings"  # the blind readings' folder: `<runs_dir>/readings/`, or `<results_dir>/readings/` packed
STAGE = ".pack-staging"  # a pack being written (dropped if it stops before COMMIT)
COMMIT = ".pack-commit"  # a pack written whole, being moved into place (finished if it stops there: `settle`)
ORIGIN = "origin"  # in an unpacked copy: the packed results directory it was unpacked from
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunFiles:
    record: bytes  # `<run_id>.json`
    examples: bytes | None  # `<run_id>.csv` (None: the run has none)


def is_packed(results_dir: Path) -> bool:
    return (Path(results_dir) / RECORDS).is_file()


def readings_home(results_dir: Path) -> Path:
    """The folder whose `readings/` holds `results_dir`'s blind readings, where every reader looks: the results
    directory itself when it is packed (beside the pack, carried into the unpacked copy), else its runs/."""
    return Path(results_dir) if is_packed(results_dir) else Path(results_dir) / "runs"


def read_runs_dir(runs_dir: Path) -> dict[str, RunFiles]:
    """The run files of `runs_dir`, by run id (a CSV without its record is not a run, and is left out)."""
    return {path.stem: RunFiles(path.read_bytes(), _bytes_or_none(path.with_suffix(".csv")))
            for path in sorted(Path(runs_dir).glob("*.json"))}


def pack(runs: dict[str, RunFiles], results_dir: Path, readings: dict[str, bytes] | None = None) -> None:
    """Write `runs` as `<results_dir>/records.jsonl` and `examples.parquet` (and `readings`, name -> bytes, into
    `<results_dir>/readings/`), after checking that they unpack to exactly these bytes (a file robench did not
    write that way is refused, naming it). The files are written whole into a staging folder, which is renamed
    to COMMIT (the one step that makes the new pack count) and then moved into place (`settle`), so a pack
    stopped at any point leaves the old pack or the new one, never a mix."""
    results_dir = Path(results_dir)
    try:
        records, examples = _encode(runs)
    except (UnicodeDecodeError, ValueError) as exc:
        raise RobenchError(f"cannot pack the runs: a record or CSV is not robench's ({exc}); nothing was "
                           "written") from exc
    back = _decode(records, examples)
    if wrong := next((run_id for run_id in runs if back.get(run_id) != runs[run_id]), None):
        raise RobenchError(f"run {wrong} cannot be packed exactly (its .json or .csv is not as robench writes "
                           "them); nothing was written")
    settle(results_dir)
    stage = results_dir / STAGE
    shutil.rmtree(stage, ignore_errors=True)
    try:
        atomic_write(stage / EXAMPLES, examples)
        atomic_write(stage / RECORDS, records)
        for name, data in (readings or {}).items():
            atomic_write(stage / READINGS_DIR / name, data)
        os.replace(stage, results_dir / COMMIT)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise
    settle(results_dir)


def settle(results_dir: Path) -> None:
    """Finish a pack that stopped after its commit (move COMMIT's files into place, the records last) and drop
    one that stopped before it (the staging folder). Nothing to do, and nothing written, otherwise."""
    results_dir = Path(results_dir)
    commit = results_dir / COMMIT
    if commit.is_dir():
        moves = [(path, results_dir / READINGS_DIR / path.name) for path in sorted((commit / READINGS_DIR).glob("*"))]
        for source, target in moves + [(commit / name, results_dir / name) for name in (EXAMPLES, RECORDS)]:
            target.parent.mkdir(exist_ok=True)
            with contextlib.suppress(FileNotFoundError):  # moved already (by another process settling it)
                os.replace(source, target)
        shutil.rmtree(commit, ignore_errors=True)
    if (results_dir / STAGE).is_dir():
        shutil.rmtree(results_dir / STAGE, ignore_errors=True)


def unpack(results_dir: Path, cache_dir: Path | None = None) -> Path:
    """The runs directory packed in `results_dir`, unpacked (once per content) under `<cache_dir>/unpacked/`.
    Every call checks the pack's records against its rows and the copy against the pack, one to one; a run
    missing from either is named in a warning (and a copy that lacks one is written again)."""
    results_dir = Path(results_dir)
    paths = [results_dir / RECORDS, results_dir / EXAMPLES]
    if missing := [p.name for p in paths if not p.is_file()]:
        raise RobenchError(f"{results_dir} is not a whole packed results directory: {', '.join(missing)} missing; "
                           "restore it (e.g. `git checkout` or from your copy) or pass another directory")
    readings = {p.name: p.read_bytes() for p in sorted((results_dir / READINGS_DIR).glob("*.json"))}
    key = hashlib.sha256("".join([str(results_dir.resolve())] + [file_sha256(p) for p in paths] +
                                 [hashlib.sha256(data).hexdigest() + name for name, data in readings.items()]
                                 ).encode())
    home = Path(cache_dir or default_cache_dir()) / "unpacked"
    target = home / key.hexdigest()[:20]
    index = _index(paths[0].read_bytes(), paths[1], results_dir)
    if (target / "runs").is_dir() and (lacking := _copy_problem(target / "runs", index)):
        log.warning("the unpacked copy %s of %s %s; writing it again from the pack", target / "runs",
                    results_dir, lacking)
        shutil.rmtree(target, ignore_errors=True)
    if not (target / "runs").is_dir():
        runs = _decode(paths[0].read_bytes(), paths[1].read_bytes())
        _write_once(runs, readings, home, target, results_dir)
    return target / "runs"


@dataclass(frozen=True)
class PackIndex:
    records: tuple[str, ...]  # the run ids of records.jsonl
    with_rows: frozenset[str]  # those with a per-example CSV


def _index(records: bytes, examples: Path, results_dir: Path) -> PackIndex:
    """The runs of a pack, checked one to one: rows of a run without a record, and a record whose CSV the
    metadata names but whose rows are gone, are warned about by name."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        ids = tuple(json.loads(line)["run_id"] for line in records.decode("utf-8").splitlines() if line.strip())
        meta = json.loads(pq.read_schema(examples).metadata[METADATA_KEY])
        column = pq.read_table(examples, columns=[RUN_ID_COLUMN]).column(RUN_ID_COLUMN).to_pylist()
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException) as exc:
        raise RobenchError(f"the packed records in {results_dir} are damaged ({exc}); restore {RECORDS} and "
                           f"{EXAMPLES}") from exc
    rows = Counter(column)
    for run_id in sorted(set(rows) - set(ids)):
        log.warning("%s holds %d row(s) of run %s, which %s lacks: that run is missing from the pack (and from "
                    "every table read from it); restore %s", results_dir / EXAMPLES, rows[run_id], run_id, RECORDS,
                    RECORDS)
    for run_id in sorted(set(meta.get("header_of", {})) - set(ids)):
        if run_id not in rows:
            log.warning("%s names run %s, which %s lacks: that run is missing from the pack; restore %s",
                        results_dir / EXAMPLES, run_id, RECORDS, RECORDS)
    return PackIndex(ids, frozenset(i for i in ids if i in meta.get("header_of", {})))


def _copy_problem(runs_dir: Path, index: PackIndex) -> str | None:
    """Why the unpacked copy `runs_dir` is not the pack's runs one to one, or None."""
    records = {p.stem for p in runs_dir.glob("*.json")}
    examples = {p.stem for p in runs_dir.glob("*.csv")}
    if lacking := sorted(set(index.records) - records) + sorted(index.with_rows - examples):
        return f"lacks run file(s) of {', '.join(lacking[:5])}{' ...' if len(lacking) > 5 else ''}"
    if extra := sorted(records - set(index.records)):
        return f"holds run(s) the pack has not: {', '.join(extra[:5])}"
    return None


def origin(runs_dir: Path) -> Path | None:
    """The packed results directory `runs_dir` is the unpacked copy of, or None (a loose runs directory)."""
    try:
        return Path((Path(runs_dir).parent / ORIGIN).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        return None


def shown_path(path: Path) -> Path:
    """`path` as a user knows it: a file of an unpacked copy's readings named where it is packed."""
    path = Path(path)
    home = origin(path.parent.parent) if path.parent.name == READINGS_DIR else None
    return home / READINGS_DIR / path.name if home is not None else path


def refuse_writing_into(results_dir: Path) -> None:
    """A run about to be written into `results_dir` (before any work): refused while the directory is packed,
    whose finished runs `run` and `grid` would not see."""
    if is_packed(results_dir):
        raise RobenchError(f"{results_dir} holds packed records ({RECORDS}): `robench unpack {results_dir}` first "
                           f"(so finished runs are skipped and new ones land beside them), then `robench pack "
                           f"{results_dir}`; or pass another --results-dir")


def runs_to_read(results_dir: Path, cache_dir: Path | None = None) -> Path:
    """The runs directory to read for `results_dir`: its `runs/`, or, packed, the unpacked copy. Loose records
    beside a pack that are copies of packed runs (an unpack that stopped midway) are read from the pack with a
    warning; other loose records beside a pack are refused (pack them, or write them elsewhere)."""
    results_dir = Path(results_dir)
    runs = results_dir / "runs"
    _settle_if_writable(results_dir)
    if not is_packed(results_dir):
        if (results_dir / EXAMPLES).is_file() and not list(runs.glob("*.json")):
            raise RobenchError(f"{results_dir} holds {EXAMPLES} but not {RECORDS}: its pack is half there; restore "
                               f"{RECORDS} (e.g. `git checkout`) or pass another directory")
        return runs
    unpacked = unpack(results_dir, cache_dir)
    if loose := sorted(runs.glob("*.json")):
        others = [p.stem for p in loose if not _same_run(p, unpacked)]
        if others:
            raise RobenchError(f"{results_dir} holds packed records ({RECORDS}) and {len(others)} other run "
                               f"record(s) in {runs} ({', '.join(others[:3])}{' ...' if len(others) > 3 else ''}): "
                               f"add them to the pack with `robench pack {results_dir}`, or move them to another "
                               "results directory")
        log.warning("%s: an unpack stopped midway (%d of the packed runs are in runs/ as copies); reading the pack: "
                    "`robench unpack %s` finishes it, `robench pack %s` undoes it", results_dir, len(loose),
                    results_dir, results_dir)
    return unpacked


def _same_run(record: Path, unpacked: Path) -> bool:
    """Whether the loose `record` (and its CSV) are byte for byte a run of the unpacked pack."""
    twin = unpacked / record.name
    return twin.is_file() and twin.read_bytes() == record.read_bytes() and \
        _bytes_or_none(record.with_suffix(".csv")) in (None, _bytes_or_none(twin.with_suffix(".csv")))


def _settle_if_writable(results_dir: Path) -> None:
    try:
        settle(results_dir)
    except OSError as exc:
        raise RobenchError(f"a pack of {results_dir} stopped midway and cannot be finished ({exc.strerror}): run "
                           f"`robench pack {results_dir}` where it is writable") from exc


def pack_results_dir(results_dir: Path, cache_dir: Path | None = None) -> tuple[int, int]:
    """Pack `<results_dir>/runs` into `results_dir`, with the runs already packed there; then remove the loose
    files the pack now holds. A loose run replaces the packed run of the same id only if it verifies (its record
    matches its manifest and its CSV); a loose copy of a packed record (an unpack that stopped midway) is the
    packed run, and leaves the pack as it is. Returns (runs packed, loose runs added)."""
    results_dir = Path(results_dir)
    runs_dir = results_dir / "runs"
    settle(results_dir)
    loose = read_runs_dir(runs_dir)
    if not loose and not is_packed(results_dir):
        raise RobenchError(f"no run records in {runs_dir} to pack")
    packed = read_runs_dir(unpack(results_dir, cache_dir)) if is_packed(results_dir) else {}
    added = {run_id: files for run_id, files in loose.items()
             if run_id not in packed or packed[run_id].record != files.record}
    if bad := [(run_id, problem) for run_id in added if (problem := loose_problem(runs_dir, run_id))]:
        run_id, problem = bad[0]
        kept = " (the packed run of that id is kept)" if run_id in packed else ""
        raise RobenchError(f"run {run_id} in {runs_dir} does not verify: {problem}; nothing was packed{kept}: "
                           f"re-run it (`--force`) or move its files away, then pack again"
                           + (f" ({len(bad) - 1} more such run(s))" if len(bad) > 1 else ""))
    runs = dict(sorted({**packed, **added}.items()))
    readings = {**{p.name: p.read_bytes() for p in sorted((results_dir / READINGS_DIR).glob("*.json"))},
                **{p.name: p.read_bytes() for p in sorted((runs_dir / READINGS_DIR).glob("*.json"))}}
    pack(runs, results_dir, readings)
    for run_id in loose:  # each record before its CSV: a record never lacks its CSV
        (runs_dir / f"{run_id}.json").unlink(missing_ok=True)
        (runs_dir / f"{run_id}.csv").unlink(missing_ok=True)
    for path in sorted((runs_dir / READINGS_DIR).glob("*.json")):  # now beside the pack
        path.unlink()
    return len(runs), len(added)


def loose_problem(runs_dir: Path, run_id: str) -> str | None:
    """Why the loose run `run_id` of `runs_dir` is not to be packed (`robench.core.records.record_problem`)."""
    from robench.core.records import read_record, record_problem

    path = Path(runs_dir) / f"{run_id}.json"
    try:
        return record_problem(path, read_record(path))
    except RobenchError as exc:
        return str(exc)


def unpack_into(results_dir: Path, runs_dir: Path, cache_dir: Path | None = None) -> int:
    """Write the packed runs of `results_dir` into `runs_dir` as loose files (a study adding runs to them); a
    different file of the same name there is refused before anything is written (the same file is fine: an
    unpack that stopped midway goes on). Each run's CSV is written before its record, each atomically, so a
    stop at any point leaves whole runs. Returns the runs written."""
    runs = read_runs_dir(unpack(results_dir, cache_dir))
    runs_dir = Path(runs_dir)
    for run_id, files in runs.items():
        for suffix, data in ((".json", files.record), (".csv", files.examples)):
            path = runs_dir / f"{run_id}{suffix}"
            if data is not None and path.is_file() and path.read_bytes() != data:
                raise RobenchError(f"{path} differs from the packed run of the same id; move it away first")
    runs_dir.mkdir(parents=True, exist_ok=True)
    for run_id, files in runs.items():
        if files.examples is not None:
            _write_if_changed(runs_dir / f"{run_id}.csv", files.examples)
        _write_if_changed(runs_dir / f"{run_id}.json", files.record)
    return len(runs)


def _write_if_changed(path: Path, data: bytes) -> None:
    if _bytes_or_none(path) != data:
        atomic_write(path, data)


def unpack_results_dir(results_dir: Path, cache_dir: Path | None = None) -> int:
    """The inverse of `pack_results_dir`: the packed runs back as loose files in `<results_dir>/runs`, the packed
    files removed last (the records file first: from then on the directory reads as loose). A stop at any point
    leaves every run readable; `unpack` again finishes, `pack` undoes. Returns the runs unpacked."""
    results_dir = Path(results_dir)
    settle(results_dir)
    if not is_packed(results_dir) and list((results_dir / "runs").glob("*.json")):  # stopped after the records
        count = len(list((results_dir / "runs").glob("*.json")))
    else:
        count = unpack_into(results_dir, results_dir / "runs", cache_dir)
    packed_readings = sorted((results_dir / READINGS_DIR).glob("*.json"))
    for path in packed_readings:  # the readings back beside the runs (copied: the pack still holds them)
        _write_if_changed(results_dir / "runs" / READINGS_DIR / path.name, path.read_bytes())
    for name in (RECORDS, EXAMPLES):
        (results_dir / name).unlink(missing_ok=True)
    for path in packed_readings:
        path.unlink(missing_ok=True)
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


def _write_once(runs: dict[str, RunFiles], readings: dict[str, bytes], home: Path, target: Path,
                results_dir: Path) -> None:
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
        (tmp / ORIGIN).write_text(str(results_dir.resolve()), encoding="utf-8")
        for run_id, files in runs.items():
            if files.examples is not None:
                (tmp / "runs" / f"{run_id}.csv").write_bytes(files.examples)
            (tmp / "runs" / f"{run_id}.json").write_bytes(files.record)
        if readings:
            (tmp / "runs" / READINGS_DIR).mkdir()
            for name, data in readings.items():
                (tmp / "runs" / READINGS_DIR / name).write_bytes(data)
        if target.exists() and not (target / "runs").is_dir():  # a copy someone emptied
            shutil.rmtree(target)
        os.replace(tmp, target)
    except OSError as exc:
        if not (target / "runs").is_dir():
            if exc.errno in NO_SPACE:
                raise disk_full_error(exc, home) from exc
            raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
