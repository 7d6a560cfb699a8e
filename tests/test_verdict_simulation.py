"""The verdict rule holds its size, its family-wise error and its printed power under the model fitted to the
reference records (studies/verdict_simulation.py, docs/studies/statistics.md "Calibration"): simulated pairs, and
families of 25 comparisons with one shared baseline, of equally robust models, and pairs one printed "detectable"
apart."""
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from study_scripts import load_study

from robench.core.packed import unpack
from robench.report.stats import INSUFFICIENT, MIN_SEEDS, paired_arrays, verdict

simulation = load_study("verdict_simulation")
FITTED, detectable_power, familywise_rate = simulation.FITTED, simulation.detectable_power, simulation.familywise_rate
fit, reference_outcomes, rejection_rate, sample = (simulation.fit, simulation.reference_outcomes,
                                                   simulation.rejection_rate, simulation.sample)
REFERENCE = Path(__file__).resolve().parents[1] / "results" / "evidence-cpu" / "reference-v2"  # packed
# repetitions per cell: a 5% rate has a Monte-Carlo sd of 0.5 (2,000) or 0.7 points (1,000); the rule's size at
# 4-10 seeds is 3.6-5.0% on this fit (docs/studies/statistics.md, 10,000 repetitions), so [2.5%, 7.5%] is 2 sd or
# more away
REPS = {3: 50, 4: 2000, 5: 2000, 10: 1000}
SIZE_LOW, SIZE_HIGH = 0.025, 0.075


@pytest.mark.parametrize("seeds", [3, 4, 5, 10])
@pytest.mark.parametrize("examples", [100, 300, 1000])
def test_the_verdict_rule_holds_its_size_under_the_fitted_null(seeds, examples):
    """Two equally robust models (the AdvGLUE fit: example difficulty, seed x example, model x example and
    checkpoint effects): the rule calls them different in 2.5-7.5% of repetitions, or gives no verdict."""
    outcomes = sample(FITTED["advglue"], np.random.default_rng(1000 * seeds + examples), REPS[seeds], seeds,
                      examples)
    diff = outcomes[:, 0].astype(np.int8) - outcomes[:, 1]
    value, _, _, p = paired_arrays(diff)
    calls = [verdict(v, q, seeds) for v, q in zip(value, p)]  # a family of one: Holm changes nothing
    if seeds < MIN_SEEDS:
        assert set(calls) == {INSUFFICIENT}
        return
    size = np.mean([c.endswith("robust than the baseline") for c in calls])
    assert SIZE_LOW <= size <= SIZE_HIGH, f"size {size:.3f} at {seeds} seeds x {examples} examples"


@pytest.mark.parametrize("seeds", [4, 5])
def test_holm_holds_the_familywise_error_over_25_comparisons_with_one_baseline(seeds):
    """26 equally robust models on AdvGLUE-sst2's 148 examples, 25 compared with the first (correlation about
    0.5 through it): Holm at 0.05 calls at least one different in at most 5% of 2,000 families (measured
    2.8% and 3.4%, Monte-Carlo sd 0.4 points; the Satterthwaite t it replaces: docs/studies/statistics.md)."""
    rate, _ = familywise_rate(FITTED["advglue"], seeds, 148, 2000, 17 + seeds)
    assert rate <= 0.05, f"family-wise error {rate:.3f} at {seeds} seeds"


@pytest.mark.parametrize("seeds", [4, 5])
def test_the_printed_detectable_difference_is_found_with_80_percent_power(seeds):
    """One model better by the median printed "detectable" (a fixed point: the true mean difference equals it):
    the rule finds it in 75-85% of 1,000 designs (Monte-Carlo sd 1.3 points; measured 80.0% and 81.5%)."""
    true, printed, power, _ = detectable_power(FITTED["advglue"], seeds, 148, 1000, 31 + seeds)
    assert printed == pytest.approx(true, rel=0.05)
    assert 0.75 <= power <= 0.85, f"power {power:.3f} at {seeds} seeds, {100 * true:.1f} points"


def test_the_rule_finds_a_five_point_difference_at_ten_seeds():
    rate, _ = rejection_rate(FITTED["advglue"], 10, 300, 500, 7, shift=(0.05, 0.0))
    assert rate > 0.95


def test_the_fitted_constants_are_the_fit_of_the_reference_records(tmp_path):
    outcomes = reference_outcomes(unpack(REFERENCE, tmp_path))
    for name, model in FITTED.items():
        fitted = asdict(fit(outcomes[name]).model)
        for key, value in asdict(model).items():
            assert fitted[key] == pytest.approx(value, abs=0.002), (name, key)


@pytest.mark.parametrize("fitted, examples", [("advglue", 148), ("advglue", 300), ("textfooler", 300)])
def test_one_checkpoint_against_five_baseline_seeds_holds_its_size(fitted, examples):
    """`robench.report.single` (a checkpoint of your own vs the reference baseline's 5 seeds, the protocol's
    sizes): an equally robust checkpoint, trained apart from every baseline seed, is called different in at most
    7.5% of 2,000 repetitions (measured: 3.6-4.9% on the AdvGLUE fit, 2.0-3.5% on TextFooler's, which is
    discrete at its 3% accuracy; docs/studies/statistics.md)."""
    from robench.report.single import single_arrays

    seeds = 5
    outcomes = sample(FITTED[fitted], np.random.default_rng(examples), 2000, seeds + 1, examples)
    value, *_, p = single_arrays(outcomes[:, 0, seeds], outcomes[:, 1, :seeds])  # model 0's extra seed: unpaired
    size = np.mean([verdict(v, q, seeds).endswith("robust than the baseline") for v, q in zip(value, p)])
    assert 0.01 <= size <= SIZE_HIGH, f"size {size:.3f}"


def test_one_checkpoint_ten_points_more_robust_is_found_most_of_the_time():
    from robench.report.single import single_arrays

    outcomes = sample(FITTED["advglue"], np.random.default_rng(7), 1000, 6, 300, shift=(0.10, 0.0))
    assert np.mean(single_arrays(outcomes[:, 0, 5], outcomes[:, 1, :5])[-1] < 0.05) > 0.6
