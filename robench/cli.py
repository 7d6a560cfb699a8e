"""`robench` command line: a thin layer over the Python API."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Sequence

from rich.console import Console
from rich.table import Table

from robench.errors import RobenchError

ERR = Console(stderr=True)

# Modules that add subcommands: each defines `add_cli(subparsers)` and sets `handler=` on its parsers.
# Keep their top-level imports light: heavy libraries are imported inside the handlers.
EXTENSIONS: tuple[str, ...] = (
    "robench.resources",
    "robench.benchmarks",
    "robench.analysis",
    "robench.grid",
)


def add_common_args(p: argparse.ArgumentParser) -> None:
    """--data-dir, --data-source, --cache-dir, --results-dir, --device, --quiet."""
    g = p.add_argument_group("locations")
    g.add_argument("--data-dir", help="data directory laid out like shared/data (default: $ROBENCH_DATA_DIR)")
    g.add_argument("--data-source", choices=["local", "hub"], default=None,
                   help="local data directory or the Hugging Face hub (default: local when a data dir is set)")
    g.add_argument("--cache-dir", help="checkpoints and built resources (default: $ROBENCH_CACHE_DIR or ~/.cache/robench)")
    g.add_argument("--results-dir", help="run records and leaderboards (default: $ROBENCH_RESULTS_DIR or ./results)")
    g.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    g.add_argument("--quiet", action="store_true", help="no progress bars")


def add_spec_args(p: argparse.ArgumentParser, attack: bool) -> None:
    """The RunSpec flags (model, task, backbone, seeds, sizes, training hyperparameters)."""
    p.add_argument("--model", default="bert", help="registered model, or architecture+objective (e.g. imbert+freelb)")
    if attack:
        p.add_argument("--attack", default="advglue", help="registered attack recipe (default: advglue)")
    p.add_argument("--task", default="sst2", help="registered task (default: sst2)")
    p.add_argument("--backbone", default="minilm", help="minilm (embedded), a local path or a hub id")
    p.add_argument("--seed", type=int, nargs="+", default=[0], help="one or more seeds (default: 0)")
    p.add_argument("--train-size", type=int, help="train-subset size, chosen by seed (default: all)")
    p.add_argument("--eval-size", type=int, help="eval/attack-subset size, chosen by seed (default: all)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--lr", type=float, default=5e-5)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--max-length", type=int, default=128, help="longer inputs are truncated (tokens)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="model hyperparameter")
    if attack:
        p.add_argument("--attack-param", action="append", default=[], metavar="KEY=VALUE",
                       help="attack hyperparameter")
        p.add_argument("--force", action="store_true", help="re-run even if a finished record exists")
    add_common_args(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="robench", description="Adversarial-robustness benchmarking for NLP classifiers.")
    sub = parser.add_subparsers(dest="command", required=True)
    add_spec_args(sub.add_parser("run", help="fine-tune (or reuse), attack, write a run record"), attack=True)
    add_spec_args(sub.add_parser("train", help="fine-tune (or reuse the cached checkpoint) only"), attack=False)
    p = sub.add_parser("list", help="list registered models, attacks and tasks with their source")
    p.add_argument("kind", nargs="?", choices=["models", "attacks", "tasks"])
    p = sub.add_parser("leaderboard", help="aggregate run records into leaderboard CSV and Markdown")
    p.add_argument("--results-dir", help="default: $ROBENCH_RESULTS_DIR or ./results")
    p.add_argument("--with-analysis", action="store_true", help="add `robench analyze` columns (mean ± std)")
    p.add_argument("--html", metavar="PATH", help="also write a self-contained static HTML page (tables, plots)")
    for module in EXTENSIONS:
        importlib.import_module(module).add_cli(sub)
    return parser


def settings_from_args(args):
    from robench.settings import resolve_settings

    return resolve_settings(getattr(args, "data_dir", None), getattr(args, "cache_dir", None), args.results_dir)


def specs_from_args(args, settings):
    """One RunSpec per --seed."""
    from robench.params import parse_assignments
    from robench.spec import RunSpec, TrainConfig

    source = args.data_source or ("local" if settings.data_dir is not None else "hub")
    train = TrainConfig(epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, max_length=args.max_length)
    for name, value in (("--epochs", args.epochs), ("--batch-size", args.batch_size), ("--max-length", args.max_length)):
        if value <= 0:
            raise RobenchError(f"{name} must be positive, got {value}")
    for seed in args.seed:
        yield RunSpec(task=args.task, model=args.model, attack=getattr(args, "attack", "advglue"),
                      backbone=args.backbone, seed=seed, train_size=args.train_size, eval_size=args.eval_size,
                      data_source=source, train=train, model_params=parse_assignments(args.param),
                      attack_params=parse_assignments(getattr(args, "attack_param", [])))


def cmd_run(args) -> None:
    from robench.runner import run

    settings, console = settings_from_args(args), None if args.quiet else Console(stderr=True)
    for spec in specs_from_args(args, settings):
        record = run(spec, settings, device=args.device, console=console, force=args.force)
        Console().print(summary_table(record))
        print(f"record: {settings.runs_dir / (record.run_id + '.json')}")


def cmd_train(args) -> None:
    from robench.runner import train

    settings, console = settings_from_args(args), None if args.quiet else Console(stderr=True)
    for spec in specs_from_args(args, settings):
        trained = train(spec, settings, device=args.device, console=console)
        state = "reused cached checkpoint" if trained.cached else "trained"
        print(f"{state}: {trained.checkpoint} (dev accuracy {trained.record['dev_accuracy']:.4f})")


ROWS = [("Dev accuracy (whole eval split)", "dev_accuracy", "%"), ("Original (clean) accuracy", "clean_accuracy", "%"),
        ("Accuracy under attack", "robust_accuracy", "%"), ("Accuracy drop", "accuracy_drop", "%"),
        ("Attack success rate", "attack_success_rate", "%"), ("Skipped attacks", "skipped", "n"),
        ("Failed attacks", "failed", "n"), ("Successful attacks", "successful", "n"), ("Errors", "errors", "n"),
        ("Average perturbed word %", "avg_perturbed_word_pct", "f"),
        ("Average words per input", "avg_words_per_input", "f"), ("Average queries", "avg_queries", "f")]


def summary_table(record) -> Table:
    spec = record.spec
    table = Table(title=f"{spec['model']} × {spec['attack']} on {spec['task']} "
                        f"({spec['backbone']}, seed {spec['seed']}, {record.metrics.get('examples')} examples)")
    table.add_column("Metric")
    table.add_column("Value", justify="right")
    for label, key, kind in ROWS:
        value = record.metrics.get(key)
        if value is None:
            continue
        text = f"{100 * value:.2f}%" if kind == "%" else str(value) if kind == "n" else f"{value:.2f}"
        table.add_row(label, text)
    return table


def cmd_list(args) -> None:
    from robench.registries import ATTACKS, MODELS, TASKS

    for name, registry in (("models", MODELS), ("attacks", ATTACKS), ("tasks", TASKS)):
        if args.kind not in (None, name):
            continue
        table = Table(title=name)
        table.add_column("name")
        table.add_column("source")
        table.add_column("summary")
        for entry in registry.entries():
            obj = entry.obj
            summary = getattr(obj, "summary", None) or getattr(obj, "note", "") if obj is not None else \
                f"(lazy: {entry.entry_point.value})"
            table.add_row(entry.name, entry.source, summary)
        Console().print(table)


def cmd_leaderboard(args) -> None:
    from robench.leaderboard import write_leaderboard

    settings = settings_from_args(args)
    table, csv_path, md_path = write_leaderboard(settings.results_dir, analysis=args.with_analysis)
    print(md_path.read_text())
    print(f"wrote {csv_path} and {md_path} ({len(table)} rows)")
    if args.html:
        from robench.html import write_html

        print(f"wrote {write_html(settings.results_dir, args.html)}")


COMMANDS = {"run": cmd_run, "train": cmd_train, "list": cmd_list, "leaderboard": cmd_leaderboard}


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        handler = getattr(args, "handler", None) or COMMANDS[args.command]
        handler(args)
    except RobenchError as exc:
        ERR.print(f"[bold red]robench: error:[/] {exc}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        ERR.print("robench: interrupted; finished work is saved, re-run the same command to resume")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
