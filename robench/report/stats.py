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
* `paired_test` / `paired_arrays`: the difference in accuracy under attack of two models over the seeds both
  have and the examples both attacked, seed s of one paired with seed s of the other (a seed fixes the training
  subset and order, so same-seed checkpoints of different models agree more than two seeds of one model). The
  variance is `variance_parts`' seed part plus example part; the reference distribution (`two_sided_tail`) is
  the generalized pivot with the seed part random on its S - 1 df and the example part known (Tsui &
  Weerahandi 1989), whose far tail holds where Satterthwaite's t did not (issue 46: Holm's family-wise error over
  25 comparisons up to 18.9%). Deterministic quadrature: no Monte-Carlo error, no verdict depends on a random
  seed. `detectable_difference`: the difference this test finds with 80% power at a given level; for a verdict
  Holm-adjusted over a family of m, at ALPHA / m (`family_alpha`: Holm's first step, a conservative bound).
* `proportion_intervals`: a setting's clean accuracy, accuracy under attack and attack success rate, as
  Wilson intervals on the effective number of examples p(1 - p) / var (the design-effect Wilson interval of
  survey statistics; Kish 1965, Korn & Graubard 1998) with the t quantile on the Satterthwaite df. One seed:
  the plain Wilson interval (examples only: no seed variance can be estimated).
* `holm`: Holm's step-down adjustment of a family of p-values (Holm 1979).
* `verdict`: fewer than MIN_SEEDS seeds: "insufficient seeds"; else the Holm-adjusted p-value against ALPHA
  (`robench.report.compare.Comparison.verdict` adds no shared seeds, too few examples and no variation). The
  vocabulary (`VOCABULARY`, docs/guide/statistics.md): "more robust" / "less robust" when the adjusted test
  excludes 0, "inconclusive" when it does not (differences up to the verdict's detectable difference cannot be
  ruled out: `inconclusive_text`).
* `exact_sign_pvalue`: the exact one-sided sign (McNemar) test on the discordant examples of ONE trained model
  under two attacks, conditional on that checkpoint (`robench.report.worstcase.blackbox_stronger`).

MIN_SEEDS and the choice of the estimators come from simulation (`studies/verdict_simulation.py`,
docs/studies/statistics.md): at S = 3 the Satterthwaite test's size reached 7.6-7.9% in some fitted scenarios; from
S = 4 the test's size stays within [2.5%, 7.5%] and Holm's family-wise error over 25 comparisons below 5% on the
AdvGLUE fit (tests/test_verdict_simulation.py).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

CONFIDENCE = 0.95
ALPHA = 0.05  # two-sided level of every verdict, after Holm's adjustment over the family
TAIL_NODES = 240  # quadrature nodes of the paired test's reference distribution (`two_sided_tail`)
MIN_SEEDS = 4  # fewer matched seeds: "insufficient seeds" (docs/studies/statistics.md, "How the rule was chosen")

# attack outcomes of one example (errors are left out, as in TextAttack's metrics); MISSING: no outcome
SKIPPED, FAILED, SUCCESSFUL = 0, 1, 2
MISSING = -1
# how model A's correctness under attack compares with model B's on one example
A_WORSE, SAME, A_BETTER = 0, 1, 2

INSUFFICIENT = "insufficient seeds"
NO_SHARED_SEEDS = "no shared seeds"  # the two models have no training seed label in common
TOO_FEW_EXAMPLES = "too few examples"  # under two examples shared by every matched seed
NO_SHARED_EXAMPLES = "no shared examples"  # matched seeds, but no example attacked in both
NO_VARIATION = "no variation"  # every (seed, example) difference alike: no variance, no interval, no verdict
NO_VERDICT = (INSUFFICIENT, NO_SHARED_SEEDS, NO_SHARED_EXAMPLES, TOO_FEW_EXAMPLES, NO_VARIATION)
# The one vocabulary of verdicts (docs/guide/statistics.md, "The words"; tests/test_vocabulary.py checks every
# generated output against it): the Holm-adjusted test excludes 0 (in one direction or the other), or it does not
MORE_ROBUST = "more robust than the baseline"
LESS_ROBUST = "less robust than the baseline"
INCONCLUSIVE = "inconclusive"  # always printed with the D of `inconclusive_text`
OVERLAPPING = "overlapping"  # the leaderboard page's ranks whose intervals overlap (not a test)

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

    difference: Estimate  # CONFIDENCE interval of the seed-fiducial test (per comparison, not adjusted for the family)
    se: float  # standard error of the difference (crossed random effects); 0: every cell alike, no test
    seed_share: float  # the seed mean square's share of se ** 2 (w of `two_sided_tail`)
    p_value: float  # two-sided, unadjusted, of the difference 0; nan without variation; deterministic quadrature
    seeds: int
    examples: int

    @property
    def varies(self) -> bool:
        return self.se > 0

    def p_value_at(self, value: float) -> float:
        """Two-sided p-value of the hypothesis that the true difference is `value` (nan without variation)."""
        if not self.varies:
            return float("nan")
        t = abs(self.difference.value - value) / self.se
        return float(two_sided_tail(t, self.seed_share, self.seeds - 1))

    @property
    def detectable(self) -> float:
        """`detectable_difference` of this comparison alone (at ALPHA, unadjusted)."""
        return detectable_difference(self.se, self.seed_share, self.seeds - 1)


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


def variance_parts(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The seed part MS_seed / (S n) and the example part max(0, MS_example - MS_residual) / (S n) of the variance
    of the grand mean of complete (..., S, n) tables (S >= 2, n >= 2), under crossed random seed and example
    effects. Seed means that tie exactly (likely at 2-3 seeds) with the example part truncated leave no variance
    although the cells vary: then MS_residual, which is part of every seed mean's variance, stands in for MS_seed
    (on the seed part's S - 1 degrees of freedom). Both parts are 0 only when every cell is alike."""
    seeds, n = np.shape(cells)[-2:]
    ms_seed, ms_example, ms_residual = mean_squares(cells)
    example_part = np.maximum(ms_example - ms_residual, 0.0)
    tied = (ms_seed + example_part <= 1e-12 * (ms_example + ms_residual)) & (ms_residual > 0)
    return np.where(tied, ms_residual, ms_seed) / (seeds * n), example_part / (seeds * n)


def crossed_variance(cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Variance of the grand mean of complete (..., S, n) tables under crossed random seed and example effects
    (`variance_parts`, summed), and its Satterthwaite degrees of freedom (S - 1 when the example part is dropped
    or the residual stands in for tied seed means; NaN for a zero variance: every cell alike). The one-setting
    intervals (`ratio_interval`) use it.

    var = (MS_seed + max(0, MS_example - MS_residual)) / (S n): MS_seed / (S n) estimates
    sigma_seed^2 / S + sigma_residual^2 / (S n) and (MS_example - MS_residual) / (S n) estimates
    sigma_example^2 / n, so their sum is unbiased for the variance of the mean whenever the example part is
    not truncated. Needs S >= 2 and n >= 2.
    """
    seeds, n = np.shape(cells)[-2:]
    seed_part, example_part = variance_parts(cells)
    ms_seed, ms_example, ms_residual = (seeds * n * seed_part, *mean_squares(cells)[1:])
    total = seed_part + example_part
    denominator = ms_seed ** 2 / (seeds - 1) + np.where(
        example_part > 0, ms_example ** 2 / (n - 1) + ms_residual ** 2 / ((seeds - 1) * (n - 1)), 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(denominator > 0, (seeds * n * total) ** 2 / denominator, np.nan)
    return total, df


@functools.lru_cache(maxsize=64)
def _chi2_nodes(df: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes u and weights of E f(U) for U ~ chi-square on `df` degrees of freedom: the trapezoid rule in log u
    from the 1e-14 to the 1 - 1e-14 quantile, TAIL_NODES nodes (at w = 1 `two_sided_tail` is within 1e-7
    relative and 1e-13 absolute of Student's t tail: tests/test_stats.py). Computed once per df (read-only):
    a quantile's bisection asks for them 64 times."""
    from scipy import stats as scipy_stats  # imported when used: `show` and `--help` need none

    x = np.linspace(np.log(scipy_stats.chi2.ppf(1e-14, df)), np.log(scipy_stats.chi2.isf(1e-14, df)), TAIL_NODES)
    u = np.exp(x)
    weight = scipy_stats.chi2.pdf(u, df) * u
    weight[[0, -1]] *= 0.5
    weight = weight / weight.sum()
    u.setflags(write=False)
    weight.setflags(write=False)
    return u, weight


def two_sided_tail(t: np.ndarray, seed_share: np.ndarray, seed_df: int) -> np.ndarray:
    """P(|T| >= t) for T = Z sqrt(w k / U + 1 - w) (Z standard normal, U ~ chi-square on k df, independent;
    w = seed_share, k = seed_df): the generalized pivot of the paired statistic, with the seed mean square's
    share w of the variance random on its S - 1 df and the example part taken as known. w = 1: Student's t on
    k df exactly; w = 0: the normal. Deterministic quadrature (`_chi2_nodes`), vectorised over t and w."""
    from scipy import special

    u, weight = _chi2_nodes(seed_df)
    t, w = np.broadcast_arrays(np.asarray(t, dtype=np.float64), np.asarray(seed_share, dtype=np.float64))
    scale = np.sqrt(w[..., None] * seed_df / u + (1.0 - w[..., None]))
    return np.minimum(1.0, (2 * special.ndtr(-t[..., None] / scale)) @ weight)


def tail_quantile(probability: float, seed_share: np.ndarray, seed_df: int) -> np.ndarray:
    """The t with `two_sided_tail(t, seed_share, seed_df)` = `probability` (bisection, vectorised over w)."""
    from scipy import stats as scipy_stats

    w = np.asarray(seed_share, dtype=np.float64)
    low = np.zeros_like(w)
    high = np.full_like(w, 2 * scipy_stats.t.isf(probability / 2, seed_df) + 10)
    for _ in range(64):
        mid = (low + high) / 2
        above = two_sided_tail(mid, w, seed_df) > probability
        low, high = np.where(above, mid, low), np.where(above, high, mid)
    return (low + high) / 2


def paired_arrays(diffs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The vectorised paired test of complete (..., S, n) tables of per-example differences (-1, 0, +1):
    (mean, se, seed_share, p); p is nan where every cell is alike (no variation, se 0). The simulation
    (`studies/verdict_simulation.py`) calls this same function."""
    diffs = np.asarray(diffs)
    seeds = diffs.shape[-2]
    value = diffs.mean((-2, -1), dtype=np.float64)
    seed_part, example_part = variance_parts(diffs)
    var = seed_part + example_part
    varies = var > 0
    se = np.sqrt(var)
    share = np.where(varies, seed_part / np.where(varies, var, 1.0), 1.0)
    t = np.abs(value) / np.where(varies, se, 1.0)
    return value, se, share, np.where(varies, two_sided_tail(t, share, seeds - 1), np.nan)


def paired_test(codes: np.ndarray, confidence: float = CONFIDENCE) -> PairedTest | None:
    """The paired comparison of (seeds, examples) A_WORSE / SAME / A_BETTER codes (MISSING where a pair has no
    outcome), on the examples every seed has: the mean, its interval value +- q se with q the `confidence`
    quantile of `two_sided_tail` (nan without variation), and the p-value of 0. None without two seeds and two
    such examples."""
    codes = np.atleast_2d(codes)
    complete = codes[:, (codes != MISSING).all(axis=0)]
    seeds, n = complete.shape
    if seeds < 2 or n < 2:
        return None
    value, se, share, p = (float(x) for x in paired_arrays(complete - SAME))
    half = float(tail_quantile(1 - confidence, share, seeds - 1)) * se if se > 0 else float("nan")
    return PairedTest(Estimate(value, value - half, value + half), se, share, p, seeds, n)


def detectable_difference(se: float, seed_share: float, seed_df: int, power: float = 0.8,
                          alpha: float = ALPHA) -> float:
    """The true difference that the paired test at `alpha` (two-sided, one comparison) finds with probability
    `power`, for a comparison with standard error `se` of which `seed_share` is the seed part (nan without them).

    The seed part is taken at its median-unbiased value, w se^2 k / median(chi-square on k), k = `seed_df` (the
    seed mean square is that chi-square scaled, so the printed difference is as likely to be above the true 80%
    difference as below it); the example part (1 - w) se^2 as it is. The test estimates the seed part again,
    as that value times U / k with U ~ chi-square on k, and rejects beyond the `tail_quantile` of the variance
    it sees (interpolated on a grid of seed shares); the power is the quadrature over U of the two normal tails,
    and the difference is where it crosses `power`.
    """
    from scipy import special
    from scipy import stats as scipy_stats
    from scipy.optimize import brentq

    if not (se == se and seed_share == seed_share) or se <= 0:
        return float("nan")
    seed_true = seed_share * seed_df / scipy_stats.chi2.median(seed_df)  # in units of se^2
    example_true = 1.0 - seed_share
    u, weight = _chi2_nodes(seed_df)
    seed_seen = seed_true * u / seed_df
    grid = np.linspace(0.0, 1.0, 65)
    quantile = np.interp(seed_seen / (seed_seen + example_true), grid, tail_quantile(alpha, grid, seed_df))
    critical = np.sqrt(seed_seen + example_true) * quantile
    spread = np.sqrt(seed_true + example_true)  # the true sd of the estimate, in units of se

    def shortfall(effect: float) -> float:  # effect in units of se
        return float((special.ndtr((effect - critical) / spread) + special.ndtr((-effect - critical) / spread))
                     @ weight) - power

    high = 4.0
    while shortfall(high) < 0:
        high *= 2
    return float(brentq(shortfall, 0.0, high, xtol=1e-6)) * se


def family_alpha(family: int) -> float:
    """The level at which a comparison's Holm-adjusted verdict in a family of `family` is sure to be called: Holm's
    first step, ALPHA / family. A p-value below it is rejected whatever the others are (every smaller p-value is
    below its own, larger, step), so the power at this level is a lower bound of the verdict's power, and the
    difference detectable at it (`detectable_difference(..., alpha=family_alpha(m))`) an upper bound of the
    verdict's 80%-power difference; tight when the comparison's effect is the only real one in the family
    (robench.report.verdict_simulation.adjusted_power)."""
    return ALPHA / max(int(family), 1)


def inconclusive_text(detectable: float) -> str:
    """The inconclusive verdict with its D (a fraction, printed in points): "inconclusive: differences up to 8.4
    points cannot be ruled out"; without a D (no variation to size it by) the word alone."""
    if detectable != detectable:
        return INCONCLUSIVE
    return f"{INCONCLUSIVE}: differences up to {100 * detectable:.1f} points cannot be ruled out"


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
    return INCONCLUSIVE


def wilson_interval(successes: float, n: float, confidence: float = CONFIDENCE,
                    df: float = float("inf")) -> tuple[float, float]:
    """The Wilson score interval of `successes` out of `n` (both may be effective, non-integer counts), with the
    normal quantile, or the t quantile on `df` degrees of freedom."""
    from scipy import special  # scipy.stats' t.ppf and norm.ppf, without importing scipy.stats (about 1 s)

    if n <= 0:
        return float("nan"), float("nan")
    z = float(special.stdtrit(df, 0.5 + confidence / 2)) if np.isfinite(df) else \
        float(special.ndtri(0.5 + confidence / 2))
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
    more than chance (probability 1/2 each); 1 when nothing is discordant. Exact: the binomial tail summed in
    integers, divided once."""
    n = more + fewer
    return sum(math.comb(n, k) for k in range(more, n + 1)) / 2 ** n


def comparisons(n: int) -> str:
    """A family's size in words: "1 comparison", "22 comparisons"."""
    return f"{n} comparison{'s' * (n != 1)}"
