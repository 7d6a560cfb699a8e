"""`robench bench NAME`: benchmarks that print ratios measured side by side (one sub-command per benchmark).

Each parser's flags map onto the benchmark's options dataclass (`robench.bench.options`): a flag left out
is None here, so the dataclass default applies. The defaults live there, once: the help names them from there
(`default`).
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

from robench.bench.options import (
    AnalysisBenchOptions,
    AttackBenchOptions,
    DefensesOptions,
    SearchGrid,
    StartupBenchOptions,
    TrainBenchOptions,
)
from robench.cli.common import add_common_args, add_spec_args, progress_console, settings_from_args, specs_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks (ratios measured side by side in one run)",
                       description="Run `robench bench NAME --help` for each benchmark's options.")
    benchmarks = p.add_subparsers(dest="name", required=True, metavar="NAME")
    for add in (_add_analysis, _add_attack, _add_defenses, _add_estimate, _add_startup, _add_train):
        add(benchmarks)


def default(cls: type, name: str) -> str:
    """The default of `cls`'s field `name` as a help text writes it: "4000", "bert imbert" (a tuple), "none"."""
    found = next(f for f in dataclasses.fields(cls) if f.name == name)
    value = found.default_factory() if found.default is dataclasses.MISSING else found.default
    return "none" if value is None else " ".join(map(str, value)) if isinstance(value, tuple) else str(value)


def add_task_args(p: argparse.ArgumentParser, cls: type) -> None:
    """--task in every form `robench run` takes, with the flags of the one-line form (`cls`: the options dataclass
    whose default task applies)."""
    p.add_argument("--task", help="registered task, a task file (my_task.toml), or csv:FILE / tsv: / jsonl: / "
                                  f"parquet: (default: {default(cls, 'task')})")
    p.add_argument("--text-column", help="with --task FORMAT:FILE: the text column, or two comma-separated for "
                                         "sentence pairs (default: text)")
    p.add_argument("--label-column", help="with --task FORMAT:FILE: the label column (default: label)")
    p.add_argument("--labels", help="with --task FORMAT:FILE: the label names in index order, comma-separated")


def options(cls: type, args: argparse.Namespace, **given: Any) -> Any:
    """`cls` from the flags named like its fields (lists become tuples); flags left out keep cls's defaults."""
    values = {f.name: getattr(args, f.name, None) for f in dataclasses.fields(cls)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in values.items() if v is not None}
    return cls(**{**values, **given})


# ---------------------------------------------------------------- defenses

def _add_defenses(sub) -> None:
    p = sub.add_parser("defenses", help="every defense against bert: clean and AdvGLUE accuracy, training cost",
                       description="`robench bench defenses`: every defense against `bert`, side by side in one "
                                   "invocation.")
    p.add_argument("--models", nargs="+", help="models to compare (bert is the baseline; default: "
                                               f"{default(DefensesOptions, 'models')})")
    add_task_args(p, DefensesOptions)
    p.add_argument("--backbone")
    p.add_argument("--train-size", type=int,
                   help=f"training subset (default {default(DefensesOptions, 'train_size')})")
    p.add_argument("--low-resource", type=int, help="low-resource training subset; 0 skips it (default "
                                                    f"{default(DefensesOptions, 'low_resource')})")
    p.add_argument("--low-resource-epochs", type=int,
                   help="epochs for the low-resource subset; 0: as many optimisation steps as the full subset gets, "
                        "i.e. epochs x train-size / low-resource (default "
                        f"{default(DefensesOptions, 'low_resource_epochs')})")
    p.add_argument("--seeds", type=int, nargs="+", help=f"default: {default(DefensesOptions, 'seeds')}")
    p.add_argument("--epochs", type=int)
    p.add_argument("--lr", type=float)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--max-length", type=int)
    p.add_argument("--param", dest="params", action="append", default=[], metavar="MODEL:KEY=VALUE",
                   help="hyperparameter of one model, e.g. imbert:im_gamma=0.02, or KEY=VALUE for every model "
                        "(repeatable)")
    g = p.add_argument_group("IM-BERT search (selects on SST-2 dev accuracy only)")
    g.add_argument("--search", action="store_true", help="grid-search IM-BERT instead of running the bench")
    g.add_argument("--grid-gamma", type=float, nargs="+", help=f"default: {default(SearchGrid, 'gamma')}")
    g.add_argument("--grid-steps", type=int, nargs="+", help=f"default: {default(SearchGrid, 'steps')}")
    g.add_argument("--grid-layers", nargs="+", help="layer sets: all, or e.g. 0,1,2 (default: "
                                                    f"{default(SearchGrid, 'layers')})")
    p.add_argument("--step-cost", type=int, default=0, metavar="N",
                   help="only time N training steps per model on identical batches; print ratios to bert")
    add_common_args(p)
    p.set_defaults(handler=cmd_defenses)


def cmd_defenses(args) -> None:
    from robench.bench.defenses import (
        compare_defenses,
        search_imbert,
        step_cost,
    )

    bench = options(DefensesOptions, args)
    settings = settings_from_args(args)
    if args.step_cost > 0:
        step_cost(bench, args.step_cost, settings)
    elif args.search:
        grid = SearchGrid(**{k: tuple(v) for k, v in (("gamma", args.grid_gamma), ("steps", args.grid_steps),
                                                      ("layers", args.grid_layers)) if v is not None})
        search_imbert(bench, grid, settings, progress_console(args))
    else:
        compare_defenses(bench, settings, progress_console(args))


# ---------------------------------------------------------------- analysis

def _add_analysis(sub) -> None:
    p = sub.add_parser("analysis", help="the arXiv 2108.13602 diagnostics for several models x seeds",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="`robench bench analysis`: the arXiv 2108.13602 diagnostics for several models × "
                                   "seeds, as one\nMarkdown table (mean ± std over seeds) plus, for each model "
                                   "against the baseline, whether the\npaper's direction holds.")
    add_spec_args(p, attack=False)
    p.set_defaults(model="bert,freelb,smart,imbert", seed=[0, 1, 2])
    p.add_argument("--baseline", help="model the others are compared with (default: "
                                      f"{default(AnalysisBenchOptions, 'baseline')})")
    p.add_argument("--examples", type=int, help="eval examples per analysis (default: "
                                                f"{default(AnalysisBenchOptions, 'examples')})")
    p.add_argument("--shuffles", type=int, help="word shuffles per example (default: "
                                                f"{default(AnalysisBenchOptions, 'shuffles')})")
    p.add_argument("--out", type=Path, help="Markdown file (default: <results_dir>/analysis_bench.md)")
    p.set_defaults(handler=cmd_analysis)


def cmd_analysis(args) -> None:
    """One spec per (model, seed): the spec flags, with `--param` routed by `robench.core.params.params_by_model`."""
    from robench.bench.analysis import analysis_bench
    from robench.core.params import params_by_model
    from robench.runs.options import comma_list

    models = comma_list(args.model) or []
    params = params_by_model(models, args.param)
    settings = settings_from_args(args)
    base = list(specs_from_args(argparse.Namespace(**{**vars(args), "model": models[0], "param": []}), settings))
    runs = {m: [dataclasses.replace(spec, model=m, model_params=params[m]) for spec in base] for m in models}
    analysis_bench(runs, options(AnalysisBenchOptions, args), settings, progress_console(args))


# ---------------------------------------------------------------- attack

def _add_attack(sub) -> None:
    p = sub.add_parser("attack", help="robench's textfooler vs TextAttack's, side by side; the fraction of the raw "
                                      "forward rate and where the time goes",
                       description="`robench bench attack`: robench's `textfooler` vs TextAttack's "
                                   "(`textattack:textfooler`), side by side, each attack's forward rate as a "
                                   "fraction of the raw forward rate on the same inputs, and the profile of its "
                                   "time.")
    p.add_argument("--attack", help="robench recipe: textfooler (beside TextAttack's), bert-attack or gradient-swap "
                                    f"(alone) (default: {default(AttackBenchOptions, 'attack')})")
    p.add_argument("--examples", type=int, help="eval examples attacked (default: "
                                                f"{default(AttackBenchOptions, 'examples')})")
    add_task_args(p, AttackBenchOptions)
    p.add_argument("--model")
    p.add_argument("--backbone")
    p.add_argument("--train-size", type=int)
    p.add_argument("--epochs", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--synonym-source", help="lexicon, counterfitted-glove or neighbors (default: "
                                            f"{default(AttackBenchOptions, 'synonym_source')})")
    p.add_argument("--sentence-encoder", help="minilm (calibrated thresholds) or use-m3 (default: "
                                              f"{default(AttackBenchOptions, 'sentence_encoder')})")
    p.add_argument("--query-budget", type=int, help="per example, both attacks (default: "
                                                    f"{default(AttackBenchOptions, 'query_budget')})")
    p.add_argument("--no-stock", dest="stock", action="store_false", default=None,
                   help="skip the third run, TextAttack with its stock HuggingFaceModelWrapper (the slowest)")
    p.add_argument("--robench-param", action="append", default=[], metavar="KEY=VALUE",
                   help="extra robench textfooler parameter (e.g. concurrency=64)")
    p.add_argument("--data-dir")
    p.add_argument("--cache-dir")
    p.add_argument("--results-dir")
    p.add_argument("--device", default="auto")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    p.set_defaults(handler=cmd_attack)


def cmd_attack(args) -> None:
    from robench.bench.attack import compare_attacks
    from robench.core.params import parse_assignments

    bench = options(AttackBenchOptions, args, robench_params=parse_assignments(args.robench_param))
    compare_attacks(bench, settings_from_args(args), progress_console(args))


# ---------------------------------------------------------------- train

def _add_train(sub) -> None:
    p = sub.add_parser("train", help="robench's fine-tuning loop vs a plain Hugging Face Trainer",
                       description="`robench bench train`: robench's fine-tuning loop vs a plain Hugging Face "
                                   "`Trainer`.")
    p.add_argument("--task")
    p.add_argument("--backbone")
    p.add_argument("--train-size", type=int)
    p.add_argument("--epochs", type=int)
    p.add_argument("--batch-size", type=int)
    p.add_argument("--seed", type=int)
    p.add_argument("--data-dir")
    p.add_argument("--device", default="auto")
    p.set_defaults(handler=cmd_train)


def cmd_train(args) -> None:
    from robench.bench.train import compare_trainers

    compare_trainers(options(TrainBenchOptions, args))


# ---------------------------------------------------------------- estimate

def _add_startup(sub) -> None:
    p = sub.add_parser("startup", help="how fast robench answers: --help, errors, show, leaderboard, a small run",
                       description="`robench bench startup`: wall and CPU seconds of --help, an argument error, "
                                   "`show` and `leaderboard` over a 20-example view of a run, the lexicon's relations "
                                   "built and cached, and a small run's first line and longest silence, each in a "
                                   "fresh process, beside its target.")
    p.add_argument("--run-id", help="the word-level run to show (default: the first in the results dir's runs/)")
    p.add_argument("--no-lexicon-build", dest="build_lexicon", action="store_false", default=None,
                   help="skip timing the lexicon's build from scratch (13 s idle)")
    p.add_argument("--no-small-run", dest="small_run", action="store_false", default=None,
                   help="skip the small run (trains MiniLM on 64 examples)")
    add_common_args(p)
    p.set_defaults(handler=cmd_startup)


def cmd_startup(args) -> None:
    from robench.bench.startup import startup_bench

    settings = settings_from_args(args)
    settings.require_data_dir()
    startup_bench(options(StartupBenchOptions, args), settings)


def _add_estimate(sub) -> None:
    p = sub.add_parser("estimate", help="the upfront cost estimate against real runs, stage by stage",
                       description="`robench bench estimate`: estimated vs measured time per stage (train, attack) "
                                   "for small real runs of each model.")
    from robench.bench.estimate import EstimateBenchOptions  # light enough to build the parser with

    p.add_argument("--models", nargs="+", help=f"default: {default(EstimateBenchOptions, 'models')}")
    p.add_argument("--task")
    p.add_argument("--attack", help=f"default: {default(EstimateBenchOptions, 'attack')}")
    p.add_argument("--backbone")
    p.add_argument("--train-size", type=int, help=f"default: {default(EstimateBenchOptions, 'train_size')}")
    p.add_argument("--epochs", type=int, help=f"default: {default(EstimateBenchOptions, 'epochs')}")
    p.add_argument("--eval-size", type=int, help=f"default: {default(EstimateBenchOptions, 'eval_size')}")
    p.add_argument("--seed", type=int)
    p.add_argument("--dry-run", action="store_true",
                   help="time `robench run --dry-run` as a new process, first (it times the model) and again, against "
                        "the 15 s target, instead of estimating and running")
    p.add_argument("--headline", action="store_true",
                   help="the README's headline command (robench run --model imbert --attack textfooler) instead of "
                        "--models at these sizes")
    p.add_argument("--protocol", metavar="NAME", help="with --checkpoint: that checkpoint through protocol NAME "
                                                      "(reference), its runs' estimate made before any of them")
    p.add_argument("--checkpoint", metavar="DIR", help="with --protocol: the checkpoint it runs")
    add_common_args(p)
    p.set_defaults(handler=cmd_estimate)


def cmd_estimate(args) -> None:
    from robench.bench.estimate import EstimateBenchOptions, dry_run_bench, estimate_bench

    given = options(EstimateBenchOptions, args)
    if given.dry_run:
        dry_run_bench(given, settings_from_args(args))
    else:
        estimate_bench(given, settings_from_args(args), progress_console(args))
