"""`robench run`, `train`, `list`, `leaderboard` and `audit`: making runs, and reading the finished ones."""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Iterable

from rich.console import Console
from rich.table import Table

from robench.cli.common import (
    add_spec_args,
    plain,
    progress_console,
    protocol_runs_from_args,
    run_title,
    say_estimate,
    settings_from_args,
    specs_from_args,
    with_startup,
)
from robench.core.errors import RobenchError

if TYPE_CHECKING:
    from robench.runs.resolve import ResolvedRun


def add_parser(sub) -> None:
    p = sub.add_parser("run", help="fine-tune (or reuse), attack, write a run record")
    add_spec_args(p, attack=True)
    p.set_defaults(handler=cmd_run)
    p = sub.add_parser("train", help="fine-tune (or reuse the cached checkpoint) only")
    add_spec_args(p, attack=False)
    p.set_defaults(handler=cmd_train)
    p = sub.add_parser("list", help="list registered models, attacks and tasks with their source")
    p.add_argument("kind", nargs="?", choices=["models", "attacks", "tasks"])
    p.set_defaults(handler=cmd_list)
    p = sub.add_parser("leaderboard", help="aggregate run records into leaderboard CSV and Markdown (one row per "
                                          "checkpoint; settings.{csv,md}: one row per setting)")
    p.add_argument("--results-dir", help="default: $ROBENCH_RESULTS_DIR or ./results")
    p.add_argument("--with-analysis", action="store_true", help="add `robench analyze` columns (mean ± std)")
    p.add_argument("--html", metavar="PATH", help="also write a self-contained static HTML page (tables, plots)")
    p.add_argument("--baseline", metavar="MODEL",
                   help="add each row's paired difference in accuracy under attack from MODEL at the same setting "
                        "(as `robench compare`); the page marks each cell with the verdict (the page's default "
                        "baseline: bert, when it has records)")
    p.add_argument("--output", metavar="DIR",
                   help="write the tables (and relative page links) here instead of into the results directory")
    p.add_argument("--run-pages", action="store_true",
                   help="with --html: also write each run's page of adversarial examples (runs/<id>.html beside it)")
    add_with_reference(p)
    p.set_defaults(handler=cmd_leaderboard)
    p = sub.add_parser("audit", help="re-audit the swaps of word-level records whose validity audit has an older "
                                    "format (robench.engine.audit), from their per-example CSVs")
    p.add_argument("results_dirs", nargs="*", metavar="RESULTS_DIR",
                   help="folders with a runs/ folder (default: $ROBENCH_RESULTS_DIR or ./results)")
    p.add_argument("--data-dir", help="data directory with the audit's lists and WordNet (default: $ROBENCH_DATA_DIR)")
    p.set_defaults(handler=cmd_audit)


def cmd_run(args) -> None:
    settings, console = settings_from_args(args), progress_console(args)
    if args.dry_run:
        return dry_run(args, settings, attack=True)
    runs = requested_runs(args, settings, attack=True)  # a bad name is refused before torch loads
    from robench.runs.runner import run_resolved

    if getattr(args, "protocol", None):
        runs = list(runs)
        if not args.no_estimate:  # the protocol's whole cost first; each run says its own as it starts
            say_estimate(protocol_estimate(runs, args.device, args.remeasure),
                         note=f"--protocol {args.protocol}: {len(runs)} runs")
    elif args.remeasure:
        runs = list(runs)
        remeasure(runs, args.device)
    for resolved in runs:
        record = run_resolved(resolved, device=args.device, console=console, force=args.force,
                              on_estimate=None if args.no_estimate else say_estimate)
        Console().print(summary_table(record))
        print(f"record: {settings.runs_dir / (record.run_id + '.json')}")
        print(f"next: robench show {record.run_id}" + ("" if args.results_dir is None else
                                                       f" --results-dir {settings.results_dir}"))
    if getattr(args, "protocol", None):
        flag = "--with-reference" + ("" if args.protocol == "reference" else f" {args.protocol}")
        print(f"next: robench leaderboard {flag} --html board.html   # your row among the published ones\n"
              f"      robench compare {flag}   # paired with the baseline's seeds on the same examples")


def protocol_estimate(runs: list[ResolvedRun], device: str, remeasure: bool = False):
    """The cost of a protocol's runs added up (one speed measurement: they attack one checkpoint)."""
    from robench.classifier.device import pick_device
    from robench.runs.estimate import estimate, total_estimate
    from robench.runs.runner import _say

    torch_device, memo = pick_device(device), {}
    parts = [estimate(r, torch_device, True, memo=memo, say=_say, remeasure=remeasure and i == 0)
             for i, r in enumerate(runs)]
    return total_estimate(parts, torch_device)


def remeasure(runs: list[ResolvedRun], device: str) -> None:
    """`--remeasure` before a run: time each run's model again now (the run's estimate then reads it)."""
    from robench.classifier.device import pick_device
    from robench.runs.runner import _say
    from robench.runs.speed import model_speed

    torch_device = pick_device(device)
    for resolved in runs:
        model_speed(resolved, torch_device, resolved.texts(), persist=True, memo={}, say=_say, remeasure=True)


def requested_runs(args, settings, attack: bool) -> Iterable[ResolvedRun]:
    """The runs the flags ask for, each resolved once (the run goes on from its resolved form): with --protocol,
    the protocol's, resolved up front to check them against the published settings; else one per --seed, resolved
    as its turn comes, after unknown names are refused (before torch loads)."""
    from robench.core.progress import phase

    if getattr(args, "protocol", None):
        with phase(f"resolving the runs of protocol {args.protocol} (reading the checkpoint and the data)"):
            return protocol_runs_from_args(args, settings)
    if getattr(args, "checkpoint", None):
        with phase("reading the checkpoint's files (transformers loads to check them)"):
            specs = specs_from_args(args, settings)
    else:
        specs = specs_from_args(args, settings)
    _require_names(specs, attack)
    with phase("loading torch and transformers"):
        from robench.runs.resolve import resolve_run

    def resolve(spec):
        with phase("reading the task data and resolving the run"):
            return resolve_run(spec, settings, attack=attack)

    return map(resolve, specs)


def _require_names(specs, attack: bool) -> None:
    """Unknown model and attack names refused from the registries' declarations (no torch); the full checks follow
    when the run resolves."""
    from robench.engine.attack import ATTACKS
    from robench.training.defense import MODELS

    for spec in specs:
        if spec.checkpoint is None:
            for part in spec.model.split("+"):
                MODELS.require(part)
        if attack:
            ATTACKS.require(spec.attack)


def cmd_train(args) -> None:
    from robench.core.progress import phase

    with phase("loading torch and transformers"):
        from robench.runs.runner import train

    settings, console = settings_from_args(args), progress_console(args)
    if args.dry_run:
        return dry_run(args, settings, attack=False)
    for spec in specs_from_args(args, settings):
        if args.remeasure:
            from robench.runs.resolve import resolve_run

            remeasure([resolve_run(spec, settings, attack=False)], args.device)
        trained = train(spec, settings, device=args.device, console=console,
                        on_estimate=None if args.no_estimate else say_estimate)
        state = "reused cached checkpoint" if trained.cached else "trained"
        print(f"{state}: {trained.checkpoint} (dev accuracy {trained.record['dev_accuracy']:.4f})")


def dry_run(args, settings, attack: bool) -> None:
    """`--dry-run`: each run's plan (run id, checkpoint and record state, the cost estimate), resolved now; for a
    protocol, its runs' total after them."""
    estimates = []
    for resolved in requested_runs(args, settings, attack):
        plan, lines = plan_lines(resolved, args.device, cost=not args.no_estimate,
                                 remeasure=args.remeasure and not estimates)
        print("\n".join(lines))
        estimates.append(plan.estimate)
    if getattr(args, "protocol", None) and len(estimates) > 1 and all(e is not None for e in estimates):
        from robench.classifier.device import pick_device
        from robench.runs.estimate import total_estimate

        total = with_startup(total_estimate(estimates, pick_device(args.device))).lines()
        print(f"--protocol {args.protocol}, {len(estimates)} runs: {total[0]}", *total[1:], sep="\n")


def plan_lines(resolved, device: str, cost: bool = True, remeasure: bool = False):
    """The plan of a resolved run and the lines a dry run prints for it (timing the model goes to stderr)."""
    import json

    from robench.runs.runner import plan_resolved
    from robench.runs.spec import used_settings

    def say(line: str) -> None:
        Console(stderr=True).print(line, highlight=False, markup=False)

    p = plan_resolved(resolved, device, cost=cost, say=say, remeasure=remeasure)
    attack = resolved.recipe is not None
    state = "given: attacked as it is" if not p.spec.trains else "cached" if p.checkpoint_cached else "to train"
    lines = [json.dumps({"run_id": p.spec.run_id, "spec": used_settings(p.spec.to_dict())}, indent=2),
             f"checkpoint: {p.checkpoint} ({state})"]
    if p.spec.checkpoint is not None and p.spec.checkpoint.get("kind") == "checkpoint":
        from robench.runs.checkpoint_info import directory_lines
        from robench.runs.given import checkpoint_dir

        lines += directory_lines(checkpoint_dir(p.spec.checkpoint["location"]), resolved.label_order,
                                 p.spec.checkpoint.get("label_map"))
    if p.record is not None:
        lines.append(f"record: {p.record} ({'finished' if p.record_finished else 'to run'})")
    if p.estimate is None:
        lines.append("nothing to do: everything is cached" if p.record_finished or not attack else
                     "no cost estimate (--no-estimate)")
    else:
        lines += with_startup(p.estimate).lines()
        if (advice := p.estimate.advice()) is not None:
            lines.append(f"hint: {advice}")
    return p, lines


def print_plan(spec, settings, device: str, attack: bool, cost: bool = True, remeasure: bool = False) -> None:
    from robench.runs.resolve import resolve_run

    print("\n".join(plan_lines(resolve_run(spec, settings, attack=attack), device, cost, remeasure)[1]))


ROWS = [("Dev accuracy (whole eval split)", "dev_accuracy", "%"), ("Original (clean) accuracy", "clean_accuracy", "%"),
        ("Accuracy under attack", "robust_accuracy", "%"),
        ("Accuracy drop (clean - under attack, same examples)", "accuracy_drop", "%"),
        ("Dev accuracy - accuracy under attack (other examples)", "dev_minus_robust", "%"),
        ("Attack success rate", "attack_success_rate", "%"), ("Skipped attacks", "skipped", "n"),
        ("Failed attacks", "failed", "n"), ("Successful attacks", "successful", "n"), ("Errors", "errors", "n"),
        ("Average perturbed word %", "avg_perturbed_word_pct", "f"),
        ("Average words per input", "avg_words_per_input", "f"), ("Average queries", "avg_queries", "f")]


def summary_table(record) -> Table:
    title = f"{run_title(record.spec, record.hyperparameters)}: {record.metrics.get('examples')} examples"
    table = Table(title=plain(title))
    table.add_column("Metric")
    table.add_column("Value", justify="right")
    from robench.report.leaderboard import derived_metrics

    metrics = {**record.metrics, **derived_metrics(record.metrics)}  # the leaderboard's definitions, old records too
    for label, key, kind in ROWS:
        value = metrics.get(key)
        if value is None:
            continue
        text = f"{100 * value:.2f}%" if kind == "%" else str(value) if kind == "n" else f"{value:.2f}"
        table.add_row(label, text)
    if warnings := untrained_warnings(record):
        table.caption = plain("WARNING: the checkpoint " + "; ".join(warnings) + " (its accuracy under attack says "
                              "nothing about robustness)")
    elif note := unchecked_note(record):
        table.caption = plain(f"note: {note}")
    return table


def untrained_warnings(record) -> list[str]:
    """The record's failed chance checks (`robench.runs.chance`), as warnings."""
    from robench.runs.chance import untrained

    return [c.warning() for c in untrained(_chance_checks(record))]


def unchecked_note(record) -> str | None:
    """The note "too few examples to check training (...)" when none of the record's chance checks can tell."""
    from robench.runs.chance import unchecked

    return unchecked(_chance_checks(record))


def _chance_checks(record) -> list:
    from robench.runs.chance import ChanceCheck

    return [ChanceCheck.from_dict(d) for d in record.metrics.get("chance") or []]


def cmd_list(args) -> None:
    import contextlib

    from robench.core.progress import phase
    from robench.data import TASKS
    from robench.engine.attack import ATTACKS
    from robench.training.defense import MODELS

    for name, registry in (("models", MODELS), ("attacks", ATTACKS), ("tasks", TASKS)):
        if args.kind not in (None, name):
            continue
        table = Table(title=name)
        table.add_column("name")
        table.add_column("source")
        table.add_column("summary")
        with phase(f"importing the built-in {name} for their summaries (torch: a few seconds)") \
                if name == "models" else contextlib.nullcontext():
            for entry in registry.entries():
                obj = entry.obj if entry.entry_point is not None else entry.load()  # a plugin: imported when used
                summary = "; ".join(filter(None, (getattr(obj, "summary", ""), getattr(obj, "note", "")))) \
                    if obj is not None else f"(lazy: {entry.entry_point.value})"
                table.add_row(entry.name, entry.source, summary)
        for pattern, obj in registry.families().items():  # e.g. transfer:RUN_ID
            table.add_row(pattern, "robench", getattr(obj, "summary", ""))
        Console().print(table)


def add_with_reference(p) -> None:
    p.add_argument("--with-reference", nargs="?", const="reference", metavar="PROTOCOL",
                   help="place your checkpoints run with --protocol among the published records of PROTOCOL "
                        "(default: reference), each compared with the baseline's seeds on the same examples")


def reference_view(args, settings, into):
    """With --with-reference: the results folder `into` whose runs/ links the protocol's records and the user's
    (`robench.report.reference.with_reference`); else the results directory."""
    if not args.with_reference:
        return settings.results_dir
    from pathlib import Path

    from robench.core.packed import runs_to_read
    from robench.report.reference import with_reference

    if Path(into).resolve() == settings.results_dir.resolve():
        raise RobenchError(f"--output {into} is the results directory: --with-reference writes links to the "
                           "published records into OUTPUT/runs, beside your own; choose another --output (default: "
                           "RESULTS_DIR/with-reference)")
    with_reference(runs_to_read(settings.results_dir, settings.cache_dir), args.with_reference, Path(into))
    return Path(into)


def cmd_leaderboard(args) -> None:
    from pathlib import Path

    from robench.core.packed import runs_to_read
    from robench.report.leaderboard import load_records, write_leaderboard

    settings = settings_from_args(args)
    if args.html:
        check_page_path(args.html)
    if args.run_pages and not args.html:
        raise RobenchError("--run-pages writes the pages the leaderboard page links: add --html PAGE")
    output = Path(args.output).expanduser() if args.output else None
    if args.with_reference and output is None:
        output = settings.results_dir / f"with-{args.with_reference}"
    results = reference_view(args, settings, output)
    baseline = args.baseline or ("bert" if args.with_reference else None)
    analyses = None
    if args.with_analysis:
        from robench.analysis import analysis_frame

        analyses = analysis_frame(settings.results_dir, settings.cache_dir)
    table, csv_path, md_path = write_leaderboard(results, analyses, baseline=baseline, cache_dir=settings.cache_dir,
                                                 output=output)
    print(md_path.read_text())
    print(f"wrote {csv_path} and {md_path} ({len(table)} checkpoints), and beside them settings.csv and settings.md "
          "(one row per setting)")
    if note := load_records(runs_to_read(results, settings.cache_dir)).note:
        print(note)
    if args.html:
        from robench.report.leaderboard_page import write_html

        page = write_html(results, args.html, baseline=baseline, table=table, cache_dir=settings.cache_dir,
                          run_pages=args.run_pages)
        print(f"wrote {page}")


def cmd_audit(args) -> None:
    from robench.core.paths import resolve_settings
    from robench.runs.runner import reaudit
    from robench.runs.store import git_commit

    every = [resolve_settings(args.data_dir, None, d) for d in args.results_dirs or [None]]
    every[0].require_data_dir()
    if missing := [str(s.runs_dir) for s in every if not s.runs_dir.is_dir()]:
        raise RobenchError(f"no runs directory {', '.join(missing)}: name folders that hold a runs/ folder")
    commit = git_commit()  # before any record changes the tree
    for settings in every:
        done = reaudit(settings.runs_dir, settings, commit)
        print(f"re-audited {len(done)} record(s) in {settings.runs_dir}")


def check_page_path(page: str) -> None:
    """--html names a file whose folder exists (or can be made) and is writable (checked before anything is
    written)."""
    from pathlib import Path

    from robench.core.errors import RobenchError

    path = Path(page).expanduser()
    if page.endswith(("/", os.sep)) or path.is_dir():
        raise RobenchError(f"--html {page} is a directory; name the page file, e.g. {path / 'leaderboard.html'}")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise RobenchError(f"--html {page}: {parent} is a file, not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise RobenchError(f"--html {page}: {parent} is not writable")
