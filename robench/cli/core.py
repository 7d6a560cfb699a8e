"""`robench run`, `train`, `list`, `leaderboard` and `audit`."""
from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table

from robench.cli.common import (
    add_spec_args,
    plain,
    progress_console,
    run_title,
    say_estimate,
    settings_from_args,
    specs_from_args,
)
from robench.core.errors import RobenchError


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
    p.set_defaults(handler=cmd_leaderboard)
    p = sub.add_parser("audit", help="re-audit the swaps of word-level records whose validity audit has an older "
                                    "format (robench.engine.audit), from their per-example CSVs")
    p.add_argument("results_dirs", nargs="*", metavar="RESULTS_DIR",
                   help="folders with a runs/ folder (default: $ROBENCH_RESULTS_DIR or ./results)")
    p.add_argument("--data-dir", help="data directory with the audit's lists and WordNet (default: $ROBENCH_DATA_DIR)")
    p.set_defaults(handler=cmd_audit)


def cmd_run(args) -> None:
    from robench.core.progress import phase

    settings, console = settings_from_args(args), progress_console(args)
    if args.dry_run:
        return dry_run(args, settings, attack=True)
    specs = specs_from_args(args, settings)  # a bad request is refused before torch loads
    _require_names(specs)
    with phase("loading torch and transformers"):
        from robench.runs.runner import run
    for spec in specs:
        record = run(spec, settings, device=args.device, console=console, force=args.force,
                     on_estimate=None if args.no_estimate else say_estimate)
        Console().print(summary_table(record))
        print(f"record: {settings.runs_dir / (record.run_id + '.json')}")
        print(f"next: robench show {record.run_id}" + ("" if args.results_dir is None else
                                                       f" --results-dir {settings.results_dir}"))


def _require_names(specs) -> None:
    """Unknown model and attack names refused from the registries' declarations (no torch); the full checks follow
    when the run resolves."""
    from robench.core.registry import ATTACKS, MODELS

    for spec in specs:
        if spec.checkpoint is None:
            for part in spec.model.split("+"):
                MODELS.require(part)
        ATTACKS.require(spec.attack)


def cmd_train(args) -> None:
    from robench.core.progress import phase

    with phase("loading torch and transformers"):
        from robench.runs.runner import train

    settings, console = settings_from_args(args), progress_console(args)
    if args.dry_run:
        return dry_run(args, settings, attack=False)
    for spec in specs_from_args(args, settings):
        trained = train(spec, settings, device=args.device, console=console,
                        on_estimate=None if args.no_estimate else say_estimate)
        state = "reused cached checkpoint" if trained.cached else "trained"
        print(f"{state}: {trained.checkpoint} (dev accuracy {trained.record['dev_accuracy']:.4f})")


def dry_run(args, settings, attack: bool) -> None:
    """`--dry-run`: each seed's plan, from the dry-run cache while nothing it depends on changed
    (`robench.runs.plan_cache`), else resolved and estimated now (and cached)."""
    from robench.runs import plan_cache

    if cached_dry_run(args, attack, settings):
        return
    key = _plan_key(args, settings, attack)
    entries = []
    for spec in specs_from_args(args, settings):
        p, lines = plan_lines(spec, settings, args.device, attack, cost=not args.no_estimate)
        print("\n".join(lines))
        entries.append(_plan_entry(p, lines, args))
    plan_cache.save(settings.cache_dir, key, entries)


def _plan_key(args, settings, attack: bool) -> str:
    import dataclasses

    from robench.cli.common import options_from_args
    from robench.runs import plan_cache

    options = dataclasses.asdict(options_from_args(args))
    dirs = {k: str(v) if v is not None else None for k, v in dataclasses.asdict(settings).items()}
    return plan_cache.plan_key("run" if attack else "train", options, args.device, dirs, args.no_estimate)


def cached_dry_run(args, attack: bool, settings=None) -> bool:
    """Print the dry run's cached answer and return True, if there is one that still holds
    (`robench.runs.plan_cache`); imports none of the heavy libraries."""
    import sys

    from robench.runs import plan_cache

    settings = settings or settings_from_args(args)
    if (lines := plan_cache.load(settings.cache_dir, _plan_key(args, settings, attack))) is None:
        return False
    print("\n".join(lines))
    print("(the cached answer of an identical dry run: code, data, calibration, checkpoint and record unchanged)",
          file=sys.stderr)
    return True


def _plan_entry(p, lines: list[str], args) -> dict:
    """What the dry-run cache keeps of one plan, and what must still hold to reuse it."""
    from pathlib import Path

    from robench.runs import plan_cache
    from robench.runs.estimate import CALIBRATION_MAX_AGE

    run, files = p.resolved, []
    if run.spec.task_source is not None:
        files += [Path(f) for f in run.spec.task_source["files"].values() if f]
    elif run.spec.data_source == "local" and run.settings.data_dir is not None:
        files += [run.settings.data_dir / f for f in run.task.data_files]
    if run.recipe is not None and run.settings.data_dir is not None:
        files += [run.settings.data_dir / f for f in run.recipe.data_files]
    if str(args.task).endswith(".toml"):
        files.append(Path(args.task).expanduser().resolve())
    if run.backbone is not None and Path(run.backbone.location).is_dir():
        files.append(Path(run.backbone.location))
    return {"lines": lines, "files": plan_cache.file_stamps(files),
            "checkpoint": None if not run.spec.trains else str(p.checkpoint), "checkpoint_cached": p.checkpoint_cached,
            "record": str(p.record) if p.record is not None else None, "record_finished": p.record_finished,
            "calibration": None if p.calibration is None else
            plan_cache.calibration_entry(p.calibration, CALIBRATION_MAX_AGE)}


def plan_lines(spec, settings, device: str, attack: bool, cost: bool = True):
    """The plan of `spec` and the lines a dry run prints for it (calibration progress goes to stderr)."""
    import json

    from robench.runs.runner import plan

    def say(line: str) -> None:
        Console(stderr=True).print(line, highlight=False, markup=False)

    p = plan(spec, settings, device, attack=attack, cost=cost, say=say)
    lines = [json.dumps({"run_id": p.spec.run_id, "spec": p.spec.to_dict()}, indent=2),
             f"checkpoint: {p.checkpoint} ({'cached' if p.checkpoint_cached else 'to train'})"]
    if p.record is not None:
        lines.append(f"record: {p.record} ({'finished' if p.record_finished else 'to run'})")
    if p.estimate is None:
        lines.append("nothing to do: everything is cached" if p.record_finished or not attack else
                     "no cost estimate (--no-estimate)" if not cost else
                     "no cost estimate for a model robench did not train")
    else:
        lines.append(p.estimate.line())
        if (advice := p.estimate.advice()) is not None:
            lines.append(f"hint: {advice}")
    return p, lines


def print_plan(spec, settings, device: str, attack: bool, cost: bool = True) -> None:
    print("\n".join(plan_lines(spec, settings, device, attack, cost)[1]))


ROWS = [("Dev accuracy (whole eval split)", "dev_accuracy", "%"), ("Original (clean) accuracy", "clean_accuracy", "%"),
        ("Accuracy under attack", "robust_accuracy", "%"), ("Accuracy drop", "accuracy_drop", "%"),
        ("Attack success rate", "attack_success_rate", "%"), ("Skipped attacks", "skipped", "n"),
        ("Failed attacks", "failed", "n"), ("Successful attacks", "successful", "n"), ("Errors", "errors", "n"),
        ("Average perturbed word %", "avg_perturbed_word_pct", "f"),
        ("Average words per input", "avg_words_per_input", "f"), ("Average queries", "avg_queries", "f")]


def summary_table(record) -> Table:
    table = Table(title=plain(f"{run_title(record.spec)}: {record.metrics.get('examples')} examples"))
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
    from robench.core.registry import ATTACKS, MODELS, TASKS

    for name, registry in (("models", MODELS), ("attacks", ATTACKS), ("tasks", TASKS)):
        if args.kind not in (None, name):
            continue
        table = Table(title=name)
        table.add_column("name")
        table.add_column("source")
        table.add_column("summary")
        for entry in registry.entries():
            obj = entry.obj if entry.entry_point is not None else entry.load()  # a plugin is imported when used
            summary = getattr(obj, "summary", None) or getattr(obj, "note", "") if obj is not None else \
                f"(lazy: {entry.entry_point.value})"
            table.add_row(entry.name, entry.source, summary)
        for pattern, obj in registry.families().items():  # e.g. transfer:RUN_ID
            table.add_row(pattern, "robench", getattr(obj, "summary", ""))
        Console().print(table)


def cmd_leaderboard(args) -> None:
    from robench.report.leaderboard import load_records, write_leaderboard

    settings = settings_from_args(args)
    if args.html:
        check_page_path(args.html)
    analyses = None
    if args.with_analysis:
        from robench.analysis import analysis_frame

        analyses = analysis_frame(settings.results_dir)
    table, csv_path, md_path = write_leaderboard(settings.results_dir, analyses, baseline=args.baseline)
    print(md_path.read_text())
    print(f"wrote {csv_path} and {md_path} ({len(table)} checkpoints), and beside them settings.csv and settings.md "
          "(one row per setting)")
    if note := load_records(settings.runs_dir).note:
        print(note)
    if args.html:
        from robench.report.leaderboard_page import write_html

        print(f"wrote {write_html(settings.results_dir, args.html, baseline=args.baseline, table=table)}")


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
