"""Victim, attack engine, textfooler and bert-attack: unit tests on the tiny fixtures.

Resources are small deterministic fakes with the interface of `robench.engine.resources`
(except the end-to-end test, which uses the real ones), so every test checks
robench's own logic quickly.
"""
from __future__ import annotations

import dataclasses
import itertools
import zlib

import numpy as np
import pytest
import torch
from conftest import tiny_spec

import robench
from robench.classifier.victim import QueryBudgetExceeded, QueryCounter, Victim
from robench.core.types import ExampleResult
from robench.data import TASKS
from robench.data.loading import load_split
from robench.engine.attack import AttackContext
from robench.engine.scheduler import EngineConfig, Request, attack_examples
from robench.engine.search import select_eager, select_lazy
from robench.engine.words import Words, split_words
from robench.runs.store import RunStore

VOCAB = ("good bad film movie story great dull funny plot actor scene heart smart bland warm cold fresh stale "
         "bright dark charming tedious clever silly moving flat rich thin solid weak brave timid lively slow "
         "sharp vague tender harsh gentle rough bold dim clear murky").split()


def _seed(word: str) -> int:
    return zlib.crc32(word.encode())


class FakeSynonyms:
    info = {"name": "fake synonyms"}

    def neighbours(self, word: str, k: int = 50, min_cos: float = 0.5) -> list[tuple[str, float]]:
        rng = np.random.default_rng(_seed(word))
        picks = [VOCAB[j] for j in rng.permutation(len(VOCAB))[:14] if VOCAB[j] != word]
        return [(w, c) for w, c in zip(picks, np.linspace(0.95, 0.4, len(picks))) if c >= min_cos][:k]


class FakeTagger:
    info = {"name": "fake tagger"}

    def tag(self, words: list[str]) -> list[str]:
        return [("NOUN", "VERB", "ADJ", "NOUN", "ADJ")[_seed(w) % 5] for w in words]


class FakeEncoder:
    """Bag of per-word random vectors: similarity falls as different words come in."""

    info = {"name": "fake encoder"}

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls += len(texts)
        rows = []
        for text in texts:
            vec = sum(np.random.default_rng(_seed(w)).normal(size=16) for w in split_words(text)) + 1e-3
            rows.append(vec / np.linalg.norm(vec))
        return np.stack(rows)

    def threshold_for(self, paper_threshold: float, metric: str) -> float:
        return paper_threshold


def fake_textfooler_resources():
    from robench.attacks.textfooler import TextFoolerResources

    return TextFoolerResources(frozenset({"a", "the", "and", "of", "it", "s", "is", "to"}), FakeTagger(),
                               FakeSynonyms(), FakeEncoder())


class BowClassifier(torch.nn.Module):
    """A tiny victim that reacts to every word: mean of random per-token logits."""

    def __init__(self, vocab_size: int) -> None:
        super().__init__()
        self.config = type("Config", (), {"num_labels": 2})()
        self.emb = torch.nn.Embedding(vocab_size, 2)
        torch.nn.init.normal_(self.emb.weight, std=3.0)

    def forward(self, input_ids, attention_mask, **_):
        mask = attention_mask.unsqueeze(-1).float()
        logits = (self.emb(input_ids) * mask).sum(1) / mask.sum(1)
        return type("Output", (), {"logits": logits})()


@pytest.fixture(scope="module")
def tiny_model(tiny_backbone):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_backbone)
    torch.manual_seed(1)
    return BowClassifier(tokenizer.vocab_size), tokenizer


def new_victim(tiny_model, **kwargs) -> Victim:
    return Victim(*tiny_model, torch.device("cpu"), max_length=64, **kwargs)


def make_ctx(settings, victim: Victim, n: int, *, labels_from: Victim | None = None, done=None, record=None,
             task: str = "sst2") -> AttackContext:
    """A context over the first `n` tiny eval rows; `labels_from` relabels them with its predictions (no skips)."""
    spec = tiny_spec("unused", task=task, eval_size=n)
    t = TASKS.get(task)
    split = load_split(t, "eval", settings.data_dir, "local")
    data = split.select(range(n))
    if labels_from is not None:
        from robench.data.loading import texts_of

        preds = [int(p) for p in labels_from.predict(texts_of(data, t))]
        data = data.remove_columns("label").add_column("label", preds)
    out: list[ExampleResult] = []
    return AttackContext(spec, t, victim, settings, data, 0.0, done or {}, record or out.append, split=split)


# --- victim ------------------------------------------------------------------------

def test_victim_caches_and_counts_queries_per_example(tiny_model):
    victim = new_victim(tiny_model)
    a, b = QueryCounter(), QueryCounter()
    first = victim.predict_proba([("a fine film",), ("a dull film",)], a)
    again = victim.predict_proba([("a dull film",), ("a fine film",)], b)
    assert np.array_equal(first, again[::-1])
    assert victim.forward_calls == 1 and victim.model_evaluations == 2  # the second request came from the cache
    assert (a.queries, b.queries) == (2, 2)  # every asked text is a query of its example (TextAttack's count)
    assert victim.predict_proba([]).shape == (0, 2)


def test_victim_enforces_the_query_budget(tiny_model):
    victim = new_victim(tiny_model)
    counter = QueryCounter(budget=3)
    victim.predict_proba([("one",), ("two",)], counter)
    with pytest.raises(QueryBudgetExceeded, match="budget of 3"):
        victim.predict_proba([("three",), ("four",)], counter)
    assert counter.queries == 2 and victim.model_evaluations == 2  # the refused request was not evaluated
    ok, refused = victim.predict_many([([("three",)], counter), ([("five",), ("six",)], QueryCounter(budget=1))])
    assert ok.shape == (1, 2) and isinstance(refused, QueryBudgetExceeded) and counter.queries == 3


def test_victim_pads_each_length_bucket_to_its_longest_input(tiny_model):
    victim = new_victim(tiny_model, batch_size=2)
    widths = []
    forward = victim.model.forward
    victim.model.forward = lambda **enc: widths.append(enc["input_ids"].shape[1]) or forward(**enc)
    victim.predict([("x " * 30,), ("y",), ("x " * 29,), ("z z",)])
    assert widths == [4, 32]  # sorted by length: (y, z z) then the two long ones


# --- engine ------------------------------------------------------------------------

def _three_rounds(text, label, clean):
    for step in range(3):
        probs = yield Request("predict", [(f"{text[0]} {step}",), (f"{text[0]} x{step}",)])
    from robench.engine.scheduler import Outcome

    return Outcome(text, probs[0], 0)


def test_engine_batches_model_calls_across_examples(tiny_model, settings):
    labeller = new_victim(tiny_model)
    victim = new_victim(tiny_model, batch_overhead=10**9)  # batches cut by count only: one per round here
    ctx = make_ctx(settings, victim, 8, labels_from=labeller)
    results = attack_examples(ctx, _three_rounds, {}, EngineConfig(concurrency=8))
    assert [r.status for r in results].count("skipped") == 0
    assert all(r.queries == 7 for r in results)  # clean prediction + 3 requests of 2
    assert victim.forward_calls == 4  # 1 round of clean predictions + 3 rounds, each shared by all 8 examples

    sequential = new_victim(tiny_model, batch_overhead=10**9)
    attack_examples(make_ctx(settings, sequential, 8, labels_from=labeller), _three_rounds, {},
                    EngineConfig(concurrency=1))
    assert sequential.forward_calls == 32

    padded = new_victim(tiny_model)  # the default: a round may be cut where padding costs more than a batch
    attack_examples(make_ctx(settings, padded, 8, labels_from=labeller), _three_rounds, {},
                    EngineConfig(concurrency=8))
    assert 4 <= padded.forward_calls < 32 and padded.model_evaluations == victim.model_evaluations


def test_an_example_without_a_clean_prediction_is_an_error_not_a_robust_one(tiny_model, settings):
    """A victim that refuses even the clean prediction of an example (its budget spent): the example was never
    predicted, so it must not count as clean-correct and robust (it was "failed" before, which the metrics read as
    exactly that)."""
    from robench.engine.metrics import textattack_metrics

    victim = new_victim(tiny_model)
    refused_text = make_ctx(settings, victim, 4).eval_data["sentence"][2]
    answer = victim.predict_many

    def refusing(requests):
        out = answer([r for r in requests if refused_text not in r[0][0]])
        return [QueryBudgetExceeded(0, 1, 0) if refused_text in r[0][0] else out.pop(0) for r in requests]

    victim.predict_many = refusing
    ctx = make_ctx(settings, victim, 4, labels_from=new_victim(tiny_model))
    results = attack_examples(ctx, _three_rounds, {}, EngineConfig(concurrency=4))
    unpredicted = results[2]
    assert unpredicted.status == "error" and "no clean prediction: query budget of 0" in unpredicted.error
    assert unpredicted.original_prediction == -1
    metrics = textattack_metrics(results)
    assert (metrics.examples, metrics.errors, metrics.failed + metrics.successful + metrics.skipped) == (3, 1, 3)


def test_engine_records_errors_and_goes_on(tiny_model, settings):
    labeller = new_victim(tiny_model)

    def search(text, label, clean):
        if "broken" in text[0]:
            raise ValueError("no candidates for this one")
        vec = yield Request("embed", [text[0]])
        from robench.engine.scheduler import Outcome

        return Outcome(text, clean, int(vec[0]))

    def embed(items):
        if any("poison" in t for t in items):
            raise RuntimeError("encoder choked")
        return [len(t) for t in items]

    ctx = make_ctx(settings, new_victim(tiny_model), 6, labels_from=labeller)
    data = ctx.eval_data.to_dict()
    data["sentence"][1] += " broken"
    data["sentence"][4] += " poison"
    import datasets

    ctx = dataclasses.replace(ctx, eval_data=datasets.Dataset.from_dict(data))
    labels = [int(p) for p in labeller.predict([(s,) for s in data["sentence"]])]
    ctx = dataclasses.replace(ctx, eval_data=ctx.eval_data.remove_columns("label").add_column("label", labels))
    recorded: list[ExampleResult] = []
    ctx = dataclasses.replace(ctx, record=recorded.append)
    results = attack_examples(ctx, search, {"embed": embed}, EngineConfig(concurrency=6))
    status = {r.index: r for r in results}
    assert status[1].status == "error" and "ValueError: no candidates" in status[1].error
    assert status[4].status == "error" and "encoder choked" in status[4].error
    assert all(status[i].status == "failed" and status[i].words_perturbed > 0 for i in (0, 2, 3, 5))
    assert sorted(r.index for r in recorded) == list(range(6))  # every example persisted as it finished


def test_engine_turns_an_exhausted_budget_into_a_failed_attack(tiny_model, settings):
    from robench.attacks.textfooler import RECIPE, TextFoolerParams

    victim = new_victim(tiny_model)
    ctx = make_ctx(settings, victim, 6, labels_from=new_victim(tiny_model))
    results = RECIPE.attack_with(ctx, TextFoolerParams(query_budget=6, window=5, skip_shorter_than_window=False),
                          fake_textfooler_resources())
    assert all(r.queries <= 6 for r in results)
    budgeted = [r for r in results if "query budget of 6 exhausted" in r.error]
    assert budgeted and all(r.status == "failed" for r in budgeted)


def test_textfooler_resumes_to_the_same_results(tiny_model, settings, tmp_path):
    from robench.attacks.textfooler import RECIPE, TextFoolerParams

    params = TextFoolerParams(window=5, skip_shorter_than_window=False, similarity_threshold=0.8, concurrency=4)
    full = RECIPE.attack_with(make_ctx(settings, new_victim(tiny_model), 16), params, fake_textfooler_resources())

    store = RunStore(tmp_path, "resume")

    def interrupted(result: ExampleResult) -> None:
        store.append(result)
        if len(store.load_partial()) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        RECIPE.attack_with(make_ctx(settings, new_victim(tiny_model), 16, record=interrupted), params,
                    fake_textfooler_resources())
    done = store.load_partial()
    assert len(done) == 5
    rest = RECIPE.attack_with(make_ctx(settings, new_victim(tiny_model), 16, done=done, record=store.append), params,
                       fake_textfooler_resources())
    assert len(rest) == 11 and not set(done) & {r.index for r in rest}
    resumed = sorted([*done.values(), *rest], key=lambda r: r.index)
    assert [dataclasses.asdict(r) for r in resumed] == [dataclasses.asdict(r) for r in full]
    one_at_a_time = RECIPE.attack_with(make_ctx(settings, new_victim(tiny_model), 16),
                                dataclasses.replace(params, concurrency=1), fake_textfooler_resources())
    assert [dataclasses.asdict(r) for r in one_at_a_time] == [dataclasses.asdict(r) for r in full]
    assert {r.status for r in full} >= {"successful", "skipped"}


# --- lazy similarity == straightforward ---------------------------------------------

def test_select_lazy_matches_select_eager_on_random_instances():
    rng = np.random.default_rng(0)
    saved = 0
    for trial in range(3000):
        n, classes = int(rng.integers(1, 12)), int(rng.choice([2, 3, 4]))
        probs = rng.dirichlet(np.ones(classes), size=n)
        if trial % 3 == 0:  # ties in scores and similarities
            probs = np.round(probs, 1) + 1e-9
        label, threshold = int(rng.integers(classes)), float(rng.uniform(0.2, 0.9))
        scores, flips = 1 - probs[:, label], probs.argmax(axis=1) != label
        sims = np.round(rng.uniform(0, 1, n), 1 if trial % 2 else 6)
        current = float(rng.uniform(0, 0.8))
        keep = [j for j in range(n) if sims[j] >= threshold]
        eager = select_eager(scores[keep], flips[keep], sims[keep], current)
        expected = None if eager is None else keep[eager]
        lazy, asked = select_lazy(scores, flips, threshold, current), []
        try:
            want = next(lazy)
            while True:
                asked += want
                want = lazy.send([sims[j] for j in want])
        except StopIteration as stop:
            assert stop.value == expected, trial
        assert len(asked) == len(set(asked)) <= n
        saved += n - len(asked)
    assert saved > 0


def test_textfooler_lazy_similarity_gives_the_straightforward_result(tiny_model, settings):
    from robench.attacks.textfooler import RECIPE, TextFoolerParams

    def run(**kw):
        res = fake_textfooler_resources()
        params = TextFoolerParams(window=5, skip_shorter_than_window=False, concurrency=8, **kw)
        ctx = make_ctx(settings, new_victim(tiny_model), 32, labels_from=new_victim(tiny_model))
        results = RECIPE.attack_with(ctx, params, res)
        return [(r.status, r.perturbed_text, r.perturbed_prediction, r.words_perturbed) for r in results], res

    lazy, lazy_res = run(similarity_threshold=0.85, lazy_similarity=True)
    eager, eager_res = run(similarity_threshold=0.85, lazy_similarity=False)
    unconstrained, _ = run(similarity_threshold=0.0)  # an angular similarity is never below 0
    assert lazy == eager
    assert lazy != unconstrained  # the similarity constraint did change some choices
    statuses = [s for s, *_ in lazy]
    assert statuses.count("successful") >= 10 and statuses.count("failed") >= 5
    assert lazy_res.encoder.calls < eager_res.encoder.calls


# --- bert-attack ----------------------------------------------------------------------

def test_top_combinations_is_exact_and_never_enumerates_the_product():
    from robench.attacks.bert_attack import top_combinations

    rng = np.random.default_rng(0)
    logp = -np.sort(rng.uniform(0, 5, size=(3, 6)), axis=1)
    ids = rng.integers(0, 1000, size=(3, 6))
    brute = sorted(((tuple(int(ids[p][j]) for p, j in enumerate(c)), sum(logp[p][j] for p, j in enumerate(c)))
                    for c in itertools.product(range(6), repeat=3)), key=lambda x: -x[1])[:10]
    beam = top_combinations(logp, ids, 10)
    assert [c for c, _ in beam] == [c for c, _ in brute]
    assert np.allclose([s for _, s in beam], [s for _, s in brute])

    long = top_combinations(-np.sort(rng.uniform(0, 5, size=(12, 48)), axis=1), rng.integers(0, 9, (12, 48)), 48)
    assert len(long) == 48  # 48**12 combinations, answered from a beam of 48


def test_bert_attack_runs_with_a_tiny_masked_lm(tiny_backbone, tiny_model, settings):
    from transformers import AutoTokenizer, BertForMaskedLM

    from robench.attacks.bert_attack import RECIPE, BertAttackParams, BertAttackResources, MlmCandidates

    torch.manual_seed(0)
    mlm = type("MLM", (), {"model": BertForMaskedLM.from_pretrained(tiny_backbone),
                           "tokenizer": AutoTokenizer.from_pretrained(tiny_backbone),
                           "info": {"name": "tiny random MLM", "heldout_masked_token_accuracy": 0.0}})()
    stop = frozenset({"a", "the", "and", "of", "it", "s", "is"})
    params = BertAttackParams(k=8, concurrency=8, valid_synonyms=False)  # the MLM's candidates, unfiltered
    table = MlmCandidates(mlm, params, stop)(["an unbelievably charming and hyperkinetic film"])[0]
    assert len(table) == 6 and all(0 < len(c) <= 8 for c in table)
    assert all(split_words(w) == [w] and w not in stop and not w.startswith("##") for c in table for w in c)

    ctx = make_ctx(settings, new_victim(tiny_model), 8)
    results = RECIPE.attack_with(ctx, params, BertAttackResources(stop, mlm, FakeEncoder()))
    assert len(results) == 8 and not [r for r in results if r.status == "error"]
    for r in results:
        if r.status == "successful":
            assert r.words_perturbed <= np.ceil(0.4 * len(Words.of((r.original_text,)).words))


# --- resources: loaded once, described with the results ----------------------------------

def test_recipes_return_the_description_of_the_resources_they_loaded(tiny_model, settings, monkeypatch):
    """`attack` loads its resources once and returns their description with the results: nothing is reloaded."""
    import robench.attacks.textfooler as textfooler
    from robench.engine.attack import ATTACKS

    loaded = []
    monkeypatch.setattr(textfooler.RECIPE, "load_resources",
                        lambda params, settings, device: loaded.append(device) or fake_textfooler_resources())
    params = textfooler.TextFoolerParams(window=5, skip_shorter_than_window=False)
    output = ATTACKS.get("textfooler").attack(make_ctx(settings, new_victim(tiny_model), 4), params)
    assert len(output.results) == 4 and loaded == [torch.device("cpu")]
    assert output.resources == textfooler.describe(params, fake_textfooler_resources())
    assert output.resources["synonyms"] == {"name": "fake synonyms"}
    assert output.resources["sentence_encoder"]["threshold"] == pytest.approx(textfooler.USE_THRESHOLD)


# --- end to end with the real resources -----------------------------------------------

@pytest.mark.integration
def test_textfooler_end_to_end_with_real_resources(settings, tiny_backbone):
    spec = tiny_spec(tiny_backbone, attack="textfooler", eval_size=6,
                     attack_params={"synonym_source": "neighbors", "concurrency": 6})
    record = robench.run(spec, settings, device="cpu")
    assert record.metrics["examples"] == 6 and record.metrics["errors"] == 0
    used = record.resources["attack"]
    assert {"synonyms", "sentence_encoder", "pos_tagger", "stopwords"} <= set(used)
    assert used["sentence_encoder"]["paper_threshold"] == pytest.approx(0.840845057)
    audit = record.metrics["validity"]  # every word-level record carries the swap audit
    assert audit["source_lists"] == ["alzantot"] and set(audit["rates"]) == {"synonym", "antonym", "inflection",
                                                                             "unlisted"}
    assert audit["examples"] == record.metrics["successful"] and audit["counts"]["antonym"] == 0
    assert record.hyperparameters["attack"]["budget"] == "textdefender"


def test_bad_attack_settings_fail_before_training(settings, tiny_backbone):
    for params, message in (({"similarity_threshold": 0.123}, "no MiniLM calibration"),
                            ({"synonym_source": "wordnet"}, "synonym_source must be one of"),
                            ({"k": 0}, "must be positive")):
        with pytest.raises(robench.RobenchError, match=message):
            robench.run(tiny_spec(tiny_backbone, attack="textfooler", attack_params=params), settings, device="cpu")
    with pytest.raises(robench.RobenchError, match="max_modification_rate"):
        robench.run(tiny_spec(tiny_backbone, attack="bert-attack", attack_params={"max_modification_rate": 2}),
                    settings, device="cpu")
    with pytest.raises(robench.RobenchError, match="budget must be one of"):
        robench.run(tiny_spec(tiny_backbone, attack="textfooler", attack_params={"budget": "loose"}), settings,
                    device="cpu")
    assert not settings.checkpoints_dir.exists()
