"""Greedy word-substitution search in word-importance order (TextAttack's `GreedyWordSwapWIR`).

What the word-substitution recipes (`textfooler`, `bert-attack`) share, as
searches for `robench.engine.scheduler`:

* `similarities`: the sentence-encoder constraint (`robench.engine.constraints.Similarity`),
  answered through "embed" requests, which `CachedEmbedder` serves;
* `UntargetedClassification` (`goal_scores`), `select_eager`: TextAttack's untargeted goal and greedy choice;
* `select_lazy`: the same choice, asking the encoder only where it matters;
* `Importance`: the word-importance strategy (leave-one-out by default);
* `WordSwapSearch`: the greedy word-importance-ranked search itself.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Sequence

import numpy as np

from robench.classifier.victim import QueryBudgetExceeded, Text
from robench.engine.attack import Profile
from robench.engine.budgets import max_changed_words
from robench.engine.constraints import Similarity
from robench.engine.fluency import Fluency, fluency_checks
from robench.engine.scheduler import Outcome, Request, Search
from robench.engine.words import Words

NO_THRESHOLD = float(np.finfo(np.float64).min)  # the similarity bar without an encoder: every real value clears it


class CachedEmbedder:
    """A `Service` over a sentence encoder: `embed` in batches, each distinct text once. `profile` (the
    attack's) hears how many texts and batches went to the encoder."""

    def __init__(self, encoder: Any, batch_size: int = 128, profile: Profile | None = None) -> None:
        self.encoder, self.batch_size = encoder, batch_size
        self.profile = profile or Profile()
        self.calls = 0  # texts actually encoded
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start:start + self.batch_size]
            self.calls += len(chunk)
            self.profile.count("encoded texts", len(chunk))
            self.profile.count("encoder calls", 1)
            for text, vec in zip(chunk, np.asarray(self.encoder.embed(chunk), dtype=np.float32)):
                self._cache[text] = vec
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 0), np.float32)


def similarities(sim: Similarity | None, pairs: Sequence[tuple[str, str] | None]
                 ) -> Generator[Request, Any, np.ndarray]:
    """Similarity of each pair (1.0 for None); one "embed" request for all texts needed."""
    out = np.ones(len(pairs), dtype=np.float64)
    texts = list(dict.fromkeys(t for p in pairs if p is not None for t in p))
    if sim is None or not texts:
        return out
    vecs = yield Request("embed", texts)
    row = {t: v for t, v in zip(texts, vecs)}
    for j, p in enumerate(pairs):
        if p is not None:
            out[j] = sim.score(row[p[0]], row[p[1]])
    return out


def goal_scores(probs: np.ndarray, label: int) -> np.ndarray:
    """TextAttack's untargeted-classification score: 1 - p(gold)."""
    return 1.0 - probs[:, label]


class UntargetedClassification:
    """The goal of every word-level recipe (TextAttack's UntargetedClassification): lower p(gold), score 1 - p(gold);
    reached when the prediction leaves the gold label."""

    @staticmethod
    def scores(probs: np.ndarray, label: int) -> np.ndarray:
        return goal_scores(probs, label)

    @staticmethod
    def reached(probs: np.ndarray, label: int) -> np.ndarray:
        return probs.argmax(axis=-1) != label


def select_eager(scores: np.ndarray, succeeded: np.ndarray, sims: np.ndarray, current: float) -> int | None:
    """GreedyWordSwapWIR's choice among candidates that passed every constraint.

    Sort by score (stable); take the best if it beats `current`; if it flips the
    label, take instead the most similar of the leading run of label-flipping
    candidates (first one on ties).
    """
    if len(scores) == 0:
        return None
    order = np.argsort(-scores, kind="stable")
    if scores[order[0]] <= current:
        return None
    if not succeeded[order[0]]:
        return int(order[0])
    chosen, best = int(order[0]), -np.inf
    for j in order:
        if not succeeded[j]:
            break
        if sims[j] > best:
            chosen, best = int(j), sims[j]
    return chosen


def select_lazy(scores: np.ndarray, succeeded: np.ndarray, threshold: float, current: float
                ) -> Generator[list[int], Sequence[float], int | None]:
    """The same choice as `select_eager` over {j : sim_j >= threshold}, asking only for needed sims.

    Candidates are visited in score order; the generator yields the indices whose
    similarity it needs and receives them. It stops as soon as the choice is
    settled: at the first passing candidate that does not flip the label, once the
    next score cannot beat `current`, or when no label-flipping candidate is left.
    First it asks for 1, 2, 4, ... candidates at a time (usually the first passes),
    then, once it holds a label flip, for the rest of the flipping run at once.
    """
    order = [int(j) for j in np.argsort(-scores, kind="stable")]
    flips = [r for r, j in enumerate(order) if succeeded[j]]
    last_flip = flips[-1] if flips else -1
    sims: dict[int, float] = {}
    chosen, best, chunk = None, -np.inf, 1
    for rank, j in enumerate(order):
        if chosen is None and scores[j] <= current:
            return None
        if chosen is not None and rank > last_flip:
            return chosen
        if j not in sims:
            if chosen is None:
                want, chunk = order[rank:rank + chunk], chunk * 2
            else:
                want = order[rank:last_flip + 1]
            want = [w for w in want if w not in sims]
            sims.update(zip(want, (yield want)))
        if sims[j] < threshold:
            continue
        if chosen is None:
            chosen, best = j, sims[j]
            if not succeeded[j]:
                return j
        elif not succeeded[j]:
            return chosen
        elif sims[j] > best:
            chosen, best = j, sims[j]
    return chosen


class Importance:
    """How `WordSwapSearch` orders the words to change, and the candidates of each: a strategy.

    The default is TextAttack's leave-one-out ranking ("delete"/"unk" WIR): 1 - p(gold) of the text with the word
    deleted or masked (`importance_text`), highest first, ties in text order; candidates in their own order.
    A white-box attack overrides all three hooks (`robench.attacks.gradient_swap`). Each hook that needs the model
    is a generator of `Request`s, like the search itself.
    """

    def __init__(self, importance_text: Callable[[Words, int], Words]) -> None:
        self.importance_text = importance_text

    def rank(self, original: Words, indices: list[int], label: int) -> Generator[Request, Any, list[int]]:
        deleted = yield Request("predict", [self.importance_text(original, i).text for i in indices])
        return [indices[r] for r in np.argsort(-goal_scores(deleted, label), kind="stable")]

    def order(self, options: list[Words], current: Words, i: int) -> list[Words]:
        """The candidates of word `i` to try, in order (all of them, by default)."""
        return options

    def accepted(self, current: Words, label: int) -> Generator[Request, Any, None]:
        """Told after each accepted swap (while the label has not flipped)."""
        return
        yield  # a generator


@dataclass
class WordSwapSearch:
    """Greedy word substitution in word-importance order (TextAttack's GreedyWordSwapWIR).

    `indices(original)`: the words that may change (stopwords excluded); `importance` ranks them (see
    `Importance`). `candidates(current, original, i)`: the substitutions for word i that pass every cheap
    constraint. `similarity`: the sentence-encoder constraint, checked last; `lazy` evaluates it only where the
    choice depends on it (the victim then also scores candidates the encoder would reject; the chosen texts
    are identical, see `select_lazy`). `max_modification_rate`: at most ceil(rate x words) words may differ
    from the original (TextAttack's MaxWordsPerturbed(max_percent)); the search stops when that many have changed.
    `checks(current, original, options)`: the deferred constraints (`Constraint.deferred`: the sense filter, the
    grammar check), and `fluency`: the language model's constraint (`robench.engine.fluency.Fluency`), asked after
    the encoder and, like it, only where the choice depends on it (a candidate they reject counts as below the
    similarity threshold).
    `goal`: the score to raise and when the attack has succeeded. A recipe declares these parts as a
    `robench.engine.recipe.Composition`, which builds this search per example.
    """

    indices: Callable[[Words], list[int]]
    importance: Importance
    candidates: Callable[[Words, Words, int], list[Words]]
    similarity: Similarity | None
    lazy: bool = True
    max_modification_rate: float | None = None
    goal: UntargetedClassification = field(default_factory=UntargetedClassification)
    fluency: Fluency | None = None
    checks: Callable[[Words, Words, list[Words]], list[bool]] | None = None  # the deferred constraints

    def __call__(self, text: Text, label: int, clean: np.ndarray) -> Search:
        original = current = Words.of(text)
        probs = clean
        score = float(self.goal.scores(clean[None], label)[0])
        limit = max_changed_words(self.max_modification_rate, len(original.words))
        try:
            indices = self.indices(original) if limit != 0 else []
            ranked = (yield from self.importance.rank(original, indices, label)) if indices else []
            for i in ranked:
                if limit is not None and current.diff(original) >= limit:
                    break
                options = self.importance.order(self.candidates(current, original, i), current, i)
                if not options:
                    continue
                pick = yield from self._pick(options, current, original, i, label, score)
                if pick is None:
                    continue
                current, probs = pick
                score = float(self.goal.scores(probs[None], label)[0])
                if self.goal.reached(probs, label):
                    break
                yield from self.importance.accepted(current, label)
        except QueryBudgetExceeded as exc:
            return Outcome(current.text, probs, current.diff(original), str(exc))
        return Outcome(current.text, probs, current.diff(original))

    @property
    def threshold(self) -> float:
        """The similarity a candidate must reach (-inf, a rejection by a later constraint, never does)."""
        return self.similarity.threshold if self.similarity else NO_THRESHOLD

    def _checked(self, current: Words, original: Words, options: list[Words], i: int
                 ) -> Generator[Request, Any, np.ndarray]:
        """The similarity of each option (a swap at word i of `current`), -inf where a later constraint rejects it:
        the sentence encoder, then `_final`'s deferred checks and language model."""
        pairs = [self.similarity.pair(current, original, o, i) if self.similarity else None for o in options]
        sims = yield from similarities(self.similarity, pairs)
        return (yield from self._final(current, original, options, sims, self.threshold))

    def _pick(self, options: list[Words], current: Words, original: Words, i: int, label: int,
              score: float) -> Generator[Request, Any, tuple[Words, np.ndarray] | None]:
        threshold = self.threshold
        if self.lazy:
            probs = yield Request("predict", [o.text for o in options])
            scores, flips = self.goal.scores(probs, label), self.goal.reached(probs, label)
            select = select_lazy(scores, flips, threshold, score)
            try:
                want = next(select)
                while True:
                    want = select.send((yield from self._checked(current, original, [options[j] for j in want], i)))
            except StopIteration as stop:
                choice = stop.value
            return None if choice is None else (options[choice], probs[choice])
        sims = yield from self._checked(current, original, options, i)
        keep = [j for j in range(len(options)) if sims[j] >= threshold]
        if not keep:
            return None
        probs = yield Request("predict", [options[j].text for j in keep])
        choice = select_eager(self.goal.scores(probs, label), self.goal.reached(probs, label), sims[keep], score)
        return None if choice is None else (options[keep[choice]], probs[choice])

    def _final(self, current: Words, original: Words, options: list[Words], sims: np.ndarray, threshold: float
               ) -> Generator[Request, Any, np.ndarray]:
        """`sims` with -inf where a deferred constraint, then the fluency constraint, rejects a candidate the
        encoder passed (each is asked only about the candidates still standing)."""
        sims = np.array(sims, dtype=np.float64)
        ask = [j for j in range(len(options)) if sims[j] >= threshold]
        if self.checks is not None and ask:
            passed = self.checks(current, original, [options[j] for j in ask])
            sims[[j for j, ok in zip(ask, passed) if not ok]] = -np.inf
            ask = [j for j, ok in zip(ask, passed) if ok]
        if self.fluency is not None and ask:
            passed = yield from fluency_checks(self.fluency, original.field_text,
                                               [options[j].field_text for j in ask], current.field_text)
            sims[[j for j, ok in zip(ask, passed) if not ok]] = -np.inf
        return sims
