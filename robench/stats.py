"""Confidence intervals and paired tests over per-example outcomes of several training seeds.

A run's per-example results are coded as categories (an attack outcome, or how two models' outcomes on
one example compare); a metric is a function of the category counts of one seed's examples, and a
setting's value is the mean of that metric over its seeds.

* `bootstrap_interval`: two-level bootstrap, seeds then examples within each seed, percentile interval.
  Resampling n examples with replacement changes only how many fall in each category, so each seed's
  resample is drawn as Multinomial(n, observed shares): the same distribution as drawing indices.
* `paired_permutation_pvalue`: sign-flip permutation test of a paired difference (swap the two models'
  outcomes on each example at random). Only discordant examples change sign, so a seed's permuted
  difference is 2·Binomial(discordant, ½) − discordant: the same distribution, drawn directly.

Every call draws from its own `np.random.default_rng(seed)` (seed `SEED` by default), so the same
outcomes always give the same numbers: leaderboards are reproducible byte for byte. docs/statistics.md
gives the definitions and the measured agreement with the Wilson interval.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

CONFIDENCE = 0.95
RESAMPLES = 10_000
SEED = 0

# attack outcomes of one example (errors are left out, as in TextAttack's metrics)
SKIPPED, FAILED, SUCCESSFUL = 0, 1, 2
# how model A's correctness under attack compares with model B's on one example
A_WORSE, SAME, A_BETTER = 0, 1, 2

Statistic = Callable[[np.ndarray], np.ndarray]  # category counts (..., K) -> value (...); NaN where undefined


def clean_accuracy(counts: np.ndarray) -> np.ndarray:
    return (counts[..., FAILED] + counts[..., SUCCESSFUL]) / counts.sum(-1)


def robust_accuracy(counts: np.ndarray) -> np.ndarray:
    return counts[..., FAILED] / counts.sum(-1)


def attack_success_rate(counts: np.ndarray) -> np.ndarray:
    attacked = counts[..., FAILED] + counts[..., SUCCESSFUL]
    return np.divide(counts[..., SUCCESSFUL], attacked, out=np.full(attacked.shape, np.nan), where=attacked > 0)


def paired_difference(counts: np.ndarray) -> np.ndarray:
    """Accuracy of A minus accuracy of B on the shared examples."""
    return (counts[..., A_BETTER] - counts[..., A_WORSE]) / counts.sum(-1)


METRICS: dict[str, Statistic] = {"clean_accuracy": clean_accuracy, "robust_accuracy": robust_accuracy,
                                 "attack_success_rate": attack_success_rate}


@dataclass(frozen=True)
class Estimate:
    value: float  # mean over seeds of the per-seed statistic
    low: float  # CONFIDENCE interval
    high: float

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high


def category_counts(groups: Sequence[np.ndarray], categories: int = 3) -> np.ndarray:
    """(seeds, categories) counts of the category codes of each seed's examples; seeds with none dropped."""
    counts = [np.bincount(np.asarray(g, dtype=np.int64), minlength=categories) for g in groups]
    counts = [c for c in counts if c.sum() > 0]
    if not counts:
        raise ValueError("no examples to estimate from")
    return np.stack(counts)


def _mean_over_seeds(values: np.ndarray) -> np.ndarray:
    """Mean over the last axis, ignoring NaN (a seed whose statistic is undefined); NaN if all are."""
    valid = ~np.isnan(values)
    total = np.where(valid, values, 0.0).sum(-1)
    n = valid.sum(-1)
    return np.divide(total, n, out=np.full(total.shape, np.nan), where=n > 0)


def bootstrap_replicates(counts: np.ndarray, statistic: Statistic, resamples: int = RESAMPLES,
                         seed: int = SEED) -> np.ndarray:
    """`resamples` two-level bootstrap replicates of the mean over seeds of `statistic`.

    Each replicate draws as many seeds as there are, with replacement, then resamples each drawn seed's
    examples with replacement (as category counts, see the module docstring).
    """
    rng = np.random.default_rng(seed)
    seeds = len(counts)
    picks = rng.integers(0, seeds, size=(resamples, seeds))
    draws = np.stack([rng.multinomial(c.sum(), c / c.sum(), size=(resamples, seeds)) for c in counts])
    chosen = draws[picks, np.arange(resamples)[:, None], np.arange(seeds)[None, :]]  # (resamples, seeds, K)
    return _mean_over_seeds(statistic(chosen))


def bootstrap_interval(counts: np.ndarray, statistic: Statistic, confidence: float = CONFIDENCE,
                       resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:
    """Mean over seeds of `statistic`, with its two-level bootstrap percentile interval."""
    value = float(_mean_over_seeds(statistic(counts)))
    replicates = bootstrap_replicates(counts, statistic, resamples, seed)
    replicates = replicates[~np.isnan(replicates)]
    if np.isnan(value) or not len(replicates):
        return Estimate(float("nan"), float("nan"), float("nan"))
    tail = (1 - confidence) / 2
    low, high = np.quantile(replicates, [tail, 1 - tail])
    return Estimate(value, float(low), float(high))


def paired_codes(a_correct: np.ndarray, b_correct: np.ndarray) -> np.ndarray:
    """Per shared example: A_WORSE, SAME or A_BETTER (correctness of A against B)."""
    return np.asarray(a_correct, dtype=np.int64) - np.asarray(b_correct, dtype=np.int64) + SAME


def paired_permutation_pvalue(counts: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED) -> float:
    """Two-sided p-value of the mean over seeds of `paired_difference` under random sign flips."""
    n = counts.sum(-1)
    discordant = counts[:, A_WORSE] + counts[:, A_BETTER]
    observed = float(np.mean(paired_difference(counts)))
    rng = np.random.default_rng(seed)
    flipped = 2 * rng.binomial(discordant, 0.5, size=(resamples, len(counts))) - discordant
    null = (flipped / n).mean(-1)
    extreme = np.count_nonzero(np.abs(null) >= abs(observed) - 1e-12)
    return float((1 + extreme) / (1 + resamples))


def wilson_interval(successes: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (scipy.stats)."""
    from scipy.stats import binomtest

    ci = binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    return float(ci.low), float(ci.high)
