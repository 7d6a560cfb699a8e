"""TextAttack-style attack metrics over per-example results."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from robench.core.types import ExampleResult


@dataclass
class AttackMetrics:
    examples: int
    clean_accuracy: float
    robust_accuracy: float  # accuracy under attack
    attack_success_rate: float | None
    skipped: int
    failed: int
    successful: int
    errors: int
    avg_perturbed_word_pct: float | None
    avg_words_per_input: float | None
    avg_queries: float | None
    extra: dict[str, Any] = field(default_factory=dict)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def textattack_metrics(results: list[ExampleResult]) -> AttackMetrics:
    """TextAttack's summary: errors are reported but excluded from every ratio."""
    ok = [r for r in results if r.status != "error"]
    count = {s: sum(r.status == s for r in ok) for s in ("skipped", "failed", "successful")}
    n, attacked = len(ok), count["failed"] + count["successful"]
    successes = [r for r in ok if r.status == "successful"]
    return AttackMetrics(
        examples=n,
        clean_accuracy=attacked / n if n else 0.0,
        robust_accuracy=count["failed"] / n if n else 0.0,
        attack_success_rate=count["successful"] / attacked if attacked else None,
        skipped=count["skipped"], failed=count["failed"], successful=count["successful"],
        errors=len(results) - n,
        avg_perturbed_word_pct=_mean([100 * r.words_perturbed / max(r.num_words, 1) for r in successes]),
        avg_words_per_input=_mean([r.num_words for r in ok]),
        avg_queries=_mean([r.queries for r in ok if r.status != "skipped"]),
    )


ZERO_GRADIENT_RATE = 0.1  # AutoAttack's flag: this share of zero or non-finite input gradients
BUDGET_FRACTIONS = (0.125, 0.25, 0.5, 1.0)


def budget_curve(results: Iterable[ExampleResult], fractions: Sequence[float] = BUDGET_FRACTIONS
                 ) -> dict[str, list] | None:
    """Accuracy under attack at fractions of the largest per-example query count (None: nothing attacked)."""
    ok = [r for r in results if r.status != "error"]
    attacked = [r for r in ok if r.status in ("failed", "successful")]
    if not attacked:
        return None
    top = max(r.queries for r in attacked)
    budgets = [max(1, math.ceil(f * top)) for f in fractions]
    failed = sum(r.status == "failed" for r in attacked)
    accuracy = [(failed + sum(r.status == "successful" and r.queries > b for r in attacked)) / len(ok)
                for b in budgets]
    return {"budgets": budgets, "robust_accuracy": accuracy}


def budget_does_not_fall(curve: dict[str, list] | None) -> bool:
    """Some examples survive the whole budget, and no more fell than at the smallest budget."""
    return curve is not None and 0 < curve["robust_accuracy"][-1] >= curve["robust_accuracy"][0]


def masking_flags_of_run(metrics: dict[str, Any]) -> list[str]:
    """The flags one run record supports on its own: zero gradients, no fall with the budget."""
    flags = []
    check = metrics.get("gradient_check") or {}
    if check.get("zero_or_nonfinite_rate") is not None and check["zero_or_nonfinite_rate"] >= ZERO_GRADIENT_RATE:
        flags.append("zero_gradients")
    if budget_does_not_fall(metrics.get("budget_curve")):
        flags.append("no_fall_with_budget")
    return flags
