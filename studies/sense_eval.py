"""Precision and recall of sense filters on the labelled swaps of studies/data/sense-dev.csv (docs/studies/sense.md).

    ROBENCH_DATA_DIR=/path/to/shared/data HF_HUB_OFFLINE=1 python studies/sense_eval.py

A method decides "keep" or "reject" per swap. For each method, on the development split and on the held-out test
split: precision and recall of "keep" (against sense kept = yes) and of "reject" (against sense kept = no). A
threshold is chosen on the development split only. Methods:

* `wordnet-any`: the candidate is a lemma of one of the word's WordNet senses in its tagged part of speech, or
  of their close relatives (similar-to, also-see, verb group): what sense-blind lists allow;
* `wordnet-top2`: the same over the word's two most frequent senses;
* `lesk`: the same over the one sense NLTK's Lesk algorithm picks in the sentence (Lesk, SIGDOC 1986);
* `context>=t`: the packaged MiniLM's contextual cosine at the word (robench.engine.resources.context) at least
  t, with t the lowest (steps of 0.05) whose development precision of "keep" is >= 0.75 (the chosen filter,
  robench.engine.sense), at the threshold of best development accuracy, and at 0.60 (the `min_context_cos`
  that issue 43's blind reading tried);
* `context|top2`: context >= 0.70, or context >= 0.55 and `wordnet-top2`.

The speed line times the chosen filter on one word with 40 candidates, as an attack calls it.
"""
from __future__ import annotations

import csv
import os
import time
from pathlib import Path
from typing import Callable

import numpy as np

from robench.core.paths import resolve_settings
from robench.engine.constraints import Swap
from robench.engine.resources.context import context_similarity
from robench.engine.resources.lexicon import wordnet_reader
from robench.engine.resources.nltk_data import pos_tagger
from robench.engine.sense import SENSE_MIN_COS, sense_constraint
from robench.engine.words import Words

SET = Path(__file__).resolve().parent / "data" / "sense-dev.csv"
WORDNET_POS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}


def read_set(path: Path = SET) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def close_lemmas(wordnet, synsets: list) -> set[str]:
    """The lemmas of `synsets` and of their similar-to, also-see and verb-group synsets, lower case."""
    related = [r for s in synsets for r in [s, *s.similar_tos(), *s.also_sees(), *s.verb_groups()]]
    return {lemma.name().lower() for s in related for lemma in s.lemmas()}


def base_forms(wordnet, word: str) -> set[str]:
    return {word, *(form for pos in "nvar" for form in wordnet._morphy(word, pos))}


def as_words(sentence: str) -> Words:
    """The sentence as `Words`, split at spaces as the set's positions count."""
    words = tuple(sentence.split())
    return Words((), words, ("",) + (" ",) * (len(words) - 1) + ("",), " ".join(words))


def wordnet_decisions(rows: list[dict], settings) -> dict[str, np.ndarray]:
    from nltk.wsd import lesk

    wordnet, tagger = wordnet_reader(settings), pos_tagger(settings)
    out: dict[str, list[bool]] = {"wordnet-any": [], "wordnet-top2": [], "lesk": []}
    for row in rows:
        words, i = row["sentence"].split(), int(row["position"])
        pos = WORDNET_POS.get(tagger.tag(words)[i])
        senses = wordnet.synsets(words[i].lower(), pos=pos) if pos else []
        chosen = lesk(words, words[i].lower(), pos) if senses else None
        forms = base_forms(wordnet, row["candidate"].lower())
        out["wordnet-any"].append(bool(forms & close_lemmas(wordnet, senses)))
        out["wordnet-top2"].append(bool(forms & close_lemmas(wordnet, senses[:2])))
        out["lesk"].append(chosen is not None and bool(forms & close_lemmas(wordnet, [chosen])))
    return {name: np.array(flags) for name, flags in out.items()}


def context_scores(rows: list[dict], scorer) -> np.ndarray:
    return np.array([scorer.scores(row["sentence"].split(), int(row["position"]), [row["candidate"]])[0]
                     for row in rows])


def precision_recall(keep: np.ndarray, kept: np.ndarray) -> tuple[float, float, float, float]:
    """(precision, recall) of "keep", then of "reject"."""
    def ratio(a: int, b: int) -> float:
        return a / b if b else float("nan")

    right_keeps, right_rejects = int((keep & kept).sum()), int((~keep & ~kept).sum())
    return (ratio(right_keeps, int(keep.sum())), ratio(right_keeps, int(kept.sum())),
            ratio(right_rejects, int((~keep).sum())), ratio(right_rejects, int((~kept).sum())))


def threshold_for_precision(scores: np.ndarray, kept: np.ndarray, floor: float = 0.75) -> float:
    """The lowest threshold, in steps of 0.05, whose precision of "keep" is at least `floor`."""
    for t in np.round(np.arange(0.30, 1.0, 0.05), 2):
        keep = scores >= t
        if keep.any() and (keep & kept).sum() / keep.sum() >= floor:
            return float(t)
    return 1.0


def best_accuracy_threshold(scores: np.ndarray, kept: np.ndarray) -> float:
    candidates = np.unique(scores)
    return float(candidates[int(np.argmax([((scores >= t) == kept).mean() for t in candidates]))])


def timed_batch(settings, rows: list[dict], n: int = 40, repeats: int = 5) -> tuple[float, float]:
    """Wall and CPU seconds (all threads) per call of the chosen filter on one word with `n` candidates."""
    constraint = sense_constraint(settings, "cpu")
    row = rows[0]
    words = as_words(row["sentence"])
    swaps = [Swap(int(row["position"]), rows[k % len(rows)]["candidate"]) for k in range(n)]
    constraint.filter(words, words, swaps)  # warm-up
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeats):
        constraint.filter(words, words, swaps)
    return (time.perf_counter() - start) / repeats, (time.process_time() - cpu) / repeats


def report(name: str, keep: np.ndarray, kept: np.ndarray, dev: np.ndarray) -> None:
    cells = []
    for split in (dev, ~dev):
        cells += [f"{v:.2f}" for v in precision_recall(keep[split], kept[split])]
    print(f"| {name} | " + " | ".join(cells) + " |")


def main() -> None:
    settings = resolve_settings()
    rows = read_set()
    kept = np.array([r["sense_kept"] == "yes" for r in rows])
    dev = np.array([r["split"] == "dev" for r in rows])
    print(f"{len(rows)} swaps: dev {dev.sum()} ({kept[dev].sum()} kept), test {(~dev).sum()} "
          f"({kept[~dev].sum()} kept)")
    decisions = wordnet_decisions(rows, settings)
    start = time.perf_counter()
    scores = context_scores(rows, context_similarity(settings, "cpu"))
    per_swap = (time.perf_counter() - start) / len(rows)
    chosen = threshold_for_precision(scores[dev], kept[dev])
    accurate = best_accuracy_threshold(scores[dev], kept[dev])
    methods: dict[str, Callable[[], np.ndarray]] = {
        **{name: (lambda d=d: d) for name, d in decisions.items()},
        f"context>={chosen:.2f} (chosen)": lambda: scores >= chosen,
        f"context>={accurate:.3f} (best dev accuracy)": lambda: scores >= accurate,
        "context>=0.60 (textfooler's min_context_cos=0.6)": lambda: scores >= 0.60,
        "context|top2": lambda: (scores >= 0.70) | ((scores >= 0.55) & decisions["wordnet-top2"]),
    }
    print("| method | dev keep P | dev keep R | dev reject P | dev reject R "
          "| test keep P | test keep R | test reject P | test reject R |")
    print("|---|" + "---|" * 8)
    for name, decide in methods.items():
        report(name, decide(), kept, dev)
    if chosen != SENSE_MIN_COS:
        print(f"note: robench.engine.sense.SENSE_MIN_COS is {SENSE_MIN_COS}, the rule chose {chosen}")
    wall, cpu = timed_batch(settings, rows)
    print(f"speed (CPU, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores): {per_swap * 1000:.0f} "
          f"ms wall per swap scored alone; {wall * 1000:.0f} ms wall, {cpu * 1000:.0f} ms CPU per word with 40 "
          "candidates in one batch")


if __name__ == "__main__":
    main()
