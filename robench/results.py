"""Run records (one JSON per run), per-example CSVs, resumable partial results.

Everything is written atomically: a temp file in the same folder, then rename.
Finished examples are appended to `<run_id>.partial.jsonl` as they complete, so
an interrupted attack resumes where it stopped.
"""
from __future__ import annotations

import csv
import json
import os
import platform
import subprocess
import tempfile
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterator

from robench.errors import RobenchError
from robench.types import ExampleResult

RECORD_FORMAT = 2  # 2: eval subset chosen by `eval_seed` (recorded by hash), AdvGLUE's clean accuracy split off
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
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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


class RunStore:
    """Files of one run under `runs_dir`: record, per-example CSV, partial results."""

    def __init__(self, runs_dir: Path, run_id: str) -> None:
        self.record_path = runs_dir / f"{run_id}.json"
        self.csv_path = runs_dir / f"{run_id}.csv"
        self.partial_path = runs_dir / f"{run_id}.partial.jsonl"

    def finished(self) -> RunRecord | None:
        """The finished record, unless there is none or it has an older format (then the run is redone)."""
        if not self.record_path.is_file():
            return None
        record = read_record(self.record_path)
        return record if record.format == RECORD_FORMAT else None

    def load_partial(self) -> dict[int, ExampleResult]:
        done: dict[int, ExampleResult] = {}
        if not self.partial_path.is_file():
            return done
        for line in self.partial_path.read_text(encoding="utf-8").splitlines():
            try:
                result = ExampleResult(**json.loads(line))
            except (json.JSONDecodeError, TypeError):
                continue  # a line cut short by an interruption
            done[result.index] = result
        return done

    def append(self, result: ExampleResult) -> None:
        self.partial_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.partial_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(result)) + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def finish(self, record: RunRecord, results: list[ExampleResult]) -> None:
        atomic_write(self.csv_path, examples_csv(results))
        atomic_write(self.record_path, json.dumps(asdict(record), indent=2, default=str))
        self.partial_path.unlink(missing_ok=True)


def examples_csv(results: list[ExampleResult]) -> str:
    import io

    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[f.name for f in fields(ExampleResult)])
    writer.writeheader()
    for r in sorted(results, key=lambda r: r.index):
        writer.writerow(asdict(r))
    return buf.getvalue()


def read_record(path: Path) -> RunRecord:
    try:
        return RunRecord(**{"format": 1, **json.loads(path.read_text(encoding="utf-8"))})
    except (json.JSONDecodeError, TypeError) as exc:
        raise RobenchError(f"run record {path} is malformed ({exc}); delete it to re-run") from exc


def iter_records(runs_dir: Path, kind: str = "run") -> Iterator[RunRecord]:
    for path in sorted(runs_dir.glob("*.json")):
        record = read_record(path)
        if record.kind == kind:
            yield record
