"""robench.report.stats against known answers: degenerate data, the Wilson interval, the crossed random-effects
variance, the paired t test, Holm's adjustment and the exact sign test."""
import math

import numpy as np
import pytest
from scipy.stats import binomtest, chi2, norm, t, ttest_1samp

from robench.report.stats import (
    A_BETTER,
    A_WORSE,
    FAILED,
    INSUFFICIENT,
    LESS_ROBUST,
    MIN_SEEDS,
    MISSING,
    MORE_ROBUST,
    RATIOS,
    SAME,
    SKIPPED,
    SUCCESSFUL,
    crossed_variance,
    detectable_difference,
    exact_sign_pvalue,
    holm,
    outcome_matrix,
    paired_test,
    ratio_interval,
    tail_quantile,
    two_sided_tail,
    verdict,
    wilson_interval,
)


def _codes(**counts: int) -> np.ndarray:
    names = {"skipped": SKIPPED, "failed": FAILED, "successful": SUCCESSFUL}
    return np.repeat([names[k] for k in counts], list(counts.values()))


def _interval(codes, metric="robust_accuracy"):
    return ratio_interval(codes, RATIOS[metric])


def test_all_correct_gives_the_wilson_interval_of_the_examples():
    """Three identical all-correct seeds are 50 examples, not 150: the interval is Wilson's for 50 of 50."""
    codes = np.stack([_codes(failed=50)] * 3)
    low, high = wilson_interval(50, 50)
    for metric in ("clean_accuracy", "robust_accuracy"):
        estimate = _interval(codes, metric)
        assert (estimate.value, estimate.high) == (1.0, 1.0) and estimate.low == pytest.approx(low)
    assert _interval(codes, "attack_success_rate").value == 0.0
    assert _interval(codes, "attack_success_rate").low == 0.0
    assert high == 1.0


@pytest.mark.parametrize("n,k", [(2000, 1000), (3000, 2100), (4000, 3600), (3000, 2940), (60, 3)])
def test_one_seed_interval_is_the_wilson_interval(n, k):
    estimate = _interval(_codes(failed=k, successful=n - k))
    ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
    assert estimate.value == k / n
    assert estimate.low == pytest.approx(ci.low, abs=1e-9) and estimate.high == pytest.approx(ci.high, abs=1e-9)


def test_seeds_on_the_same_examples_do_not_shrink_the_interval():
    """Identical seeds are one seed: the examples are shared, so averaging seeds adds no examples."""
    one = _codes(failed=300, successful=200)
    single, triple = _interval(one), _interval(np.stack([one] * 3))
    assert triple.low == pytest.approx(single.low, abs=0.005) and triple.high == pytest.approx(single.high, abs=0.005)


def test_seed_variation_widens_the_interval():
    """Three seeds that disagree give a wider interval than the examples alone would."""
    rng = np.random.default_rng(0)
    seeds = np.stack([rng.permutation(_codes(failed=f, successful=500 - f)) for f in (200, 300, 400)])
    estimate = _interval(seeds)
    low, high = wilson_interval(300, 500)
    assert estimate.value == pytest.approx(0.6)
    assert estimate.high - estimate.low > 2 * (high - low)


def test_success_rate_ignores_skipped_examples_and_missing_outcomes():
    codes = np.concatenate([_codes(skipped=30, failed=10, successful=60), np.full(5, MISSING)])
    assert _interval(codes, "attack_success_rate").value == pytest.approx(60 / 70)
    assert _interval(codes, "clean_accuracy").value == pytest.approx(0.7)
    low, high = wilson_interval(60, 70)
    assert _interval(codes, "attack_success_rate").low == pytest.approx(low)


def test_outcome_matrix_aligns_examples_by_index():
    codes = outcome_matrix([{0: FAILED, 2: SKIPPED}, {2: SUCCESSFUL, 5: FAILED}])
    assert codes.tolist() == [[FAILED, SKIPPED, MISSING], [MISSING, SUCCESSFUL, FAILED]]


def test_crossed_variance_of_an_additive_table():
    """y_si = a_s + b_i exactly: no residual, so the variance of the mean is var(a) / S + var(b) / n."""
    a, b = np.array([0.0, 1.0, 3.0]), np.array([2.0, -1.0, 0.5, 4.0, 1.0])
    var, df = crossed_variance(a[:, None] + b[None, :])
    assert var == pytest.approx(a.var(ddof=1) / 3 + b.var(ddof=1) / 5)
    seed_part, example_part = 5 * a.var(ddof=1), 3 * b.var(ddof=1)  # the mean squares; residual 0
    assert df == pytest.approx((seed_part + example_part) ** 2 / (seed_part ** 2 / 2 + example_part ** 2 / 4))


@pytest.mark.parametrize("k", [1, 3, 4, 9, 40])
def test_the_reference_distribution_is_t_at_seed_share_one_and_normal_at_zero(k):
    """T = Z sqrt(w k / U + 1 - w): Student's t on k df at w = 1 (the quadrature within 1e-7 relative), the normal
    at w = 0, in between otherwise; `tail_quantile` inverts it."""
    x = np.array([0.1, 1.0, 2.0, 3.0, 5.0, 8.0])
    assert two_sided_tail(x, 1.0, k) == pytest.approx(2 * t.sf(x, k), rel=1e-7, abs=1e-13)
    assert two_sided_tail(x, 0.0, k) == pytest.approx(2 * norm.sf(x), rel=1e-9)
    half = two_sided_tail(x, 0.5, k)
    assert np.all(2 * norm.sf(x[2:]) < half[2:]) and np.all(half[2:] < 2 * t.sf(x[2:], k))
    shares = np.array([0.0, 0.3, 1.0])
    assert two_sided_tail(tail_quantile(0.002, shares, k), shares, k) == pytest.approx(0.002, rel=1e-6)
    assert float(tail_quantile(0.05, 1.0, k)) == pytest.approx(t.isf(0.025, k), rel=1e-6)


def test_detectable_difference_known_answers():
    """No seed part: the normal test's 80% difference, z_0.975 + z_0.8 (the other tail adds 1e-6 of power); a
    seed part on few df: wider; nan without a test."""
    assert detectable_difference(0.01, 0.0, 3) == pytest.approx(0.01 * (1.959964 + 0.841621), abs=1e-7)
    assert detectable_difference(0.01, 1.0, 3) > detectable_difference(0.01, 1.0, 9) > \
        detectable_difference(0.01, 1.0, 400) > detectable_difference(0.01, 0.0, 3)
    assert math.isnan(detectable_difference(float("nan"), 0.5, 4)) and math.isnan(detectable_difference(0.0, 0.5, 4))


@pytest.mark.parametrize("share,k", [(1.0, 3), (0.7, 4), (0.3, 9)])
def test_the_test_finds_the_detectable_difference_with_80_percent_power(share, k):
    """What the column promises, on the test's own model: the seed part at its median-unbiased value, the
    estimate normal around `detectable`, the seed part the test sees chi-square on k df; 20,000 draws (Monte-Carlo
    sd 0.3 points)."""
    rng = np.random.default_rng(k)
    se = 0.02
    effect = detectable_difference(se, share, k)
    seed_part = share * se ** 2 * k / chi2.median(k)
    example_part = (1 - share) * se ** 2
    estimate = effect + np.sqrt(seed_part + example_part) * rng.standard_normal(20_000)
    seen = seed_part * rng.chisquare(k, 20_000) / k
    p = two_sided_tail(np.abs(estimate) / np.sqrt(seen + example_part), seen / (seen + example_part), k)
    assert float(np.mean(p < 0.05)) == pytest.approx(0.8, abs=0.015)


def test_tied_seed_means_do_not_give_a_zero_width_interval():
    """Two seeds with the same mean difference (+2 of 148 each) but different examples: the cells vary, so the
    interval has width and p > 0 (found on v3 AdvGLUE records: "+1.4 [+1.4, +1.4], p 0" at 2 seeds)."""
    diffs = np.zeros((2, 148), dtype=np.int64)
    diffs[0, [3, 50, 90]] = 1
    diffs[0, 7] = -1
    diffs[1, [10, 11]] = 1
    test = paired_test(diffs + SAME)
    assert test.difference.value == pytest.approx(2 / 148) and test.se > 0 and 0 < test.p_value < 1
    assert test.difference.low < test.difference.value < test.difference.high
    assert float(crossed_variance(np.ones((3, 5)))[0]) == 0.0  # every cell alike: no variance, as before


@pytest.mark.parametrize("seeds", [4, 5, 6])
def test_tied_seed_means_are_no_more_liberal_than_the_exact_sign_test(seeds):
    """One discordant cell per seed, all favouring A, on 148 examples (every seed mean ties): the residual mean
    square stands in for the seed part on S - 1 df, and p is at least the exact two-sided sign test's 2^(1 - S)
    (0.125 at 4 seeds, where the residual on (S - 1)(n - 1) df gave 0.047)."""
    diffs = np.zeros((seeds, 148), dtype=np.int64)
    diffs[np.arange(seeds), np.arange(seeds)] = 1
    test = paired_test(diffs + SAME)
    sign = binomtest(seeds, seeds, 0.5).pvalue
    assert sign == 2.0 ** (1 - seeds) and sign <= test.p_value < 1
    assert test.seed_share == 1.0 and test.difference.low < 0 < test.difference.high


def test_without_an_example_effect_the_test_is_the_t_test_on_the_seed_means():
    """Every example column has the same total: the example part is dropped, and the test is the one-sample t
    test of the per-seed mean differences on S - 1 degrees of freedom."""
    diffs = np.array([[1, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1], [1, 1, 1]])
    test = paired_test(diffs + SAME)
    means = diffs.mean(1)
    reference = ttest_1samp(means, 0.0)
    assert test.seed_share == 1.0
    assert test.se == pytest.approx(means.std(ddof=1) / np.sqrt(len(means)))
    assert test.p_value == pytest.approx(reference.pvalue, rel=1e-7)
    ci = reference.confidence_interval(0.95)
    assert (test.difference.low, test.difference.high) == pytest.approx((ci.low, ci.high), rel=1e-6)
    assert test.seeds == 5 and test.examples == 3 and test.difference.value == pytest.approx(means.mean())


@pytest.mark.parametrize("cell", [0, 1, -1])
def test_all_equal_outcomes_have_no_variation_no_interval_and_no_p_value(cell):
    """Identical models (every difference 0), or A always right where B is always wrong (every difference +1):
    no variance to estimate, so no interval (not [0, 0] or [100, 100]), no p-value and no detectable difference."""
    test = paired_test(np.full((5, 100), SAME + cell))
    assert not test.varies and test.difference.value == cell
    assert math.isnan(test.difference.low) and math.isnan(test.difference.high) and math.isnan(test.p_value)
    assert math.isnan(test.detectable) and math.isnan(test.p_value_at(0.05))


def test_a_planted_difference_is_found_and_its_sign_named():
    rng = np.random.default_rng(0)
    codes = np.where(rng.random((6, 300)) < 0.15, A_BETTER, np.where(rng.random((6, 300)) < 0.02, A_WORSE, SAME))
    test = paired_test(codes)
    assert test.difference.low > 0 and test.p_value < 0.001
    assert verdict(test.difference.value, test.p_value, 6) == MORE_ROBUST
    assert verdict(-test.difference.value, test.p_value, 6) == LESS_ROBUST
    assert verdict(test.difference.value, test.p_value, MIN_SEEDS - 1) == INSUFFICIENT


def test_paired_test_uses_the_examples_every_seed_has():
    codes = np.array([[A_BETTER, SAME, MISSING, A_WORSE], [A_BETTER, SAME, A_BETTER, SAME]])
    test = paired_test(codes)
    assert test.examples == 3 and test.seeds == 2
    assert test.difference.value == pytest.approx((1 + 0 - 1 + 1 + 0 + 0) / 6)
    assert paired_test(codes[:1]) is None  # one seed: no seed-level test


def test_holm_adjustment_known_answer():
    assert holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])  # the step-down adjustment never decreases
    assert holm([]) == []


def test_exact_sign_pvalue_is_the_binomial_test():
    assert exact_sign_pvalue(12, 3) == pytest.approx(binomtest(12, 15, 0.5, alternative="greater").pvalue)
    assert exact_sign_pvalue(2, 0) == 0.25  # two examples are noise
    assert exact_sign_pvalue(0, 0) == 1.0
    for n in range(1, 80):  # computed in integers without scipy.stats: the same test, to rounding
        for more in range(n + 1):
            expected = binomtest(more, n, 0.5, alternative="greater").pvalue
            assert exact_sign_pvalue(more, n - more) == pytest.approx(expected, rel=1e-12)


def test_wilson_quantiles_are_scipy_stats_bit_for_bit():
    """wilson_interval takes its quantiles from scipy.special (scipy.stats costs a second to import): the
    values are scipy.stats' own, so every interval is unchanged."""
    def wilson(k: float, n: float, z: float) -> tuple[float, float]:
        p = k / n
        centre, half = p + z * z / (2 * n), z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
        return (centre - half) / (1 + z * z / n), (centre + half) / (1 + z * z / n)

    for df in (1.0, 2.5, 4.0, 17.3, 299.0):
        assert wilson_interval(13.0, 40.0, df=df) == wilson(13.0, 40.0, float(t.ppf(0.975, df)))
    assert wilson_interval(13, 40) == wilson(13, 40, float(norm.ppf(0.975)))


def test_wilson_interval_matches_scipy():
    for k, n in ((0, 10), (3, 40), (40, 40), (17, 23)):
        ci = binomtest(k, n).proportion_ci(confidence_level=0.95, method="wilson")
        assert wilson_interval(k, n) == pytest.approx((ci.low, ci.high))
