"""Which run records come from a checkpoint that did not train (`robench.runs.chance`, docs/guide/statistics.md).

A record written since the rule carries its checks (`metrics.chance`). An older one is checked here: its clean
accuracy from its per-example CSV (the attacked examples' labels), its dev accuracy against the dev split's
labels read from the data directory (`$ROBENCH_DATA_DIR`; without one, or for a task read from files, only the
clean check applies). A record none of whose checks has the examples to tell is not flagged: `unchecked_runs`
names it ("too few examples to check training") and comparisons keep its seed.
"""
from __future__ import annotations

import logging
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from robench.core.errors import RobenchError
from robench.core.records import RunRecord, read_examples
from robench.runs.chance import ChanceCheck, check, unchecked, untrained


def untrained_runs(records: Iterable[RunRecord], runs_dir: Path, data_dir: Path | None = None) -> dict[str, str]:
    """Run id -> the warning of each record whose checkpoint did not train."""
    data_dir = _data_dir(data_dir)
    out = {}
    for rec in records:
        if failed := untrained(record_checks(rec, runs_dir, data_dir)):
            out[rec.run_id] = "; ".join(c.warning() for c in failed)
    return out


def unchecked_runs(records: Iterable[RunRecord], runs_dir: Path, data_dir: Path | None = None) -> dict[str, str]:
    """Run id -> "too few examples to check training (...)" for each record that no check can tell about."""
    data_dir = _data_dir(data_dir)
    return {rec.run_id: note for rec in records if (note := unchecked(record_checks(rec, runs_dir, data_dir)))}


def _data_dir(data_dir: Path | None) -> Path | None:
    if data_dir is None:
        from robench.core.paths import resolve_settings

        data_dir = resolve_settings().data_dir
    return data_dir


def record_checks(record: RunRecord, runs_dir: Path, data_dir: Path | None) -> list[ChanceCheck | None]:
    """The record's chance checks: as recorded, else computed from its CSV and the dev split."""
    if isinstance(record.metrics.get("chance"), list):
        return [ChanceCheck.from_dict(d) for d in record.metrics["chance"]]
    checks = []
    labels = _dev_labels(record.spec.get("task"), data_dir) if _built_in_local(record) else None
    if labels and record.metrics.get("dev_accuracy") is not None:
        checks.append(check("dev", record.metrics["dev_accuracy"], labels))
    elif _built_in_local(record) and record.metrics.get("dev_accuracy") is not None:
        logging.getLogger("robench").warning(
            "run %s: its dev accuracy cannot be checked against chance without its task's dev split (set "
            "ROBENCH_DATA_DIR or --data-dir): a checkpoint that did not train would not be flagged", record.run_id)
    if record.metrics.get("clean_accuracy") is not None:
        try:
            attacked = [r for r in read_examples(runs_dir, record.run_id) if r.status != "error"]
        except RobenchError:  # no per-example CSV: the clean check needs it
            attacked = []
        if attacked:
            correct = sum(r.status != "skipped" for r in attacked) / len(attacked)
            checks.append(check("clean", correct, [r.label for r in attacked]))
    return checks


def _built_in_local(record: RunRecord) -> bool:
    return record.spec.get("task_source") is None and record.spec.get("data_source", "local") == "local"


@lru_cache(maxsize=16)
def _dev_labels(task: str | None, data_dir: Path | None) -> tuple[int, ...] | None:
    if task is None or data_dir is None:
        return None
    from robench.data import TASKS
    from robench.data.loading import load_split

    try:
        return tuple(int(y) for y in load_split(TASKS.get(task), "eval", Path(data_dir), "local")["label"])
    except (RobenchError, OSError):  # a task or data file not here: no dev check
        return None
