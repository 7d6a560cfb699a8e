"""TextAttack-style attack metrics over per-example results."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from robench.types import ExampleResult


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
