"""The field's attack budgets as named settings, in one place (the `budget` parameter of the word-level attacks).

A setting fixes the five knobs that decide what an attack may do, so that numbers under one setting compare:

| knob | `textdefender` (default) | `morris2020` and `natural` | `paper` |
|---|---|---|---|
| `k`: candidates per word | 50 | 50 | the recipe's (TextFooler 50, BERT-Attack 48) |
| `max_modification_rate`: share of words that may change | 0.3 | none (1.0) | the recipe's (BERT-Attack 0.4) |
| `min_cos`: word cosine in the counter-fitted space | none | 0.9 | the recipe's (TextFooler 0.5) |
| sentence similarity (paper scale) | angular 0.840845, 15-word windows | cosine 0.98, 15-word windows | recipe's |
| query budget: victim queries per example | K x words | none | none |
| the `natural` filters (`robench.engine.natural`) | no | `natural` only | no |
| `fluency_max_drop`: nats a swap may lower log p(text) (`robench.engine.fluency`) | none | `natural` only | none |

* `textdefender`: Li, Yu et al., "Searching for an Effective Defender: Benchmarking Defense against Adversarial
  Word Substitution", EMNLP 2021 (RockyLzy/TextDefender, `args.py` and its attack builder): neighbour_vocab_size
  = 50 (TextFooler's WordSwapEmbedding(max_candidates=50), its WordEmbeddingDistance removed), modify_ratio = 0.3
  (MaxWordsPerturbed), sentence_similarity = 0.840845057 (UniversalSentenceEncoder, angular, window 15, texts
  under 15 words skipped, against the previous text), query budget = neighbour_vocab_size x words.
* `morris2020`: Morris, Lifland, Lanchantin, Ji and Qi, "Reevaluating Adversarial Examples in Natural
  Language", Findings of EMNLP 2020 (QData/Reevaluating-NLP-Adversarial-Examples, TextFoolerJin2019Adjusted):
  the thresholds at which human raters judged swaps meaning-preserving: WordEmbeddingDistance(min_cos_sim=0.9)
  in the counter-fitted space, sentence-encoder cosine >= 0.98 over 15-word windows against the previous text,
  short texts not skipped; max_candidates = 50; no words-perturbed cap and no query budget.
  Deviations: the sentence threshold is mapped to robench's encoder like the USE thresholds
  (`SentenceEncoder.threshold_for("cosine", 0.98)`, docs/guide/resources.md; Morris et al. used USE or BERT sentence
  embeddings); the word cosine is taken in robench's counter-fitted space (the synonym table's, not the
  unavailable counter-fitted PARAGRAM vectors); their LanguageTool grammar check is not available offline.
* `natural`: Morris et al.'s thresholds plus filters for swaps a reader accepts (issue 43, docs/guide/natural.md): no
  swap inside a fixed phrase, name or title, the original's inflection and a/an agreement, the sense filter and
  a grammar check (Harper in place of Morris et al.'s LanguageTool), and the language model's fluency constraint
  (issue 57). Not the default: blind readings of its best setting found it short of the targets (valid >= 80% at
  >= 10% success) and the positive control unseen (docs/studies/natural.md).
* `paper`: each recipe's own paper values (robench's behaviour before the settings existed).

An explicit attack parameter always wins over the setting's value (`--attack-param k=20`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

USE_THRESHOLD = 0.840845057  # TextAttack: 1 - 0.5 / pi, the TextFooler code's USE threshold as an angular similarity


@dataclass(frozen=True)
class BudgetSetting:
    """One named setting; None means "the recipe's own value"."""

    name: str
    paper: str
    k: int | None
    max_modification_rate: float | None
    min_cos: float | None
    similarity_metric: Literal["angular", "cosine"] | None
    similarity_threshold: float | None
    window: int | None
    skip_shorter_than_window: bool | None
    queries_per_word: int | None  # query budget = this x the input's words; None: no budget
    natural_filters: bool = False  # the filters of `robench.engine.natural` run too
    fluency_max_drop: float | None = None  # the language model's constraint (`robench.engine.fluency`); None: off

    def values(self) -> dict[str, Any]:
        """The parameter values the setting fixes (recipe parameter name -> value)."""
        out = {"k": self.k, "max_modification_rate": self.max_modification_rate, "min_cos": self.min_cos,
               "similarity_metric": self.similarity_metric, "similarity_threshold": self.similarity_threshold,
               "window": self.window, "skip_shorter_than_window": self.skip_shorter_than_window,
               "queries_per_word": self.queries_per_word, "fluency_max_drop": self.fluency_max_drop}
        return {k: v for k, v in out.items() if v is not None}


TEXTDEFENDER = BudgetSetting("textdefender", "Li et al., EMNLP 2021 (TextDefender args.py)", k=50,
                             max_modification_rate=0.3, min_cos=-1.0, similarity_metric="angular",
                             similarity_threshold=USE_THRESHOLD, window=15, skip_shorter_than_window=True,
                             queries_per_word=50)
MORRIS2020 = BudgetSetting("morris2020", "Morris et al., Findings of EMNLP 2020 (human-validated thresholds)", k=50,
                           max_modification_rate=1.0, min_cos=0.9, similarity_metric="cosine",
                           similarity_threshold=0.98, window=15, skip_shorter_than_window=False,
                           queries_per_word=None)
NATURAL = BudgetSetting("natural", "Morris et al. 2020's thresholds + robench's natural-text filters (issue 43)",
                        k=50, max_modification_rate=1.0, min_cos=0.9, similarity_metric="cosine",
                        similarity_threshold=0.98, window=15, skip_shorter_than_window=False, queries_per_word=None,
                        natural_filters=True, fluency_max_drop=1.5)  # studies/lm_fluency.py: the calibration's max_drop
PAPER = BudgetSetting("paper", "each recipe's own paper values", None, None, None, None, None, None, None, None)
BUDGETS: dict[str, BudgetSetting] = {s.name: s for s in (TEXTDEFENDER, MORRIS2020, NATURAL, PAPER)}
DEFAULT_BUDGET = "textdefender"


def budget_setting(name: str) -> BudgetSetting:
    """The named setting; ValueError (a bad hyperparameter) for an unknown name."""
    try:
        return BUDGETS[name]
    except KeyError:
        raise ValueError(f"budget must be one of {', '.join(BUDGETS)}, got {name!r}") from None


def max_changed_words(rate: float | None, words: int) -> int | None:
    """Words that may differ from the original: ceil(rate x words) (TextAttack's MaxWordsPerturbed); None: no cap."""
    if rate is None or rate >= 1:
        return None
    return math.ceil(rate * words)
