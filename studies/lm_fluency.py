"""The language model's fluency signal against the blind readings, and the calibration robench ships (issue 57).

    ROBENCH_DATA_DIR=/path/to/shared/data HF_HUB_OFFLINE=1 python studies/lm_fluency.py [--write]

Every read pair of the committed readings (`results/natural/reading/readings.json`,
`results/natural-reading/readings/*.json`; each pair once) is scored by SmolLM2-135M-Instruct
(`robench.engine.resources.causal_lm`): the fluency score is log p(adversarial) - log p(original), each the
whole text, detokenised, beginning-of-text token first. Printed as Markdown: the ROC AUC against the readers'
"fluent" (percentile bootstrap 95% interval over pairs), per attack and pooled; the readers' fluent share per
score band (`robench.engine.fluency.BANDS`); the share of pairs kept and their fluent share at each candidate
threshold. The `natural` setting's threshold (`robench.engine.budgets.NATURAL.fluency_max_drop`) is the largest
candidate whose kept pairs are at least `TARGET_FLUENT` fluent (the calibration's `max_drop`; a test checks that
the two agree). `--write` writes the calibration (bands, AUC, the pairs it rests on) to
`robench/engine/fluency_calibration.json`, which every run's fluency estimate reads.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

from robench.core.paths import resolve_settings
from robench.engine.fluency import BANDS, CALIBRATION_FILE, band_of
from robench.engine.resources.causal_lm import language_model
from robench.report.readings import Reading

ROOT = Path(__file__).resolve().parents[1]
READINGS = ("results/natural/reading/readings.json", "results/natural-reading/readings/*.json")
THRESHOLDS = (0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0)
TARGET_FLUENT = 0.85  # issue 57's fluency target: the threshold is the largest whose kept read pairs reach it
BOOTSTRAP = 2000


def read_pairs() -> list[tuple[str, Reading]]:
    """(attack, reading) of every read pair, each (original, adversarial) once."""
    seen, out = set(), []
    for pattern in READINGS:
        for path in sorted(ROOT.glob(pattern)):
            for row in json.loads(path.read_text())["readings"]:
                reading = Reading(**row)
                key = (reading.original_text, reading.perturbed_text)
                if key not in seen:
                    seen.add(key)
                    out.append((attack_of(reading.run_id), reading))
    return out


def attack_of(run_id: str) -> str:
    return next(a for a in ("gradient-swap", "bert-attack", "textfooler") if f"-{a}-" in run_id)


def roc_auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """P(score of a positive > score of a negative), ties half."""
    pos, neg = scores[positive], scores[~positive]
    if not len(pos) or not len(neg):
        return float("nan")
    greater = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(greater / (len(pos) * len(neg)))


def auc_interval(scores: np.ndarray, positive: np.ndarray, seed: int = 0) -> tuple[float, float]:
    rng = np.random.default_rng(seed)
    draws = [roc_auc(scores[idx], positive[idx]) for idx in
             (rng.integers(0, len(scores), len(scores)) for _ in range(BOOTSTRAP))]
    low, high = np.nanpercentile(draws, [2.5, 97.5])
    return float(low), float(high)


def finite(x: float) -> float | None:
    return None if math.isinf(x) else x


def calibration(scores: np.ndarray, fluent: np.ndarray) -> dict:
    """The readers' fluent count per band, and the AUC with its interval."""
    bands = [band_of(s) for s in scores]
    rows = [{"low": finite(low), "high": finite(high), "n": int(sum(b == k for b in bands)),
             "fluent": int(sum(f for b, f in zip(bands, fluent) if b == k))} for k, (low, high) in enumerate(BANDS)]
    auc, (low, high) = roc_auc(scores, fluent), auc_interval(scores, fluent)
    curve = [{"max_drop": d, "kept": int((scores >= -d).sum()), "fluent_kept": int(fluent[scores >= -d].sum())}
             for d in THRESHOLDS]
    passing = [c["max_drop"] for c in curve if c["kept"] and c["fluent_kept"] / c["kept"] >= TARGET_FLUENT]
    return {"bands": rows, "thresholds": curve, "target_fluent": TARGET_FLUENT,
            "max_drop": max(passing) if passing else None, "auc": round(auc, 4),
            "auc_interval": [round(low, 4), round(high, 4)], "pairs": int(len(scores)), "fluent": int(fluent.sum())}


def markdown(attacks: list[str], scores: np.ndarray, fluent: np.ndarray, calib: dict) -> str:
    lines = ["| attack | pairs | fluent | AUC [95%] |", "|---|---|---|---|"]
    for attack in [*sorted(set(attacks)), "all"]:
        pick = np.array([a == attack or attack == "all" for a in attacks])
        auc, (low, high) = roc_auc(scores[pick], fluent[pick]), auc_interval(scores[pick], fluent[pick])
        lines.append(f"| {attack} | {pick.sum()} | {fluent[pick].mean():.0%} | {auc:.2f} [{low:.2f}, {high:.2f}] |")
    lines += ["", "| score band (nats) | pairs | fluent share |", "|---|---|---|"]
    for row in calib["bands"]:
        share = f"{row['fluent'] / row['n']:.0%} ({row['fluent']}/{row['n']})" if row["n"] else "–"
        lines.append(f"| {row['low']} to {row['high']} | {row['n']} | {share} |")
    lines += ["", "| max drop (nats) | pairs kept | fluent among kept | fluent pairs kept |", "|---|---|---|---|"]
    for drop in THRESHOLDS:
        kept = scores >= -drop
        lines.append(f"| {drop:g} | {kept.mean():.0%} ({kept.sum()}) | {fluent[kept].mean():.0%} | "
                     f"{(kept & fluent).sum() / fluent.sum():.0%} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"write {CALIBRATION_FILE.name}")
    args = parser.parse_args()
    pairs = read_pairs()
    lm = language_model(resolve_settings(read_only=True))
    texts = [t for _, r in pairs for t in (r.perturbed_text, r.original_text)]
    logp = np.array(lm.log_probs(texts))
    scores, fluent = logp[0::2] - logp[1::2], np.array([r.fluent for _, r in pairs])
    calib = calibration(scores, fluent)
    print(markdown([a for a, _ in pairs], scores, fluent, calib))
    print(f"\nthreshold: the largest max drop keeping >= {TARGET_FLUENT:.0%} fluent: {calib['max_drop']} nats")
    if args.write:
        calib["language_model"] = lm.source.describe() | {"file": Path(lm.source.file).name}
        calib["readings"] = list(READINGS)
        CALIBRATION_FILE.write_text(json.dumps(calib, indent=1) + "\n")


if __name__ == "__main__":
    main()
