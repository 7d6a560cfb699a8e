"""The sense filter of the `natural` setting: a candidate must fit the sense the word has in this sentence, not
any sense the synonym lists give ("a major career" -> "a weighty quarry", "the script" -> "the hand").

Method: the contextual cosine at the word (`robench.engine.resources.context`: the packaged MiniLM's last-layer
states at the word, before and after the swap, the token-level half of BERTScore, Zhang et al., ICLR 2020, one
word at a time) must be at least `SENSE_MIN_COS`. All candidates of a word are scored in one batch.

Chosen on a hand-labelled development set of 270 candidate swaps from robench's attacks on SST-2 dev sentences
(`studies/data/sense-dev.csv`, measured by `studies/sense_eval.py`, docs/studies/sense.md): the threshold is the lowest
(in steps of 0.05) whose precision of "keep" on the development split is at least 0.75. On the held-out split
it keeps the sense in 90% of what it keeps and rejects 96% of the wrong-sense candidates. WordNet's senses
(every sense, the two most frequent, or the one Lesk's algorithm picks) did worse alone, and added to the
cosine they traded precision for recall.
"""
from __future__ import annotations

from robench.core.paths import Settings
from robench.engine.constraints import Constraint, ContextSimilarity

SENSE_MIN_COS = 0.70


def sense_constraint(settings: Settings, device) -> Constraint:
    """The sense filter (see the module): `ContextSimilarity` with the packaged MiniLM at `SENSE_MIN_COS`."""
    from robench.engine.resources.context import context_similarity

    return ContextSimilarity(context_similarity(settings, device), SENSE_MIN_COS)
