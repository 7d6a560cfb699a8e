"""Mapping the papers' USE similarity thresholds to MiniLM (`robench resources calibrate`)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from robench.core.paths import Settings
from robench.engine.resources.encoders import sentence_encoder
from robench.engine.resources.files import data_file
from robench.engine.resources.nltk_data import stopwords
from robench.engine.resources.synonyms import SynonymTable, synonym_table

# (pairs, metric, USE threshold) of the papers: TextFooler (angular, 15-word windows), BERT-Attack (cosine)
PAPER_THRESHOLDS = (("window", "angular", 0.840845), ("sentence", "cosine", 0.2))


def calibration_pairs(settings: Settings, table: SynonymTable, stop: frozenset, n: int = 400, seed: int = 0,
                      window: int = 15, max_fraction: float = 0.4) -> dict[str, list[tuple[str, str]]]:
    """Perturbed-text pairs from SST-2 dev sentences of at least `window` words: "window" = one counter-fitted
    synonym swap (non-stopword, top-50, cos >= 0.5), compared on the 15-word window around it (TextFooler);
    "sentence" = up to 40% of the words swapped, whole sentences (BERT-Attack)."""
    import csv

    path = data_file(settings, "sst2/dev.tsv", "SST-2 dev split (calibration text)")
    rows = list(csv.reader(path.read_text(encoding="utf-8").splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    rng = np.random.default_rng(seed)
    pairs: dict[str, list[tuple[str, str]]] = {"window": [], "sentence": []}
    for i in rng.permutation(len(rows)):
        words = rows[i][0].split()
        if len(words) < window:  # TextAttack skips the windowed check on shorter texts
            continue
        swappable = [j for j, w in enumerate(words) if w not in stop and table.neighbours(w, 50, 0.5)]
        if not swappable:
            continue
        j = int(rng.choice(swappable))
        cands = table.neighbours(words[j], 50, 0.5)
        new = list(words)
        new[j] = cands[int(rng.integers(len(cands)))][0]
        lo = max(0, min(j - window // 2, len(words) - window))
        pairs["window"].append((" ".join(words[lo:lo + window]), " ".join(new[lo:lo + window])))
        count = max(1, int(round(rng.uniform(0, max_fraction) * len(words))))
        new = list(words)
        for j in rng.permutation(swappable)[:count]:
            cands = table.neighbours(words[j], 50, 0.5)
            new[j] = cands[int(rng.integers(len(cands)))][0]
        pairs["sentence"].append((" ".join(words), " ".join(new)))
        if len(pairs["window"]) >= n:
            break
    return pairs



def calibrate_thresholds(settings: Settings, device=None, n: int = 400, seed: int = 0,
              thresholds: Sequence[tuple[str, str, float]] = PAPER_THRESHOLDS) -> dict:
    """Map USE thresholds to MiniLM by matching acceptance fractions on the same perturbed pairs."""
    from scipy.stats import spearmanr

    # the pairs of the calibrated thresholds (MINILM_THRESHOLDS) come from this table, whatever the attacks' default
    table, stop = synonym_table(settings, "counterfitted-glove"), stopwords(settings)
    pairs = calibration_pairs(settings, table, stop, n, seed)
    encoders = {"use-m3": sentence_encoder(settings, device, "use-m3"), "minilm": sentence_encoder(settings, device)}
    out: dict[str, Any] = {"pairs": {k: len(v) for k, v in pairs.items()}, "seed": seed,
                           "synonyms": table.info["name"], "thresholds": []}
    for kind, metric, tau in thresholds:
        a, b = [p[0] for p in pairs[kind]], [p[1] for p in pairs[kind]]
        scores = {name: getattr(enc, metric)(a, b) for name, enc in encoders.items()}
        accepted = float(np.mean(scores["use-m3"] >= tau))
        if accepted < 1.0:
            mapped = float(np.quantile(scores["minilm"], 1.0 - accepted))
        else:  # USE accepts every pair: keep the paper value unless MiniLM would reject some pair at it
            mapped = min(tau, float(scores["minilm"].min()))
        out["thresholds"].append({
            "pairs": kind, "metric": metric, "use_threshold": tau, "use_accept_fraction": round(accepted, 4),
            "minilm_threshold": round(mapped, 6),
            "minilm_accept_fraction_at_use_threshold": round(float(np.mean(scores["minilm"] >= tau)), 4),
            "spearman_use_minilm": round(float(spearmanr(scores["use-m3"], scores["minilm"])[0]), 3),
            "use_quantiles_5_50_95": np.quantile(scores["use-m3"], [0.05, 0.5, 0.95]).round(4).tolist(),
            "minilm_quantiles_5_50_95": np.quantile(scores["minilm"], [0.05, 0.5, 0.95]).round(4).tolist()})
    return out

