"""Did the checkpoint train? A model at chance looks robust: an attack cannot flip what it never got right.

The rule (docs/guide/statistics.md, "A checkpoint that did not train"): a checkpoint *trained* when, on its whole dev
split and on the examples it was attacked on (where the attack has a clean accuracy), the 95% Wilson lower bound
of its accuracy is more than MARGIN above the majority-class rate of those same examples. An accuracy the
interval cannot put MARGIN above always answering the commonest label is flagged: the run summary, the record
(`metrics.chance`), the leaderboard (`untrained_seeds`), the page and `compare` say so, and paired comparisons
leave such seeds out (`robench.report.compare`).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Sequence

MARGIN = 0.05  # points above the majority-class rate the interval's lower bound must clear
Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval


@dataclass(frozen=True)
class ChanceCheck:
    """One accuracy against chance: `what` is "dev" (the whole dev split) or "clean" (the attacked examples)."""

    what: str
    accuracy: float
    examples: int
    majority_rate: float  # the share of the commonest label among those examples
    lower_bound: float  # the 95% Wilson lower bound of `accuracy`

    @property
    def trained(self) -> bool:
        return self.lower_bound > self.majority_rate + MARGIN

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "trained": self.trained}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ChanceCheck:
        return cls(str(d["what"]), float(d["accuracy"]), int(d["examples"]), float(d["majority_rate"]),
                   float(d["lower_bound"]))

    def warning(self) -> str:
        where = "dev accuracy" if self.what == "dev" else "clean accuracy on the attacked examples"
        return (f"did not train: {where} {100 * self.accuracy:.1f}% (95% lower bound {100 * self.lower_bound:.1f}%, "
                f"{self.examples:,} examples) is not {100 * MARGIN:.0f} points above the majority-class rate "
                f"{100 * self.majority_rate:.1f}%")


def wilson_lower(accuracy: float, n: int) -> float:
    """The lower end of the 95% Wilson score interval of a proportion `accuracy` of `n`."""
    if n <= 0:
        return float("nan")
    centre = accuracy + Z95 * Z95 / (2 * n)
    half = Z95 * math.sqrt(accuracy * (1 - accuracy) / n + Z95 * Z95 / (4 * n * n))
    return max(0.0, (centre - half) / (1 + Z95 * Z95 / n))


def check(what: str, accuracy: float, labels: Sequence[int]) -> ChanceCheck | None:
    """`accuracy` on examples with these `labels` against their majority-class rate (None without examples)."""
    if not labels or accuracy is None or accuracy != accuracy:
        return None
    majority = max(Counter(labels).values()) / len(labels)
    return ChanceCheck(what, float(accuracy), len(labels), majority, wilson_lower(float(accuracy), len(labels)))


def untrained(checks: Sequence[ChanceCheck | None]) -> list[ChanceCheck]:
    """The checks that fail the rule."""
    return [c for c in checks if c is not None and not c.trained]
