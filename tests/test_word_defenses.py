"""The word-substitution defences of issue 27 (pgd, a2t, safer, ascc) on the tiny backbone."""
from __future__ import annotations

import math

import pytest
import torch

from robench.core.errors import RobenchError
from robench.training.defense import resolve_model

TEXTS = ["a great movie", "this is a terrible , long and boring film that i hated", "fine", "not bad at all"]


def _model(backbone, name: str, **overrides):
    defense = resolve_model(name)
    params = defense.resolve_params(overrides)
    torch.manual_seed(0)
    model = defense.build(str(backbone), 2, params)
    return model, defense.objective(model, params)


def _batch(backbone, texts=TEXTS):
    from transformers import AutoTokenizer

    enc = dict(AutoTokenizer.from_pretrained(backbone)(texts, padding=True, return_tensors="pt"))
    enc["labels"] = torch.tensor([i % 2 for i in range(len(texts))])
    return enc


# ---------------------------------------------------------------------------------------------------- pgd

@pytest.mark.parametrize("norm", ["l2", "linf"])
def test_pgd_inner_steps_increase_the_loss(tiny_backbone, norm):
    model, objective = _model(tiny_backbone, "pgd", adv_steps=4, adv_norm=norm)  # TextDefender step 0.03
    model.eval()  # no dropout: the inner losses are the same function of delta
    loss = objective.step(_batch(tiny_backbone))
    losses = objective.last_losses
    assert len(losses) == 5 and math.isclose(losses[-1], float(loss), rel_tol=1e-6)
    assert all(b > a for a, b in zip(losses, losses[1:])), losses  # every ascent step raises the loss


def test_pgd_trains_on_the_perturbed_batch_only_and_projects(tiny_backbone):
    from robench.models.pgd import PGDParams, ascent_step

    p = PGDParams(adv_lr=1.0, adv_max_norm=0.3)
    mask = torch.tensor([[1, 1, 0]]).unsqueeze(-1).float()
    delta = ascent_step(torch.zeros(1, 3, 4), torch.randn(1, 3, 4), mask, p)
    assert torch.all(delta[0, 2] == 0) and delta.flatten(1).norm() <= 0.3 + 1e-6
    q = PGDParams(adv_lr=1.0, adv_max_norm=0.1, adv_norm="linf")
    assert ascent_step(torch.zeros(1, 3, 4), torch.randn(1, 3, 4), mask, q).abs().max() <= 0.1 + 1e-7
    model, objective = _model(tiny_backbone, "pgd")
    model.train()
    objective.step(_batch(tiny_backbone))
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters() if p.requires_grad)


def test_pgd_refuses_bad_hyperparameters_and_composes_with_imbert(tiny_backbone):
    with pytest.raises(RobenchError, match="adv_norm"):
        resolve_model("pgd").resolve_params({"adv_norm": "l1"})
    with pytest.raises(RobenchError, match="adv_steps"):
        resolve_model("pgd").resolve_params({"adv_steps": 0})
    model, objective = _model(tiny_backbone, "imbert+pgd", im_steps=1, adv_steps=2)
    model.train()
    assert math.isfinite(float(objective.step(_batch(tiny_backbone))))


# ---------------------------------------------------------------------------------------------------- a2t

class _ConstantEncoder:
    """A sentence encoder under which every text is equally similar (the unit tests may not load MiniLM)."""

    info = {"name": "constant-test-encoder"}

    def embed(self, texts):
        import numpy as np

        return np.ones((len(texts), 4), dtype=np.float32) / 2.0

    def threshold_for(self, paper_threshold, metric):
        return 0.9


@pytest.fixture(scope="module")
def small_lexicon_table(tmp_path_factory, tiny_data):
    """robench's default ("lexicon") synonym table built over the 3,000 most frequent GloVe words only."""
    from robench.core.paths import resolve_settings
    from robench.engine.resources.lexicon_table import build_lexicon_table

    root = tmp_path_factory.mktemp("small-lexicon")
    table = build_lexicon_table(resolve_settings(tiny_data, root / "cache", root / "results"), vocab_size=3000)
    table.info["synonym_lists"] = ["alzantot", "ppdb", "wordnet"]
    return table


def _a2t_with(table, monkeypatch, settings):
    """A2T's resources with `table` as its synonyms and a constant sentence encoder, patched in."""
    from robench.engine import resources
    from robench.models import a2t

    res = a2t.A2TResources(resources.stopwords(settings), resources.pos_tagger(settings), table, _ConstantEncoder())
    monkeypatch.setattr(a2t, "load_resources", lambda params, settings, device: res)
    monkeypatch.setattr(a2t, "synonyms_of", lambda params, settings: table)
    return res


@pytest.fixture
def a2t_resources(monkeypatch, settings, small_lexicon_table):
    return _a2t_with(small_lexicon_table, monkeypatch, settings)


@pytest.fixture
def a2t_random_resources(monkeypatch, settings, tiny_train_table):
    """A2T over random synonyms of the tiny data's words (what training does, not which swaps it makes)."""
    return _a2t_with(tiny_train_table, monkeypatch, settings)


def _a2t_objective(tiny_backbone, settings, **overrides):
    from transformers import AutoTokenizer

    from robench.data import TASKS
    from robench.data.loading import load_split
    from robench.training.config import TrainConfig
    from robench.training.loop import training_context

    model, objective = _model(tiny_backbone, "a2t", **overrides)
    task = TASKS.get("sst2")
    train = load_split(task, "train", settings.data_dir, "local")
    tokenizer = AutoTokenizer.from_pretrained(tiny_backbone)
    objective.prepare(training_context(model, tokenizer, task, train, settings, torch.device("cpu"), 0,
                                       TrainConfig(epochs=2, max_length=64)))
    return model, objective


def _fit(model, objective, epochs: int = 8) -> None:
    """Fit the tiny model to its 96 training sentences (an untrained one predicts one class whatever the words)."""
    from transformers import DataCollatorWithPadding

    ctx = objective.context
    features, collate = ctx.encode(ctx.texts, ctx.labels), DataCollatorWithPadding(ctx.tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(epochs):
        for i in range(0, len(features), 16):
            model(**collate(features[i:i + 16])).loss.backward()
            optimizer.step()
            optimizer.zero_grad()


def test_a2t_schedule_clean_epochs_first_then_adversarial(settings):
    from robench.models.a2t import A2TParams
    from robench.training.config import TrainConfig

    p = A2TParams(a2t_clean_epochs=1, a2t_attack_interval=2)
    assert [p.attack_epoch(e) for e in range(1, 7)] == [False, True, False, True, False, True]
    assert p.successes_wanted(3000) == 600
    a2t = resolve_model("a2t")
    with pytest.raises(RobenchError, match="never attacks"):
        a2t.check_training(a2t.resolve_params({}), TrainConfig(epochs=1), None)
    a2t.check_training(a2t.resolve_params({}), TrainConfig(epochs=2), None)
    a2t.check_training(a2t.resolve_params({"a2t_clean_epochs": 0}), TrainConfig(epochs=1), None)
    for bad in ({"a2t_adv_fraction": 0}, {"a2t_synonym_source": "thesaurus"}, {"a2t_k": 0},
                {"a2t_sentence_encoder": "use-v9"}):
        with pytest.raises(RobenchError, match=next(iter(bad))):
            a2t.resolve_params(bad)


@pytest.mark.integration  # its swaps checked against the real lexicon (lists and WordNet)
def test_a2t_training_examples_pass_the_validity_audit(tiny_backbone, settings, a2t_resources):
    import numpy as np

    from robench.engine.audit import classify
    from robench.engine.resources.lexicon import lexicon
    from robench.engine.substitution import modification_limit
    from robench.models.a2t import WEIGHT, changed_words

    # the small table has few neighbours at the paper's k = 20, cos >= 0.8: widen them so that some attacks succeed
    model, objective = _a2t_objective(tiny_backbone, settings, a2t_adv_fraction=1.0, a2t_concurrency=16,
                                      a2t_alpha=2.0, a2t_k=50, a2t_min_cos=0.5)
    _fit(model, objective)
    features = objective.context.encode(objective.context.texts, objective.context.labels)
    assert objective.epoch_features(1, features) is None  # the clean epoch
    assert objective.epoch_report() == {}
    epoch = objective.epoch_features(2, features)
    report = objective.epoch_report()["a2t"]
    examples = epoch[len(features):]
    assert len(examples) == report["adversarial_examples"] > 0
    assert all(f[WEIGHT] == 1.0 for f in epoch[:len(features)]) and all(f[WEIGHT] == 2.0 for f in examples)
    assert report["examples_tried"] == len(features) == 96  # gamma = 1: every example was tried
    assert report["successful"] + report["failed"] + report["skipped"] + report["error"] == 96
    assert report["error"] == 0 and report["adversarial_examples"] == report["successful"]
    assert report["gradients"] > 0 and report["model_evaluations"] > 0 and report["queries"] > 0
    lex = lexicon(settings)
    for original, perturbed, label in report["examples"]:
        pairs = changed_words((original,), (perturbed,))
        assert 0 < len(pairs) <= modification_limit(len(original.split()), 0.1, 4)
        assert all(lex.is_synonym(a, b) and classify(lex, a, b) != "antonym" for a, b in pairs), pairs  # listed
        assert all(a2t_resources.synonyms.cos(a.lower(), b.lower()) >= 0.5 for a, b in pairs)
    audit = report["audit"]
    assert audit["counts"]["unlisted"] == audit["counts"]["antonym"] == 0 and audit["swaps"] > 0  # all listed
    assert max(np.asarray([e["queries"] for e in objective.generate(2)])) <= 200  # the training query budget
    # the weighted loss of an adversarial epoch's batch: mean(w_i * CE_i)
    from transformers import AutoTokenizer, DataCollatorWithPadding

    batch = DataCollatorWithPadding(AutoTokenizer.from_pretrained(tiny_backbone))(epoch[-4:])
    model.eval()
    loss = objective.step(dict(batch))
    with torch.no_grad():
        logits = model(**{k: v for k, v in batch.items() if k not in (WEIGHT, "labels")}).logits
        expected = (torch.nn.functional.cross_entropy(logits, batch["labels"], reduction="none") * 2.0).mean()
    assert torch.allclose(loss, expected, atol=1e-6)


@pytest.mark.integration  # its swaps checked against the real lexicon (lists and WordNet)
def test_a2t_with_textfoolers_search_at_textdefenders_budget(tiny_backbone, settings, a2t_resources):
    import math

    from robench.engine.audit import classify
    from robench.engine.resources.lexicon import lexicon
    from robench.engine.words import Words
    from robench.models.a2t import changed_words

    model, objective = _a2t_objective(tiny_backbone, settings, a2t_attack="textfooler", a2t_adv_fraction=1.0,
                                      a2t_k=50, a2t_min_cos=-1.0, a2t_max_rate=0.3, a2t_min_words=0,
                                      a2t_query_budget=1000, a2t_concurrency=16, a2t_audit=False)
    _fit(model, objective)
    objective.generate(2)
    report = objective.epoch_report()["a2t"]
    assert report["adversarial_examples"] > 0 and report["gradients"] == 0  # deletion ranking: no gradient
    lex = lexicon(settings)
    for original, perturbed, _ in report["examples"]:
        pairs = changed_words((original,), (perturbed,))
        assert 0 < len(pairs) <= math.ceil(0.3 * len(Words.of((original,)).words))
        assert all(lex.is_synonym(a, b) and classify(lex, a, b) != "antonym" for a, b in pairs)
    with pytest.raises(RobenchError, match="a2t_attack"):
        resolve_model("a2t").resolve_params({"a2t_attack": "pwws"})


def test_a2t_trains_end_to_end_and_records_its_attack(settings, tiny_backbone, a2t_random_resources):
    from conftest import tiny_spec

    import robench
    from robench.runs.spec import TrainConfig

    spec = tiny_spec(tiny_backbone, model="a2t", train=TrainConfig(epochs=2, batch_size=16, max_length=32, lr=1e-3),
                     model_params={"a2t_adv_fraction": 0.25, "a2t_audit": False})
    trained = robench.train(spec, settings, device="cpu")
    history = trained.record["history"]
    assert "a2t" not in history[0] and history[0]["examples"] == 96
    report = history[1]["a2t"]
    assert history[1]["examples"] == 96 + report["adversarial_examples"]
    assert report["wanted"] == 24 and report["adversarial_examples"] <= 24
    assert report["attack_seconds"] > 0 and report["queries_per_example"] > 0


# ---------------------------------------------------------------------------------------------------- safer

def _toy_table():
    """A synonym table of 8 words: one component of 4 (good-fine-nice-great, a chain), one of 2 (movie-film),
    bad-poor, and 'the' alone; vectors so that ranks are defined."""
    import numpy as np

    from robench.engine.resources.synonyms import SynonymTable

    words = ["good", "fine", "nice", "great", "movie", "film", "bad", "poor", "the"]
    links = {"good": ["fine"], "fine": ["good", "nice"], "nice": ["fine", "great"], "great": ["nice"],
             "movie": ["film"], "film": ["movie"], "bad": ["poor"], "poor": ["bad"]}
    index = {w: i for i, w in enumerate(words)}
    nn = np.full((len(words), 2), -1, dtype=np.int32)
    cos = np.full((len(words), 2), -np.inf, dtype=np.float32)
    for w, others in links.items():
        for r, o in enumerate(others):
            nn[index[w], r], cos[index[w], r] = index[o], 0.9 - 0.1 * r
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(len(words), 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    return SynonymTable(words, vectors, nn, cos, {"name": "toy", "key": "toy-1"})


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


# ---------------------------------------------------------------------------------------------------- ascc

def test_ascc_maps_synonyms_onto_single_tokens_and_its_inner_steps_find_a_worse_hull_point(tiny_backbone):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_backbone)
    model, objective = _model(tiny_backbone, "ascc", ascc_steps=4)
    objective.use_table(tokenizer, _toy_table())
    vocab = tokenizer.get_vocab()
    row = objective.candidates[vocab["good"]][objective.mask[vocab["good"]]].tolist()
    assert row == [vocab["good"], vocab["fine"]]
    assert objective.mask[vocab["the"], 0] and not objective.mask[vocab["the"], 1:].any()  # no synonyms: itself
    batch = _batch(tiny_backbone, ["a good movie", "a fine film", "good , nice and great", "bad"])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(15):  # a model whose prediction depends on the words (an untrained one is flat)
        model(**batch).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()  # no dropout: without synonyms the hull is the clean input and the KL term vanishes
    loss = objective.step(batch)
    inner = objective.last_inner_losses
    assert len(inner) == 4 and inner[-1] < inner[0]  # Adam lowers -KL + alpha * entropy
    with torch.no_grad():
        ce = torch.nn.functional.cross_entropy(model(**{k: v for k, v in batch.items() if k != "labels"}).logits,
                                               batch["labels"])
    assert float(loss) > float(ce)  # the adversarial hull point disagrees with the clean prediction
    bare_model, bare = _model(tiny_backbone, "ascc")
    bare_model.eval()
    with torch.no_grad():
        bare_ce = torch.nn.functional.cross_entropy(
            bare_model(**{k: v for k, v in batch.items() if k != "labels"}).logits, batch["labels"])
    assert torch.allclose(bare.step(batch), bare_ce, atol=1e-5)  # empty synonym sets: ASCC is cross-entropy
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)


def test_ascc_keeps_pieces_of_multi_piece_words_fixed(tiny_backbone):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_backbone)
    _, objective = _model(tiny_backbone, "ascc")
    objective.use_table(tokenizer, _toy_table())
    enc = tokenizer(["good goodish film"], return_tensors="pt")
    pieces = tokenizer.convert_ids_to_tokens(enc["input_ids"][0])
    assert pieces == ["[CLS]", "good", "good", "##ish", "film", "[SEP]"]
    _, allowed = objective._hull(enc["input_ids"], enc["attention_mask"])
    assert allowed[0, 1, 1] and allowed[0, 4, 1]  # the words "good" and "film" may move in their hulls
    assert not allowed[0, 2, 1:].any() and not allowed[0, 3, 1:].any()  # "good" of "goodish" and "##ish" may not


# ---------------------------------------------------------------------------------------------------- all four

def test_robench_list_shows_the_word_substitution_defences(capsys):
    from robench.cli import main

    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("pgd", "a2t", "safer", "ascc"):
        assert f"│ {name} " in out


@pytest.mark.parametrize("name, bad", [("pgd", {"adv_lr": -1}), ("a2t", {"a2t_max_rate": 1.5}),
                                       ("safer", {"safer_samples": 0}), ("safer", {"safer_cert_alpha": 1.0}),
                                       ("ascc", {"ascc_k": 0}), ("ascc", {"ascc_synonym_source": "thesaurus"})])
def test_bad_hyperparameters_are_clear_errors_before_training(settings, tiny_backbone, name, bad):
    from conftest import tiny_spec

    from robench.runs.resolve import resolve_run

    with pytest.raises(RobenchError, match=f"robench|{next(iter(bad))}") as info:
        resolve_run(tiny_spec(tiny_backbone, model=name, model_params=bad), settings)
    assert next(iter(bad)) in str(info.value)


def test_step_cost_bench_times_training_and_defended_inference_side_by_side(settings, tiny_backbone, monkeypatch,
                                                                           capsys):
    from robench.bench.defenses import DefensesOptions, step_cost
    from robench.models import ascc, safer

    table = _toy_table()
    monkeypatch.setattr(safer, "synonyms_of", lambda params, settings: table)
    monkeypatch.setattr(ascc, "synonyms_of", lambda params, settings: table)
    options = DefensesOptions(models=("bert", "pgd", "ascc", "safer"), backbone=str(tiny_backbone), batch_size=4,
                              max_length=32, params=("safer:safer_samples=8", "safer:safer_k=2"), device="cpu")
    out = step_cost(options, 1, settings, infer_sentences=2)
    steps, queries = out["seconds_per_step"], out["seconds_per_query"]
    assert set(steps) == set(queries) == {"bert", "pgd", "ascc", "safer"}
    assert all(0 < s < float("inf") for s in [*steps.values(), *queries.values()])
    passes, votes = out["passes_per_step"], out["passes_per_query"]
    assert passes["bert"] == 1 and passes["pgd"] == 6  # K = 5 ascent steps and the update: load-free, unlike seconds
    assert votes["bert"] == votes["pgd"] == 1 and votes["safer"] > 1  # up to 8 votes a query (repeats are cached)
    text = capsys.readouterr().out
    assert "s / query" in text and "safer" in text


def test_the_estimate_knows_a2ts_training_attack_and_safers_votes_and_certificate(settings, tiny_backbone,
                                                                                 monkeypatch):
    from conftest import tiny_spec

    from robench.models import a2t, safer
    from robench.runs.estimate import estimate
    from robench.runs.resolve import resolve_run
    from robench.runs.spec import TrainConfig

    table = _toy_table()
    monkeypatch.setattr(a2t, "synonyms_of", lambda params, settings: table)
    monkeypatch.setattr(safer, "synonyms_of", lambda params, settings: table)
    train = TrainConfig(epochs=2, batch_size=16, max_length=32, lr=1e-3)
    memo: dict = {}
    est = {}
    for model, params in (("bert", {}), ("a2t", {}), ("safer", {"safer_samples": 10, "safer_cert_samples": 50})):
        run = resolve_run(tiny_spec(tiny_backbone, model=model, attack="advglue", train=train, model_params=params),
                          settings)
        est[model] = (run, estimate(run, torch.device("cpu"), train_cached=False, persist=False, memo=memo))
    run, a2t_est = est["a2t"]
    assert run.defense.extra_cost(run.model_params, [10] * 96, 2, 148)["train"] > 0  # the training attack's queries
    # a2t trains on more examples in its adversarial epoch and attacks its model: both are in the estimate
    assert run.defense.epoch_sizes(run.model_params, 96, 2) == [96, 96 + 20]
    assert a2t_est.train_seconds > est["bert"][1].train_seconds
    run, safer_est = est["safer"]
    assert run.defense.extra_cost(run.model_params, [10], 2, 148) == {"attack": 148 * 50 / 10}
    assert safer_est.attack_seconds > est["bert"][1].attack_seconds  # 10 votes a query and the certificate


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
