"""The run-file format, and its one owner: every run has a JSON record `<run_id>.json` and a per-example CSV
`<run_id>.csv` in a runs directory. This module names those files, and is the only reader of them and the only
writer of their formats (`robench.runs.store` writes them atomically as a run finishes); reports, the transfer
attack and the worst case all read through it."""
from __future__ import annotations

import csv
import io
import json
import logging
import re
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Iterator

from robench.core.errors import RobenchError
from robench.core.hashing import file_sha256
from robench.core.manifest import content_digest, digest_problem, files_problem
from robench.core.text import excerpt
from robench.core.types import ExampleResult

log = logging.getLogger(__name__)

RECORD_FORMAT = 2  # 2: eval subset chosen by `eval_seed` (recorded by hash), AdvGLUE's clean accuracy split off


# Knobs added after records were published, each with the value that reproduces what the code did before it
# existed: a record without the knob was made with that value. All came with issue 57: no fluency constraint
# (`fluency_max_drop` None; budget=natural now resolves it to 1.5, which no earlier record holds), the sense
# filter at its constant (`sense_min_cos` None), budget=natural's grammar check always on, the greedy search (no
# beam, no population; `population_search`, `generations` and `lm_top_k` are the population search's), the
# fluency drop counted against the original only.
KNOBS_ADDED_LATER: dict[str, dict[str, Any]] = {
    "attack": {"fluency_max_drop": None, "sense_min_cos": None, "grammar_check": True, "beam_width": 1,
               "fluency_each_swap": False, "population_size": 0, "population_search": "genetic",
               "generations": 20, "lm_top_k": None}}


def without_earlier_knobs(hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """`hyperparameters` (a record's: part -> values) without each knob of KNOBS_ADDED_LATER at its earlier
    value, so a record made before the knob existed and one made after at that value read as the same setting
    (`robench.runs.store` verifies records this way, `robench.report.identity` groups them)."""
    def plain(part: str, values: Any) -> Any:
        earlier = KNOBS_ADDED_LATER.get(part, {})
        if not isinstance(values, dict) or not earlier:
            return values
        return {k: v for k, v in values.items() if not (k in earlier and v == earlier[k])}

    return {part: plain(part, values) for part, values in (hyperparameters or {}).items()}

@dataclass
class RunRecord:
    run_id: str
    spec: dict[str, Any]
    hyperparameters: dict[str, Any]  # resolved: training, defense and attack
    resources: dict[str, Any]  # backbone, data, and every attack resource (incl. substitutes)
    metrics: dict[str, Any]
    timings: dict[str, float]
    checkpoint: str
    versions: dict[str, str | None] = field(default_factory=dict)
    git_commit: str | None = None
    created: str = ""
    kind: str = "run"
    format: int = RECORD_FORMAT  # records written before formats were numbered read as 1
    # robench.core.manifest: the SHA-256 of the record's own content and the size and SHA-256 of its per-example
    # CSV, checked before the record is reused or aggregated (None: written before records carried one)
    manifest: dict[str, Any] | None = None


def record_path(runs_dir: Path, run_id: str) -> Path:
    return Path(runs_dir) / f"{run_id}.json"


def examples_path(runs_dir: Path, run_id: str) -> Path:
    return Path(runs_dir) / f"{run_id}.csv"


def examples_csv(results: list[ExampleResult]) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[f.name for f in fields(ExampleResult)])
    writer.writeheader()
    for r in sorted(results, key=lambda r: r.index):
        writer.writerow(asdict(r))
    return buf.getvalue()


_INTS = {f.name for f in fields(ExampleResult) if f.type in ("int", int)}


def read_examples(runs_dir: Path, run_id: str) -> list[ExampleResult]:
    """The per-example results of a finished run, in index order (a missing file is a clear error)."""
    path = examples_path(runs_dir, run_id)
    if not path.is_file():
        raise RobenchError(f"missing per-example results {path} of run {run_id}; re-run it with --force")
    names = {f.name for f in fields(ExampleResult)}
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [ExampleResult(**{k: int(v) if k in _INTS else v for k, v in row.items() if k in names}) for row in rows]


RECORD_DICTS = ("spec", "hyperparameters", "resources", "metrics", "timings")  # fields that must be JSON objects


def read_record(path: Path) -> RunRecord:
    try:
        record = RunRecord(**{"format": 1, **json.loads(path.read_text(encoding="utf-8"))})
    except (UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
        raise RobenchError(f"run record {path} is malformed ({exc}); delete it to re-run") from exc
    bad = [name for name in RECORD_DICTS if not isinstance(getattr(record, name), dict)]
    if bad or not isinstance(record.run_id, str):
        what = f"{bad[0]!r} is not a JSON object" if bad else "'run_id' is not a string"
        raise RobenchError(f"run record {path} is malformed ({what}); delete it to re-run")
    return record


def with_manifest(record: RunRecord, runs_dir: Path) -> RunRecord:
    """`record` with its manifest; its per-example CSV must be written already."""
    csv_file = examples_path(runs_dir, record.run_id)
    files = {csv_file.name: {"bytes": csv_file.stat().st_size, "sha256": file_sha256(csv_file)}}
    return replace(record, manifest={"record_sha256": content_digest(_content(record)), "files": files})


def _content(record: RunRecord) -> dict[str, Any]:
    content = asdict(record)
    content.pop("manifest")
    return content


def record_problem(path: Path, record: RunRecord) -> str | None:
    """Why the record read from `path` is not to be trusted, or None: it must name the run its file is named after,
    and match its manifest (its content and its per-example CSV unchanged since the run wrote them)."""
    if record.run_id != path.stem:
        return f"it names run {excerpt(record.run_id, 80)}, not {path.stem} (its file name)"
    if record.manifest is None:  # written before records carried a manifest: its name is what can be checked
        return None
    if not isinstance(record.manifest, dict):
        return "its manifest is not a JSON object"
    return digest_problem(_content(record), record.manifest.get("record_sha256")) or \
        files_problem(path.parent, record.manifest.get("files"))


RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")  # what `robench.runs.spec.slug` makes: a plain file name
MAX_RUN_ID = 200  # characters: a file name's limit is 255 bytes, and no run id robench makes comes near


def find_record(runs_dir: Path, run_id: str) -> Path:
    """The record of `run_id`, or of the one run whose id starts with it. A run id is a plain file name: a path
    (absolute, or with `..` or a separator) or a glob pattern is refused, never read."""
    run_id = run_id.removesuffix(".json")  # the record's file name is accepted as its id
    if not RUN_ID.fullmatch(run_id) or len(run_id) > MAX_RUN_ID:
        raise RobenchError(f"{excerpt(run_id, 80)} is not a run id: run ids are the names of the .json files in "
                           f"{runs_dir} (at most {MAX_RUN_ID} letters, digits, '_', '-' and '.'; not a path)")
    exact = record_path(runs_dir, run_id)
    if exact.is_file():
        return exact
    matches = sorted(p for p in Path(runs_dir).glob(f"{run_id}*.json"))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RobenchError(f"no run {run_id!r} in {runs_dir} (run ids are the names of its .json files)")
    raise RobenchError(f"{run_id!r} matches {len(matches)} runs: {', '.join(p.stem for p in matches[:5])}")


def iter_records(runs_dir: Path, kind: str = "run") -> Iterator[RunRecord]:
    """The records of `kind` in `runs_dir`; one that does not verify (`record_problem`) is skipped with a warning."""
    for path in sorted(runs_dir.glob("*.json")):
        record = read_record(path)
        if record.kind != kind:
            continue
        if (problem := record_problem(path, record)) is not None:
            log.warning("skipping run record %s: %s; re-run it (or delete it)", path, problem)
            continue
        yield record
