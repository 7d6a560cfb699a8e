"""Adaptive evaluation: gradients through IM-BERT's solver, BPDA, gradient-swap, transfer, worst case, flags."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from conftest import tiny_spec
from test_attacks import fake_textfooler_resources, make_ctx, new_victim, tiny_model  # noqa: F401

import robench
from robench.classifier.victim import QueryCounter, Victim
from robench.core.errors import RobenchError
from robench.core.records import RunRecord
from robench.core.types import ExampleResult
from robench.data import TASKS
from robench.engine.attack import ATTACKS
from robench.engine.gradients import GradientVictim, GradQuery, bpda, word_gradients
from robench.report.worstcase import budget_curve, worst_case, worst_cases
from robench.runs.store import RunStore

TEXT = ("the movie was good but slow",)  # every word is one word piece of the uncased vocabulary


def _imbert(backbone, **params):
    from robench.training.defense import resolve_model

    defense = resolve_model("imbert")
    torch.manual_seed(0)
    return defense.build(str(backbone), 2, defense.resolve_params(params)).eval()


def _victim(backbone, model) -> Victim:
    from transformers import AutoTokenizer

    return Victim(model, AutoTokenizer.from_pretrained(backbone), torch.device("cpu"), max_length=32)


def _loss(victim: Victim, embeds: torch.Tensor, label: int) -> float:
    """The loss of the model's inference path (no autograd: IM-BERT's detached solver)."""
    with torch.no_grad():
        logits = victim.model(inputs_embeds=embeds, attention_mask=torch.ones(embeds.shape[:2])).logits
    return float(torch.nn.functional.cross_entropy(logits, torch.tensor([label])))


def test_gradient_through_the_imbert_solver_matches_finite_differences(tiny_backbone):
    victim = _victim(tiny_backbone, _imbert(tiny_backbone, im_steps=4, im_gamma=0.05).double())
    with torch.inference_mode():  # as the engine runs: autograd must be switched back on, not skipped
        (grads,) = word_gradients(victim, [GradQuery(TEXT, 1)])
    ids = victim.tokenizer(*zip(TEXT), return_tensors="pt")["input_ids"]
    assert ids.shape[1] == len(TEXT[0].split()) + 2
    base = victim.model.get_input_embeddings()(ids).detach()
    rng = np.random.default_rng(0)
    for word in (0, 3, 5):
        v = torch.tensor(rng.normal(size=base.shape[-1]), dtype=base.dtype)
        step = torch.zeros_like(base)
        step[0, word + 1] = v  # the word's only word piece ([CLS] first)
        h = 1e-5
        numeric = (_loss(victim, base + h * step, 1) - _loss(victim, base - h * step, 1)) / (2 * h)
        analytic = float(grads.grads[word].astype(np.float64) @ v.numpy())
        assert abs(numeric - analytic) <= 1e-4 * max(1.0, abs(numeric)), (word, numeric, analytic)
        assert abs(analytic) > 1e-6
    (through_bpda,) = word_gradients(victim, [GradQuery(TEXT, 1)], mode="bpda")
    assert not np.allclose(through_bpda.grads, grads.grads, rtol=1e-3)  # the solver's own gradient was used


def test_bpda_keeps_the_solver_value_and_takes_the_explicit_layer_gradient(tiny_backbone):
    from transformers.models.bert.modeling_bert import BertLayer

    from robench.models.imbert import IMBertLayer

    model = _imbert(tiny_backbone, im_steps=4, im_gamma=0.05).double()
    layer = model.bert.encoder.layer[1]
    assert isinstance(layer, IMBertLayer)
    x = torch.randn(2, 5, 32, dtype=torch.float64, requires_grad=True)
    cotangent = torch.randn(2, 5, 32, dtype=torch.float64)
    with torch.no_grad():
        solved = layer(x)[0]
    with bpda(model):
        out = layer(x)[0]
        (got,) = torch.autograd.grad(out, x, cotangent)
    (explicit,) = torch.autograd.grad(BertLayer.forward(layer, x)[0], x, cotangent)
    (unrolled,) = torch.autograd.grad(layer(x)[0], x, cotangent)
    torch.testing.assert_close(out.detach(), solved)
    torch.testing.assert_close(got, explicit)
    assert not torch.allclose(unrolled, explicit)
    assert "forward" not in vars(layer)  # the context leaves the model as it was
    batch = victim_batch = _victim(tiny_backbone, model).encode([TEXT, ("fine",)])
    with torch.no_grad():
        plain = model(**batch).logits
        with bpda(model):
            approx = model(**victim_batch).logits
    torch.testing.assert_close(plain, approx)


def test_gradient_victim_charges_two_queries_per_gradient(tiny_backbone):
    victim = GradientVictim(_victim(tiny_backbone, _imbert(tiny_backbone, im_steps=2)))
    counter = QueryCounter(budget=4)
    (answer,) = victim.predict_many([([GradQuery(TEXT, 0), TEXT], counter)])
    assert counter.queries == 3 and victim.gradient_calls == 1
    assert answer[0].grads.shape == (6, 32) and answer[1].shape == (2,)
    (refused,) = victim.predict_many([([GradQuery(TEXT, 0)], counter)])
    assert "budget of 4" in str(refused) and counter.queries == 3


@pytest.mark.parametrize("gradient", ["unrolled", "bpda"])
def test_gradient_swap_attacks_imbert_within_the_constraints(tiny_backbone, settings, gradient):
    from robench.attacks.gradient_swap import RECIPE, GradientSwapParams

    victim = _victim(tiny_backbone, _imbert(tiny_backbone, im_steps=2, im_gamma=0.05))
    ctx = make_ctx(settings, victim, 8, labels_from=victim)
    params = GradientSwapParams(gradient=gradient, window=5, skip_shorter_than_window=False, verify=3)
    results = RECIPE.attack_with(ctx, params, fake_textfooler_resources())
    assert len(results) == 8 and not [r.error for r in results if r.status == "error"]
    assert all(r.queries >= 3 for r in results)  # clean prediction + at least one gradient (2)
    budgeted = RECIPE.attack_with(ctx, dataclasses.replace(params, query_budget=2), fake_textfooler_resources())
    assert all(r.status == "failed" and "budget of 2" in r.error for r in budgeted)  # 1 + 2 > 2


def test_first_order_ranking_picks_the_largest_estimated_loss_increase():
    from robench.attacks.gradient_swap import first_order

    grad = np.array([1.0, -2.0])
    old = np.array([0.0, 0.0])
    new = np.array([[1.0, 0.0], [0.0, -1.0], [0.0, 1.0]])
    np.testing.assert_allclose(first_order(grad, old, new), [1.0, 2.0, -2.0])


# --- transfer ----------------------------------------------------------------------

def _finish(settings, run_id: str, spec, results) -> None:
    record = RunRecord(run_id, spec.to_dict(), {}, {}, {}, {}, "", created="now")
    RunStore(settings.runs_dir, run_id).finish(record, results)


def test_transfer_to_an_identical_model_reproduces_the_source_successes(tiny_model, settings):  # noqa: F811
    from robench.attacks.textfooler import RECIPE, TextFoolerParams

    params = TextFoolerParams(window=5, skip_shorter_than_window=False)
    source = RECIPE.attack_with(make_ctx(settings, new_victim(tiny_model), 16), params, fake_textfooler_resources())
    assert {r.status for r in source} >= {"successful", "skipped"}
    _finish(settings, "src", tiny_spec("unused", attack="textfooler", eval_size=16), source)

    recipe = ATTACKS.get("transfer:src")
    ctx = make_ctx(settings, new_victim(tiny_model), 16)
    replay = {r.index: r for r in recipe.attack(ctx, recipe.params()).results}
    for r in source:
        assert replay[r.index].status == r.status
        if r.status == "successful":
            assert replay[r.index].perturbed_text == r.perturbed_text
    metrics = recipe.summarize(list(replay.values()), ctx, recipe.params())
    assert metrics["replayed"] == sum(r.status == "successful" for r in source)  # its texts, whatever the queries

    # another subset of the same split: matched by eval-split row and text, not by position in the subset
    shifted = make_ctx(settings, new_victim(tiny_model), 20)
    shifted = dataclasses.replace(shifted, eval_data=shifted.eval_data.select(range(4, 20)))
    moved = {r.index: r for r in recipe.attack(shifted, recipe.params()).results}
    for r in source[4:]:
        assert moved[r.index - 4].status == r.status
    assert all(moved[i].status == "error" and "not in the source run" in moved[i].error for i in range(12, 16))


def test_transfer_refuses_a_replay_source_by_its_recipe_not_its_name(settings, monkeypatch):
    """A source whose recipe replays fixed texts (`AttackRecipe.replay`: AdvGLUE, a transfer) has nothing of its own
    to transfer; a search recipe, whatever its name, is a source."""
    task = TASKS.get("sst2")
    results = _results("sf")
    for attack in ("transfer:other", "advglue"):
        _finish(settings, "replayed", tiny_spec("unused", attack=attack, eval_size=2), results)
        with pytest.raises(RobenchError, match="is a replay"):
            ATTACKS.get("transfer:replayed").check(task, None, settings)
    monkeypatch.setattr(ATTACKS.get("advglue"), "replay", False)  # the flag decides, not the name
    ATTACKS.get("transfer:replayed").check(task, None, settings)


def test_transfer_rejects_a_missing_source_before_training(settings, tiny_backbone):
    with pytest.raises(RobenchError, match="transfer source run 'nope' not found"):
        robench.run(tiny_spec(tiny_backbone, attack="transfer:nope"), settings, device="cpu")
    with pytest.raises(RobenchError, match="gradient must be one of"):
        robench.run(tiny_spec(tiny_backbone, attack="gradient-swap", attack_params={"gradient": "x"}), settings,
                    device="cpu")


# --- worst case and flags ----------------------------------------------------------

def _results(statuses: str, queries=None, texts=None) -> list[ExampleResult]:
    code = {"f": "failed", "s": "successful", "k": "skipped", "e": "error"}
    return [ExampleResult(i, 1, (texts or {}).get(i, f"text {i}"), "x", 1, 0, code[c],
                          (queries or [10] * len(statuses))[i]) for i, c in enumerate(statuses)]


def _record(attack: str, params=None, model="imbert", seed=0, metrics=None) -> RunRecord:
    spec = tiny_spec("b", model=model, attack=attack, seed=seed, attack_params=params or {}, eval_size=6)
    return RunRecord(spec.run_id, spec.to_dict(), {}, {}, metrics or {}, {}, "")


def test_worst_case_is_the_per_example_minimum_over_attacks():
    members = [
        (_record("textfooler"), _results("ffsfkf")),
        (_record("gradient-swap"), _results("fsffkf")),
        (_record("gradient-swap", {"gradient": "bpda"}), _results("ffffke")),  # example 5: error, left out
        (_record("transfer:src"), _results("ffffkf", texts={3: "another text"})),  # example 3: another text
    ]
    case = worst_case(members)
    assert case.examples == 4  # 0, 1, 2, 4
    assert case.worst_case_accuracy == 1 / 4  # only example 0 survives every attack; 4 was skipped
    assert case.accuracy == {"gradient-swap": 2 / 4, "gradient-swap[gradient=bpda]": 3 / 4,
                             "textfooler": 2 / 4, "transfer:src": 3 / 4}
    assert "blackbox_stronger:textfooler" not in case.flags  # ties the strongest white-box attack
    members[0] = (_record("textfooler"), _results("fsssks"))
    assert "blackbox_stronger:textfooler" not in worst_case(members).flags  # 2 examples more: noise


def test_blackbox_stronger_needs_a_paired_difference_beyond_noise():
    """The flag needs the exact one-sided sign test on the examples one attack broke and the other did not."""
    white = (_record("gradient-swap"), _results("f" * 30 + "s" * 10))
    far = (_record("textfooler"), _results("f" * 20 + "s" * 20))  # breaks 10 more, and none fewer: p = 0.001
    near = (_record("textfooler"), _results("f" * 28 + "s" * 12))  # 2 more: p = 0.25
    assert "blackbox_stronger:textfooler" in worst_case([far, white]).flags
    assert "blackbox_stronger:textfooler" not in worst_case([near, white]).flags


def test_budget_curve_and_the_no_fall_flag():
    results = _results("fssfke", queries=[80, 10, 70, 80, 1, 3])
    curve = budget_curve(results)
    assert curve["budgets"] == [10, 20, 40, 80]
    assert curve["robust_accuracy"] == [3 / 5, 3 / 5, 3 / 5, 2 / 5]  # example 2 (70 queries) falls only at 80
    flat = worst_case([(_record("gradient-swap", metrics={"gradient_check": {"zero_or_nonfinite_rate": 0.5}}),
                        _results("ffffk", queries=[50, 60, 70, 80, 1]))])
    assert set(flat.flags) == {"zero_gradients", "no_fall_with_budget:gradient-swap"}
    broken_early = worst_case([(_record("textfooler"), _results("sssk", queries=[5, 5, 80, 1]))])
    assert broken_early.flags == []  # nothing survives: the budget is not what stops the attack


def test_leaderboard_gets_the_worst_case_column_and_flags(settings):
    from robench.report.leaderboard import write_leaderboard

    for seed, (tf, gs) in enumerate([("ffsfks", "ffffkf"), ("sfffkf", "fsffkf")]):
        for attack, statuses in (("textfooler", tf), ("gradient-swap", gs)):
            rec = _record(attack, seed=seed, metrics={"robust_accuracy": statuses.count("f") / 6})
            RunStore(settings.runs_dir, rec.run_id).finish(rec, _results(statuses))
    cases = worst_cases(settings.runs_dir)
    assert [c.worst_case_accuracy for c in cases] == [3 / 6, 3 / 6]
    table, _, md = write_leaderboard(settings.results_dir)
    assert set(table["worst_case_accuracy_mean"]) == {0.5}
    assert (table["worst_case_accuracy_ci_low"] < 0.5).all() and (table["worst_case_accuracy_ci_high"] > 0.5).all()
    assert "worst_case_accuracy" in md.read_text()
    assert "blackbox_stronger" not in md.read_text()  # textfooler breaks one example more per seed: noise
    assert (settings.results_dir / "worstcase.md").is_file()


def test_worst_case_matches_runs_of_different_subsets_by_eval_split_row_and_text(settings):
    from robench.data import TASKS
    from robench.data.loading import load_split, texts_of

    split = [t[0] for t in texts_of(load_split(TASKS.get("sst2"), "eval", settings.data_dir, "local"),
                                    TASKS.get("sst2"))]
    data = {"data": {"source": "local", "data_dir": str(settings.data_dir)}}

    def run(attack: str, rows: list[int], statuses: str, size: int):
        spec = tiny_spec("b", model="imbert", attack=attack, eval_size=size)
        results = [ExampleResult(i, 1, split[row], "x", 1, 0, {"f": "failed", "s": "successful"}[c])
                   for i, (row, c) in enumerate(zip(rows, statuses))]
        return RunRecord(spec.run_id, spec.to_dict(), {}, data, {}, {}, ""), results

    wide = run("textfooler", [0, 1, 2, 3, 4, 5], "ffsfsf", 6)
    narrow = run("gradient-swap", [1, 3, 4], "fsf", 3)  # rows 1, 3, 4: subset indices 0, 1, 2
    case = worst_case([wide, narrow])
    assert case.examples == 3
    assert case.accuracy == {"textfooler": 2 / 3, "gradient-swap": 2 / 3}
    assert case.worst_case_accuracy == 1 / 3  # row 1 survives both; row 3 falls to one, row 4 to the other
    again = run("textfooler", [1, 3, 4], "fff", 3)  # the same attack on the smaller subset: its own column
    both = worst_case([wide, narrow, again])
    assert len(both.accuracy) == 3 and both.worst_case_accuracy == 1 / 3
