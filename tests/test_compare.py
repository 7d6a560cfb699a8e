"""Settings, per-setting intervals and paired comparisons on synthetic run records with known answers."""
import dataclasses
import math

import numpy as np
import pytest

from robench.core.hashing import content_hash
from robench.core.records import RunRecord, iter_records
from robench.core.types import ExampleResult
from robench.report.compare import compare, group_settings, intervals
from robench.report.identity import one_per_seed
from robench.report.stats import (
    INSUFFICIENT,
    MIN_SEEDS,
    NO_SHARED_SEEDS,
    NO_VARIATION,
    TOO_FEW_EXAMPLES,
    holm,
    wilson_interval,
)
from robench.runs.spec import RunSpec, TrainConfig
from robench.runs.store import RunStore


def fake_run(runs_dir, statuses, model="bert", seed=0, attack="textfooler", eval_size=200, attack_params=None,
             model_params=None, train=TrainConfig(), eval_seed=0, chance=None) -> RunRecord:
    """A finished run whose per-example CSV has `statuses` (one per example) and whose metrics match them
    (`chance`: the record's chance checks, `metrics.chance`; by default none, so they are computed from the CSV)."""
    spec = RunSpec(task="sst2", model=model, attack=attack, seed=seed, eval_size=eval_size, eval_seed=eval_seed,
                   train=train, model_params=model_params or {}, attack_params=attack_params or {})
    results = [_result(i, s) for i, s in enumerate(statuses)]
    n = len(statuses)
    count = {s: list(statuses).count(s) for s in ("skipped", "failed", "successful")}
    attacked = count["failed"] + count["successful"]
    metrics = {"examples": n, "dev_accuracy": 0.8, "clean_accuracy": attacked / n,
               "robust_accuracy": count["failed"] / n,
               "attack_success_rate": count["successful"] / attacked if attacked else None,
               **({} if chance is None else {"chance": chance})}
    from robench.report.identity import _attack_defaults, _model_defaults

    attack_params = attack_params or {}  # the attack's resolved parameters under its budget setting, as a run records
    hyper = {"train": dataclasses.asdict(train), "model": {**(_model_defaults(model) or {}), **(model_params or {})},
             "attack": {**(_attack_defaults(attack, attack_params.get("budget")) or {}), **attack_params}}
    rows = list(range(n))
    record = RunRecord(run_id=spec.run_id, spec=spec.to_dict(), hyperparameters=hyper,
                       resources={"data": {"source": "local", "eval_examples": n,
                                           "eval_indices_hash": content_hash(rows)}},
                       metrics=metrics, timings={"train_seconds": 1.0}, checkpoint="", created=f"2026-01-01T00:0{seed}")
    RunStore(runs_dir, spec.run_id).finish(record, results)
    return record


def _result(index: int, status: str) -> ExampleResult:
    """Example `index` with `status`; labels alternate, so a model right on every example is above chance
    (robench.runs.chance)."""
    label = index % 2
    before = label if status != "skipped" else 1 - label
    after = label if status == "failed" else 1 - label
    return ExampleResult(index, label, "a b", "a c", before, after, status, num_words=2)


def statuses(n_failed, n_successful, n_skipped=0, rng=None):
    out = np.array(["failed"] * n_failed + ["successful"] * n_successful + ["skipped"] * n_skipped)
    return list(rng.permutation(out)) if rng is not None else list(out)


def test_all_correct_setting_has_the_wilson_interval_of_its_examples(tmp_path):
    for seed in (0, 1, 2):
        fake_run(tmp_path, ["failed"] * 50, seed=seed)
    [setting] = group_settings(iter_records(tmp_path))
    ci = intervals(setting, tmp_path)
    low, high = wilson_interval(50, 50)  # three identical seeds on the same 50 examples are 50 examples
    assert (ci["robust_accuracy_ci_low"], ci["robust_accuracy_ci_high"]) == (pytest.approx(low), 1.0)
    assert (ci["clean_accuracy_ci_low"], ci["clean_accuracy_ci_high"]) == (pytest.approx(low), 1.0)
    assert setting.seeds == [0, 1, 2] and setting.label == "budget=textdefender eval=200"


@pytest.mark.parametrize("change", [{"eval_size": 100}, {"attack_params": {"k": 20}},
                                    {"attack_params": {"budget": "natural"}},
                                    {"model_params": {"im_gamma": 0.5}, "model": "imbert"},
                                    {"train": TrainConfig(lr=1e-4)}, {"eval_seed": 1}])
def test_runs_differing_in_one_setting_are_two_settings(tmp_path, change):
    base = {"model": "imbert"} if "model" in change else {}
    fake_run(tmp_path, ["failed"] * 10, **base)
    fake_run(tmp_path, ["failed"] * 10, **{**base, **change})
    settings = group_settings(iter_records(tmp_path))
    assert len(settings) == 2 and len({s.label for s in settings}) == 2


def test_setting_labels_name_what_differs_from_the_defaults(tmp_path):
    fake_run(tmp_path, ["failed"] * 10, model="imbert", model_params={"im_gamma": 0.5}, train=TrainConfig(lr=1e-4),
             attack_params={"k": 20}, eval_size=100, eval_seed=3)
    [setting] = group_settings(iter_records(tmp_path))
    assert setting.label == "imbert[im_gamma=0.5] lr=1e-4 budget=textdefender textfooler[k=20] eval=100 eval_seed=3"


def test_explicit_default_parameter_is_the_same_setting(tmp_path):
    fake_run(tmp_path, ["failed"] * 10, seed=0)
    fake_run(tmp_path, ["failed"] * 10, seed=1, attack_params={"k": 50})
    [setting] = group_settings(iter_records(tmp_path))
    assert setting.seeds == [0, 1]


def _planted(tmp_path, worse_by: int, n: int = 200, seeds=(0, 1, 2, 3, 4)):
    """bert wrong under attack on 40% of the examples; imbert on `worse_by` more of the same examples; freelb
    exactly as bert."""
    rng = np.random.default_rng(0)
    for seed in seeds:
        base = statuses(120, 80, rng=rng)
        worse = list(base)
        for i in [i for i, s in enumerate(base) if s == "failed"][:worse_by]:
            worse[i] = "successful"
        fake_run(tmp_path, base, model="bert", seed=seed)
        fake_run(tmp_path, worse, model="imbert", seed=seed)
        fake_run(tmp_path, base, model="freelb", seed=seed)
    return {c.setting.spec["model"]: c for c in compare(group_settings(iter_records(tmp_path)), tmp_path, "bert")}


def test_compare_finds_a_planted_difference_and_not_identical_models(tmp_path):
    found = _planted(tmp_path, worse_by=40)  # 20% of 200 shared examples
    worse, same = found["imbert"], found["freelb"]
    assert worse.difference.value == pytest.approx(-0.2)
    assert worse.significant and worse.p_value < 0.001 and worse.difference.high < 0
    assert worse.verdict == "less robust than the baseline"
    assert worse.seeds == (0, 1, 2, 3, 4) and worse.examples == 200
    assert 0 < worse.detectable < 0.2  # the planted 20 points were well within reach
    # identical models: every difference 0, so no variance, no interval, no p-value and no verdict
    assert not same.significant and math.isnan(same.p_value) and math.isnan(same.difference.low)
    assert same.verdict == NO_VARIATION and same.difference.value == 0.0


def test_the_family_is_every_comparison_and_holm_decides(tmp_path):
    """Holm over every comparison made: one without a p-value (identical models: no variation) counts with p 1."""
    found = _planted(tmp_path, worse_by=40)
    worse, same = found["imbert"], found["freelb"]
    assert worse.family == same.family == 2
    assert worse.adjusted_p == pytest.approx(holm([worse.p_value, 1.0])[0]) == pytest.approx(2 * worse.p_value)
    assert math.isnan(same.adjusted_p)


def test_no_shared_seeds_is_a_row_that_says_so_and_counts_in_the_family(tmp_path):
    """bert on seeds 0-4, imbert on seeds 5-9: no pairing is possible; the comparison is still made, says why
    there is no verdict, and counts in the family (Holm's m), so freelb's adjusted p is twice its p."""
    rng = np.random.default_rng(1)
    for seed in range(5):
        base = statuses(120, 80, rng=rng)
        fake_run(tmp_path, base, model="bert", seed=seed)
        fake_run(tmp_path, base, model="imbert", seed=seed + 5)
        fake_run(tmp_path, [s if i % 5 else "successful" for i, s in enumerate(base)], model="freelb", seed=seed)
    found = {c.setting.spec["model"]: c for c in compare(group_settings(iter_records(tmp_path)), tmp_path, "bert")}
    apart, freelb = found["imbert"], found["freelb"]
    assert apart.verdict == NO_SHARED_SEEDS and apart.seeds == () and apart.examples == 0
    assert math.isnan(apart.difference.value) and math.isnan(apart.p_value) and apart.family == freelb.family == 2
    assert freelb.adjusted_p == pytest.approx(min(1.0, 2 * freelb.p_value))


def test_one_example_is_too_few_examples_not_insufficient_seeds(tmp_path):
    for seed in range(5):
        fake_run(tmp_path, ["failed"], model="bert", seed=seed, eval_size=1)
        fake_run(tmp_path, ["successful"], model="imbert", seed=seed, eval_size=1)
    # one example cannot show a checkpoint above chance (test_chance.py); the label is what is tested here
    [one] = compare(group_settings(iter_records(tmp_path)), tmp_path, "bert", untrained={})
    assert one.verdict == TOO_FEW_EXAMPLES and one.examples == 1 and len(one.seeds) == 5
    assert one.difference.value == -1.0 and math.isnan(one.p_value) and math.isnan(one.detectable)


def test_too_few_seeds_give_no_verdict(tmp_path):
    found = _planted(tmp_path, worse_by=40, seeds=tuple(range(MIN_SEEDS - 1)))
    worse = found["imbert"]
    assert worse.difference.value == pytest.approx(-0.2) and worse.p_value < 0.05  # a difference, and a p-value
    assert worse.verdict == INSUFFICIENT and not worse.significant


def test_one_record_per_setting_and_seed_the_newest(tmp_path):
    """An explicit default (k=50) gives another run id but the same setting: the newer record replaces the older
    one for its seed instead of counting as a second seed."""
    old = fake_run(tmp_path, ["failed"] * 10, seed=0)
    fake_run(tmp_path, ["failed"] * 10, seed=1)
    new = fake_run(tmp_path, ["successful"] * 10, seed=0, attack_params={"k": 50})
    records = list(iter_records(tmp_path))
    newer = dataclasses.replace(new, created="2026-02-01T00:00")
    chosen = one_per_seed([r if r.run_id != new.run_id else newer for r in records])
    assert [(dropped.run_id, kept.run_id) for dropped, kept in chosen.replaced] == [(old.run_id, new.run_id)]
    [setting] = group_settings(chosen.kept)
    assert setting.seeds == [0, 1] and new.run_id in [r.run_id for r in setting.records]


def test_compare_without_the_baseline_is_an_error(tmp_path):
    from robench.core.errors import RobenchError

    fake_run(tmp_path, ["failed"] * 10, model="imbert")
    with pytest.raises(RobenchError, match="baseline model 'bert'"):
        compare(group_settings(iter_records(tmp_path)), tmp_path, "bert")


def test_explicit_defaults_and_an_unused_eval_seed_give_the_default_run_id(settings, tiny_backbone):
    """`_canonical` drops parameters given at their defaults, and with the whole eval split the eval seed is 0:
    so the two ways a seed could get two records of one setting give one run id instead."""
    from conftest import tiny_spec

    from robench.engine.attack import ATTACKS
    from robench.runs.resolve import resolve_run

    def run_id(**overrides):
        return resolve_run(tiny_spec(tiny_backbone, model="imbert", attack="gradient-swap", **overrides),
                           settings).spec.run_id

    default_gradient = dataclasses.asdict(ATTACKS.get("gradient-swap").params())["gradient"]
    assert run_id(model_params={"im_gamma": 0.01}, attack_params={"gradient": default_gradient}) == run_id()
    assert run_id(model_params={"im_gamma": 0.02}) != run_id()
    assert run_id(eval_seed=3) == run_id()  # eval_size None: the whole split, whatever the eval seed
    assert run_id(eval_size=8, eval_seed=3) != run_id(eval_size=8)


def test_the_family_note_names_a_lone_comparison_as_unadjusted(tmp_path):
    """A family of one is "1 comparison" whose Holm p is its p; a larger one is "Holm-adjusted together"."""
    from robench.cli.compare import family_note

    found = _planted(tmp_path, worse_by=40)
    assert family_note(list(found.values())).startswith("family exploratory: 2 comparisons, Holm-adjusted together")
    alone = dataclasses.replace(found["imbert"], family=1)
    assert family_note([alone]).startswith("family exploratory: 1 comparison, no adjustment (p = Holm p)\n")
