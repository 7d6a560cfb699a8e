"""What robench's word-substitution recipes (`textfooler`, `bert-attack`) share.

Both check a sentence encoder's similarity against a threshold given on the
paper's (Universal Sentence Encoder) scale and mapped to the encoder used, and
both leave stopwords unchanged. Here: validating those parameters, mapping the
threshold, and describing the encoder and stopwords for the run record.
"""
from __future__ import annotations

from typing import Any, Callable, Protocol

from robench.engine import resources
from robench.engine.budgets import budget_setting
from robench.engine.words import Words


class EncoderParams(Protocol):
    """The parameters both recipes share (fields of their frozen params dataclasses)."""

    sentence_encoder: str  # one of resources.ENCODERS
    similarity_threshold: float  # on the paper's (USE) scale
    similarity_metric: str  # "angular" or "cosine"
    encoder_threshold: float | None  # on the encoder's own scale; None: mapped from similarity_threshold
    query_budget: int | None


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


def changeable_words(stopwords: frozenset[str]) -> Callable[[Words], list[int]]:
    """The positions of the words an attack may change: every word that is not a stopword (any case)."""
    def indices(original: Words) -> list[int]:
        return [i for i, w in enumerate(original.words) if w.lower() not in stopwords]

    return indices


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


def query_budget_of(params: Any) -> tuple[int | None, int | None]:
    """(fixed budget per example, budget per word of the input) for `EngineConfig`."""
    return params.query_budget, params.queries_per_word
