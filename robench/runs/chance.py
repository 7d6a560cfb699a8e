"""Did the checkpoint train? A model at chance looks robust: an attack cannot flip what it never got right.

The rule (docs/guide/statistics.md, "A checkpoint that did not train"): a checkpoint *trained* when, on its whole dev
split and on the examples it was attacked on (where the attack has a clean accuracy), the 95% Wilson lower bound
of its accuracy is more than MARGIN above the majority-class rate of those same examples. A check on fewer than
MIN_CHECK_EXAMPLES examples cannot tell (a trained checkpoint would fail it by chance) and is not applied. An
accuracy the interval cannot put MARGIN above always answering the commonest label is flagged: the run summary,
the record (`metrics.chance`), the leaderboard (`untrained_seeds`), the page and `compare` say so, and paired
comparisons leave such seeds out (`robench.report.compare`). A checkpoint with no check that can tell (no dev
split, and fewer attacked examples than that) is kept, with the warning TOO_FEW_TO_CHECK.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import asdict, dataclass
from typing import Any, Sequence

MARGIN = 0.05  # points above the majority-class rate the interval's lower bound must clear
Z95 = 1.959963984540054  # the normal quantile of a two-sided 95% interval
# The fewest examples a check needs to tell (docs/guide/statistics.md): with 100, a checkpoint at 75% on balanced labels
# (25 points above the majority rate) fails the rule in 0.9% of draws, one at 84% (bert on SST-2) in none; with 20,
# in 59% and 21%.
MIN_CHECK_EXAMPLES = 100
TOO_FEW_TO_CHECK = "too few examples to check training"


@dataclass(frozen=True)
class ChanceCheck:
    """One accuracy against chance: `what` is "dev" (the whole dev split) or "clean" (the attacked examples)."""

    what: str
    accuracy: float
    examples: int
    majority_rate: float  # the share of the commonest label among those examples
    lower_bound: float  # the 95% Wilson lower bound of `accuracy`

    @property
    def can_tell(self) -> bool:
        """Whether the check has the examples to tell a checkpoint that trained from one that did not."""
        return self.examples >= MIN_CHECK_EXAMPLES

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
    """The checks that fail the rule, among those with the examples to tell."""
    return [c for c in checks if c is not None and c.can_tell and not c.trained]


def unchecked(checks: Sequence[ChanceCheck | None]) -> str | None:
    """TOO_FEW_TO_CHECK, with the examples each check had, when there are checks and none can tell (else None)."""
    present = [c for c in checks if c is not None]
    if not present or any(c.can_tell for c in present):
        return None
    had = ", ".join(f"{c.examples:,} {'dev' if c.what == 'dev' else 'attacked'}" for c in present)
    return f"{TOO_FEW_TO_CHECK} ({had}; a check needs {MIN_CHECK_EXAMPLES}): kept in comparisons"
