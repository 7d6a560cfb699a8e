"""Confidence intervals and paired tests over per-example outcomes of several training seeds.

A run's per-example results are coded as categories (an attack outcome, or how two models' outcomes on
one example compare); a metric is a function of the category counts of one seed's examples, and a
setting's value is the mean of that metric over its seeds.

* `bootstrap_interval`: two-level bootstrap, seeds then examples, percentile interval. The seeds of a
  setting are attacked on the same examples, so a replicate draws one resample of the examples and applies
  it to every drawn seed (seeds and examples are crossed factors; resampling the examples independently
  per seed would count the same examples as new ones and shrink the interval).
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

# attack outcomes of one example (errors are left out, as in TextAttack's metrics); MISSING: no outcome
SKIPPED, FAILED, SUCCESSFUL = 0, 1, 2
MISSING = -1
# how model A's correctness under attack compares with model B's on one example
A_WORSE, SAME, A_BETTER = 0, 1, 2

CATEGORIES = 3
CHUNK = 500  # bootstrap replicates drawn at a time (bounds memory: CHUNK x examples weights)

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


def outcome_matrix(per_seed: Sequence[dict[int, int]]) -> np.ndarray:
    """(seeds, examples) category codes aligned by example index; MISSING where a seed has no outcome."""
    indices = sorted(set().union(*per_seed))
    column = {index: j for j, index in enumerate(indices)}
    codes = np.full((len(per_seed), len(indices)), MISSING, dtype=np.int64)
    for s, outcomes in enumerate(per_seed):
        for index, code in outcomes.items():
            codes[s, column[index]] = code
    return codes


def _onehot(codes: np.ndarray) -> np.ndarray:
    return (np.asarray(codes)[..., None] == np.arange(CATEGORIES)).astype(np.float64)  # MISSING: all zero


def seed_counts(codes: np.ndarray) -> np.ndarray:
    """(seeds, categories) counts of each seed's outcomes."""
    return _onehot(codes).sum(axis=1)


def _mean_over_seeds(values: np.ndarray) -> np.ndarray:
    """Mean over the last axis, ignoring NaN (a seed whose statistic is undefined); NaN if all are."""
    valid = ~np.isnan(values)
    total = np.where(valid, values, 0.0).sum(-1)
    n = valid.sum(-1)
    return np.divide(total, n, out=np.full(total.shape, np.nan), where=n > 0)


def _apply(statistic: Statistic, counts: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", divide="ignore"):  # a seed with no outcomes: NaN, left out of the mean
        return statistic(counts)


def bootstrap_replicates(codes: np.ndarray, statistics: Sequence[Statistic], resamples: int = RESAMPLES,
                         seed: int = SEED) -> np.ndarray:
    """(statistics, resamples) two-level bootstrap replicates of the mean over seeds of each statistic.

    `codes` is (seeds, examples). Each replicate draws as many seeds as there are with replacement, and one
    resample of the examples with replacement (as per-example weights) shared by all drawn seeds; every
    statistic is evaluated on the same replicates.
    """
    rng = np.random.default_rng(seed)
    seeds, n = codes.shape
    onehot = _onehot(codes).transpose(1, 0, 2).reshape(n, seeds * CATEGORIES)
    picks = rng.integers(0, seeds, size=(resamples, seeds))
    out = np.empty((len(statistics), resamples))
    for start in range(0, resamples, CHUNK):
        m = min(CHUNK, resamples - start)
        draws = rng.integers(0, n, size=(m, n)) + n * np.arange(m)[:, None]
        weights = np.bincount(draws.ravel(), minlength=m * n).reshape(m, n).astype(np.float64)
        counts = (weights @ onehot).reshape(m, seeds, CATEGORIES)
        chosen = counts[np.arange(m)[:, None], picks[start:start + m]]
        for i, statistic in enumerate(statistics):
            out[i, start:start + m] = _mean_over_seeds(_apply(statistic, chosen))
    return out


def bootstrap_intervals(codes: np.ndarray, statistics: dict[str, Statistic], confidence: float = CONFIDENCE,
                        resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, Estimate]:
    """Per statistic: the mean over seeds, with its two-level bootstrap percentile interval."""
    codes = np.atleast_2d(codes)
    replicates = bootstrap_replicates(codes, list(statistics.values()), resamples, seed)
    tail = (1 - confidence) / 2
    out = {}
    for (name, statistic), values in zip(statistics.items(), replicates):
        value = float(_mean_over_seeds(_apply(statistic, seed_counts(codes))))
        values = values[~np.isnan(values)]
        if np.isnan(value) or not len(values):
            out[name] = Estimate(float("nan"), float("nan"), float("nan"))
            continue
        low, high = np.quantile(values, [tail, 1 - tail])
        out[name] = Estimate(value, float(low), float(high))
    return out


def bootstrap_interval(codes: np.ndarray, statistic: Statistic, confidence: float = CONFIDENCE,
                       resamples: int = RESAMPLES, seed: int = SEED) -> Estimate:
    """Mean over seeds of `statistic`, with its two-level bootstrap percentile interval."""
    return bootstrap_intervals(codes, {"value": statistic}, confidence, resamples, seed)["value"]


def paired_permutation_pvalue(codes: np.ndarray, resamples: int = RESAMPLES, seed: int = SEED) -> float:
    """Two-sided p-value of the mean over seeds of `paired_difference` under random sign flips, one per
    (seed, example) pair. `codes` is (seeds, examples) of A_WORSE / SAME / A_BETTER (or MISSING)."""
    counts = seed_counts(np.atleast_2d(codes))
    counts = counts[counts.sum(-1) > 0]
    n = counts.sum(-1)
    discordant = (counts[:, A_WORSE] + counts[:, A_BETTER]).astype(np.int64)
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
