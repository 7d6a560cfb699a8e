"""Records verified before they are reported: `record_fault` is the one check `leaderboard`, `compare`, `show` and
the page apply to every run record before they show a number from it.

A record is shown only when
* its run id hashes from its spec (`RunSpec.from_dict(spec).run_id`): a record copied or edited to claim another
  run's name is not that run;
* its metrics have their types and ranges: rates are finite numbers in [0, 1], counts non-negative integers, and
  `robust_accuracy` is there;
* its per-example CSV is there, has rows, and gives back the record's counts and rates (`robench.engine.metrics`'s
  definitions: errors are left out of every ratio), so a metric edited without its CSV, or a CSV edited without
  its record, is caught whether or not the record carries a manifest.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from robench.core.errors import RobenchError
from robench.core.records import RunRecord, read_examples
from robench.engine.metrics import textattack_metrics

RATES = ("dev_accuracy", "clean_accuracy", "robust_accuracy", "attack_success_rate", "certified_accuracy")
COUNTS = ("examples", "skipped", "failed", "successful", "errors")
TOLERANCE = 1e-9


def record_fault(record: RunRecord, runs_dir: Path) -> str | None:
    """Why `record` (of `runs_dir`) must not be reported, or None when it verifies."""
    return _identity_fault(record) or _metrics_fault(record.metrics) or _examples_fault(record, Path(runs_dir))


def _identity_fault(record: RunRecord) -> str | None:
    from robench.runs.spec import RunSpec

    try:
        run_id = RunSpec.from_dict(record.spec).run_id
    except (TypeError, ValueError, AttributeError) as exc:
        return f"its spec is not a run spec ({type(exc).__name__})"
    return None if run_id == record.run_id else f"its spec hashes to run id {run_id}, not {record.run_id}"


def _metrics_fault(metrics: dict[str, Any]) -> str | None:
    if metrics.get("robust_accuracy") is None:
        return "it has no robust_accuracy"
    for name in RATES:
        value = metrics.get(name)
        if value is not None and not (_number(value) and 0.0 <= value <= 1.0):
            return f"its {name} is {value!r}, not a number in [0, 1]"
    for name in COUNTS:
        value = metrics.get(name)
        if value is not None and not (type(value) is int and value >= 0):
            return f"its {name} is {value!r}, not a non-negative integer"
    return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _examples_fault(record: RunRecord, runs_dir: Path) -> str | None:
    try:
        results = read_examples(runs_dir, record.run_id)
    except RobenchError:
        return "its per-example CSV is missing"
    except (ValueError, TypeError) as exc:
        return f"its per-example CSV is malformed ({type(exc).__name__})"
    if not results:
        return "its per-example CSV has no rows"
    computed = textattack_metrics(results)
    expected: dict[str, Any] = {"examples": computed.examples, "failed": computed.failed,
                                "successful": computed.successful, "skipped": computed.skipped,
                                "errors": computed.errors, "robust_accuracy": computed.robust_accuracy,
                                "clean_accuracy": computed.clean_accuracy,
                                "attack_success_rate": computed.attack_success_rate}
    for name, value in expected.items():  # a metric a recipe leaves out (None) has nothing to check
        stated = record.metrics.get(name)
        if stated is not None and (value is None or abs(stated - value) > TOLERANCE):
            return f"its {name} is {stated!r} but its per-example CSV gives {value!r}"
    return None
