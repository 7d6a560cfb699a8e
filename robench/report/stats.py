"""Intervals and paired tests for outcomes of several training seeds on the same examples.

A run's per-example results are coded as categories (an attack outcome, or how two models' outcomes on one
example compare). The seeds of a setting are attacked on the *same* examples, so seeds and examples are
crossed factors, and the claim "model A is more robust than B" is about the training procedure: the seed is a
replication unit, crossed with the example. Both are random.

* `crossed_variance`: the variance of a grand mean over an S x n table (seeds x examples) under the crossed
  random-effects model y_si = mu + a_s + b_i + e_si (seed, example, seed x example), by the ANOVA
  (method-of-moments) estimator: var = (MS_seed + max(0, MS_example - MS_residual)) / (S n), with
  Satterthwaite's degrees of freedom (Searle, Casella & McCulloch, *Variance Components*, 1992, ch. 4;
  Satterthwaite 1946). The seed part (MS_seed, S - 1 df) is never truncated; the example part is dropped
  when its estimate is negative.
* `paired_tests`: the difference in accuracy under attack of two models over the seeds both have and the
  examples both attacked, seed s of one paired with seed s of the other (a seed fixes the training subset
  and order, so same-seed checkpoints of different models agree more than two seeds of one model);
  t test and t interval on the Satterthwaite df. Closed form: no resampling, so no Monte-Carlo error and no
  verdict depends on a random seed.
* `proportion_intervals`: a setting's clean accuracy, accuracy under attack and attack success rate, as
  Wilson intervals on the effective number of examples p(1 - p) / var (the design-effect Wilson interval of
  survey statistics; Kish 1965, Korn & Graubard 1998) with the t quantile on the Satterthwaite df. One seed:
  the plain Wilson interval (examples only: no seed variance can be estimated).
* `holm`: Holm's step-down adjustment of a family of p-values (Holm 1979).
* `verdict`: fewer than MIN_SEEDS seeds: "insufficient seeds"; else the Holm-adjusted p-value against ALPHA.
* `exact_sign_pvalue`: the exact one-sided sign (McNemar) test on the discordant examples of ONE trained model
  under two attacks, conditional on that checkpoint (`robench.report.worstcase.blackbox_stronger`).

MIN_SEEDS and the choice of the estimators come from simulation (`robench.report.calibration`,
docs/statistics.md): at S = 3 the test's size reaches 7.6-7.9% in some fitted scenarios; from S = 4 it
stays within [2.5%, 7.5%] at 100-2,000 examples.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
from scipy import stats as scipy_stats

CONFIDENCE = 0.95
ALPHA = 0.05  # two-sided level of every verdict, after Holm's adjustment over the family
MIN_SEEDS = 4  # fewer matched seeds: "insufficient seeds" (docs/statistics.md, "How the rule was chosen")

# attack outcomes of one example (errors are left out, as in TextAttack's metrics); MISSING: no outcome
SKIPPED, FAILED, SUCCESSFUL = 0, 1, 2
MISSING = -1
# how model A's correctness under attack compares with model B's on one example
A_WORSE, SAME, A_BETTER = 0, 1, 2

INSUFFICIENT = "insufficient seeds"
NOT_DISTINGUISHABLE = "not distinguishable from the baseline"
MORE_ROBUST = "more robust than the baseline"
LESS_ROBUST = "less robust than the baseline"

# a metric as a ratio of two per-example indicators (numerator, denominator) of the category codes
Ratio = tuple[Callable[[np.ndarray], np.ndarray], Callable[[np.ndarray], np.ndarray]]


def _known(codes: np.ndarray) -> np.ndarray:
    return codes != MISSING


RATIOS: dict[str, Ratio] = {
    "clean_accuracy": (lambda c: (c == FAILED) | (c == SUCCESSFUL), _known),
    "robust_accuracy": (lambda c: c == FAILED, _known),
    "attack_success_rate": (lambda c: c == SUCCESSFUL, lambda c: (c == FAILED) | (c == SUCCESSFUL)),
}
INTERVAL_METRICS = tuple(RATIOS)  # the metrics that get intervals from per-example data


@dataclass(frozen=True)
class Estimate:
    value: float  # mean over seeds of the per-seed statistic
    low: float  # CONFIDENCE interval
    high: float

    def contains(self, x: float) -> bool:
        return self.low <= x <= self.high


NAN_ESTIMATE = Estimate(float("nan"), float("nan"), float("nan"))


@dataclass(frozen=True)
class PairedTest:
    """Model A minus model B in accuracy under attack, over `seeds` matched seeds x `examples` shared examples."""

    difference: Estimate  # CONFIDENCE t interval (per comparison, not adjusted for the family)
    se: float  # standard error of the difference (crossed random effects)
    df: float  # Satterthwaite degrees of freedom of the t reference
    p_value: float  # two-sided, unadjusted; exact arithmetic (no Monte-Carlo error)
    seeds: int
    examples: int


def outcome_matrix(per_seed: Sequence[dict[int, int]]) -> np.ndarray:
    """(seeds, examples) category codes aligned by example index; MISSING where a seed has no outcome."""
    indices = sorted(set().union(*per_seed))
    column = {index: j for j, index in enumerate(indices)}
    codes = np.full((len(per_seed), len(indices)), MISSING, dtype=np.int64)
    for s, outcomes in enumerate(per_seed):
        for index, code in outcomes.items():
            codes[s, column[index]] = code
    return codes


def mean_squares(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Two-way ANOVA mean squares (seed, example, residual) of complete (..., S, n) tables, S >= 2, n >= 2,
    from the table's row, column and grand sums (integer tables are summed exactly)."""
    cells = np.asarray(cells)
    seeds, n = cells.shape[-2:]
    kind = np.int64 if np.issubdtype(cells.dtype, np.integer) or cells.dtype == bool else np.float64
    rows, columns = cells.sum(-1, dtype=kind), cells.sum(-2, dtype=kind)
    total = rows.sum(-1)
    squares = (cells.astype(kind) ** 2).sum((-2, -1))
    correction = total.astype(np.float64) ** 2 / (seeds * n)
    ss_seed = (rows.astype(np.float64) ** 2).sum(-1) / n - correction
    ss_example = (columns.astype(np.float64) ** 2).sum(-1) / seeds - correction
    ss_residual = squares - correction - ss_seed - ss_example
    return (np.maximum(ss_seed, 0.0) / (seeds - 1), np.maximum(ss_example, 0.0) / (n - 1),
            np.maximum(ss_residual, 0.0) / ((seeds - 1) * (n - 1)))


def crossed_variance(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Variance of the grand mean of complete (..., S, n) tables under crossed random seed and example effects,
    and its Satterthwaite degrees of freedom (S - 1 when the example part is dropped; NaN for a zero variance:
    every cell alike).

    var = (MS_seed + max(0, MS_example - MS_residual)) / (S n): MS_seed / (S n) estimates
    sigma_seed^2 / S + sigma_residual^2 / (S n) and (MS_example - MS_residual) / (S n) estimates
    sigma_example^2 / n, so their sum is unbiased for the variance of the mean whenever the example part is
    not truncated. Needs S >= 2 and n >= 2.
    """
    seeds, n = np.shape(cells)[-2:]
    ms_seed, ms_example, ms_residual = mean_squares(cells)
    example_part = np.maximum(ms_example - ms_residual, 0.0)
    total = ms_seed + example_part
    denominator = ms_seed ** 2 / (seeds - 1) + np.where(
        example_part > 0, ms_example ** 2 / (n - 1) + ms_residual ** 2 / ((seeds - 1) * (n - 1)), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denominator > 0, total ** 2 / denominator, np.nan)
    # Seeds whose means tie exactly (likely at 2-3 seeds) with the example part truncated leave no variance
    # although the cells vary: the residual, which is part of every seed mean's variance, stands in for it.
    degenerate = (total <= 1e-12 * (ms_example + ms_residual)) & (ms_residual > 0)
    total = np.where(degenerate, ms_residual, total)
    df = np.where(degenerate, float((seeds - 1) * (n - 1)), df)
    return total / (seeds * n), df


def t_pvalue(value: np.ndarray, se: np.ndarray, df: np.ndarray) -> np.ndarray:
    """Two-sided p-value of value / se on a t reference with `df`: 1 for a zero estimate, 0 for a nonzero
    estimate with a zero standard error (every cell the same nonzero difference)."""
    value, se, df = np.broadcast_arrays(*(np.asarray(x, dtype=np.float64) for x in (value, se, df)))
    p = np.where(value == 0, 1.0, 0.0)
    ok = se > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(value) / np.where(ok, se, 1.0)
        p = np.where(ok, 2 * scipy_stats.t.sf(t, np.where(ok, df, 1.0)), p)
    return p


def paired_arrays(diffs: np.ndarray, confidence: float = CONFIDENCE
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised `paired_test` on complete (..., S, n) tables of per-example differences (-1, 0, +1):
    (mean, low, high, se, df, p). The simulation (`robench.report.calibration`) calls this same function."""
    diffs = np.asarray(diffs)
    value = diffs.mean((-2, -1), dtype=np.float64)
    var, df = crossed_variance(diffs)
    se = np.sqrt(var)
    with np.errstate(invalid="ignore"):
        half = np.where(se > 0, scipy_stats.t.ppf(0.5 + confidence / 2, np.where(se > 0, df, 1.0)) * se, 0.0)
    return value, value - half, value + half, se, df, t_pvalue(value, se, df)


def paired_test(codes: np.ndarray, confidence: float = CONFIDENCE) -> PairedTest | None:
    """The paired comparison of (seeds, examples) A_WORSE / SAME / A_BETTER codes (MISSING where a pair has no
    outcome), on the examples every seed has. None without two seeds and two such examples."""
    codes = np.atleast_2d(codes)
    complete = codes[:, (codes != MISSING).all(axis=0)]
    seeds, n = complete.shape
    if seeds < 2 or n < 2:
        return None
    value, low, high, se, df, p = (float(x) for x in paired_arrays(complete - SAME, confidence))
    return PairedTest(Estimate(value, low, high), se, df, p, seeds, n)


def detectable_difference(se: float, df: float, power: float = 0.8, alpha: float = ALPHA) -> float:
    """The smallest true difference a two-sided test at `alpha` finds with probability `power`, given the
    comparison's standard error and degrees of freedom: (t_{1-alpha/2} + t_{power}) x se (nan without them)."""
    if not (se == se and df == df) or se <= 0:
        return float("nan")
    return float((scipy_stats.t.ppf(1 - alpha / 2, df) + scipy_stats.t.ppf(power, df)) * se)


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values (Holm 1979), in the order given: the family is every p-value given."""
    p = np.asarray(p_values, dtype=np.float64)
    order = np.argsort(p, kind="stable")
    m = len(p)
    adjusted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adjusted
    return out.tolist()


def verdict(difference: float, adjusted_p: float, seeds: int) -> str:
    """The verdict on a comparison with the baseline: too few matched seeds, or the Holm-adjusted p-value."""
    if seeds < MIN_SEEDS:
        return INSUFFICIENT
    if adjusted_p < ALPHA:
        return MORE_ROBUST if difference > 0 else LESS_ROBUST
    return NOT_DISTINGUISHABLE


def wilson_interval(successes: float, n: float, confidence: float = CONFIDENCE,
                    df: float = float("inf")) -> tuple[float, float]:
    """The Wilson score interval of `successes` out of `n` (both may be effective, non-integer counts), with the
    normal quantile, or the t quantile on `df` degrees of freedom."""
    if n <= 0:
        return float("nan"), float("nan")
    z = float(scipy_stats.t.ppf(0.5 + confidence / 2, df)) if np.isfinite(df) else \
        float(scipy_stats.norm.ppf(0.5 + confidence / 2))
    p = min(max(successes / n, 0.0), 1.0)
    centre = p + z * z / (2 * n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    scale = 1 + z * z / n
    low = 0.0 if p == 0 else max(0.0, (centre - half) / scale)  # exact ends, not rounding residue
    high = 1.0 if p == 1 else min(1.0, (centre + half) / scale)
    return low, high


def ratio_interval(codes: np.ndarray, ratio: Ratio, confidence: float = CONFIDENCE) -> Estimate:
    """Mean over seeds of a per-seed ratio (numerator / denominator indicators of the codes), with its
    design-effect Wilson interval.

    Point estimate: the mean of each seed's ratio over its own examples (a seed with an empty denominator is
    left out). Variance: `crossed_variance` of the linearised cells r_s + (num_si - r_s den_si) / mean_i den_si
    (the delta method; for an accuracy these are the 0/1 outcomes themselves) over the examples every kept seed
    has. Effective examples n_eff = r (1 - r) / var, at most the attacked cells, and the t quantile on the
    Satterthwaite df. One seed, or a zero variance: the plain Wilson interval on the mean counts.
    """
    codes = np.atleast_2d(codes)
    numerator, denominator = (f(codes).astype(np.float64) for f in ratio)
    den_counts = denominator.sum(1)
    kept = den_counts > 0
    if not kept.any():
        return NAN_ESTIMATE
    numerator, denominator, codes = numerator[kept], denominator[kept], codes[kept]
    per_seed = numerator.sum(1) / denominator.sum(1)
    value = float(per_seed.mean())
    mean_den = float(denominator.sum(1).mean())
    complete = (codes != MISSING).all(axis=0)
    seeds, n = len(per_seed), int(complete.sum())
    if seeds < 2 or n < 2:
        return Estimate(value, *wilson_interval(value * mean_den, mean_den, confidence))
    num, den = numerator[:, complete], denominator[:, complete]
    rate = np.divide(num.sum(1), den.sum(1), out=per_seed.copy(), where=den.sum(1) > 0)
    scale = np.maximum(den.mean(1), 1e-12)[:, None]
    cells = rate[:, None] + (num - rate[:, None] * den) / scale
    var, df = (float(x) for x in crossed_variance(cells))
    if var <= 0 or not np.isfinite(df):
        return Estimate(value, *wilson_interval(value * mean_den, mean_den, confidence))
    effective = min(value * (1 - value) / var, seeds * mean_den)  # var > 0 implies 0 < value < 1
    return Estimate(value, *wilson_interval(value * effective, effective, confidence, df))


def proportion_intervals(codes: np.ndarray, metrics: Sequence[str] = INTERVAL_METRICS,
                         confidence: float = CONFIDENCE) -> dict[str, Estimate]:
    """`ratio_interval` of each named metric (RATIOS) of (seeds, examples) attack-outcome codes."""
    return {metric: ratio_interval(codes, RATIOS[metric], confidence) for metric in metrics}


def binary_interval(outcomes: np.ndarray, confidence: float = CONFIDENCE) -> Estimate:
    """The design-effect Wilson interval of a (seeds, examples) table of 0/1 outcomes (the worst case)."""
    outcomes = np.atleast_2d(np.asarray(outcomes))
    codes = np.where(outcomes.astype(bool), FAILED, SUCCESSFUL)
    return ratio_interval(codes, RATIOS["robust_accuracy"], confidence)


def exact_sign_pvalue(more: int, fewer: int) -> float:
    """One-sided exact sign test (McNemar's, exact) that `more` discordant examples out of `more + fewer` is
    more than chance (probability 1/2 each); 1 when nothing is discordant."""
    if more + fewer == 0:
        return 1.0
    return float(scipy_stats.binomtest(more, more + fewer, 0.5, alternative="greater").pvalue)
