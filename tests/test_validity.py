"""Valid adversarial examples (issue 25): the swap audit, the lexicon source, BERT-Attack's antonym filter, budgets."""
from __future__ import annotations

import math

import numpy as np
import pytest
from test_attacks import tiny_model  # noqa: F401, F811 - the tiny victim fixture, used as an argument

from robench.core.types import ExampleResult
from robench.engine.audit import audit, classify, swap_classes, swaps
from robench.engine.budgets import BUDGETS, max_changed_words
from robench.engine.resources.lexicon import Lexicon
from robench.engine.search import Importance, WordSwapSearch
from robench.engine.words import Words


class FakeWordNet:
    """WordNet's morphology for a handful of words (the audit's inflection class)."""

    BASES = {"loved": "love", "hated": "hate", "movies": "movie", "films": "film", "worse": "bad",
             "walked": "walk", "walks": "walk"}

    def _morphy(self, word: str, pos: str) -> list[str]:
        return [self.BASES[word]] if word in self.BASES and pos == "v" else []

    def synsets(self, word: str, pos: str | None = None) -> list:
        return []


def fake_lexicon() -> Lexicon:
    def rel(*pairs: tuple[str, str]) -> dict[str, frozenset[str]]:
        out: dict[str, set[str]] = {}
        for a, b in pairs:
            out.setdefault(a, set()).add(b)
            out.setdefault(b, set()).add(a)
        return {k: frozenset(v) for k, v in out.items()}

    return Lexicon({"alzantot": rel(("movie", "film")), "ppdb": rel(("terrible", "horrible"), ("movie", "movies")),
                    "wordnet": rel(("good", "bad"), ("funny", "amusing"))},  # good/bad: also an antonym below
                   rel(("good", "bad"), ("love", "hate")), rel(("awful", "good")), FakeWordNet(),
                   info={"name": "fake"})


def test_audit_classes_known_answers():
    lex = fake_lexicon()
    assert classify(lex, "movie", "film") == "synonym"  # Alzantot
    assert classify(lex, "Terrible", "horrible") == "synonym"  # PPDB, any case
    assert classify(lex, "funny", "amusing") == "synonym"  # WordNet
    assert classify(lex, "movies", "films") == "synonym"  # between lemmas
    assert classify(lex, "good", "bad") == "antonym"  # antonym wins over a synonym listing
    assert classify(lex, "worse", "good") == "antonym"  # any inflection ("worse" -> "bad")
    assert classify(lex, "loved", "hated") == "antonym"  # both inflected, either direction
    assert classify(lex, "hate", "love") == "antonym"
    assert classify(lex, "walked", "walks") == "inflection"
    assert classify(lex, "movie", "movies") == "inflection"  # a listed pair of one lemma is an inflection
    assert classify(lex, "delicious", "canned") == "unlisted"
    assert classify(lex, "awful", "good") == "unlisted"  # an indirect antonym is not a listed one for the audit
    assert lex.is_antonym("awful", "good", indirect=True)


def test_audit_rates_of_a_run():
    lex = fake_lexicon()

    def result(original: str, perturbed: str, status: str = "successful") -> ExampleResult:
        return ExampleResult(0, 1, original, perturbed, 1, 0, status)

    results = [result("a good movie", "a bad film"),  # antonym + synonym
               result("a funny movie", "an amusing movie"),  # funny->amusing synonym; "a"->"an" agrees, no swap
               result("loved it", "hated it", "failed"),  # not successful: not audited
               result("short", "a longer text")]  # not a word substitution
    out = audit(results, lex, source_lists=["alzantot"])
    assert out.examples == 2 and out.swaps == 3 and out.not_word_swaps == 1
    assert out.counts == {"synonym": 2, "antonym": 1, "inflection": 0, "unlisted": 0}
    assert out.rates["synonym"] == pytest.approx(2 / 3) and out.rates["antonym"] == pytest.approx(1 / 3)
    assert out.examples_with_antonym == 1 and out.antonym_example_rate == 0.5
    assert out.resource_rates["alzantot"] == pytest.approx(1 / 3)
    assert out.resource_rates["wordnet"] == pytest.approx(2 / 3)  # good/bad, funny/amusing
    assert out.independent_synonym_rate == pytest.approx(2 / 3)  # listed by ppdb or wordnet (not the source's)
    assert swaps("a funny movie", "an amusing movie") == [("funny", "amusing")]
    assert swaps("x [SEP] a b", "x [SEP] a c") == [("b", "c")]
    assert swap_classes(lex, "a good movie", "a bad film") == [("good", "bad", "antonym"), ("movie", "film",
                                                                                           "synonym")]
    empty = audit([], lex)
    assert empty.swaps == 0 and empty.rates["synonym"] is None


def _word_record(runs_dir, run_id: str, results: list[ExampleResult], validity: dict | None):
    from robench.core.records import RunRecord
    from robench.runs.store import RunStore

    metrics = {"examples": len(results)} | ({"validity": validity} if validity is not None else {})
    record = RunRecord(run_id=run_id, spec={"model": "bert"}, hyperparameters={}, resources={"attack": {}},
                       metrics=metrics, timings={}, checkpoint="ckpt")
    RunStore(runs_dir, run_id).finish(record, results)


def test_robench_audit_reaudits_older_records_only(settings, capsys):
    """A format-1 audit (synonym checked before inflection) is stale: the report shows no validity columns for it,
    and `robench audit` re-audits it from its CSV, rewriting the record with a manifest that verifies."""
    from robench.cli import main
    from robench.core.records import iter_records, read_record, record_path
    from robench.engine.audit import AUDIT_FORMAT
    from robench.report.validity import validity_columns, validity_facts
    from robench.runs.store import git_commit

    runs = settings.runs_dir
    runs.mkdir(parents=True)
    swap = [ExampleResult(0, 1, "the director is great", "the directors is great", 1, 0, "successful"),
            ExampleResult(1, 1, "a funny film", "a funny film", 1, 1, "failed")]
    old = {"examples": 1, "swaps": 1, "rates": {"synonym": 1.0, "antonym": 0.0, "inflection": 0.0, "unlisted": 0.0},
           "format": 1}
    _word_record(runs, "word", swap, old)
    _word_record(runs, "replay", swap, None)  # no audit (a replay attack): never touched
    replay_bytes = record_path(runs, "replay").read_bytes()
    assert validity_columns({"validity": old}) == {} and "robench audit" in validity_facts({"validity": old})[0][1]

    assert main(["audit", str(settings.results_dir), "--data-dir", str(settings.data_dir)]) == 0
    assert "re-audited 1 record(s)" in capsys.readouterr().out
    audit = read_record(record_path(runs, "word")).metrics["validity"]
    assert audit["format"] == AUDIT_FORMAT and audit["counts"]["inflection"] == 1 and audit["swaps"] == 1
    assert audit["reaudited"]["from_format"] == 1 and audit["reaudited"]["git_commit"] == git_commit()
    assert validity_columns({"validity": audit})["inflection_swap_rate"] == 1.0
    assert {r.run_id for r in iter_records(runs)} == {"word", "replay"}  # both verify against their manifests
    assert record_path(runs, "replay").read_bytes() == replay_bytes
    assert main(["audit", str(settings.results_dir), "--data-dir", str(settings.data_dir)]) == 0
    assert "re-audited 0 record(s)" in capsys.readouterr().out  # current audits are left alone
    assert main(["audit", str(settings.results_dir), str(settings.results_dir / "nowhere"),
                 "--data-dir", str(settings.data_dir)]) != 0
    assert "no runs directory" in capsys.readouterr().err


def test_max_modification_rate_is_never_exceeded():
    """A search whose every candidate lowers p(gold) a little would change every word; the rate caps it."""
    rng = np.random.default_rng(0)
    for rate in (0.1, 0.3, 0.5, 1.0):
        for n in (1, 3, 7, 10, 23):
            text = (" ".join(f"w{i}" for i in range(n)),)
            search = WordSwapSearch(lambda o: list(range(len(o.words))), Importance(lambda o, i: o.delete(i)),
                                    lambda cur, orig, i: [cur.replace(i, orig.words[i] + "x")], None,
                                    max_modification_rate=rate)
            gen = search(text, 0, np.array([0.99, 0.01]))
            request, p = next(gen), 0.99
            try:
                while True:
                    p -= 0.001  # every candidate lowers p(gold), never flips the label
                    answer = np.array([[p, 1 - p]] * len(request.items)) + rng.uniform(0, 1e-6, (1, 2))
                    request = gen.send(answer)
            except StopIteration as stop:
                outcome = stop.value
            cap = max_changed_words(rate, n)
            changed = Words.of(outcome.text).diff(Words.of(text))
            assert changed == (n if cap is None else min(cap, n)) == outcome.words_perturbed
            assert cap is None or changed <= math.ceil(rate * n)


def test_budget_settings_in_one_place():
    from robench.attacks.bert_attack import BertAttackParams
    from robench.attacks.gradient_swap import GradientSwapParams
    from robench.attacks.textfooler import TextFoolerParams

    td = TextFoolerParams()
    assert (td.budget, td.k, td.max_modification_rate, td.queries_per_word) == ("textdefender", 50, 0.3, 50)
    assert td.similarity_threshold == pytest.approx(0.840845057) and td.window == 15 and td.min_cos == -1.0
    mo = TextFoolerParams(budget="morris2020")
    assert (mo.min_cos, mo.similarity_metric, mo.similarity_threshold, mo.skip_shorter_than_window) == \
        (0.9, "cosine", 0.98, False)
    assert mo.queries_per_word is None and mo.max_modification_rate == 1.0
    paper = TextFoolerParams(budget="paper")
    assert (paper.k, paper.min_cos, paper.queries_per_word) == (50, 0.5, None)
    assert TextFoolerParams(budget="morris2020", k=20).k == 20  # an explicit value wins
    assert GradientSwapParams().budget == "textdefender" and GradientSwapParams().max_modification_rate == 0.3
    ba = BertAttackParams()
    assert (ba.k, ba.max_modification_rate, ba.window, ba.filter_antonyms) == (50, 0.3, 15, True)
    assert (BertAttackParams(budget="paper").k, BertAttackParams(budget="paper").window) == (48, 0)
    assert set(BUDGETS) == {"textdefender", "morris2020", "natural", "paper"}
    na = TextFoolerParams(budget="natural")  # Morris et al.'s thresholds, plus the natural filters
    assert (na.min_cos, na.similarity_threshold, na.window, na.max_modification_rate) == (0.9, 0.98, 15, 1.0)
    assert BUDGETS["natural"].natural_filters and not any(BUDGETS[n].natural_filters for n in BUDGETS if n != "natural")
    with pytest.raises(ValueError, match="budget must be one of"):
        TextFoolerParams(budget="loose")
    from robench.attacks.common import check_threshold

    for params in (td, mo, na, paper, ba, BertAttackParams(budget="morris2020"), BertAttackParams(budget="paper")):
        check_threshold(params)  # every setting's sentence threshold maps to MiniLM


def test_query_budget_is_k_times_words():
    from robench.engine.scheduler import EngineConfig

    config = EngineConfig(query_budget=None, queries_per_word=50)
    assert config.budget_for(("one two three",)) == 150
    assert EngineConfig(query_budget=100, queries_per_word=50).budget_for(("one two three",)) == 100
    assert EngineConfig().budget_for(("x",)) is None


def _tried_swaps(search, text: tuple[str, ...], table: list[list[str]]) -> set[str]:
    """Every replacement word a BERT-Attack search queries, given its MLM candidate table (never flips); the
    importance queries (a word replaced by [MASK]) are not swaps."""
    words, seen = Words.of(text).words, set()
    gen = search(text, 1, np.array([0.1, 0.9]))
    next(gen)
    answer: object = [table]
    try:
        while True:
            request = gen.send(answer)
            if request.kind == "predict":
                for t in (t for t in request.items if "[MASK]" not in " ".join(t)):
                    seen.update(w for w, o in zip(Words.of(t).words, words) if w != o)
                answer = np.array([[0.2, 0.8]] * len(request.items))  # never flips: every candidate is tried
            else:
                answer = np.ones((len(request.items), 4)) / 2
    except StopIteration:
        pass
    return seen


# an MLM table that proposes listed antonyms (direct, inflected, indirect) beside synonyms and unrelated words
BA_TEXT = ("the movie is good and the acting is better",)
BA_TABLE = [[], ["film", "movies", "book"], [], ["bad", "worse", "awful", "decent", "fine", "purple"], ["or", "but"],
            [], ["performing"], [], ["worse", "improved"]]


@pytest.mark.integration  # the real lexicon: its relations built from the lists and WordNet
def test_bert_attack_never_proposes_a_listed_antonym(settings):
    from robench.attacks.bert_attack import BertAttackParams, BertAttackResources, compose
    from robench.engine.resources.lexicon import lexicon

    lex = lexicon(settings)
    params = BertAttackParams(budget="paper", concurrency=1, valid_synonyms=False)  # the paper's MLM candidates
    res = BertAttackResources(frozenset({"a", "the", "is"}), None, _IdentityEncoder(), lex)
    words = Words.of(BA_TEXT).words
    assert len(BA_TABLE) == len(words)
    tried = _tried_swaps(compose(params, res), BA_TEXT, BA_TABLE)
    assert {"film", "movies", "book", "decent", "fine", "purple", "improved"} <= tried
    assert not tried & {"bad", "worse", "awful"}
    assert not any(lex.is_antonym(o, w) for o in words for w in tried if o in ("good", "better"))


@pytest.mark.integration  # the real lexicon: its relations built from the lists and WordNet
def test_bert_attack_keeps_only_valid_synonyms(settings, small_lexicon):
    """The default: an MLM candidate is swapped in only if it is one of the word's listed synonyms, in the
    word's part of speech in context (TextFooler's test); the unrelated MLM words never reach the victim."""
    from robench.attacks.bert_attack import BertAttackParams, BertAttackResources, compose
    from robench.engine import resources
    from robench.engine.constraints import WordNetPos
    from robench.engine.resources.lexicon import lexicon

    lex = lexicon(settings)
    params = BertAttackParams(concurrency=1)
    assert params.valid_synonyms
    res = BertAttackResources(frozenset({"a", "the", "is"}), None, _IdentityEncoder(), lex, small_lexicon,
                              resources.pos_tagger(settings), WordNetPos(lex.wordnet))
    tried = _tried_swaps(compose(params, res), BA_TEXT, BA_TABLE)
    words = Words.of(BA_TEXT).words
    listed = {w for o in words for w, _ in small_lexicon.neighbours(o.lower(), k=params.k, min_cos=-1)}
    assert tried and tried <= listed
    assert "film" in tried and not tried & {"book", "purple", "or", "but", "bad", "worse", "awful"}


class _IdentityEncoder:
    info = {"name": "identity"}

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.ones((len(texts), 4)) / 2

    def threshold_for(self, paper_threshold: float, metric: str) -> float:
        return paper_threshold


@pytest.fixture(scope="module")
def small_lexicon(tiny_data, tmp_path_factory):
    """The default source built over the 4,000 most frequent GloVe words (the real build, smaller)."""
    from robench.core.paths import resolve_settings
    from robench.engine.resources.lexicon_table import build_lexicon_table

    root = tmp_path_factory.mktemp("lexicon")
    small = resolve_settings(tiny_data, root / "cache", root / "results")
    return build_lexicon_table(small, vocab_size=4000)


@pytest.mark.integration  # the real lexicon table (GloVe, a smaller build) and its relations
@pytest.mark.parametrize("wordnet_pos", [False, True])
def test_lazy_similarity_gives_the_straightforward_result_with_the_lexicon_source(small_lexicon, tiny_model,  # noqa: F811
                                                                                   settings, wordnet_pos):
    """The lazy-versus-eager equivalence (tests/test_attacks.py) with the default source's real candidates, with
    and without the part-of-speech-in-context check."""
    from test_attacks import FakeEncoder, FakeTagger, make_ctx, new_victim

    from robench.attacks.textfooler import RECIPE, TextFoolerParams, TextFoolerResources
    from robench.engine.constraints import WordNetPos
    from robench.engine.resources.lexicon import lexicon

    senses = WordNetPos(lexicon(settings).wordnet) if wordnet_pos else None

    def run(lazy: bool, threshold: float = 0.85):
        res = TextFoolerResources(frozenset({"a", "the", "and", "of", "it", "s", "is", "to"}), FakeTagger(),
                                  small_lexicon, FakeEncoder(), senses)
        params = TextFoolerParams(window=5, skip_shorter_than_window=False, similarity_threshold=threshold,
                                  lazy_similarity=lazy, concurrency=8)
        ctx = make_ctx(settings, new_victim(tiny_model), 32, labels_from=new_victim(tiny_model))
        return [(r.status, r.perturbed_text, r.words_perturbed) for r in RECIPE.attack_with(ctx, params, res)], res

    lazy, lazy_res = run(True)
    eager, eager_res = run(False)
    assert lazy == eager
    assert lazy != run(True, 0.0)[0]  # the similarity constraint changed some choices
    assert sum(s == "successful" for s, *_ in lazy) >= 3
    assert lazy_res.encoder.calls < eager_res.encoder.calls


@pytest.mark.integration  # the real lexicon: its relations built from the lists and WordNet
def test_no_default_candidate_is_a_listed_antonym(small_lexicon, settings):
    """Property test over every word of a (small) lexicon build: no candidate is a listed antonym, in any
    inflection, either direction (WordNet's indirect antonyms included), and every candidate is a listed synonym."""
    from robench.engine.resources.lexicon import lexicon

    table = small_lexicon
    lex = lexicon(settings)
    pairs = [(w, c) for w in table.words for c, _ in table.neighbours(w, k=50, min_cos=-1.0)]
    assert len(pairs) > 5000 and "film" in [c for c, _ in table.neighbours("movie")]
    assert not [p for p in pairs if lex.is_antonym(*p, indirect=True)]
    assert all(lex.is_synonym(w, c) for w, c in pairs)


@pytest.mark.integration  # the real lexicon: its relations built from the lists and WordNet
def test_wordnet_pos_known_answers(settings):
    """A candidate needs a WordNet sense in the word's part of speech in context; other tags get none."""
    from robench.engine.constraints import WordNetPos
    from robench.engine.resources.lexicon import lexicon

    senses = WordNetPos(lexicon(settings).wordnet)
    assert not senses("VERB", "dearth")  # "the movie lacks wit" -> "the movie dearth wit"
    assert senses("VERB", "misses") and senses("NOUN", "movie") and senses("ADJ", "awful")
    assert senses("ADJ", "fetching")  # a satellite adjective counts as an adjective
    assert not senses("ADJ", "appease") and not senses("ADJ", "updates")
    assert not senses("ADP", "fond") and not senses("DET", "the")  # "entertainments like it" is no content word
    assert senses("NOUN", "qwzxv")  # WordNet does not know it: the check says nothing


@pytest.mark.integration  # the real lexicon: its relations built from the lists and WordNet
def test_pos_check_rejects_a_candidate_outside_the_words_part_of_speech(settings):
    from robench.engine.constraints import ContextTags, PartOfSpeech, Swap, WordNetPartOfSpeech, WordNetPos
    from robench.engine.resources.lexicon import lexicon

    class Tagger:  # "lacks" is a verb here, and so is any word in its place (the paper's check would pass)
        def tag(self, words: list[str]) -> list[str]:
            return ["VERB" if w in ("lacks", "dearth", "misses") else "NOUN" for w in words]

    original = Words.of(("the movie lacks wit",))
    tags = ContextTags(Tagger())
    plain, senses = PartOfSpeech(tags, True), WordNetPartOfSpeech(tags, WordNetPos(lexicon(settings).wordnet))
    dearth, misses = Swap(2, "dearth"), Swap(2, "misses")
    assert plain.allows(original, dearth) and not senses.allows(original, dearth)
    assert plain.allows(original, misses) and senses.allows(original, misses)


class FakeContext:
    """Scores a replacement by a hash of the word: some fall under any threshold, none depends on the text."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, str]] = []

    def scores(self, words, i, replacements):
        self.asked += [(i, r) for r in replacements]
        return np.array([(sum(map(ord, r)) % 10) / 10 for r in replacements])


def test_min_context_cos_drops_every_candidate_below_it(tiny_model, settings):  # noqa: F811
    from test_attacks import fake_textfooler_resources, make_ctx, new_victim

    from robench.attacks.textfooler import RECIPE, TextFoolerParams

    def run(threshold):
        res = fake_textfooler_resources()
        res.context = FakeContext()
        params = TextFoolerParams(window=5, skip_shorter_than_window=False, concurrency=8,
                                  min_context_cos=threshold)
        ctx = make_ctx(settings, new_victim(tiny_model), 32, labels_from=new_victim(tiny_model))
        return RECIPE.attack_with(ctx, params, res), res.context

    off, unused = run(None)
    strict, scorer = run(0.5)
    assert not unused.asked and scorer.asked
    changed = [new for r in strict for _, new in (swaps(r.original_text, r.perturbed_text) or [])]
    assert changed and all((sum(map(ord, w.lower())) % 10) / 10 >= 0.5 for w in changed)
    assert [r.perturbed_text for r in off] != [r.perturbed_text for r in strict]


@pytest.mark.integration
def test_context_similarity_tells_a_sense_error_from_a_synonym(settings):
    """The real packaged MiniLM: in "a witty script", "screenplay" stays closer to "script" than "hand" does,
    and a word against itself scores 1."""
    from robench.engine.resources.context import context_similarity

    scorer = context_similarity(settings, "cpu")
    words = "a devilishly witty script by heather mcgowan".split()
    same, screenplay, hand = scorer.scores(words, 3, ["script", "screenplay", "hand"])
    assert same == pytest.approx(1.0, abs=1e-4) and screenplay > hand
    assert scorer.info["name"] == "minilm-context-similarity"
