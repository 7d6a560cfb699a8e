"""Run records (one JSON per run), per-example CSVs, resumable partial results.

Everything is written atomically: a temp file in the same folder, then rename
(with the permissions the umask gives a new file). Finished examples are
appended to `<run_id>.partial.jsonl` as they complete, so an interrupted attack
resumes where it stopped; on resume each line is checked against the run's
examples, and a file that does not belong to the run is discarded with a warning.
"""
from __future__ import annotations

import csv
import json
import logging
import os
import platform
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, Iterator, get_args

from robench.errors import RobenchError
from robench.types import ExampleResult, Status

RECORD_FORMAT = 2  # 2: eval subset chosen by `eval_seed` (recorded by hash), AdvGLUE's clean accuracy split off

log = logging.getLogger(__name__)
PACKAGES = ("robench", "torch", "transformers", "datasets", "textattack", "numpy", "pandas", "nltk")


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


def atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a record is as readable as any new file
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask: from /proc on Linux, else by setting it and putting it back at once."""
    try:
        with open("/proc/self/status", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def package_versions() -> dict[str, str | None]:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = None
    return out


def git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True, text=True, timeout=5)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if sha.returncode != 0:
        return None
    return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Partial(dict[int, ExampleResult]):
    """What an interrupted attack left: its finished examples by index, and the cost of earlier processes."""

    attack_seconds: float = 0.0  # attack time of earlier processes, up to their last finished example
    victim_queries: int = 0  # likewise, model queries


PROGRESS_KEYS = ("attack_seconds", "victim_queries")  # carried on each partial line besides the result
STATUSES = frozenset(get_args(Status))


class RunStore:
    """Files of one run under `runs_dir`: record, per-example CSV, partial results."""

    def __init__(self, runs_dir: Path, run_id: str) -> None:
        self.record_path = runs_dir / f"{run_id}.json"
        self.csv_path = runs_dir / f"{run_id}.csv"
        self.partial_path = runs_dir / f"{run_id}.partial.jsonl"
        self.lock_path = runs_dir / f"{run_id}.lock"

    def finished(self) -> RunRecord | None:
        """The finished record, unless there is none or it has an older format (then the run is redone)."""
        if not self.record_path.is_file():
            return None
        record = read_record(self.record_path)
        return record if record.format == RECORD_FORMAT else None

    def load_partial(self, check: Callable[[ExampleResult], str | None] | None = None) -> Partial:
        """The finished examples of an interrupted attempt. A half-written last line is cut off the file
        (so the next append starts a fresh line); a file that is unreadable, has a bad line, a repeated
        index, an unknown status, or a result `check` rejects (it returns the reason) is discarded with a
        warning: the attack then starts over."""
        if not self.partial_path.is_file():
            return Partial()
        data = self.partial_path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) < len(data):  # cut short by an interruption
            os.truncate(self.partial_path, len(complete))
        try:
            return _parse_partial(complete, check)
        except ValueError as exc:
            log.warning("discarding %s: %s; the attack starts over", self.partial_path, exc)
            self.partial_path.unlink(missing_ok=True)
            return Partial()

    def append(self, result: ExampleResult, progress: dict[str, float] | None = None) -> None:
        """Persist one finished example (with the attack's cost so far, `progress`, for a later resume)."""
        self.partial_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.partial_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({**asdict(result), **(progress or {})}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def finish(self, record: RunRecord, results: list[ExampleResult]) -> None:
        atomic_write(self.csv_path, examples_csv(results))
        atomic_write(self.record_path, json.dumps(asdict(record), indent=2, default=str))
        self.partial_path.unlink(missing_ok=True)


def _parse_partial(data: bytes, check: Callable[[ExampleResult], str | None] | None) -> Partial:
    """Parse partial lines; any problem is a ValueError naming the line."""
    partial = Partial()
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    for number, line in enumerate(lines, 1):
        try:
            row = json.loads(line)
            progress = {k: row.pop(k) for k in PROGRESS_KEYS if k in row}
            result = ExampleResult(**row)
        except (json.JSONDecodeError, TypeError, AttributeError) as exc:
            raise ValueError(f"line {number} is not an example result ({exc})") from None
        problem = _problem(result, partial) or (check(result) if check is not None else None)
        if problem:
            raise ValueError(f"line {number}: {problem}")
        partial[result.index] = result
        partial.attack_seconds = float(progress.get("attack_seconds", partial.attack_seconds))
        partial.victim_queries = int(progress.get("victim_queries", partial.victim_queries))
    return partial


def _problem(result: ExampleResult, seen: dict[int, ExampleResult]) -> str | None:
    for f in fields(ExampleResult):
        value, kind = getattr(result, f.name), {"int": int, "str": str}.get(str(f.type))
        if kind is not None and type(value) is not kind:
            return f"{f.name} {value!r} is not {'an integer' if kind is int else 'a string'}"
    if result.index < 0:
        return f"index {result.index} is negative"
    if result.index in seen:
        return f"index {result.index} appears twice"
    if result.status not in STATUSES:
        return f"unknown status {result.status!r} (expected one of {sorted(STATUSES)})"
    return None


def examples_csv(results: list[ExampleResult]) -> str:
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[f.name for f in fields(ExampleResult)])
    writer.writeheader()
    for r in sorted(results, key=lambda r: r.index):
        writer.writerow(asdict(r))
    return buf.getvalue()


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


def iter_records(runs_dir: Path, kind: str = "run") -> Iterator[RunRecord]:
    for path in sorted(runs_dir.glob("*.json")):
        record = read_record(path)
        if record.kind == kind:
            yield record
