"""The word-substitution defences of issue 27 (pgd, a2t, ascc; safer in test_safer.py) on the tiny backbone."""
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

    from robench.core import machine
    from robench.models import a2t, safer
    from robench.runs.estimate import estimate
    from robench.runs.resolve import resolve_run
    from robench.runs.spec import TrainConfig

    table = _toy_table()
    monkeypatch.setattr(a2t, "synonyms_of", lambda params, settings: table)
    monkeypatch.setattr(safer, "synonyms_of", lambda params, settings: table)
    monkeypatch.setattr(machine, "slowdown", lambda: 1.0)  # the fluency scoring's share, the same for all three
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


