"""What robench's word-substitution recipes (`textfooler`, `bert-attack`, `gradient-swap`) share.

Each checks a sentence encoder's similarity against a threshold given on the
paper's (Universal Sentence Encoder) scale and mapped to the encoder used, and
takes the knobs of a named budget setting (`robench.engine.budgets`). Here:
validating those parameters, mapping the threshold, the constraints a setting
governs (`setting_constraints`, the one list every word-level recipe appends),
and describing the encoder and stopwords for the run record.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from robench.core.params import bounded
from robench.engine import resources
from robench.engine.budgets import budget_setting
from robench.engine.constraints import (
    Constraint,
    IndexConstraint,
    MaxWordsPerturbed,
    Similarity,
    WordCosine,
    WordNetPos,
)
from robench.engine.fluency import Fluency
from robench.engine.resources.causal_lm import check_lm, language_model
from robench.engine.resources.lexicon import CachedWordNet, lexicon


class EncoderParams(Protocol):
    """The parameters both recipes share (fields of their frozen params dataclasses)."""

    sentence_encoder: str  # one of resources.ENCODERS
    similarity_threshold: float  # on the paper's (USE) scale
    similarity_metric: str  # "angular" or "cosine"
    encoder_threshold: float | None  # on the encoder's own scale; None: mapped from similarity_threshold
    query_budget: int | None


@dataclass(frozen=True)
class SearchParams:
    """The knobs every word-level search recipe shares (its params dataclass derives from this, and its own fields
    follow): how the search runs, and its query budget."""

    lazy_similarity: bool = True  # same adversarial texts, fewer encoder calls, more victim queries
    fluency_max_drop: float | None = bounded(None, 0, 1000)  # nats a swap may lower log p(text) (None: no check)
    fluency_each_swap: bool = False  # the drop also counts against the text before each swap, not only the original
    sense_min_cos: float | None = bounded(None, -1, 1)  # budget=natural's sense threshold (None: SENSE_MIN_COS)
    grammar_check: bool = True  # budget=natural's grammar check (off: the frontier study's knob)
    beam_width: int = bounded(1, 1, 64)  # texts kept by the search (1: greedy; above: robench.engine.beam)
    population_size: int = bounded(0, 0, 1024)  # above 0: a population search (robench.engine.population)
    population_search: str = "genetic"  # Alzantot et al.'s "genetic" algorithm or Zang et al.'s particle "swarm"
    generations: int = bounded(20, 1, 1000)  # the population search's generations (iterations) at most
    lm_top_k: int | None = bounded(None, 1, 1000)  # the population search keeps a word's k most probable candidates
    query_budget: int | None = bounded(None, 1, 10**9)  # victim queries per example, on top of the setting's
    queries_per_word: int | None = bounded(None, 1, 10**6)  # query budget = this x the input's words
    concurrency: int = bounded(32, 1, 4096)  # examples attacked at once
    encoder_batch_size: int = bounded(128, 1, 4096)


POPULATION_SEARCHES = ("genetic", "swarm")  # robench.engine.population


def validate_search_params(params: SearchParams) -> None:
    """The search knobs agree (ValueError, as make_params expects): one search at a time; the LM cut needs the LM."""
    if params.population_size and params.beam_width != 1:
        raise ValueError(f"a population search takes no beam: population_size={params.population_size} "
                         f"with beam_width={params.beam_width}; set one of them")
    if params.population_search not in POPULATION_SEARCHES:
        raise ValueError(f"population_search must be one of {POPULATION_SEARCHES}, got {params.population_search!r}")
    if params.lm_top_k is not None and not params.population_size:
        raise ValueError("lm_top_k is the population search's: set population_size too")
    if params.lm_top_k is not None and params.fluency_max_drop is None:
        raise ValueError("lm_top_k needs the language model: set fluency_max_drop (budget=natural sets it)")


def search_knobs(params: SearchParams) -> dict[str, Any]:
    """The `robench.engine.recipe.Greedy` fields the params choose: which search, and how it runs."""
    return dict(lazy=params.lazy_similarity, beam_width=params.beam_width, population_size=params.population_size,
                population_search=params.population_search, generations=params.generations, lm_top_k=params.lm_top_k)


def validate_encoder_params(params: EncoderParams) -> None:
    """The shared part of each params dataclass's `__post_init__` (ValueError, as make_params expects)."""
    if params.sentence_encoder not in resources.ENCODERS:
        raise ValueError(f"sentence_encoder must be one of {resources.ENCODERS}, got {params.sentence_encoder!r}")
    if params.similarity_metric not in ("angular", "cosine"):
        raise ValueError(f"similarity_metric must be 'angular' or 'cosine', got {params.similarity_metric!r}")
    if params.query_budget is not None and params.query_budget < 1:
        raise ValueError(f"query_budget must be positive or null, got {params.query_budget}")
    low = 0.0 if params.similarity_metric == "angular" else -1.0  # angular similarity lies in [0, 1], cosine [-1, 1]
    for name in ("similarity_threshold", "encoder_threshold"):
        value = getattr(params, name)
        if value is not None and not low <= value <= 1:
            raise ValueError(f"{name} must be between {low:g} and 1 for {params.similarity_metric} similarity, "
                             f"got {value}")


def encoder_threshold(params: EncoderParams, encoder: Any) -> float:
    """`params.encoder_threshold`, else the encoder's value for the paper's threshold (`threshold_for`)."""
    if params.encoder_threshold is not None:
        return float(params.encoder_threshold)
    return float(encoder.threshold_for(params.similarity_threshold, params.similarity_metric))


def check_threshold(params: EncoderParams) -> None:
    """Before training: the paper's threshold must have a mapping on the chosen encoder (or be overridden)."""
    if params.encoder_threshold is None:
        resources.SentenceEncoder(params.sentence_encoder, lambda texts: None, {}).threshold_for(  # no model loaded
            params.similarity_threshold, params.similarity_metric)


def info_of(resource: Any, default: Any) -> Any:
    """A loaded resource's `.info` (its record entry), or `default` for one without (a test fake)."""
    return getattr(resource, "info", None) or default


def describe_encoder(params: EncoderParams, encoder: Any) -> dict[str, Any]:
    """The encoder's `.info` plus the paper's threshold and the one used on this encoder."""
    out = dict(info_of(encoder, {}))
    out.update(paper="Universal Sentence Encoder", paper_threshold=params.similarity_threshold,
               metric=params.similarity_metric, threshold=encoder_threshold(params, encoder),
               threshold_overridden=params.encoder_threshold is not None)
    return out


def describe_stopwords(stopwords: frozenset[str]) -> Any:
    return info_of(stopwords, f"{len(stopwords)} stopwords")


def apply_budget(params: Any, recipe_defaults: dict[str, Any]) -> None:
    """Fill the knobs of a frozen params dataclass left at None: the budget setting's value
    (`robench.engine.budgets`), else the recipe's own (`recipe_defaults`). Explicit values are kept."""
    setting = budget_setting(params.budget)  # ValueError for an unknown name, as make_params expects
    for name, value in {**recipe_defaults, **setting.values()}.items():
        if getattr(params, name, None) is None:
            object.__setattr__(params, name, value)
    rate = params.max_modification_rate
    if rate is not None and not 0 < rate <= 1:
        raise ValueError(f"max_modification_rate must be in (0, 1], got {rate}")


def sentence_similarity(params: Any, encoder: Any) -> Similarity:
    """The sentence-encoder constraint of the setting: `window` words around the swap against the text before it
    (TextDefender, Morris et al., TextFooler), or with window 0 the whole text against the original (BERT-Attack's
    paper), at the paper's threshold mapped to `encoder`."""
    threshold = encoder_threshold(params, encoder)
    if params.window == 0:
        return Similarity(threshold, params.similarity_metric, None, against_original=True)
    return Similarity(threshold, params.similarity_metric, params.window, against_original=False,
                      skip_shorter_than_window=params.skip_shorter_than_window)


def setting_constraints(params: Any, encoder: Any, word_space: Any = None
                        ) -> list[IndexConstraint | Constraint | Similarity | None]:
    """The constraints the budget setting governs, the same in every word-level recipe: the cap on changed words,
    the word-cosine bound (None without one; `word_space` scores candidates that carry no cosine) and the
    sentence encoder. A new setting's constraints join this list."""
    return [MaxWordsPerturbed(params.max_modification_rate),
            WordCosine(params.min_cos, word_space) if params.min_cos > -1 else None,
            sentence_similarity(params, encoder)]


def check_fluency(params: Any, settings: Any) -> None:
    """Before training: the language model is installed when the setting asks for the fluency constraint."""
    if params.fluency_max_drop is not None:
        check_lm(settings)


def load_fluency(params: Any, settings: Any, device: Any) -> Fluency | None:
    """The fluency constraint at `params.fluency_max_drop` (None: none) on the language model."""
    if params.fluency_max_drop is None:
        return None
    return Fluency(params.fluency_max_drop, language_model(settings, device), each_swap=params.fluency_each_swap)


def describe_fluency(fluency: Fluency | None) -> dict[str, Any] | None:
    """The run record's entry: the rule, its threshold and the language model that judged it."""
    if fluency is None:
        return None
    rule = "log p(candidate) - log p(original) >= -max_drop (nats; whole texts, detokenised, BOS first)"
    if fluency.each_swap:
        rule += ", and the same against the text before each swap"
    return {"rule": rule, "max_drop": fluency.max_drop, "language_model": fluency.lm.source.describe()}


def load_wordnet_pos(settings: Any) -> WordNetPos:
    """The WordNet part-of-speech check over the lexicon's WordNet, its reader loaded now (NLTK's takes seconds,
    under its own phase line): a resource's one-off cost, not the first example's candidate generation."""
    wordnet = lexicon(settings).wordnet
    if isinstance(wordnet, CachedWordNet):  # a lexicon cut's WordNet is a table, read when the cut loads
        wordnet.load()
    return WordNetPos(wordnet)
