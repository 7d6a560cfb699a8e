"""robench.report.stats against known answers: degenerate data, the Wilson interval, the exact sign test."""
import numpy as np
import pytest
from scipy.stats import binomtest, permutation_test

from robench.report.stats import (
    A_BETTER,
    A_WORSE,
    FAILED,
    MISSING,
    SAME,
    SKIPPED,
    SUCCESSFUL,
    attack_success_rate,
    bootstrap_interval,
    bootstrap_replicates,
    clean_accuracy,
    outcome_matrix,
    paired_difference,
    paired_permutation_pvalue,
    robust_accuracy,
    wilson_interval,
)

WILSON_TOLERANCE = 0.002  # measured: largest gap 0.0007 on these and two more cases (docs/statistics.md)


def _codes(**counts: int) -> np.ndarray:
    names = {"skipped": SKIPPED, "failed": FAILED, "successful": SUCCESSFUL}
    return np.repeat([names[k] for k in counts], list(counts.values()))


def test_all_correct_gives_the_interval_one_one():
    codes = np.stack([_codes(failed=50)] * 3)
    for statistic in (clean_accuracy, robust_accuracy):
        estimate = bootstrap_interval(codes, statistic)
        assert (estimate.value, estimate.low, estimate.high) == (1.0, 1.0, 1.0)
    assert bootstrap_interval(codes, attack_success_rate).high == 0.0


@pytest.mark.parametrize("n,k", [(2000, 1000), (3000, 2100), (4000, 3600), (3000, 2940)])
def test_one_seed_bootstrap_matches_the_wilson_interval(n, k):
    estimate = bootstrap_interval(_codes(failed=k, successful=n - k), robust_accuracy)
    low, high = wilson_interval(k, n)
    assert estimate.value == k / n
    assert abs(estimate.low - low) < WILSON_TOLERANCE and abs(estimate.high - high) < WILSON_TOLERANCE


def test_seeds_on_the_same_examples_do_not_shrink_the_interval():
    """Identical seeds are one seed: the examples are shared, so averaging seeds adds no examples."""
    one = _codes(failed=300, successful=200)
    single, triple = bootstrap_interval(one, robust_accuracy), bootstrap_interval(np.stack([one] * 3), robust_accuracy)
    assert triple.low == pytest.approx(single.low, abs=0.005) and triple.high == pytest.approx(single.high, abs=0.005)


def test_seed_variation_widens_the_interval():
    """Three seeds that disagree give a wider interval than the examples alone would."""
    rng = np.random.default_rng(0)
    seeds = np.stack([rng.permutation(_codes(failed=f, successful=500 - f)) for f in (200, 300, 400)])
    estimate = bootstrap_interval(seeds, robust_accuracy)
    low, high = wilson_interval(300, 500)
    assert estimate.value == pytest.approx(0.6)
    assert estimate.high - estimate.low > 2 * (high - low)


def test_success_rate_ignores_skipped_examples_and_missing_outcomes():
    codes = np.concatenate([_codes(skipped=30, failed=10, successful=60), np.full(5, MISSING)])
    assert bootstrap_interval(codes, attack_success_rate).value == pytest.approx(60 / 70)
    assert bootstrap_interval(codes, clean_accuracy).value == pytest.approx(0.7)


def test_outcome_matrix_aligns_examples_by_index():
    codes = outcome_matrix([{0: FAILED, 2: SKIPPED}, {2: SUCCESSFUL, 5: FAILED}])
    assert codes.tolist() == [[FAILED, SKIPPED, MISSING], [MISSING, SUCCESSFUL, FAILED]]


def test_bootstrap_is_reproducible_and_seeded():
    codes = np.stack([_codes(failed=30, successful=70), _codes(failed=40, successful=60)])
    first = bootstrap_replicates(codes, [robust_accuracy], resamples=500)
    assert np.array_equal(first, bootstrap_replicates(codes, [robust_accuracy], resamples=500))
    assert not np.array_equal(first, bootstrap_replicates(codes, [robust_accuracy], resamples=500, seed=1))


def test_one_seed_permutation_pvalue_is_the_exact_sign_test():
    codes = np.repeat([A_WORSE, SAME, A_BETTER], [12, 150, 26])
    exact = binomtest(26, 38, 0.5).pvalue
    assert paired_permutation_pvalue(codes) == pytest.approx(exact, abs=0.01)


def test_permutation_pvalue_matches_scipy_on_two_seeds():
    rng = np.random.default_rng(3)
    a = [rng.random(60) < 0.6, rng.random(60) < 0.6]
    b = [rng.random(60) < 0.45, rng.random(60) < 0.45]
    codes = np.stack([x.astype(int) - y.astype(int) + SAME for x, y in zip(a, b)])
    observed = bootstrap_interval(codes, paired_difference).value

    def statistic(x, y, axis):  # mean over the two seeds of the per-seed accuracy difference
        d = x.astype(float) - y.astype(float)
        return (d[..., :60].mean(axis=-1) + d[..., 60:].mean(axis=-1)) / 2

    ref = permutation_test((np.concatenate(a), np.concatenate(b)), statistic, permutation_type="samples",
                           vectorized=True, n_resamples=9999, random_state=0)
    assert ref.statistic == pytest.approx(observed)
    assert paired_permutation_pvalue(codes) == pytest.approx(ref.pvalue, abs=0.01)


def test_identical_models_are_not_distinguishable():
    codes = np.full((2, 100), SAME)
    estimate = bootstrap_interval(codes, paired_difference)
    assert (estimate.low, estimate.high) == (0.0, 0.0) and estimate.contains(0.0)
    assert paired_permutation_pvalue(codes) == 1.0
