"""The evidence table of `robench analyze --syntax` (`robench syntax-report`): anaphor agreement,
BLiMP overall and best-layer UUAS per model, each with its 95% interval over seeds and its
difference from the baseline model, against the direction of arXiv 2108.13602 (adversarial
fine-tuning keeps more of BERT's syntactic abilities: higher is the paper's direction for all).

Intervals: mean ± t(0.975, n−1)·s/√n over the seeds of a model; the difference from the baseline
uses t(0.975, min(n₁, n₂)−1)·√(s₁²/n₁ + s₂²/n₂) (conservative Welch). With one seed there is no
interval and only the sign of the difference is reported.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np

from robench.core.errors import RobenchError

COLUMNS = (("blimp_anaphor_gender_agreement", "anaphor gender"), ("blimp_anaphor_number_agreement", "anaphor number"),
           ("blimp_overall", "BLiMP overall"), ("probe_uuas_best", "UUAS (best layer)"))


def _t(df: int) -> float:
    from scipy.stats import t

    return float(t.ppf(0.975, df))


def interval(values: list[float]) -> tuple[float, float]:
    """(mean, half-width of the 95% t-interval; NaN with fewer than two values)."""
    x = np.asarray(values, dtype=float)
    if len(x) < 2:
        return float(x.mean()), float("nan")
    return float(x.mean()), _t(len(x) - 1) * float(x.std(ddof=1)) / math.sqrt(len(x))


def difference(values: list[float], base: list[float]) -> tuple[float, float]:
    """(difference of means, half-width of its 95% interval; NaN when either side has one value)."""
    a, b = np.asarray(values, dtype=float), np.asarray(base, dtype=float)
    diff = float(a.mean() - b.mean())
    if min(len(a), len(b)) < 2:
        return diff, float("nan")
    se = math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))
    return diff, _t(min(len(a), len(b)) - 1) * se


def verdict(diff: float, half: float) -> str:
    if diff == 0:
        return "no difference"
    if math.isnan(half):
        return "holds (one seed, no interval)" if diff > 0 else "does not hold (one seed, no interval)"
    if abs(diff) <= half:
        return "within noise"
    return "holds" if diff > 0 else "opposite"


def _cell(mean: float, half: float) -> str:
    return f"{100 * mean:.1f}" if math.isnan(half) else f"{100 * mean:.1f} ± {100 * half:.1f}"


def report(records: Iterable, baseline: str = "bert") -> str:
    """Markdown: the pre-trained encoder, each model (mean ± 95% interval, in %), then each model's
    difference from `baseline` with its interval and whether the paper's direction holds."""
    by_model: dict[str, list[dict[str, float]]] = {}
    settings, backbone = set(), None
    for rec in records:
        if rec.syntax is None:
            continue
        s = rec.spec
        settings.add((s["task"], s["backbone"], s.get("train_size"), s["train"]["epochs"],
                      repr(rec.config.get("syntax"))))
        by_model.setdefault(s["model"], []).append(rec.metrics)
        backbone = backbone or rec.metrics
    if not by_model:
        raise RobenchError("no analysis records with syntax results; run `robench analyze --syntax` first")
    if len(settings) > 1:
        raise RobenchError(f"the records mix {len(settings)} settings (task, backbone, train size, epochs, syntax "
                           "settings); pass --task or a results dir holding one setting")
    task, name, train_size, epochs, _ = settings.pop()
    head = ["model", "seeds"] + [label for _, label in COLUMNS]
    lines = [f"Syntax of arXiv 2108.13602 ({task}, backbone {name}, train size {train_size or 'all'}, {epochs} "
             "epochs): accuracy / UUAS in %, mean ± 95% interval over seeds.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
             "| pre-trained encoder | – | " + " | ".join(_cell(backbone[f"backbone_{k}"], float("nan"))
                                                        for k, _ in COLUMNS) + " |"]
    for model, runs in by_model.items():
        cells = [_cell(*interval([r[k] for r in runs])) for k, _ in COLUMNS]
        lines.append(f"| {model} | {len(runs)} | " + " | ".join(cells) + " |")
    if baseline in by_model and len(by_model) > 1:
        lines += ["", f"Difference from `{baseline}` (points, 95% interval) and the paper's direction "
                      "(adversarial fine-tuning keeps more: higher).", "",
                  "| model | " + " | ".join(label for _, label in COLUMNS) + " |", "|" + "---|" * (len(COLUMNS) + 1)]
        for model, runs in by_model.items():
            if model == baseline:
                continue
            cells = []
            for key, _ in COLUMNS:
                diff, half = difference([r[key] for r in runs], [r[key] for r in by_model[baseline]])
                text = f"{100 * diff:+.1f}" + ("" if math.isnan(half) else f" ± {100 * half:.1f}")
                cells.append(f"{text}: {verdict(diff, half)}")
            lines.append(f"| {model} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
