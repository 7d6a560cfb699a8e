"""The sense constraint of the `natural` setting: a candidate must fit the sense the word has in its sentence.

This is the measured contextual filter (docs/attacks.md): the packaged MiniLM's last-layer state at the word,
before and after the swap, within cosine 0.6 (`robench.engine.constraints.ContextSimilarity`, the token-level
half of BERTScore, Zhang et al., ICLR 2020).
"""
from __future__ import annotations

from typing import Any

from robench.core.paths import Settings
from robench.engine.constraints import Constraint, ContextSimilarity

MIN_CONTEXT_COS = 0.6


def sense_constraint(settings: Settings, device: Any) -> Constraint:
    """The sense filter on the offline resources (the packaged MiniLM)."""
    from robench.engine.resources.context import context_similarity

    return ContextSimilarity(context_similarity(settings, device), MIN_CONTEXT_COS)
