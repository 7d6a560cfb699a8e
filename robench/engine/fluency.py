"""Fluency by a causal language model: a constraint for the search, and an estimate for every run (issue 57).

The score of an adversarial text is `log p(adversarial) - log p(original)` under SmolLM2-135M
(`robench.engine.resources.causal_lm`): each the whole text, so the words after the swap are read too, unlike
TextAttack's `LanguageModelConstraint` (Alzantot et al., "Generating Natural Language Adversarial Examples",
EMNLP 2018, with the Google 1B LM; GPT-2 in TextAttack), which scores the swapped word from its left context. A
blind reading's "fluent" separates by it at the AUC of `fluency_calibration.json` (`studies/lm_fluency.py`).

* `Fluency`: the constraint. A swap may not lower the text's log-probability by more than `max_drop` nats
  against the original text; with `each_swap`, nor against the text before the swap (so a swap that makes the
  text more probable cannot pay for a later one that makes it less). The search asks it last and lazily
  (`robench.engine.search.WordSwapSearch`): only for the candidates it would take, in the order it would take
  them, after the sentence encoder, so its cost follows the accepted swaps, not the candidate pool.
* `LogProbCache`: the "lm" service the engine batches across examples (each distinct text scored once).
* `fluency_estimate`: the LM-judged fluent share of a run's successful examples: the mean, over them, of the
  readers' fluent share in the score band each falls in, with the calibration it rests on.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from importlib import resources as package_files
from pathlib import Path
from typing import Any, Generator, Sequence

from robench.engine.attack import Profile
from robench.engine.scheduler import Request

# the LM's scoring rate, words of text per second, on the reference machine idle (SST-2 dev pairs: an original
# and its one-word swap, as a run scores its successes): 162 words/s (8.2 texts/s) measured at slowdown 0.87 by
# studies/lm_cost.py on 2026-12-06, so 141 on the reference machine (docs/studies/natural.md, "Cost")
LM_WORDS_PER_SECOND = 141.0
BANDS: tuple[tuple[float, float], ...] = ((-math.inf, -8.0), (-8.0, -4.0), (-4.0, -2.0), (-2.0, 0.0), (0.0, math.inf))
CALIBRATION_FILE = Path(str(package_files.files("robench.engine") / "fluency_calibration.json"))


def band_of(score: float) -> int:
    """The index of the band (low, high] that holds `score`; the last band is [0, inf)."""
    for k, (low, high) in enumerate(BANDS):
        if score <= high or k == len(BANDS) - 1:
            return k
    return len(BANDS) - 1


@dataclass(frozen=True)
class Fluency:
    """log p(candidate) - log p(original) >= -`max_drop` (nats, whole texts), and with `each_swap` the same
    against the text before the swap; `lm` scores texts (its `source` names it in the record)."""

    max_drop: float
    lm: Any = field(repr=False, compare=False, default=None)  # .log_probs(texts) -> floats; .source
    each_swap: bool = False

    def passes(self, original: float, candidate: float) -> bool:
        return candidate - original >= -self.max_drop


def fluency_checks(fluency: Fluency | None, original: str, candidates: Sequence[str], before: str | None = None
                   ) -> Generator[Request, Any, list[bool]]:
    """Whether each candidate text passes (all pass without a constraint); one "lm" request. `before`: the text
    the swap was made in, which `each_swap` also compares with."""
    if fluency is None or not candidates:
        return [True] * len(candidates)
    references = [original] + ([before] if fluency.each_swap and before not in (None, original) else [])
    scores = yield Request("lm", [*references, *candidates])
    bars = scores[:len(references)]
    return [all(fluency.passes(bar, s) for bar in bars) for s in scores[len(references):]]


class LogProbCache:
    """The "lm" service: log-probabilities of texts, each distinct text scored once; `profile` counts texts."""

    def __init__(self, lm: Any, profile: Profile | None = None) -> None:
        self.lm, self.profile = lm, profile or Profile()
        self._cache: dict[str, float] = {}

    def __call__(self, texts: list[str]) -> list[float]:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if todo:
            self.profile.count("lm texts", len(todo))
            self._cache.update(zip(todo, self.lm.log_probs(todo)))
        return [self._cache[t] for t in texts]


@functools.lru_cache(maxsize=1)
def calibration() -> dict[str, Any]:
    """The shipped calibration (`studies/lm_fluency.py --write`): readers' fluent counts per band, the AUC."""
    return json.loads(CALIBRATION_FILE.read_text())


def band_shares(calib: dict[str, Any]) -> list[float]:
    """The readers' fluent share per band (a band no read pair fell in borrows its nearest read neighbour's)."""
    shares = [b["fluent"] / b["n"] if b["n"] else None for b in calib["bands"]]
    for k, share in enumerate(shares):
        if share is None:
            near = sorted((abs(j - k), s) for j, s in enumerate(shares) if s is not None)
            shares[k] = near[0][1]
    return shares


def fluency_estimate(scores: Sequence[float]) -> dict[str, Any]:
    """The LM-judged fluent share of successful examples with fluency scores `scores`, and what it rests on."""
    calib = calibration()
    shares = band_shares(calib)
    estimate = sum(shares[band_of(s)] for s in scores) / len(scores) if scores else None
    return {"lm_fluent_share": None if estimate is None else round(estimate, 4), "scored": len(scores),
            "method": "mean over the successful examples of the readers' fluent share in the score band of "
                      "log p(adversarial) - log p(original) (an estimate, not a reading)",
            "calibration": {"auc": calib["auc"], "auc_interval": calib["auc_interval"], "pairs": calib["pairs"],
                            "bands": [{**b, "share": round(s, 4)} for b, s in zip(calib["bands"], shares)]}}


def scoring_seconds(words: int) -> float:
    """Expected seconds, on this machine now, to score texts of `words` words in all (a run's successes: an
    original and its adversarial text each)."""
    from robench.core.progress import expected_seconds

    return expected_seconds(words / LM_WORDS_PER_SECOND)


def score_pairs(lm: Any, pairs: Sequence[tuple[str, str]]) -> list[float]:
    """log p(adversarial) - log p(original) of each (original, adversarial) pair."""
    logp = lm.log_probs([t for pair in pairs for t in pair])
    return [adv - orig for orig, adv in zip(logp[0::2], logp[1::2])]


# Why a run whose attack kept only swaps the language model passed gets no fluent share (issue 57's reading)
SELECTED_BY_LM = ("the attack kept only swaps this language model passed, and the calibration does not hold for "
                  "them: a blind reading of such swaps found 54% fluent where it estimated 93% (within its top band "
                  "the score does not separate them, AUC 0.46; docs/studies/natural.md)")


def run_fluency(results: Sequence[Any], settings: Any, device: Any = None, selected_by_lm: bool = False
                ) -> dict[str, Any]:
    """The run record's `metrics.fluency`: each successful example's score (by index), the LM-judged fluent share
    of them with its calibration, and the language model; without the LM installed, why not (the run goes on).
    `selected_by_lm`: the attack ran the fluency constraint, so the scores are kept but no share is estimated."""
    from robench.core.errors import RobenchError
    from robench.engine.resources.causal_lm import language_model

    successes = [r for r in results if r.status == "successful"]
    try:
        lm = language_model(settings, device)
    except RobenchError as exc:
        return {"lm_fluent_share": None, "unavailable": str(exc)}
    scores = score_pairs(lm, [(r.original_text, r.perturbed_text) for r in successes]) if successes else []
    uncalibrated = {"lm_fluent_share": None, "not_calibrated": SELECTED_BY_LM}
    estimate = uncalibrated if selected_by_lm else fluency_estimate(scores)
    return {**estimate, "language_model": lm.source.describe(),
            "scores": {str(r.index): round(s, 3) for r, s in zip(successes, scores)}}
