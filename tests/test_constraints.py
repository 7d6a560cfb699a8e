"""The constraint objects and the recipe declaration (robench.engine.constraints, robench.engine.recipe), on fakes.

The recipes built from them are checked against the straightforward search and TextAttack in test_attacks.py,
test_validity.py and test_textattack_backend.py; here each part on its own.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from robench.engine.attack import AttackOutput, Profile
from robench.engine.constraints import (
    ContextSimilarity,
    ListedSynonym,
    MaxWordsPerturbed,
    NotAntonym,
    RepeatModification,
    Similarity,
    Stopwords,
    Swap,
    WordCosine,
)
from robench.engine.recipe import Composition, Greedy, SynonymSwap, Transformation, WordSwapRecipe
from robench.engine.scheduler import Request
from robench.engine.search import Importance
from robench.engine.words import Words

TEXT = Words.of(("The film is Good and the plot is warm",))


def test_index_constraints():
    stop = Stopwords(frozenset({"the", "is", "and"}))
    assert [i for i in range(len(TEXT.words)) if stop.modifiable(TEXT, TEXT, i)] == [1, 3, 6, 8]  # any case
    changed = TEXT.replace(1, "movie")
    assert not RepeatModification().modifiable(changed, TEXT, 1) and RepeatModification().modifiable(changed, TEXT, 3)
    cap = MaxWordsPerturbed(0.25)  # ceil(0.25 x 9) = 3 words
    three = changed.replace(3, "fine").replace(6, "story")
    assert cap.modifiable(changed.replace(3, "fine"), TEXT, 8) and not cap.modifiable(three, TEXT, 8)
    assert MaxWordsPerturbed(None).modifiable(three, TEXT, 8) and MaxWordsPerturbed(1.0).modifiable(three, TEXT, 8)


class Space:
    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def cos(self, a: str, b: str) -> float | None:
        self.asked.append((a, b))
        return {("film", "movie"): 0.8, ("film", "picture"): 0.4}.get((a, b))


def test_word_cosine_takes_the_transformations_cosine_else_the_space():
    space = Space()
    bound = WordCosine(0.5, space)
    assert bound.allows(TEXT, Swap(1, "movie", cos=0.6)) and not bound.allows(TEXT, Swap(1, "movie", cos=0.4))
    assert not space.asked  # the transformation's own cosine is used
    assert bound.allows(TEXT, Swap(1, "Movie")) and not bound.allows(TEXT, Swap(1, "picture"))
    assert not bound.allows(TEXT, Swap(1, "qwzxv"))  # a pair the space does not know fails
    assert not WordCosine(0.5).allows(TEXT, Swap(1, "movie"))  # no cosine at all: fails


def test_antonyms_and_listed_synonyms():
    class Lexicon:
        def is_antonym(self, a: str, b: str, indirect: bool) -> bool:
            return indirect and {a, b} == {"good", "bad"}

    antonyms = NotAntonym(Lexicon())
    assert not antonyms.allows(TEXT, Swap(3, "Bad")) and antonyms.allows(TEXT, Swap(3, "fine"))

    class Table:
        calls = 0

        def neighbours(self, word: str, k: int, min_cos: float) -> list[tuple[str, float]]:
            Table.calls += 1
            return [("movie", 0.9), ("picture", 0.7), ("flick", 0.5)][:k]

    listed = ListedSynonym(Table(), k=2, min_cos=0.0)
    assert [listed.allows(TEXT, Swap(1, w)) for w in ("Movie", "picture", "flick")] == [True, True, False]
    assert Table.calls == 1  # each word's list is read once


def test_context_similarity_scores_a_words_candidates_in_one_batch():
    class Scorer:
        def __init__(self) -> None:
            self.calls: list[tuple[int, list[str]]] = []

        def scores(self, words, i, replacements):
            self.calls.append((i, list(replacements)))
            return np.array([0.9, 0.2, 0.6])

    scorer, profile = Scorer(), Profile()
    check = ContextSimilarity(scorer, 0.5, profile)
    assert check.filter(TEXT, TEXT, []) == [] and not scorer.calls
    kept = check.filter(TEXT, TEXT, [Swap(1, "movie"), Swap(1, "picture"), Swap(1, "flick")])
    assert [s.word for s in kept] == ["movie", "flick"] and scorer.calls == [(1, ["movie", "picture", "flick"])]
    assert "context similarity" in profile.seconds


def test_synonym_swap_cases_and_drops_what_is_no_swap():
    class Table:
        def neighbours(self, word, k, min_cos):
            return [("good", 1.0), ("fine", 0.9), ("well-made", 0.8), ("so so", 0.7), ("nice", 0.6)][:k]

    swaps = SynonymSwap(Table(), k=4).swaps(TEXT, TEXT, 3)
    assert swaps == [Swap(3, "Fine", 0.9), Swap(3, "Well-made", 0.8)]  # not the word, one word each, cased


class Fixed(Transformation):
    """Every word may become "X<i>" or "Y<i>"; asks the engine once per example, like a masked LM."""

    def start(self, original):
        (answer,) = yield Request("table", [original.field_text])
        return lambda current, original, i: [Swap(i, f"{p}{i}{answer}") for p in ("X", "Y")]


def _run(composition: Composition, text: tuple[str, ...]) -> tuple[list[str], object]:
    """Drive a composition's search on `text` (never flipping the label, every swap raising the score a little);
    return the candidate texts the victim was asked about (importance queries left out) and the outcome."""
    gen, tried, p = composition(text, 0, np.array([0.9, 0.1])), [], 0.9
    request = next(gen)
    try:
        while True:
            if request.kind == "table":
                request = gen.send(["q"])
                continue
            if request.kind == "embed":
                request = gen.send(np.ones((len(request.items), 4)) / 2)
                continue
            p -= 0.01
            tried += [t[-1] for t in request.items if "Z" not in t[-1]]
            request = gen.send(np.array([[p, 1 - p]] * len(request.items)))
    except StopIteration as stop:
        return tried, stop.value


def test_a_composition_is_the_search_its_parts_declare():
    text = ("a b c d e f g h",)
    composition = Composition(
        transformation=Fixed(),
        constraints=[Stopwords(frozenset({"b"})), RepeatModification(), MaxWordsPerturbed(0.25), None],
        search=Greedy(lambda: Importance(lambda words, i: words.replace(i, "Z"))))
    tried, outcome = _run(composition, text)
    swapped = {w for t in tried for w in Words.of((t,)).words if w[0] in "XY"}
    assert swapped and all(w[1] != "1" for w in swapped)  # the stopword "b" (word 1) is never tried
    assert all(w.endswith("q") for w in swapped)  # the transformation's table, asked once per example
    assert outcome.words_perturbed == 2  # ceil(0.25 x 8): then no word may change
    with pytest.raises(ValueError, match="at most one sentence-encoder"):
        sim = Similarity(0.5, "cosine", None, True)
        Composition(Fixed(), [sim, sim], Greedy(lambda: Importance(lambda w, i: w))).similarity


def test_a_word_swap_recipe_runs_itself_and_a_copy_runs_the_copy(monkeypatch):
    @dataclasses.dataclass
    class Resources:
        name: str
        encoder: object = None

    ran = []

    def recipe(name):
        return WordSwapRecipe(name=name, summary="", params=object,
                              load_resources=lambda params, settings, device: Resources(name),
                              describe=lambda params, res: {"loaded": res.name},
                              compose=lambda params, res, profile, victim: None)

    first = recipe("first")
    monkeypatch.setattr(WordSwapRecipe, "attack_with", lambda self, ctx, params, res: ran.append(res.name) or [])
    ctx = type("Ctx", (), {"settings": None, "victim": type("V", (), {"device": "cpu"})()})()
    assert first.attack(ctx, None) == AttackOutput([], {"loaded": "first"}) and first.word_swaps
    copy = dataclasses.replace(first, name="copy", load_resources=lambda params, settings, device: Resources("copy"))
    assert copy.attack(ctx, None).resources == {"loaded": "copy"} and ran == ["first", "copy"]
    spied = dataclasses.replace(first, attack=lambda ctx, params: "spy")
    assert spied.attack(ctx, None) == "spy"


def test_the_sense_scorer_scores_each_swap_once():
    """A population search asks about the same swaps each generation: the contextual cosine of a (window, word,
    replacement) is computed once, in the order asked."""
    from robench.engine.resources.context import ContextSimilarity

    asked = []

    class Counting(ContextSimilarity):
        def _score(self, window, at, replacements):
            asked.append((tuple(window), at, list(replacements)))
            return np.array([0.1 * len(r) for r in replacements], dtype=np.float32)

    scorer = Counting(None, None, "cpu", {}, context=1)
    first = scorer.scores("a b c d".split(), 1, ["xx", "y"])
    again = scorer.scores("a b c d".split(), 1, ["y", "zzz", "xx", "y"])
    other = scorer.scores("a q c d".split(), 2, ["y"])  # another window: scored anew
    assert asked == [(("a", "b", "c"), 1, ["xx", "y"]), (("a", "b", "c"), 1, ["zzz"]), (("q", "c", "d"), 1, ["y"])]
    assert np.allclose(first, [0.2, 0.1]) and np.allclose(again, [0.1, 0.3, 0.2, 0.1]) and np.allclose(other, [0.1])
