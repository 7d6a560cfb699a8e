"""`robench bench defenses`: every defense against `bert`, side by side in one invocation.

For each seed, training size (the full subset and the low-resource one) and
model, `robench.runner.run` fine-tunes (or reuses) the model and replays the
AdvGLUE dev set against it. The leaderboard (`defenses.csv`, `defenses.md` in
the results dir, rewritten after every run so an interrupted bench still leaves
one) shows clean SST-2 dev accuracy, AdvGLUE accuracy and the training cost
relative to `bert`: the ratio of mean `train_seconds` at the same training size,
counting only models trained in this invocation (reused checkpoints have no
comparable time; their ratio is left empty).

`--search` instead grid-searches IM-BERT's gamma, T and layers, selecting on
SST-2 dev accuracy only (no attack, never AdvGLUE). `--step-cost N` only times
N training steps per model on the same batches (after one warm-up step) and
prints the per-step cost relative to `bert`.
"""
from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from typing import Any

import pandas as pd
from rich.console import Console
from rich.table import Table

from robench.errors import RobenchError
from robench.leaderboard import aggregate, format_mean_std, records_frame
from robench.results import atomic_write, now
from robench.settings import Settings
from robench.spec import RunSpec, TrainConfig

DEFAULT_MODELS = ["bert", "imbert", "freelb", "smart"]
COLUMNS = [("dev_accuracy", "SST-2 dev acc (clean)", True), ("robust_accuracy", "AdvGLUE-sst2 acc", True),
           ("accuracy_drop", "drop", True)]


def build_parser() -> argparse.ArgumentParser:
    from robench.cli.common import add_common_args

    p = argparse.ArgumentParser(prog="robench bench defenses", description=__doc__.split("\n\n")[0])
    p.add_argument("--models", nargs="+", default=DEFAULT_MODELS, help="models to compare (bert is the baseline)")
    p.add_argument("--task", default="sst2")
    p.add_argument("--backbone", default="minilm")
    p.add_argument("--train-size", type=int, default=4000, help="training subset (default 4000)")
    p.add_argument("--low-resource", type=int, default=500, help="low-resource training subset; 0 skips it")
    p.add_argument("--low-resource-epochs", type=int, default=0,
                   help="epochs for the low-resource subset (default 0: as many optimisation steps as the full "
                        "subset gets, i.e. epochs x train-size / low-resource)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--param", action="append", default=[], metavar="MODEL:KEY=VALUE",
                   help="hyperparameter of one model, e.g. imbert:im_gamma=0.02 (repeatable)")
    g = p.add_argument_group("IM-BERT search (selects on SST-2 dev accuracy only)")
    g.add_argument("--search", action="store_true", help="grid-search IM-BERT instead of running the bench")
    g.add_argument("--grid-gamma", type=float, nargs="+", default=[0.005, 0.01, 0.02])
    g.add_argument("--grid-steps", type=int, nargs="+", default=[3, 5])
    g.add_argument("--grid-layers", nargs="+", default=["all"], help="layer sets: all, or e.g. 0,1,2")
    p.add_argument("--step-cost", type=int, default=0, metavar="N",
                   help="only time N training steps per model on identical batches; print ratios to bert")
    add_common_args(p)
    return p


def main(argv: Sequence[str] | None = None) -> None:
    from robench.cli.common import settings_from_args

    args = build_parser().parse_args(argv)
    if args.low_resource_epochs < 0:
        raise RobenchError("--low-resource-epochs must be 0 (same number of steps) or positive")
    for name in ("train_size", "epochs", "batch_size", "max_length"):
        if getattr(args, name) <= 0:
            raise RobenchError(f"--{name.replace('_', '-')} must be positive")
    settings = settings_from_args(args)
    console = None if args.quiet else Console(stderr=True)
    if args.step_cost > 0:
        step_cost(args, settings)
    elif args.search:
        search(args, settings, console)
    else:
        bench(args, settings, console)


def model_params(models: Sequence[str], assignments: Sequence[str]) -> dict[str, dict[str, Any]]:
    """`imbert:im_gamma=0.02` -> {"imbert": {"im_gamma": 0.02}}; unknown models are an error."""
    from robench.params import parse_assignments

    out: dict[str, dict[str, Any]] = {m: {} for m in models}
    for item in assignments:
        model, sep, assignment = item.partition(":")
        if not sep or model not in out:
            raise RobenchError(f"--param {item!r}: expected MODEL:KEY=VALUE with MODEL one of {', '.join(models)}")
        out[model].update(parse_assignments([assignment]))
    return out


def epochs_for(args, size: int) -> int:
    """Full subset: --epochs. Low-resource subset: --low-resource-epochs, or the same number of steps."""
    if size == args.train_size:
        return args.epochs
    return args.low_resource_epochs or max(1, round(args.epochs * args.train_size / size))


def _spec(args, settings: Settings, model: str, seed: int, size: int, params: dict[str, Any]) -> RunSpec:
    source = args.data_source or ("local" if settings.data_dir is not None else "hub")
    train = TrainConfig(epochs=epochs_for(args, size), lr=args.lr, batch_size=args.batch_size,
                        max_length=args.max_length)
    return RunSpec(task=args.task, model=model, attack="advglue", backbone=args.backbone, seed=seed,
                   train_size=size, data_source=source, train=train, model_params=params)


def bench(args, settings: Settings, console: Console | None) -> None:
    from robench.runner import run, validate

    if "bert" not in args.models:
        raise RobenchError("--models must include bert: training cost is reported relative to it")
    params = model_params(args.models, args.param)
    sizes = [args.train_size] + ([args.low_resource] if args.low_resource > 0 else [])
    specs = [_spec(args, settings, m, seed, size, params[m])
             for seed in args.seeds for size in sizes for m in args.models]
    for spec in specs:
        validate(spec, settings)  # fail fast on a bad name or hyperparameter, before any training
    started, fresh = now(), {}
    for i, spec in enumerate(specs, 1):
        if console is not None:
            console.log(f"[{i}/{len(specs)}] {spec.model}, train size {spec.train_size}, seed {spec.seed}")
        record = run(spec, settings, device=args.device, console=console)
        fresh[record.run_id] = not record.timings.get("train_cached", True) and record.created >= started
        table = leaderboard(settings, fresh, args.models)
        write(settings, "defenses", table, markdown(table, args))
    Console().print(rich_table(table, "Defenses vs bert"))
    print(f"wrote {settings.results_dir / 'defenses.csv'} and {settings.results_dir / 'defenses.md'}")


def leaderboard(settings: Settings, fresh: dict[str, bool], models: Sequence[str]) -> pd.DataFrame:
    """Mean ± std per (model, train size) of the given runs, plus training cost relative to bert."""
    frame = records_frame(settings.runs_dir)
    frame = frame[frame["run_id"].isin(fresh)].copy()
    table = aggregate(frame)
    timed = frame[frame["run_id"].map(fresh)].groupby(["model", "train_size"])["train_seconds"].mean()
    ratios = []
    for _, row in table.iterrows():
        own, base = timed.get((row["model"], row["train_size"])), timed.get(("bert", row["train_size"]))
        ratios.append(own / base if own is not None and base else float("nan"))
    table["train_cost_vs_bert"] = ratios
    order = {m: i for i, m in enumerate(models)}
    sizes = pd.to_numeric(table["train_size"], errors="coerce").fillna(float("inf"))
    return table.assign(_size=-sizes, _model=table["model"].map(order)).sort_values(["_size", "_model"]).drop(
        columns=["_size", "_model"]).reset_index(drop=True)


def markdown(table: pd.DataFrame, args) -> str:
    header = ["model", "train size", "seeds"] + [label for _, label, _ in COLUMNS] + ["train cost vs bert"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in table.iterrows():
        cells = [str(row["model"]), str(row["train_size"]), str(row["seeds"])]
        cells += [format_mean_std(row.get(f"{m}_mean"), row.get(f"{m}_std"), pct) for m, _, pct in COLUMNS]
        cost = row["train_cost_vs_bert"]
        cells.append("–" if pd.isna(cost) else f"{cost:.2f}×")
        lines.append("| " + " | ".join(cells) + " |")
    low = f" ({epochs_for(args, args.low_resource)} at {args.low_resource})" if args.low_resource else ""
    note = (f"\n{args.task}, backbone {args.backbone}, seeds {' '.join(map(str, args.seeds))}, "
            f"{args.epochs} epochs{low}, lr {args.lr}, batch {args.batch_size}; "
            "accuracies in %, mean ± std over seeds; "
            "clean = whole SST-2 dev split, AdvGLUE = AdvGLUE dev sst2; training cost = mean train_seconds / "
            "bert's at the same train size, measured in one invocation.\n")
    return "\n".join(lines) + "\n" + note


def rich_table(table: pd.DataFrame, title: str) -> Table:
    out = Table(title=title)
    for name in ("model", "train size", "seeds", "clean acc", "AdvGLUE acc", "drop", "cost vs bert"):
        out.add_column(name, justify="left" if name == "model" else "right")
    for _, row in table.iterrows():
        cost = row["train_cost_vs_bert"]
        out.add_row(str(row["model"]), str(row["train_size"]), str(row["seeds"]),
                    *[format_mean_std(row.get(f"{m}_mean"), row.get(f"{m}_std"), pct) for m, _, pct in COLUMNS],
                    "–" if pd.isna(cost) else f"{cost:.2f}×")
    return out


def write(settings: Settings, stem: str, table: pd.DataFrame, md: str) -> None:
    atomic_write(settings.results_dir / f"{stem}.csv", table.to_csv(index=False, float_format="%.6f"))
    atomic_write(settings.results_dir / f"{stem}.md", md)


def search(args, settings: Settings, console: Console | None) -> None:
    """Grid over (layers, T, gamma) for `imbert`; select the best mean SST-2 dev accuracy."""
    from robench.models.imbert import parse_layers
    from robench.runner import train

    base = model_params(["imbert"], args.param)["imbert"]
    try:
        layer_sets = [parse_layers(v) for v in args.grid_layers]
    except ValueError as exc:
        raise RobenchError(f"--grid-layers: {exc}") from exc
    rows = []
    grid = list(itertools.product(layer_sets, args.grid_steps, args.grid_gamma))
    for i, (layers, steps, gamma) in enumerate(grid, 1):
        params = {**base, "im_layers": list(layers) if layers else None, "im_steps": steps, "im_gamma": gamma}
        if console is not None:
            console.log(f"[{i}/{len(grid)}] imbert {params}")
        for seed in args.seeds:
            trained = train(_spec(args, settings, "imbert", seed, args.train_size, params), settings,
                            device=args.device, console=console)
            rows.append({"im_layers": "all" if layers is None else ",".join(map(str, layers)), "im_steps": steps,
                         "im_gamma": gamma, "seed": seed, "dev_accuracy": trained.record["dev_accuracy"],
                         "train_seconds": trained.record["train_seconds"]})
        table = (pd.DataFrame(rows).groupby(["im_layers", "im_steps", "im_gamma"], sort=False)
                 .agg(seeds=("seed", "size"), dev_accuracy_mean=("dev_accuracy", "mean"),
                      dev_accuracy_std=("dev_accuracy", "std"), train_seconds=("train_seconds", "mean"))
                 .reset_index().sort_values("dev_accuracy_mean", ascending=False, kind="stable"))
        best = table.iloc[0]
        choice = (f"--param imbert:im_layers={best['im_layers']} --param imbert:im_steps={best['im_steps']} "
                  f"--param imbert:im_gamma={best['im_gamma']}")
        md = table.to_markdown(index=False) if _has_tabulate() else table.to_string(index=False)
        write(settings, "imbert_search", table,
              f"IM-BERT search on {args.task} dev accuracy (train size {args.train_size}, seeds "
              f"{' '.join(map(str, args.seeds))}); never selected on AdvGLUE.\n\n{md}\n\nbest: {choice}\n")
    out = Table(title="IM-BERT search (SST-2 dev accuracy)")
    for name in ("layers", "T", "gamma", "seeds", "dev acc", "train s"):
        out.add_column(name, justify="right")
    for _, row in table.iterrows():
        out.add_row(str(row["im_layers"]), str(row["im_steps"]), f"{row['im_gamma']:g}", str(row["seeds"]),
                    format_mean_std(row["dev_accuracy_mean"], row["dev_accuracy_std"], True), f"{row['train_seconds']:.1f}")
    Console().print(out)
    print(f"best on dev: {choice}\nwrote {settings.results_dir / 'imbert_search.csv'}")


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


def step_cost(args, settings: Settings) -> None:
    """Seconds per training step of each model on the same batches, relative to bert (one process)."""
    import time

    import torch

    from robench.backbones import load_tokenizer, resolve_backbone
    from robench.data import load_split, subset
    from robench.defense import resolve_model
    from robench.device import autocast, pick_device
    from robench.registries import TASKS
    from robench.training import _encode

    if "bert" not in args.models:
        raise RobenchError("--models must include bert: costs are reported relative to it")
    device, task = pick_device(args.device), TASKS.get(args.task)
    backbone = resolve_backbone(args.backbone)
    tokenizer = load_tokenizer(backbone.location)
    n = args.batch_size * (args.step_cost + 1)
    data = subset(load_split(task, "train", settings.data_dir, args.data_source or "local"), n, args.seeds[0])
    from transformers import DataCollatorWithPadding

    collate = DataCollatorWithPadding(tokenizer)
    features = _encode(tokenizer, task, data, args.max_length)
    batches = [collate(features[i:i + args.batch_size]) for i in range(0, len(features), args.batch_size)]
    params, runners = model_params(args.models, args.param), {}
    for name in args.models:
        defense = resolve_model(name)
        resolved = defense.resolve_params(params[name])
        torch.manual_seed(args.seeds[0])
        model = defense.build(backbone.location, task.num_labels, resolved).to(device).train()
        runners[name] = (defense.objective(model, resolved), torch.optim.AdamW(model.parameters(), lr=args.lr))
    seconds = dict.fromkeys(runners, 0.0)
    for i, batch in enumerate(batches):  # round robin over models, so machine load hits all of them alike
        batch = {k: v.to(device) for k, v in batch.items()}
        for name, (objective, optimizer) in runners.items():
            _sync(device)
            start = time.perf_counter()
            with autocast(device):
                objective.step(batch)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            objective.after_optimizer_step()
            _sync(device)
            if i > 0:  # the first step is a warm-up
                seconds[name] += (time.perf_counter() - start) / (len(batches) - 1)
    out = Table(title=f"Training-step cost on {device} (batch {args.batch_size}, {len(batches) - 1} timed steps)")
    for col in ("model", "s / step", "vs bert"):
        out.add_column(col, justify="left" if col == "model" else "right")
    for name, sec in seconds.items():
        out.add_row(name, f"{sec:.3f}", f"{sec / seconds['bert']:.2f}×")
    Console().print(out)


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
