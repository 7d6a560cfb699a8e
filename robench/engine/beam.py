"""Beam search in word-importance order: the greedy search's stronger sibling (issue 57, item 5).

`BeamWordSwapSearch` keeps the `width` best texts instead of one. At each word, in the order of the
leave-one-out importance (`robench.engine.search.Importance`), every kept text is extended by each candidate of
that word; the victim scores all extensions in one request; the kept texts for the next word are the `width`
highest goal scores among the texts kept so far and the extensions that pass every constraint. It stops at the
first word where a passing extension changes the label (the most similar such extension wins, as in the greedy
choice), when every kept text has changed as many words as the budget allows, or at the end of the words.

Paper: the beam search of Yoo, Morris, Lifland and Qi, "Searching for a Search Method: Benchmarking Search
Algorithms for Generating NLP Adversarial Examples" (BlackboxNLP 2020; TextAttack's `BeamSearch`), who found
beam widths of 4-8 to find more adversarial examples than the greedy word-importance search under the same
constraints, at a multiple of its queries. Deviations from TextAttack's `BeamSearch`:

* words are visited in the leave-one-out importance order, one word per step, as the greedy search does
  (TextAttack's beam extends every word of every beam at each step, a query cost of words x candidates x width
  per step); so width 1 makes `WordSwapSearch`'s choice (a test checks the two agree on two-class goals), and a
  width w costs at most w times its victim queries;
* a kept text may also stay unchanged at a word (it competes with its own extensions by goal score);
* constraints are asked lazily, in score order, as the greedy search does: the sentence encoder, then the
  deferred checks, then the language model, only until `width` extensions pass (and for every label-changing
  one).

Only the leave-one-out importance: a strategy that re-ranks after each accepted swap (gradient-swap's) has no
one current text to re-rank on.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generator

import numpy as np

from robench.classifier.victim import QueryBudgetExceeded, Text
from robench.engine.budgets import max_changed_words
from robench.engine.scheduler import Outcome, Request, Search
from robench.engine.search import WordSwapSearch
from robench.engine.words import Words


@dataclass
class Kept:
    """One text of the beam: its words, the victim's probabilities and its goal score."""

    words: Words
    probs: np.ndarray
    score: float


@dataclass
class BeamWordSwapSearch(WordSwapSearch):
    """`WordSwapSearch` keeping the `width` best texts (see the module docstring)."""

    width: int = 4

    def __call__(self, text: Text, label: int, clean: np.ndarray) -> Search:
        original = Words.of(text)
        beam = [Kept(original, clean, float(self.goal.scores(clean[None], label)[0]))]
        limit = max_changed_words(self.max_modification_rate, len(original.words))
        try:
            indices = self.indices(original) if limit != 0 else []
            ranked = (yield from self.importance.rank(original, indices, label)) if indices else []
            for i in ranked:
                open_ = [k for k in beam if limit is None or k.words.diff(original) < limit]
                if not open_:
                    break
                extensions = [(k, o) for k in open_ for o in self.importance.order(
                    self.candidates(k.words, original, i), k.words, i)]
                if not extensions:
                    continue
                probs = yield Request("predict", [o.text for _, o in extensions])
                beam, won = yield from self._step(beam, extensions, probs, original, i, label)
                if won is not None:
                    return Outcome(won.words.text, won.probs, won.words.diff(original))
        except QueryBudgetExceeded as exc:
            best = max(beam, key=lambda k: k.score)
            return Outcome(best.words.text, best.probs, best.words.diff(original), str(exc))
        best = max(beam, key=lambda k: k.score)
        return Outcome(best.words.text, best.probs, best.words.diff(original))

    def _step(self, beam: list[Kept], extensions: list[tuple[Kept, Words]], probs: np.ndarray, original: Words,
              i: int, label: int) -> Generator[Request, Any, tuple[list[Kept], Kept | None]]:
        """The next beam, or the label-changing extension that ends the search."""
        scores, flips = self.goal.scores(probs, label), self.goal.reached(probs, label)
        order = [int(j) for j in np.argsort(-scores, kind="stable")]
        floor = sorted((k.score for k in beam), reverse=True)[self.width - 1] if len(beam) >= self.width else -np.inf
        flipping = [j for j in order if flips[j]]
        sims = yield from self._passing(extensions, flipping, original, i)
        passed = [j for j in flipping if sims[j] >= self.threshold]
        if passed:
            j = max(passed, key=lambda j: sims[j])  # the most similar label change (first on ties)
            return beam, Kept(extensions[j][1], probs[j], float(scores[j]))
        kept: list[int] = []
        rest = [j for j in order if not flips[j] and scores[j] > floor]
        chunk = self.width
        while rest and len(kept) < self.width:
            ask, rest = rest[:chunk], rest[chunk:]
            sims = yield from self._passing(extensions, ask, original, i)
            kept += [j for j in ask if sims[j] >= self.threshold][: self.width - len(kept)]
            chunk *= 2
        pool = beam + [Kept(extensions[j][1], probs[j], float(scores[j])) for j in kept]
        best_of = {k.words.words: k for k in sorted(pool, key=lambda k: k.score)}  # each text once, at its best
        return sorted(best_of.values(), key=lambda k: -k.score)[: self.width], None

    def _passing(self, extensions: list[tuple[Kept, Words]], ask: list[int], original: Words, i: int
                 ) -> Generator[Request, Any, dict[int, float]]:
        """The similarity of each asked extension, -inf where a later constraint rejects it (per parent text)."""
        out: dict[int, float] = {}
        by_parent: dict[int, list[int]] = {}
        for j in ask:
            by_parent.setdefault(id(extensions[j][0]), []).append(j)
        for group in by_parent.values():
            parent = extensions[group[0]][0].words
            sims = yield from self._checked(parent, original, [extensions[j][1] for j in group], i)
            out.update(zip(group, (float(s) for s in sims)))
        return out
