"""studies/natural_filters.py: the per-check table of the `natural` setting on written swaps, with fakes."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from study_scripts import load_study

from robench.engine.constraints import ContextSimilarity, Similarity, Swap, WordCosine
from robench.engine.natural import FixedPhrases, GrammarCheck, Inflection
from robench.engine.words import Words

REPO = Path(__file__).resolve().parents[1]
TEXT = "the film falls short of a great ending ."
TAGS = ["DT", "NN", "VBZ", "JJ", "IN", "DT", "JJ", "NN", "."]


def natural_filters():
    return load_study("natural_filters")


@dataclass(frozen=True)
class Lint:
    lint_kind: str


class FakeLinter:
    def lint(self, text: str) -> list[Lint]:
        return [Lint("Agreement")] if "a excellent" in text else []


class FakeSpace:
    COS = {("film", "movie"): 0.95, ("short", "brief"): 0.95, ("great", "excellent"): 0.92, ("ending", "finish"): 0.5}

    def cos(self, a: str, b: str) -> float | None:
        return self.COS.get((a, b))


class FakeScorer:
    def scores(self, words, i, replacements):
        return [0.5 if word == "brief" else 0.9 for word in replacements]


def fake_embed(texts: list[str]) -> np.ndarray:
    return np.array([[0.0, 1.0] if "finish" in text else [1.0, 0.0] for text in texts])


def fake_checks(study) -> list:
    fixed = FixedPhrases(frozenset({("fall", "short")}), frozenset(), lambda w: {"fall"} if w == "falls" else set())
    return [("fixed phrases", study.index_check(fixed)),
            ("word cosine", study.filter_check(WordCosine(0.9, FakeSpace()))),
            ("inflection", study.filter_check(Inflection(lambda words: TAGS))),
            ("sense", study.filter_check(ContextSimilarity(FakeScorer(), 0.7))),
            ("grammar", study.filter_check(GrammarCheck(FakeLinter()))),
            ("sentence encoder", study.similarity_check(Similarity(0.98, "cosine", 15, against_original=False),
                                                        fake_embed))]


def test_the_table_counts_each_check_alone_cumulatively_and_per_example():
    study = natural_filters()
    original = Words.of((TEXT,))
    film, short, great, ending = (Swap(1, "movie"), Swap(3, "brief"), Swap(6, "excellent"), Swap(7, "finish"))
    examples = [study.Example("textfooler", "a", original, (film,)),
                study.Example("textfooler", "b", original, (short, great, ending))]
    table = study.attack_table(examples, fake_checks(study))
    assert (table.examples, table.swaps) == (2, 4)
    # "brief": a fixed phrase and the wrong sense; "finish": low word cosine and sentence similarity;
    # "excellent" alone makes "a excellent" (a grammar lint); inflection passes it as "an excellent"
    assert table.rejected_alone == {"fixed phrases": 0.25, "word cosine": 0.25, "inflection": 0.0, "sense": 0.25,
                                    "grammar": 0.25, "sentence encoder": 0.25}
    assert table.changed_alone["inflection"] == 0.25 and table.changed_alone["grammar"] == 0.0
    assert table.surviving == {"fixed phrases": 0.75, "word cosine": 0.5, "inflection": 0.5, "sense": 0.5,
                               "grammar": 0.5, "sentence encoder": 0.5}
    assert table.examples_all_pass == 0.5
    assert table.rejected_samples["fixed phrases"] == ["short -> brief"]


def test_word_swaps_skip_the_agreeing_article_and_draw_takes_whole_examples():
    study = natural_filters()
    original = Words.of(("a great film , a good cast",))
    assert study.word_swaps(original, Words.of(("an excellent film , a fine cast",))) == (Swap(1, "excellent"),
                                                                                          Swap(4, "fine"))
    assert study.word_swaps(original, Words.of(("a great film",))) is None
    examples = [study.Example("x", str(k), original, (Swap(1, "w"),) * (k + 1)) for k in range(4)]
    drawn = study.draw(examples, 3)
    assert sum(len(e.swaps) for e in drawn) >= 3 and len({e.key for e in drawn}) == len(drawn)
    assert len(study.draw(examples, 100)) == 4


if __name__ == "__main__":
    pytest.main([__file__])
