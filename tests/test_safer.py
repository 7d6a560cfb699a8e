"""SAFER (issue 27): its certificate against enumeration on a toy model, the vote fixed per query, the checkpoint
round trip and a run's certified accuracy, on the tiny backbone."""
from __future__ import annotations

import pytest
import torch
from test_word_defenses import _model, _toy_table

from robench.core.errors import RobenchError


def _toy_classifier(texts):
    """Positive words push towards label 1, negative ones towards 0; 'fine' and 'nice' count half."""
    weights = {"good": 2.0, "great": 2.0, "fine": 0.5, "nice": 0.5, "bad": -2.0, "poor": -2.0}
    out = []
    for text in texts:
        s = sum(weights.get(w, 0.0) for w in text.lower().split()) - 0.25
        out.append([-s, s])
    return out


def _smoothed(cap: int, samples: int = 400, cert_samples: int = 4000):
    from robench.classifier.victim import CallableVictim
    from robench.models.safer import PerturbationSets, SaferParams, SmoothedVictim

    sets = PerturbationSets(_toy_table(), k=2, min_cos=0.5, cap=cap)
    params = SaferParams(safer_samples=samples, safer_cert_samples=cert_samples)
    return SmoothedVictim(CallableVictim(_toy_classifier, 2), sets, params), sets


def _exact(sets, text: str) -> float:
    """g_1(X) by enumerating every draw of the smoothing distribution (uniform over the product of the sets)."""
    import itertools

    options = [sets.words_of(w) for w in text.split()]
    draws = [" ".join(c) for c in itertools.product(*options)]
    return float(sum(row[1] > row[0] for row in _toy_classifier(draws))) / len(draws)


def _attacks(sets, text: str) -> list[str]:
    """Every X' the threat model allows: each word kept or replaced by one of its synonyms T_x."""
    import itertools

    table = sets.table
    options = [[w] + [table.words[j] for j in sets.threat(table.index[w])] if w in table.index else [w]
               for w in text.split()]
    return [" ".join(c) for c in itertools.product(*options)]


@pytest.mark.parametrize("cap", [4, 2])
def test_safer_certificate_holds_on_a_toy_model_by_enumeration(cap):
    from robench.models.safer import certified

    victim, sets = _smoothed(cap)
    if cap == 4:  # every component fits: each word's set is its whole component, so q = 1 and Delta = 0
        assert sets.words_of("good") == sets.words_of("great") and sets.q_of("good") == 1.0
    else:  # the chain of 4 is cut: good's set {good, fine}, nice's {nice, fine} or {nice, great}: q < 1
        assert len(sets.words_of("good")) == 2 and min(sets.q_of(w) for w in ("good", "fine", "nice", "great")) < 1
    checked = 0
    for text in ["good movie", "the fine film", "nice bad movie", "great good the", "poor fine film", "the movie"]:
        delta, p = sets.delta((text,)), _exact(sets, text)
        for attacked in _attacks(sets, text):
            q = _exact(sets, attacked)
            assert abs(q - p) <= delta + 1e-12, (text, attacked, p, q, delta)  # the TV bound
            for label, gold in ((1, p), (0, 1 - p)):
                if certified(gold, delta):  # with the exact probability: the label survives every attack
                    assert (q > 0.5) == (label == 1)
                    checked += 1
    assert checked > 0


def test_safer_vote_is_fixed_per_query_and_every_inner_forward_is_counted():
    import numpy as np

    from robench.classifier.victim import QueryCounter

    victim, sets = _smoothed(cap=2, samples=200)
    counter = QueryCounter()
    first = victim.predict_proba([("good movie",), ("poor fine film",)], counter)
    assert counter.queries == 2  # the attack pays one query per text, not one per vote
    assert 0 < victim.inner_forwards <= 2 * 200 and victim.model_evaluations == 2
    victim.reset()
    again = victim.predict_proba([("good movie",), ("poor fine film",)])
    assert np.array_equal(first, again)  # seeded by the text: the same answer every time
    assert np.allclose(first.sum(axis=1), 1.0)
    for text, row in zip(["good movie", "poor fine film"], first):
        assert abs(row[1] - _exact(sets, text)) < 0.12  # 200 votes estimate the smoothed probability


def test_safer_certified_accuracy_matches_the_enumerated_certificate():

    victim, sets = _smoothed(cap=4, cert_samples=2000)
    texts = [("good movie",), ("bad film",), ("the fine film",), ("nice bad movie",)]
    labels = [1, 0, 1, 1]
    out = victim.certify(texts, labels)
    exact = [_exact(sets, t[0]) if y == 1 else 1 - _exact(sets, t[0]) for t, y in zip(texts, labels)]
    deltas = [sets.delta(t) for t in texts]
    # the toy's smoothed mass is all or nothing (exact 1, 1, 1, 0) and Delta = 0: no Monte Carlo margin is needed
    assert exact == [1.0, 1.0, 1.0, 0.0] and deltas == [0.0] * 4
    assert out["certified"] == [p - d > 0.5 for p, d in zip(exact, deltas)] == [True, True, True, False]
    assert (out["certified_accuracy"], out["certified_examples"], out["certify_examples"]) == (0.75, 3, 4)
    n, alpha = out["certify_samples"], out["certify_alpha"]
    assert out["certify_median_p_lower"] == pytest.approx(alpha ** (1 / n))  # Clopper-Pearson, n of n votes
    assert out["certify_forwards"] > 0
    assert victim.certify_forwards == out["certify_forwards"] <= victim.inner_forwards


def test_safer_keeps_a_bounded_number_of_perturbation_sets(monkeypatch):
    """The sets are built once per table and parameters, and a process keeps only the last few (a grid over
    safer_k once grew a module-level dict without end)."""
    from robench.models import safer

    table = _toy_table()
    monkeypatch.setattr(safer, "synonyms_of", lambda params, settings: table)
    safer._built_sets.cache_clear()
    first = safer.perturbation_sets(safer.SaferParams(safer_k=2), None)
    assert safer.perturbation_sets(safer.SaferParams(safer_k=2), None) is first  # built once
    for cap in range(2, 2 + 3 * safer.SETS_KEPT):
        safer.perturbation_sets(safer.SaferParams(safer_k=2, safer_set_size=cap), None)
        assert safer._built_sets.cache_info().currsize <= safer.SETS_KEPT
    other = _toy_table()  # an equal table loaded again is another table: its own sets
    monkeypatch.setattr(safer, "synonyms_of", lambda params, settings: other)
    assert safer.perturbation_sets(safer.SaferParams(safer_k=2), None).table is other
    safer._built_sets.cache_clear()


def test_safer_checkpoint_round_trip_and_its_victim(tiny_backbone, tmp_path, settings, monkeypatch):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from robench.classifier.victim import Victim, defended
    from robench.models import safer
    from robench.runs.given import load_victim, register_architectures

    table = _toy_table()
    monkeypatch.setattr(safer, "synonyms_of", lambda params, settings: table)
    model, objective = _model(tiny_backbone, "safer", safer_samples=16, safer_k=2)
    model.config.safer_table = {"name": "toy", "key": "toy-1"}
    model.save_pretrained(tmp_path, safe_serialization=True)
    AutoTokenizer.from_pretrained(tiny_backbone).save_pretrained(tmp_path)
    register_architectures()
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    assert type(loaded) is safer.SaferForSequenceClassification and loaded.safer_params().safer_samples == 16
    victim = load_victim(tmp_path, torch.device("cpu"), settings=settings)
    assert isinstance(victim, safer.SmoothedVictim)
    direct = defended(Victim(model.eval(), AutoTokenizer.from_pretrained(tiny_backbone), torch.device("cpu")),
                      settings)
    texts = [("a good movie",), ("a bad film",)]
    assert (victim.predict_proba(texts) == direct.predict_proba(texts)).all()
    with pytest.raises(RobenchError, match="settings"):
        load_victim(tmp_path, torch.device("cpu"))
    rebuilt = _toy_table()  # a rebuilt table: its sets may differ from the ones the model was trained with
    rebuilt.info["key"] = "toy-2"
    monkeypatch.setattr(safer, "synonyms_of", lambda params, settings: rebuilt)
    with pytest.raises(RobenchError, match="trained with synonym table"):
        load_victim(tmp_path, torch.device("cpu"), settings=settings)


def test_a_safer_run_records_its_certified_accuracy_and_inner_forwards(settings, tiny_backbone, monkeypatch):
    from conftest import tiny_spec

    import robench
    from robench.models import safer
    from robench.report.leaderboard import aggregate, records_frame

    table = _toy_table()
    monkeypatch.setattr(safer, "synonyms_of", lambda params, settings: table)
    spec = tiny_spec(tiny_backbone, model="safer", attack="advglue",
                     model_params={"safer_samples": 4, "safer_cert_samples": 20, "safer_k": 2})
    record = robench.run(spec, settings, device="cpu")
    m, t = record.metrics, record.timings
    assert 0.0 <= m["certified_accuracy"] <= 1.0 and m["certify_examples"] == m["examples"] == 24
    assert len(m["certified"]) == 24 and m["certify_samples"] == 20
    assert t["inner_forwards"] >= m["certify_forwards"] > 0
    assert t["inner_forwards"] > t["victim_queries"]  # 4 votes (and the certificate) behind every query
    table_ = aggregate(records_frame(settings.runs_dir))
    assert "certified_accuracy_mean" in table_.columns
