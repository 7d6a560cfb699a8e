"""`robench bench analysis`: the arXiv 2108.13602 diagnostics for several models × seeds, as one
Markdown table (mean ± std over seeds) plus, for each model against the baseline, whether the
paper's direction holds.

Example (the issue's evidence run, on a GPU):

    robench bench analysis --model bert,freelb,smart,imbert --seed 0 1 2 --task sst2 \\
        --train-size 4000 --epochs 2 --examples 200 --data-dir shared/data

`--model` takes a comma-separated list; `--param MODEL:KEY=VALUE` sets a hyperparameter of one
model, `--param KEY=VALUE` of every model (`robench.core.params.params_by_model`). Each (model, seed)
reuses the cached fine-tuned checkpoint of the same spec (the defenses bench's, when it ran with
the same cache dir and training flags) or trains it, and reuses an existing analysis record of
the same settings.
"""
from __future__ import annotations

import time

import numpy as np

from robench.bench.options import AnalysisBenchOptions
from robench.core.paths import Settings
from robench.report.leaderboard_markdown import format_mean_std
from robench.runs.spec import RunSpec

# metric -> (column title, +1 if the paper expects adversarial fine-tuning to raise it, -1 to lower it, percent?)
PAPER_DIRECTION: dict[str, tuple[str, int, bool]] = {
    "shuffle_flip_rate": ("shuffle: pred. changes", +1, True),
    "shuffle_gold_prob_abs_change": ("shuffle: mean abs. gold-prob change", +1, False),
    "top1_share": ("deletion: top-1 share", -1, True),
    "top3_share": ("deletion: top-3 share", -1, True),
    "gini": ("deletion: Gini", -1, False),
    "entropy": ("deletion: entropy", +1, False),
    "token_cosine": ("token cosine (last layer)", -1, False),
    "cls_effective_rank": ("[CLS] effective rank", +1, False),
    "cka_mean": ("CKA to pre-trained (mean 1..L)", +1, False),
    "cka_last": ("CKA to pre-trained (last layer)", +1, False),
}


def analysis_bench(runs: dict[str, list[RunSpec]], options: AnalysisBenchOptions, settings: Settings,
                   console=None) -> str:
    """Analyse every spec of `runs` (by model: one spec per seed); write and print the table; return it."""
    from robench.analysis import analyze
    from robench.core.files import atomic_write
    from robench.training.defense import resolve_model

    for model, specs in runs.items():  # fail on a bad name or hyperparameter before any training
        for spec in specs:
            resolve_model(model).resolve_params(spec.model_params)
    metrics: dict[str, list[dict[str, float]]] = {}
    start = time.perf_counter()
    for model, specs in runs.items():
        for spec in specs:
            record = analyze(spec, settings, options.device, options.examples, options.shuffles, console)
            metrics.setdefault(model, []).append(record.metrics)
            if console is not None:
                console.log(f"{model} seed {spec.seed}: done ({time.perf_counter() - start:.0f} s so far)")
    first = next(iter(runs.values()))
    spec = first[0]
    setting = (f"{spec.task}, backbone {spec.backbone}, train size {spec.train_size or 'all'}, "
               f"{spec.train.epochs} epochs, seeds {' '.join(str(s.seed) for s in first)}, "
               f"{options.examples} eval examples, {options.shuffles} shuffles each")
    text = markdown(metrics, options.baseline, setting)
    out = options.out or settings.results_dir / "analysis_bench.md"
    atomic_write(out, text)
    print(text)
    print(f"wrote {out} ({time.perf_counter() - start:.0f} s)")
    return text


def markdown(metrics: dict[str, list[dict[str, float]]], baseline: str, setting: str) -> str:
    """The mean ± std table with the paper's expected direction, then the direction check per model."""
    keys = list(PAPER_DIRECTION)
    head = ["model", "seeds", "dev acc."] + [PAPER_DIRECTION[k][0] for k in keys]
    lines = [f"Diagnostics of arXiv 2108.13602 ({setting}); mean ± std over seeds.", "",
             "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
             "| paper: adversarial vs vanilla | | | " + " | ".join(
                 "higher" if PAPER_DIRECTION[k][1] > 0 else "lower" for k in keys) + " |"]
    for model, runs in metrics.items():
        cells = [model, str(len(runs)), _cell(runs, "dev_accuracy", True)]
        cells += [_cell(runs, k, PAPER_DIRECTION[k][2]) for k in keys]
        lines.append("| " + " | ".join(cells) + " |")
    if baseline in metrics and len(metrics) > 1:
        lines += ["", f"Does the paper's direction hold against `{baseline}`? yes / no: the sign of the difference "
                      "of means (shown); 'within noise': |difference| < √(std₁² + std₂²).", "",
                  "| model | " + " | ".join(PAPER_DIRECTION[k][0] for k in keys) + " |",
                  "|" + "---|" * (len(keys) + 1)]
        for model, runs in metrics.items():
            if model != baseline:
                lines.append(f"| {model} | " + " | ".join(_verdict(runs, metrics[baseline], k) for k in keys) + " |")
    return "\n".join(lines) + "\n"


def _stats(runs: list[dict[str, float]], key: str) -> tuple[float, float]:
    values = np.array([r.get(key, np.nan) for r in runs], dtype=float)
    values = values[np.isfinite(values)]
    mean = float(values.mean()) if len(values) else float("nan")
    return mean, float(values.std(ddof=1)) if len(values) > 1 else float("nan")


def _cell(runs, key: str, percent: bool) -> str:
    mean, std = _stats(runs, key)
    return format_mean_std(mean, std, percent, 1 if percent else 3)


def _verdict(runs, base_runs, key: str) -> str:
    (mean, std), (base, base_std) = _stats(runs, key), _stats(base_runs, key)
    diff = mean - base
    if np.isnan(diff):
        return "–"
    holds = "yes" if np.sign(diff) == PAPER_DIRECTION[key][1] else "no"
    noise = np.sqrt(np.nansum([std ** 2, base_std ** 2]))
    return f"{holds} ({diff:+.3f}{', within noise' if abs(diff) < noise else ''})"
