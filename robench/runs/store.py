"""Run records (one JSON per run), per-example CSVs, resumable partial results.

Everything is written atomically: a temp file in the same folder, then rename
(with the permissions the umask gives a new file). Finished examples are
appended to `<run_id>.partial.jsonl` as they complete, so an interrupted attack
resumes where it stopped; on resume each line is checked against the run's
examples, and a file that does not belong to the run is discarded with a warning.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import subprocess
from dataclasses import asdict, fields
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Callable, get_args

from robench.core.files import NO_SPACE, atomic_write, disk_full_error
from robench.core.hashing import content_hash
from robench.core.packed import refuse_writing_into
from robench.core.records import (
    RECORD_FORMAT,
    RunRecord,
    examples_csv,
    examples_path,
    read_record,
    record_path,
    record_problem,
    with_manifest,
    without_earlier_knobs,
)
from robench.core.types import ExampleResult, Status
from robench.runs.spec import RunSpec

log = logging.getLogger(__name__)
PACKAGES = ("robench", "torch", "transformers", "datasets", "textattack", "numpy", "pandas", "nltk")


@functools.cache
def _package_versions() -> tuple[tuple[str, str | None], ...]:
    """Read once per process: the distributions' metadata cost 37 ms a run."""
    out: list[tuple[str, str | None]] = [("python", platform.python_version())]
    for name in PACKAGES:
        try:
            out.append((name, version(name)))
        except PackageNotFoundError:
            out.append((name, None))
    return tuple(out)


def package_versions() -> dict[str, str | None]:
    return dict(_package_versions())


def git_commit(source: Path | None = None) -> str | None:
    """The commit of the robench checkout this module (or the file `source`) is tracked in: `<sha>`, or
    `<sha>+dirty.<diff>` with uncommitted changes to tracked files, where `<diff>` is the first 16 hex digits of
    the SHA-256 of `git diff HEAD --binary` (so a record made from a dirty tree names the exact changes it was made
    with). None when the file is tracked in no repository: an installed robench, even one inside the user's own
    repository (a virtual environment in a project), whose commit says nothing about robench."""
    source = (source or Path(__file__)).resolve()
    here = source.parent

    def git(*args: str, timeout: int = 5, text: bool = True) -> subprocess.CompletedProcess:
        return subprocess.run(["git", *args], cwd=here, capture_output=True, text=text, timeout=timeout)

    try:
        if git("ls-files", "--error-unmatch", "--", source.name).returncode != 0:
            return None  # not tracked here (or no repository at all)
        sha = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
        diff = git("diff", "HEAD", "--binary", timeout=30, text=False) \
            if sha.returncode == 0 and dirty.stdout.strip() else None
    except (OSError, subprocess.TimeoutExpired):
        return None
    if sha.returncode != 0:
        return None
    if diff is None:
        return sha.stdout.strip()
    digest = hashlib.sha256(diff.stdout).hexdigest()[:16] if diff.returncode == 0 else "unknown"
    return f"{sha.stdout.strip()}+dirty.{digest}"


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


class Partial(dict[int, ExampleResult]):
    """What an interrupted attack left: its finished examples by index, and the cost of earlier processes."""

    attack_seconds: float = 0.0  # attack time of earlier processes, up to their last finished example
    victim_queries: int = 0  # likewise, model queries


# carried on each partial line besides the result
PROGRESS_KEYS = ("attack_seconds", "victim_queries", "made_with", "resources")
STATUSES = frozenset(get_args(Status))


class RunStore:
    """Files of one run under `runs_dir`: record, per-example CSV, partial results."""

    def __init__(self, runs_dir: Path, run_id: str) -> None:
        refuse_writing_into(Path(runs_dir).parent)  # a packed results directory: unpack it first
        self.record_path = record_path(runs_dir, run_id)
        self.csv_path = examples_path(runs_dir, run_id)
        self.partial_path = runs_dir / f"{run_id}.partial.jsonl"
        self.lock_path = runs_dir / f"{run_id}.lock"

    def finished(self, hyperparameters: dict[str, Any] | None = None,
                 resources: dict[str, Any] | None = None) -> RunRecord | None:
        """The finished record, unless there is none, it has an older format, or it does not verify: it must name
        this run, its spec must hash to this run id, it and its per-example CSV must match the manifest written
        with them, and, given the run's resolved `hyperparameters`, it must have been made with them (a recipe's
        or defence's default may have changed since: the spec, and so the run id, only holds what was asked
        for); given the identities of the `resources` its attack reads now (`ResolvedRun.resource_identity`), it
        must have been made with those versions (a rebuilt masked LM, say: robench.engine.resources.identity).
        Otherwise, with a warning, the run is redone and the record replaced."""
        if not self.record_path.is_file():
            return None
        record = read_record(self.record_path)
        if record.format != RECORD_FORMAT:
            return None
        problem = record_problem(self.record_path, record) or _spec_problem(record)
        if problem is None and hyperparameters is not None:
            problem = _hyperparameter_problem(record, hyperparameters)
        if problem is None and resources:
            from robench.engine.resources.identity import identity_problem

            problem = identity_problem(record.resources, resources)
        if problem is not None:
            log.warning("run record %s does not verify (%s); running again", self.record_path, problem)
            return None
        return record

    def load_partial(self, check: Callable[[ExampleResult], str | None] | None = None,
                     made_with: str | None = None, resources: str | None = None) -> Partial:
        """The finished examples of an interrupted attempt. A half-written last line is cut off the file
        (so the next append starts a fresh line); a file that is unreadable, has a bad line, a repeated
        index, an unknown status, a result `check` rejects (it returns the reason), or, given `made_with` (the
        hash of the run's resolved hyperparameters, `hyperparameters_hash`), a line appended under other
        hyperparameters, or given `resources` (`robench.engine.resources.identity.identity_digest`), a line
        appended with other resources, is discarded with a warning: the attack then starts over. (Lines written
        before partial lines carried their resources are not checked for them.)"""
        if not self.partial_path.is_file():
            return Partial()
        data = self.partial_path.read_bytes()
        complete = data[: data.rfind(b"\n") + 1]
        if len(complete) < len(data):  # cut short by an interruption
            os.truncate(self.partial_path, len(complete))
        try:
            return _parse_partial(complete, check, made_with, resources)
        except ValueError as exc:
            log.warning("discarding %s: %s; the attack starts over", self.partial_path, exc)
            self.partial_path.unlink(missing_ok=True)
            return Partial()

    def append(self, result: ExampleResult, progress: dict[str, float] | None = None) -> None:
        """Persist one finished example (with the attack's cost so far, `progress`, for a later resume)."""
        self.partial_path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with open(self.partial_path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({**asdict(result), **(progress or {})}) + "\n")
                fh.flush()
                os.fsync(fh.fileno())
        except OSError as exc:  # a line cut short is cut off the file on resume (load_partial)
            if exc.errno in NO_SPACE:
                raise disk_full_error(exc, self.partial_path) from exc
            raise

    def finish(self, record: RunRecord, results: list[ExampleResult]) -> None:
        """Write the per-example CSV, then the record with its manifest (the CSV's checksum and its own)."""
        atomic_write(self.csv_path, examples_csv(results))
        write_record(self.csv_path.parent, record)
        self.partial_path.unlink(missing_ok=True)


def write_record(runs_dir: Path, record: RunRecord) -> None:
    """Write `record` atomically with its manifest (its per-example CSV must already be in `runs_dir`)."""
    record = with_manifest(record, runs_dir)
    atomic_write(record_path(runs_dir, record.run_id), json.dumps(asdict(record), indent=2, default=str))


def _spec_problem(record: RunRecord) -> str | None:
    """Why the record's spec does not name its run id, or None."""
    try:
        run_id = RunSpec.from_dict(record.spec).run_id
    except (TypeError, ValueError) as exc:
        return f"its spec is not a run spec ({type(exc).__name__})"
    return None if run_id == record.run_id else f"its spec is that of run {run_id}, not {record.run_id}"


def _hyperparameter_problem(record: RunRecord, hyperparameters: dict[str, Any]) -> str | None:
    """Which recorded hyperparameters differ from the run's resolved ones (compared as JSON), or None."""
    expected = without_earlier_knobs(_as_recorded(hyperparameters))
    recorded = without_earlier_knobs(record.hyperparameters)
    differ = sorted(f"{part}.{name}" for part in sorted(set(expected) | set(recorded))
                    for name in _differing(recorded.get(part), expected.get(part)))
    return f"it was made with other hyperparameters: {', '.join(differ)}" if differ else None


def _differing(recorded: Any, expected: Any) -> list[str]:
    if isinstance(recorded, dict) and isinstance(expected, dict):
        return [k for k in sorted(set(recorded) | set(expected)) if recorded.get(k) != expected.get(k)]
    return [] if recorded == expected else ["*"]


def hyperparameters_hash(hyperparameters: dict[str, Any]) -> str:
    """What a partial line carries so that a resume under other hyperparameters is refused. A knob added since,
    at the value that reproduces the code before it (`KNOBS_ADDED_LATER`), is no other hyperparameter, as for
    a finished record (`_hyperparameter_problem`)."""
    return content_hash(without_earlier_knobs(_as_recorded(hyperparameters)), length=16)


def _as_recorded(hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """The hyperparameters as a record stores them (through JSON: tuples become lists, paths strings)."""
    return json.loads(json.dumps(hyperparameters, default=str))


def _parse_partial(data: bytes, check: Callable[[ExampleResult], str | None] | None,
                   made_with: str | None = None, resources: str | None = None) -> Partial:
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
        if problem is None and made_with is not None and progress.get("made_with") != made_with:
            problem = "it was attacked with other hyperparameters"
        if problem is None and resources is not None and progress.get("resources", resources) != resources:
            problem = "it was attacked with other resources (a rebuilt masked LM or lexicon, say)"
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
