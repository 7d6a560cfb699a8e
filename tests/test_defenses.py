"""IM-BERT, FreeLB and SMART on the tiny backbone (one integration test on the packaged MiniLM)."""
from __future__ import annotations

import math

import pytest
import torch
from conftest import tiny_spec

import robench
from robench.core.errors import RobenchError
from robench.training.defense import resolve_model

TEXTS = ["a great movie", "this is a terrible , long and boring film that i hated", "fine", "not bad at all"]


def _model(backbone, name: str, **overrides):
    defense = resolve_model(name)
    params = defense.resolve_params(overrides)
    torch.manual_seed(0)
    model = defense.build(str(backbone), 2, params)
    return model, defense.objective(model, params)


def _batch(backbone, texts=TEXTS, labels=True):
    from transformers import AutoTokenizer

    enc = dict(AutoTokenizer.from_pretrained(backbone)(texts, padding=True, return_tensors="pt"))
    if labels:
        enc["labels"] = torch.tensor([i % 2 for i in range(len(texts))])
    return enc


@pytest.mark.parametrize("name", ["bert", "imbert", "freelb", "smart", "imbert+freelb", "imbert+smart"])
def test_training_step_gives_finite_loss_and_gradients(tiny_backbone, name):
    model, objective = _model(tiny_backbone, name)
    model.train()
    loss = objective.step(_batch(tiny_backbone))
    assert math.isfinite(float(loss)) and float(loss) > 0
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert any(g.abs().sum() > 0 for g in grads)


def test_freelb_initial_delta_is_scaled_and_masked():
    from robench.models.freelb import initial_delta

    embeds, mask = torch.zeros(3, 5, 8), torch.tensor([[1, 1, 1, 0, 0], [1] * 5, [1, 0, 0, 0, 0]]).unsqueeze(-1).float()
    delta = initial_delta(embeds, mask, 0.05)
    assert torch.all(delta[mask.squeeze(-1) == 0] == 0)
    assert torch.all(delta.flatten(1).norm(dim=1) <= 0.05)  # |U(-1,1)| <= 1 on L*d entries, scaled by 1/sqrt(L*d)
    assert torch.all(delta.abs().amax(dim=(1, 2)) <= 0.05 / torch.tensor([3 * 8, 5 * 8, 8]).sqrt() + 1e-9)


def test_freelb_respects_max_norm(tiny_backbone):
    _, unbounded = _model(tiny_backbone, "freelb", adv_lr=0.5, adv_steps=3)
    unbounded.model.train()
    unbounded.step(_batch(tiny_backbone))
    assert unbounded.last_delta_norms.shape == (3, len(TEXTS))
    assert unbounded.last_delta_norms[-1].max() > 0.2  # the ascent really moves delta

    _, bounded = _model(tiny_backbone, "freelb", adv_lr=0.5, adv_steps=3, adv_max_norm=0.2)
    bounded.model.train()
    bounded.step(_batch(tiny_backbone))
    assert torch.all(bounded.last_delta_norms <= 0.2 + 1e-5)
    assert bounded.last_delta_norms[-1].max() > 0.19  # and the bound is active


def test_smart_perturbation_respects_eps_and_padding(tiny_backbone):
    _, objective = _model(tiny_backbone, "smart", smart_eps=1e-3, smart_noise=1e-4, smart_step=1e-2)
    objective.model.train()
    batch = _batch(tiny_backbone)
    objective.step(batch)
    delta = objective.last_delta
    assert delta.abs().max() <= 1e-3 + 1e-12
    assert delta.abs().max() > 5e-4  # the ascent step reached the ball's surface
    assert torch.all(delta[batch["attention_mask"] == 0] == 0)


def test_smart_ema_teacher_update(tiny_backbone):
    model, objective = _model(tiny_backbone, "smart", ema_beta=0.9)
    model.train()
    before = [t.detach().clone() for t in objective.teacher.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    objective.step(_batch(tiny_backbone))
    optimizer.step()
    objective.after_optimizer_step()
    moved = 0
    for old, teacher, student in zip(before, objective.teacher.parameters(), model.parameters()):
        torch.testing.assert_close(teacher, 0.9 * old + 0.1 * student.detach())
        moved += int(not torch.equal(teacher, old))
    assert moved > 0
    assert not any(t.requires_grad for t in objective.teacher.parameters())


def test_smart_hyperparameters_are_recorded_and_validated():
    params = resolve_model("smart").resolve_params({"smart_lambda": 3})
    assert params == {"smart_lambda": 3, "smart_noise": 1e-5, "smart_step": 1e-3, "smart_eps": 1e-5,
                      "smart_ascent_steps": 1, "bregman_mu": 1.0, "ema_beta": 0.99}
    with pytest.raises(RobenchError, match="ema_beta"):
        resolve_model("smart").resolve_params({"ema_beta": 1.5})


def test_imbert_with_zero_steps_equals_bert(tiny_backbone, tmp_path):
    from transformers import BertForSequenceClassification

    model, _ = _model(tiny_backbone, "imbert", im_steps=0)
    model.eval()
    bert = BertForSequenceClassification.from_pretrained(tiny_backbone, num_labels=2, attn_implementation="eager")
    assert bert.state_dict().keys() == model.state_dict().keys()  # no new parameters
    bert.load_state_dict(model.state_dict())
    bert.eval()
    batch = _batch(tiny_backbone, labels=False)
    with torch.inference_mode():
        assert torch.equal(model(**batch).logits, bert(**batch).logits)


def test_imbert_solver_is_padding_invariant_and_works_in_inference_mode(tiny_backbone):
    model, _ = _model(tiny_backbone, "imbert", im_steps=3, im_gamma=0.05)
    model.eval()
    padded = _batch(tiny_backbone, labels=False)
    with torch.inference_mode():
        batched = model(**padded).logits
        alone = model(**_batch(tiny_backbone, TEXTS[:1], labels=False)).logits
    with torch.no_grad():
        no_grad = model(**padded).logits
    plain, _ = _model(tiny_backbone, "imbert", im_steps=0)
    with torch.inference_mode():
        explicit = plain.eval()(**padded).logits
    torch.testing.assert_close(batched[:1], alone, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(batched, no_grad)
    assert not torch.allclose(batched, explicit)  # the solver changes the output


def test_imbert_gradients_flow_through_the_unrolled_solver(tiny_backbone):
    grads = {}
    for steps in (0, 2):
        model, objective = _model(tiny_backbone, "imbert", im_steps=steps, im_gamma=0.05)
        model.eval()  # no dropout: the comparison is deterministic
        objective.step(_batch(tiny_backbone))
        grads[steps] = model.bert.encoder.layer[0].attention.self.query.weight.grad.clone()
    assert torch.isfinite(grads[2]).all()
    assert (grads[0] - grads[2]).abs().max() > 1e-4 * grads[0].abs().max()


def test_unrolled_solver_gradients_are_exact():
    """gradcheck: the unrolled solver (create_graph VJPs) differentiates correctly w.r.t. weights and input."""
    from robench.models.imbert import im_solve

    torch.manual_seed(0)
    weight = (0.3 * torch.randn(4, 4, dtype=torch.double)).requires_grad_()
    x = torch.randn(2, 3, 4, dtype=torch.double, requires_grad=True)
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.double).unsqueeze(-1)

    def solve(w, x, solver):
        layer = lambda z: torch.tanh(z @ w) + z  # noqa: E731
        return im_solve(layer, x, layer(x), mask, steps=3, gamma=0.1, solver=solver, differentiable=True)

    for solver in ("gd", "fixed_point"):
        assert torch.autograd.gradcheck(lambda w, x: solve(w, x, solver), (weight, x))


def test_imbert_fixed_point_solver_and_layer_choice(tiny_backbone):
    from robench.models.imbert import IMBertLayer

    model, objective = _model(tiny_backbone, "imbert", im_solver="fixed_point", im_layers="1", im_damping=0.3)
    layers = model.bert.encoder.layer
    assert [isinstance(layer, IMBertLayer) for layer in layers] == [False, True]
    model.train()
    assert math.isfinite(float(objective.step(_batch(tiny_backbone))))
    with pytest.raises(RobenchError, match="out of range"):
        _model(tiny_backbone, "imbert", im_layers=[5])
    with pytest.raises(RobenchError, match="im_solver"):
        resolve_model("imbert").resolve_params({"im_solver": "newton"})


def test_imbert_checkpoint_round_trip_through_auto_classes(tiny_backbone, tmp_path):
    from transformers import AutoModelForSequenceClassification

    from robench.models.imbert import IMBertForSequenceClassification

    model, _ = _model(tiny_backbone, "imbert", im_steps=2, im_gamma=0.05, im_layers=[0])
    model.save_pretrained(tmp_path, safe_serialization=True)
    assert (tmp_path / "model.safetensors").is_file()
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert isinstance(loaded, IMBertForSequenceClassification)
    assert (loaded.config.model_type, loaded.config.im_steps, loaded.config.im_layers) == ("imbert", 2, [0])
    batch = _batch(tiny_backbone, labels=False)
    with torch.inference_mode():
        torch.testing.assert_close(loaded.eval()(**batch).logits, model.eval()(**batch).logits)


def test_tiny_run_with_imbert_records_its_hyperparameters(settings, tiny_backbone):
    import csv

    from robench.classifier.victim import accuracy
    from robench.runs.given import load_victim

    spec = tiny_spec(tiny_backbone, model="imbert", model_params={"im_steps": 2})
    record = robench.run(spec, settings, device="cpu")
    assert record.hyperparameters["model"]["im_steps"] == 2
    assert record.hyperparameters["model"]["im_gamma"] == 0.01
    victim = load_victim(record.checkpoint, torch.device("cpu"), max_length=spec.train.max_length)
    config = victim.model.config
    assert (config.model_type, config.im_steps, config.im_gamma) == ("imbert", 2, 0.01)  # what was trained
    rows = list(csv.DictReader(open(settings.runs_dir / f"{record.run_id}.csv")))
    assert len(rows) == record.metrics["examples"] == 24  # the tiny AdvGLUE split, whole
    # known answer: accuracy under attack is the checkpoint's own accuracy on the replayed AdvGLUE texts
    replayed = accuracy(victim, [(r["perturbed_text"],) for r in rows], [int(r["label"]) for r in rows])
    assert record.metrics["robust_accuracy"] == pytest.approx(replayed)
    assert record.metrics["robust_accuracy"] == sum(r["status"] == "failed" for r in rows) / len(rows)
    assert record.metrics["dev_accuracy"] == pytest.approx(
        accuracy(victim, [(t,) for t in _dev_texts(settings)[0]], _dev_texts(settings)[1]))


def _dev_texts(settings) -> tuple[list[str], list[int]]:
    from robench.data import TASKS
    from robench.data.loading import load_split

    dev = load_split(TASKS.get("sst2"), "eval", settings.data_dir, "local")
    return list(dev["sentence"]), [int(y) for y in dev["label"]]


def test_defenses_bench_tiny_end_to_end(settings, tiny_backbone, tiny_data, capsys):
    from robench.cli import main

    out = settings.results_dir / "bench"
    assert main(["bench", "defenses", "--backbone", str(tiny_backbone), "--data-dir", str(tiny_data), "--cache-dir",
                 str(settings.cache_dir), "--results-dir", str(out), "--models", "bert", "imbert",
                 "--train-size", "32", "--low-resource", "16", "--seeds", "0", "--epochs", "1",
                 "--max-length", "32", "--device", "cpu", "--quiet", "--param", "imbert:im_steps=1"]) == 0
    table = __import__("pandas").read_csv(out / "defenses.csv")
    assert set(table["model"]) == {"bert", "imbert"} and set(table["train_size"].astype(str)) == {"32", "16"}
    assert (table.loc[table["model"] == "bert", "train_cost_vs_bert"] == 1.0).all()
    assert (table["train_cost_vs_bert"] > 0).all()
    assert "AdvGLUE" in (out / "defenses.md").read_text()


@pytest.mark.integration
def test_im_connection_residual_falls_on_real_minilm_layers():
    from transformers import AutoTokenizer

    from robench.classifier.backbone import resolve_backbone
    from robench.models.imbert import IMBertParams, build_imbert

    location = resolve_backbone("minilm").location
    model = build_imbert(location, 2, IMBertParams(im_steps=0)).eval()
    enc = AutoTokenizer.from_pretrained(location)(
        ["it 's a charming and often affecting journey .", "unflinchingly bleak and desperate",
         "the acting , costumes , music , cinematography and sound are all astounding given the production 's "
         "austere locales ."], padding=True, return_tensors="pt")
    mask = model.get_extended_attention_mask(enc["attention_mask"], enc["input_ids"].shape)
    with torch.no_grad():
        hidden = model(**enc, output_hidden_states=True).hidden_states
    for i in (0, 5):
        layer = model.bert.encoder.layer[i]
        layer.im_steps = 5  # the defaults: gradient descent, gamma 0.01
        trace: list[float] = []
        layer._solve(hidden[i], hidden[i + 1], mask, (), {}, differentiable=False, trace=trace)
        assert all(b < a for a, b in zip(trace, trace[1:])), trace
        assert trace[-1] < 0.85 * trace[0], trace


def test_bench_param_parsing():
    from robench.core.params import params_by_model

    assert params_by_model(["bert", "imbert"], ["imbert:im_gamma=0.02", "imbert:im_layers=0,1"]) == {
        "bert": {}, "imbert": {"im_gamma": 0.02, "im_layers": "0,1"}}
    assert params_by_model(["bert", "imbert"], ["max_norm=0.5"]) == {"bert": {"max_norm": 0.5},
                                                                    "imbert": {"max_norm": 0.5}}
    with pytest.raises(RobenchError, match="MODEL:KEY=VALUE"):
        params_by_model(["bert"], ["imbert:im_gamma=0.02"])


def test_imbert_search_selects_on_dev_accuracy(settings, tiny_backbone, tiny_data, capsys):
    from robench.cli import main

    out = settings.results_dir / "search"
    assert main(["bench", "defenses", "--search", "--backbone", str(tiny_backbone), "--data-dir", str(tiny_data),
                 "--cache-dir", str(settings.cache_dir), "--results-dir", str(out), "--train-size", "16", "--seeds",
                 "0", "--epochs", "1", "--max-length", "32", "--device", "cpu", "--quiet",
                 "--grid-gamma", "0.01", "0.02", "--grid-steps", "1", "--grid-layers", "all", "1"]) == 0
    table = __import__("pandas").read_csv(out / "imbert_search.csv")
    assert len(table) == 4 and table["dev_accuracy_mean"].is_monotonic_decreasing
    assert not (settings.runs_dir.parent / "search" / "runs").exists()  # training only: no attack, no AdvGLUE
    assert "best on dev: --param imbert:im_layers=" in capsys.readouterr().out


def test_low_resource_gets_as_many_steps_as_the_full_subset():
    from robench.bench.defenses import DefensesOptions

    options = DefensesOptions(train_size=4000, epochs=2, low_resource_epochs=0)
    assert options.epochs_for(4000) == 2 and options.epochs_for(500) == 16
    assert DefensesOptions(train_size=4000, epochs=2, low_resource_epochs=5).epochs_for(500) == 5
