"""Synonym-substitution candidates and A2T's gradient word ranking, for searches that run outside `attacks/`.

A defence that attacks its own model while it trains (`a2t`, Yoo and Qi 2021) may not import the recipes in
`attacks/` (the layering test), so the parts of a word-substitution attack it shares with them live here, in
the engine:

* `modification_limit`: TextAttack's `MaxModificationRate` (max(ceil(rate * words), min_threshold) words);
* `synonym_candidates`: the substitutions of word i: the synonym table's `k` best neighbours with cosine >=
  `min_cos`, cased like the word, one word, POS-matched (`robench.engine.constraints.PartOfSpeech`), none once
  the text has as many changed words as the modification limit allows (TextAttack checks the limit before each
  transformation, as here);
* `GradientRanking`: A2T's word importance (TextAttack's `GreedyWordSwapWIR(wir_method="gradient")`): the L1 norm
  of the loss gradient w.r.t. each word's input embeddings, computed once on the original text, highest
  first; candidates keep the table's order and are all queried. The gradient travels the engine's "predict"
  path as a `GradQuery` (`robench.engine.gradients.GradientVictim`), so it is batched across examples and
  charged to the example's query counter (2 queries).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Generator

import numpy as np

from robench.engine.constraints import ContextTags, PartOfSpeech, Swap
from robench.engine.gradients import GradQuery
from robench.engine.scheduler import Request
from robench.engine.search import Importance
from robench.engine.words import Words, is_one_word, recover_case


def modification_limit(words: int, max_rate: float, min_threshold: int) -> int:
    """TextAttack's MaxModificationRate: at most max(ceil(words * max_rate), min_threshold) changed words."""
    return max(math.ceil(words * max_rate), min_threshold)


def synonym_candidates(table: Any, tagger: Any, k: int, min_cos: float, allow_verb_noun_swap: bool,
                       max_rate: float | None = None, min_threshold: int = 0
                       ) -> Callable[[Words, Words, int], list[Words]]:
    """`WordSwapSearch.candidates` over `table.neighbours(word, k, min_cos)` (see the module docstring);
    `max_rate` None: no modification limit."""
    pos = PartOfSpeech(ContextTags(tagger), allow_verb_noun_swap)

    def candidates(current: Words, original: Words, i: int) -> list[Words]:
        if max_rate is not None and current.diff(original) >= modification_limit(len(original.words), max_rate,
                                                                                 min_threshold):
            return []
        word, out = current.words[i], []
        for neighbour, _ in table.neighbours(word.lower(), k=k, min_cos=min_cos):
            new = recover_case(neighbour, word)
            if new != word and is_one_word(new) and pos.allows(original, Swap(i, new)):
                out.append(current.replace(i, new))
        return out

    return candidates


class GradientRanking(Importance):
    """A2T's gradient word importance: L1 norm of each word's loss gradient on the original text, highest first
    (ties in text order); candidates in their own order, every one queried; no re-ranking after a swap."""

    def __init__(self) -> None:
        super().__init__(importance_text=lambda words, i: words)

    def rank(self, original: Words, indices: list[int], label: int) -> Generator[Request, Any, list[int]]:
        (answer,) = yield Request("predict", [GradQuery(original.text, label)])
        grads = np.asarray(answer.grads)
        if not np.all(np.isfinite(grads)):
            raise FloatingPointError("the input gradient is not finite")
        importance = np.abs(grads[indices]).sum(axis=1)
        return [indices[r] for r in np.argsort(-importance, kind="stable")]
