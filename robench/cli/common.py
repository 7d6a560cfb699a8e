"""Flags and argument -> object conversions shared by the sub-commands."""
from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table
from rich.text import Text

from robench.runs.presets import DEFAULT_PRESET, PRESETS


def add_common_args(p: argparse.ArgumentParser) -> None:
    """--data-dir, --data-source, --cache-dir, --results-dir, --device, --quiet."""
    g = p.add_argument_group("locations")
    g.add_argument("--data-dir", help="data directory laid out like shared/data (default: $ROBENCH_DATA_DIR)")
    g.add_argument("--data-source", choices=["local", "hub"], default=None,
                   help="local data directory or the Hugging Face hub (default: local when a data dir is set)")
    g.add_argument("--cache-dir",
                   help="checkpoints and built resources (default: $ROBENCH_CACHE_DIR or ~/.cache/robench)")
    g.add_argument("--results-dir", help="run records and leaderboards (default: $ROBENCH_RESULTS_DIR or ./results)")
    g.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N (default: auto)")
    g.add_argument("--quiet", action="store_true", help="no progress bars")


def subset_size(text: str) -> int | str:
    """--train-size / --eval-size: an integer (checked with the spec: positive), or "full" (the whole split)."""
    if text == "full":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer or full, got {text!r}") from None


def add_spec_args(p: argparse.ArgumentParser, attack: bool) -> None:
    """The RunSpec flags (model, task, backbone, seeds, sizes, training hyperparameters)."""
    p.add_argument("--model", help="registered model, or architecture+objective (e.g. imbert+freelb); default: bert")
    if attack:
        p.add_argument("--attack", default="advglue", help="registered attack recipe (default: advglue)")
        p.add_argument("--checkpoint", metavar="PATH_OR_HUB_ID",
                       help="attack this saved sequence classifier instead of fine-tuning one (no training)")
        p.add_argument("--label-map", metavar="0=NAME,1=NAME",
                       help="the checkpoint's outputs as task label names, when its id2label does not say")
        p.add_argument("--protocol", metavar="NAME",
                       help="with --checkpoint: every attack setting of a published protocol (reference: the "
                            "reference leaderboard's four attacks on its examples), to place the checkpoint beside "
                            "it (`leaderboard --with-reference`); sets the task, attacks and eval sizes")
    p.add_argument("--task", default="sst2",
                   help="registered task, a task file (my_task.toml), or csv:FILE / tsv: / jsonl: / parquet: "
                        "(default: sst2)")
    p.add_argument("--text-column", help="with --task FORMAT:FILE: the text column, or two comma-separated "
                                         "for sentence pairs (default: text)")
    p.add_argument("--label-column", help="with --task FORMAT:FILE: the label column (default: label)")
    p.add_argument("--labels", help="with --task FORMAT:FILE: the label names in index order, comma-separated")
    p.add_argument("--backbone", default="minilm", help="minilm (embedded), a local path or a hub id")
    p.add_argument("--seed", type=int, nargs="+", default=[0], help="one or more seeds (default: 0)")
    p.add_argument("--preset", choices=sorted(PRESETS), default=DEFAULT_PRESET,
                   help="named explicit settings for the flags below; explicit flags override "
                        f"(default: {DEFAULT_PRESET}; " + "; ".join(f"{n}: {x.summary}" for n, x in PRESETS.items())
                        + ")")
    p.add_argument("--train-size", type=subset_size,
                   help="train-subset size, chosen by seed, or full (default: the preset's)")
    p.add_argument("--eval-size", type=subset_size,
                   help="eval/attack-subset size, or full (default: the preset's for search attacks, all for replay)")
    p.add_argument("--epochs", type=int, help="default: the preset's")
    p.add_argument("--lr", type=float, help="default: the preset's")
    p.add_argument("--batch-size", type=int, help="default: the preset's")
    p.add_argument("--eval-seed", type=int, default=0,
                   help="chooses the eval subset; the same for every model and training seed (default: 0)")
    p.add_argument("--max-length", type=int, default=128, help="longer inputs are truncated (tokens)")
    p.add_argument("--param", action="append", default=[], metavar="KEY=VALUE", help="model hyperparameter")
    if attack:
        p.add_argument("--attack-param", action="append", default=[], metavar="KEY=VALUE",
                       help="attack hyperparameter")
        p.add_argument("--force", action="store_true", help="re-run even if a finished record exists")
    p.add_argument("--dry-run", action="store_true",
                   help="validate, print the resolved spec, where its checkpoint and record go, whether they are "
                        "cached, and the cost estimate; then exit without training")
    p.add_argument("--no-estimate", action="store_true",
                   help="skip the cost estimate (and timing the model behind it)")
    p.add_argument("--remeasure", action="store_true",
                   help="time the model for the estimate even when a measurement of its speed is cached (it is "
                        "taken again anyway when the machine's load differs materially from the one it was taken "
                        "under)")
    add_common_args(p)


def settings_from_args(args, read_only: bool = False):
    """The Settings of a command's location flags; `read_only` for a command that only reads (`show`), which
    works on a read-only results directory."""
    from robench.core.paths import resolve_settings

    return resolve_settings(getattr(args, "data_dir", None), getattr(args, "cache_dir", None), args.results_dir,
                            read_only=read_only)


def options_from_args(args):
    """The run options the flags give (None where a flag was not given: the preset's value applies)."""
    from robench.core.params import parse_assignments
    from robench.runs.options import RunOptions, comma_list

    return RunOptions(
        task=args.task, model=args.model, attack=getattr(args, "attack", "advglue"), backbone=args.backbone,
        seeds=tuple(args.seed), preset=args.preset, train_size=args.train_size, eval_size=args.eval_size,
        epochs=args.epochs, lr=args.lr, batch_size=args.batch_size, eval_seed=args.eval_seed,
        max_length=args.max_length, model_params=parse_assignments(args.param),
        attack_params=parse_assignments(getattr(args, "attack_param", [])),
        checkpoint=getattr(args, "checkpoint", None), label_map=getattr(args, "label_map", None),
        text_column=comma_list(args.text_column), label_column=args.label_column, labels=comma_list(args.labels),
        data_source=args.data_source)


PROTOCOL_SETS = ("attack", "task", "eval_size", "eval_seed", "attack_param", "model")  # flags --protocol sets


def specs_from_args(args, settings):
    """One RunSpec per --seed, through the library's one path (`robench.runs.options.specs`)."""
    from robench.runs.options import specs

    return specs(options_from_args(args), settings)


def protocol_runs_from_args(args, settings):
    """`--protocol NAME --checkpoint DIR`: one resolved run per attack setting of the protocol and --seed
    (`robench.report.reference.protocol_runs`); the flags the protocol sets are refused."""
    from robench.core.errors import RobenchError
    from robench.report.reference import protocol_runs

    if not args.checkpoint:
        raise RobenchError("--protocol runs a checkpoint of your own through a published protocol: add "
                           "--checkpoint DIR")
    given = [f"--{name.replace('_', '-')}" for name in PROTOCOL_SETS
             if getattr(args, name, None) not in (None, [], DEFAULTS.get(name))]
    if given:
        raise RobenchError(f"--protocol {args.protocol} sets the task, attacks and eval sizes: drop "
                           f"{', '.join(given)}")
    return protocol_runs(args.protocol, args.checkpoint, settings, args.label_map, tuple(args.seed))


DEFAULTS = {"attack": "advglue", "task": "sst2", "eval_seed": 0}  # the run flags' defaults (add_spec_args)


def plain(text) -> Text:
    """A name or text from data or a record as one terminal cell: plain text (no rich markup), control and
    bidirectional characters shown as visible escapes (`robench.core.text.terminal_safe`)."""
    from robench.core.text import terminal_safe

    return Text(terminal_safe(text))


def narrow_table(title: str, headers: tuple[str, ...], caption: str | None = None) -> Table:
    """A rich table that keeps its headers whole on an 80-column terminal: light rules, one space between columns,
    and each column at least as wide as its header's longest word (cells fold; headers break only between
    words)."""
    from rich import box

    table = Table(title=title, caption=caption, box=box.SIMPLE_HEAD, collapse_padding=True, pad_edge=False)
    for header in headers:
        table.add_column(header, overflow="fold", min_width=max(len(word) for word in header.split()))
    return table


def run_title(spec: dict, hyperparameters: dict | None = None) -> str:
    """A run as its record names it: `MODEL × ATTACK (budget=SETTING) on TASK` and, for a model robench
    fine-tuned, its backbone and seed (a given checkpoint's name, `checkpoint:NAME@HASH`, already says what it
    is). The budget setting is the resolved one of `hyperparameters` (a record's), else the spec's."""
    from robench.report.identity import budget_of

    trained = spec.get("checkpoint") is None
    budget = budget_of(spec, hyperparameters)
    return (f"{spec.get('model')} × {spec.get('attack')}" + (f" (budget={budget})" if budget else "")
            + f" on {spec.get('task')}" + (f" (backbone {spec.get('backbone')}, seed {spec.get('seed')})"
                                           if trained else ""))


def progress_console(args) -> Console | None:
    """stderr console for progress bars, or None with --quiet."""
    return None if getattr(args, "quiet", False) else Console(stderr=True)


def say_estimate(estimate, note: str = "", grid: bool = False) -> None:
    """The estimate's lines with this process's start-up (and how to make a long CPU run cheaper), on stderr
    before any work starts."""
    lines = with_startup(estimate).lines()
    err = Console(stderr=True)
    err.print("\n".join([lines[0] + (f" ({note})" if note else ""), *lines[1:]]), highlight=False, markup=False)
    if (advice := estimate.advice(grid)) is not None:
        err.print(f"hint: {advice}", highlight=False, markup=False)


def with_startup(estimate):
    """`estimate` with the start-up a new robench process for it pays: this process's seconds from its start to
    now (imports, reading the data), less the time the estimate spent timing the model."""
    from robench.runs.estimate import process_seconds

    seconds = process_seconds()
    return estimate.with_startup(None if seconds is None else seconds - estimate.measuring_seconds)
