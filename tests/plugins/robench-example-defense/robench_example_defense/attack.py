"""`example-typo`: adjacent-character swaps as a third-party robench attack recipe.

Pruthi, Dhingra and Lipton, "Combating Adversarial Misspellings with Robust
Word Recognition", ACL 2019: swap two adjacent inner characters of a word
(first and last letters kept). Used here only to show the plugin interface for
attacks: a package declares an entry point in the group `robench.attacks`, and
robench finds it with no change to robench itself.

The search is robench's greedy word-substitution search (`WordSwapSearch`):
words ranked by leave-one-out importance, one swap per word, through robench's
engine (model calls batched across examples, the query budget enforced at the
victim). At most `max_modification_rate` of the words change, rounded up to a
whole word (TextAttack's `MaxWordsPerturbed`). No external resources.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from robench.core.params import bounded, check_fields
from robench.engine.attack import AttackContext, AttackOutput, AttackRecipe
from robench.engine.scheduler import EngineConfig, attack_examples
from robench.engine.search import Importance, WordSwapSearch
from robench.engine.words import Words, is_one_word


@dataclass(frozen=True)
class TypoParams:
    max_modification_rate: float = bounded(0.3, 0, 1, low_open=True)  # share of words that may change
    query_budget: int | None = bounded(None, 1, 10**9)  # victim queries per example; None: unlimited
    concurrency: int = bounded(16, 1, 4096)  # examples attacked at once

    def __post_init__(self) -> None:
        check_fields(self)


def typos(word: str) -> list[str]:
    """`word` with two adjacent inner characters swapped, each distinct result once."""
    out = []
    for i in range(1, len(word) - 2):
        new = word[:i] + word[i + 1] + word[i] + word[i + 2:]
        if new != word and new not in out and is_one_word(new):
            out.append(new)
    return out


def build_search(params: TypoParams) -> WordSwapSearch:
    def indices(original: Words) -> list[int]:
        return [i for i, w in enumerate(original.words) if len(w) >= 4 and w.isalpha()]

    def candidates(current: Words, original: Words, i: int) -> list[Words]:
        if current.diff(original) + 1 > math.ceil(params.max_modification_rate * len(original.words)):
            return []
        return [current.replace(i, w) for w in typos(current.words[i])]

    return WordSwapSearch(indices, Importance(lambda words, i: words.delete(i)), candidates, None)


def _attack(ctx: AttackContext, params: TypoParams) -> AttackOutput:
    config = EngineConfig(params.concurrency, params.query_budget, "example-typo")
    results = attack_examples(ctx, build_search(params), {}, config)
    return AttackOutput(results, {"perturbation": "adjacent inner-character swaps (Pruthi et al., 2019)",
                                  "external_resources": "none"})


EXAMPLE_TYPO = AttackRecipe(
    name="example-typo", summary="Adjacent-character swaps, greedy (example plugin)", attack=_attack,
    params=TypoParams, query_cost_per_word=2.0,
)
