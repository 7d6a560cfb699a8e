"""`robench bench analysis`: the arXiv 2108.13602 diagnostics for several models × seeds, as one
Markdown table (mean ± std over seeds) plus, for each model against the baseline, whether the
paper's direction holds.

Example (the issue's evidence run, on a GPU):

    robench bench analysis --model bert,freelb,smart,imbert --seed 0 1 2 --task sst2 \\
        --train-size 4000 --epochs 2 --examples 200 --data-dir shared/data

`--model` takes a comma-separated list; `--param MODEL:KEY=VALUE` sets a hyperparameter of one
model (as in `robench bench defenses`), `--param KEY=VALUE` of every model. Each (model, seed)
reuses the cached fine-tuned checkpoint of the same spec (the defenses bench's, when it ran with
the same cache dir and training flags) or trains it, and reuses an existing analysis record of
the same settings.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

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


def main(argv: list[str]) -> None:
    from rich.console import Console

    from robench.analysis import analyze
    from robench.cli.common import add_spec_args, settings_from_args, specs_from_args
    from robench.defense import resolve_model
    from robench.params import parse_assignments

    p = argparse.ArgumentParser(prog="robench bench analysis", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    add_spec_args(p, attack=False)
    p.set_defaults(model="bert,freelb,smart,imbert", seed=[0, 1, 2])
    p.add_argument("--baseline", default="bert", help="model the others are compared with (default: bert)")
    p.add_argument("--examples", type=int, default=100, help="eval examples per analysis (default: 100)")
    p.add_argument("--shuffles", type=int, default=5, help="word shuffles per example (default: 5)")
    p.add_argument("--out", type=Path, help="Markdown file (default: <results_dir>/analysis_bench.md)")
    args = p.parse_args(argv)
    models = [m.strip() for m in args.model.split(",") if m.strip()]
    for model in models:  # fail on a bad name or hyperparameter before any training
        resolve_model(model).resolve_params(parse_assignments(params_for(model, args.param)))
    settings = settings_from_args(args)
    console = None if args.quiet else Console(stderr=True)
    metrics: dict[str, list[dict[str, float]]] = {}
    start = time.perf_counter()
    for model in models:
        own = {**vars(args), "model": model, "param": params_for(model, args.param)}
        for spec in specs_from_args(argparse.Namespace(**own), settings):
            record = analyze(spec, settings, args.device, args.examples, args.shuffles, console)
            metrics.setdefault(model, []).append(record.metrics)
            if console is not None:
                console.log(f"{model} seed {spec.seed}: done ({time.perf_counter() - start:.0f} s so far)")
    setting = (f"{args.task}, backbone {args.backbone}, train size {args.train_size or 'all'}, {args.epochs} epochs, "
               f"seeds {' '.join(map(str, args.seed))}, {args.examples} eval examples, {args.shuffles} shuffles each")
    text = markdown(metrics, args.baseline, setting)
    out = args.out or settings.results_dir / "analysis_bench.md"
    from robench.results import atomic_write

    atomic_write(out, text)
    print(text)
    print(f"wrote {out} ({time.perf_counter() - start:.0f} s)")


def params_for(model: str, assignments: list[str]) -> list[str]:
    """`--param MODEL:KEY=VALUE` applies to MODEL only (as in `robench bench defenses`); `KEY=VALUE` to all."""
    out = []
    for item in assignments:
        target, sep, assignment = item.partition(":")
        if not sep or "=" in target:
            out.append(item)
        elif target == model:
            out.append(assignment)
    return out


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
    scale, digits = (100.0, 1) if percent else (1.0, 3)
    text = f"{mean * scale:.{digits}f}"
    return text if np.isnan(std) else f"{text} ± {std * scale:.{digits}f}"


def _verdict(runs, base_runs, key: str) -> str:
    (mean, std), (base, base_std) = _stats(runs, key), _stats(base_runs, key)
    diff = mean - base
    if np.isnan(diff):
        return "–"
    holds = "yes" if np.sign(diff) == PAPER_DIRECTION[key][1] else "no"
    noise = np.sqrt(np.nansum([std ** 2, base_std ** 2]))
    return f"{holds} ({diff:+.3f}{', within noise' if abs(diff) < noise else ''})"
