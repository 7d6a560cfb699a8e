"""`robench bench estimate`: the upfront cost estimate against real runs, stage by stage.

For each model, the estimate is made exactly as `robench run` makes it (the real model freshly timed
on this device), then the same spec runs for real in a scratch cache (nothing reused; the built attack
resources are shared) and the measured stage times are printed beside the estimated ones with their ratio.
A resource the cache lacks is built inside the first model's attack stage, as in a real run, so that stage's
estimate includes the estimate's build lines.
The defaults train real classifiers (1,000 SST-2 examples, one epoch): the estimate's queries per word were
measured against real classifiers, and is only meant for them. `--headline` runs the README's headline command
instead (`robench run --model imbert --attack textfooler`, nothing else given); `--protocol reference --checkpoint
DIR` runs that checkpoint through the protocol, each run's estimate made before any of them runs (the dev pass and
the builds counted once, in the first run, as `robench run --protocol` counts them). Every table says the machine's
load before and after (`os.getloadavg`): a shared machine's load moves the measured side, and the estimate was
measured under the load before.

`robench bench estimate --dry-run` times the answer instead: for each model, `robench run ... --dry-run` as a
new process with a fresh cache (first: no speed measurement cached, so it times the model), then the same command
again (measurement cached): wall-clock seconds from process start to exit against the `DRY_RUN_TARGET`, the
CPU seconds beside them (a loaded machine stretches the first, not the second), and the total the first one
estimated.
"""
from __future__ import annotations

import dataclasses
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from robench.core.paths import Settings
from robench.runs.presets import PRESETS
from robench.runs.spec import RunSpec

QUICK = PRESETS["quick"]
DRY_RUN_TARGET = 15.0  # seconds: the first, uncached `--dry-run` of a newcomer (issue 45)


@dataclass(frozen=True)
class EstimateBenchOptions:
    models: tuple[str, ...] = ("bert", "imbert")
    task: str = "sst2"
    attack: str = "textfooler"
    backbone: str = "minilm"
    train_size: int = 1000  # real classifiers (bert ~80% SST-2 dev): a search against a chance-level model
    epochs: int = 1  # fails and tries every word, far more queries than the estimate's typical count
    eval_size: int = 20
    seed: int = 0
    data_source: str | None = None
    device: str = "auto"
    dry_run: bool = False  # time `robench run --dry-run` (first and again) instead of estimating and running
    headline: bool = False  # the README's headline command instead of `models` at these sizes
    protocol: str | None = None  # with `checkpoint`: that checkpoint's runs under this protocol
    checkpoint: str | None = None

    def spec(self, model: str, settings: Settings) -> RunSpec:
        """`robench run --preset quick` with these values."""
        from robench.runs.options import RunOptions, specs

        (made,) = specs(RunOptions(task=self.task, model=model, attack=self.attack, backbone=self.backbone,
                                   seeds=(self.seed,), train_size=self.train_size, eval_size=self.eval_size,
                                   epochs=self.epochs, preset=QUICK.name, data_source=self.data_source), settings)
        return made

    def headline_spec(self, settings: Settings) -> RunSpec:
        """`robench run --model imbert --attack textfooler`, as the README gives it."""
        from robench.runs.options import RunOptions, specs

        (made,) = specs(RunOptions(model="imbert", attack="textfooler"), settings)
        return made


def estimate_bench(options: EstimateBenchOptions, settings: Settings, console: Console | None = None) -> list[dict]:
    """Estimated vs measured seconds per stage for each run, and their totals; prints a table and returns its
    rows."""
    from robench.classifier.device import pick_device
    from robench.core.machine import load
    from robench.runs.estimate import estimate
    from robench.runs.runner import run_resolved

    device, rows, before = pick_device(options.device), [], load()
    with tempfile.TemporaryDirectory(prefix="robench-bench-estimate-") as tmp:
        scratch = _scratch_settings(settings, Path(tmp))
        runs = _bench_runs(options, settings, scratch)
        memo: dict = {}
        guesses = [estimate(resolved, device, train_cached=False, persist=False, memo=memo) for _, resolved in runs]
        counted: set = set()  # a build or a dev pass is paid once, by the first run that needs it
        for (label, resolved), guess in zip(runs, guesses):
            builds = sum(b.seconds for b in guess.builds if b.what not in counted)
            dev = (guess.dev_seconds or 0.0) if "dev pass" not in counted else 0.0
            counted |= {b.what for b in guess.builds} | ({"dev pass"} if guess.dev_seconds is not None else set())
            record = run_resolved(resolved, str(device), console)
            rows += _stage_rows(label, guess, record, builds, dev)
    rows.append(_total_row(rows))
    _print(rows, options, device, before, load())
    return rows


def _bench_runs(options: EstimateBenchOptions, settings: Settings, scratch: Settings) -> list[tuple[str, Any]]:
    """(label, resolved run) of each run the bench makes, resolved in the scratch cache."""
    from robench.core.errors import RobenchError
    from robench.runs.resolve import resolve_run

    if options.protocol is not None:
        from robench.report.reference import protocol_runs

        if options.checkpoint is None:
            raise RobenchError("bench estimate --protocol runs a checkpoint through it: add --checkpoint DIR")
        return [(f"{r.spec.attack} ({options.protocol})", r)
                for r in protocol_runs(options.protocol, options.checkpoint, scratch)]
    if options.headline:
        return [("imbert (headline)", resolve_run(options.headline_spec(settings), scratch))]
    return [(model, resolve_run(options.spec(model, settings), scratch)) for model in options.models]


def _stage_rows(label: str, guess, record, builds: float, dev: float) -> list[dict]:
    """A run's stages, estimated beside measured: train (or a given checkpoint's loading and dev pass: `dev`) and
    attack (with the resources it builds first: `builds`); with the attack's queries apart. A given checkpoint's
    loading is estimated in its attack stage and measured in the first: compare its total."""
    given = record.spec.get("checkpoint") is not None
    measured = {"train": record.timings["train_stage_seconds"], "attack": record.timings["attack_seconds"]}
    rows = [{"model": label, "stage": "load + dev pass" if given else "train",
             "estimated": dev if given else guess.train_seconds, "measured": measured["train"]},
            {"model": label, "stage": "attack", "estimated": guess.attack_seconds + builds,
             "measured": measured["attack"]}]
    for row in rows:
        row.update(ratio=row["measured"] / row["estimated"] if row["estimated"] else None,
                   dev_accuracy=record.metrics["dev_accuracy"])
    # the attack's two factors apart: how many queries the search made, and how fast each one was (not told apart
    # from the builds' time in a stage that built resources)
    queries = record.timings["victim_queries"]
    rows[-1].update(estimated_queries=guess.attack_queries, measured_queries=queries,
                    seconds_per_query_ratio=None if builds else (measured["attack"] / queries) /
                    (guess.attack_seconds / guess.attack_queries))
    return rows


def _total_row(rows: list[dict]) -> dict:
    estimated, measured = sum(r["estimated"] or 0.0 for r in rows), sum(r["measured"] for r in rows)
    return {"model": "all", "stage": "total", "estimated": estimated, "measured": measured,
            "ratio": measured / estimated if estimated else None, "dev_accuracy": None}


def dry_run_bench(options: EstimateBenchOptions, settings: Settings) -> list[dict]:
    """Wall seconds of `robench run --dry-run` for each model as a new process, with a fresh cache (it times the model)
    and then again (measurement cached); prints a table against `DRY_RUN_TARGET` and returns its rows."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="robench-bench-dry-run-") as tmp:
        scratch = _scratch_settings(settings, Path(tmp))
        for model in ("imbert",) if options.headline else options.models:
            first, again = (_timed_dry_run(options, model, scratch) for _ in ("first", "again"))
            rows.append({"model": model, "first": first.wall, "first_cpu": first.cpu, "again": again.wall,
                         "again_cpu": again.cpu, "estimated": first.estimate, "target": DRY_RUN_TARGET,
                         "silence": max(first.silence, again.silence), "load": first.load})
    what = "the headline command" if options.headline else \
        f"{options.task}, {options.attack}, train {options.train_size}, eval {options.eval_size}"
    table = Table(title=f"robench run --dry-run ({what}, device {options.device}), a new process, wall / CPU "
                        "seconds: first with no speed measurement cached (it times the model), then again; the "
                        "longest silence on its output (a pipe)")
    for col in ("model", "first", "again", f"first <= {DRY_RUN_TARGET:.0f} s", "silent", "load", "first's estimate"):
        table.add_column(col, justify="left" if col in ("model", "load", "first's estimate") else "right")
    for r in rows:
        table.add_row(r["model"], f"{r['first']:.1f} / {r['first_cpu']:.1f}", f"{r['again']:.1f} / "
                      f"{r['again_cpu']:.1f}", "yes" if r["first"] <= r["target"] else "no",
                      f"{r['silence']:.1f} s", r["load"], r["estimated"].partition(": ")[2])
    Console().print(table)
    return rows


@dataclass(frozen=True)
class DryRunTiming:
    wall: float
    cpu: float  # the process's user + system seconds
    estimate: str  # the estimate's first line, e.g. "estimate on cpu: total ~4 min"
    silence: float = 0.0  # the longest time it printed nothing (in a pipe), start and end included
    load: str = ""  # the machine's load when it ended


def _timed_dry_run(options: EstimateBenchOptions, model: str, settings: Settings) -> DryRunTiming:
    import os
    import subprocess
    import sys
    import time

    from robench.core.errors import RobenchError
    from robench.core.machine import load

    argv = [sys.executable, "-m", "robench.cli", "run", "--model", model]
    if options.headline:  # the README's command as it is
        argv += ["--attack", "textfooler"]
    else:
        spec = options.spec(model, settings)
        argv += ["--task", spec.task, "--attack", spec.attack, "--backbone", spec.backbone, "--train-size",
                 str(spec.train_size), "--eval-size", str(spec.eval_size), "--epochs", str(spec.train.epochs),
                 "--seed", str(spec.seed), "--data-source", spec.data_source]
    argv += ["--device", options.device, "--cache-dir", str(settings.cache_dir), "--results-dir",
             str(settings.results_dir), "--dry-run"]
    if settings.data_dir is not None:
        argv += ["--data-dir", str(settings.data_dir)]
    start, before = time.perf_counter(), os.times()
    lines, times = [], [start]  # its output and stderr as they come, each line's time: the longest silence
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as process:
        for line in process.stdout:
            lines.append(line.rstrip("\n"))
            times.append(time.perf_counter())
    end, after = time.perf_counter(), os.times()
    if process.returncode != 0:
        raise RobenchError(f"the dry run of {model} failed: {lines[-1:]}")
    cpu = after.children_user + after.children_system - before.children_user - before.children_system
    estimate = next((line for line in lines if line.startswith("estimate on ")), "")
    silence = max(b - a for a, b in zip(times, [*times[1:], end]))
    return DryRunTiming(end - start, cpu, estimate, silence, load().describe())


def _scratch_settings(settings: Settings, tmp: Path) -> Settings:
    """A fresh cache (no checkpoint reused) that shares the attack resources with `settings`' cache: those built
    already, and those the bench builds (so a second bench does not build them again)."""
    from robench.engine.resources.files import resources_dir

    (tmp / "cache").mkdir()
    built = resources_dir(settings)
    built.mkdir(parents=True, exist_ok=True)
    (tmp / "cache" / built.name).symlink_to(built, target_is_directory=True)
    return dataclasses.replace(settings, cache_dir=tmp / "cache", results_dir=tmp / "results")


def _print(rows: list[dict], options: EstimateBenchOptions, device, before, after) -> None:
    what = ("the headline command, robench run --model imbert --attack textfooler" if options.headline else
            f"--protocol {options.protocol} --checkpoint {options.checkpoint}" if options.protocol else
            f"{options.task}, {options.train_size} training examples x {options.epochs} epoch(s), {options.attack} on "
            f"{options.eval_size} examples")
    table = Table(title=f"Estimate vs measurement on {device}: {what}; {before.describe()} before, "
                        f"{after.average:.1f} after")
    for col in ("model", "dev acc.", "stage", "estimated s", "measured s", "measured / estimated"):
        table.add_column(col, justify="left" if col in ("model", "stage") else "right")
    for r in rows:  # dev accuracy: is the attacked model a real classifier, as the estimate assumes?
        table.add_row(r["model"], "" if r["dev_accuracy"] is None else f"{100 * r['dev_accuracy']:.1f}%", r["stage"],
                      f"{r['estimated']:.1f}", f"{r['measured']:.1f}",
                      "–" if r["ratio"] is None else f"{r['ratio']:.2f}")
    Console().print(table)
    table = Table(title="The attack stage apart: queries the search made, and seconds per query")
    for col in ("model", "queries estimated", "queries measured", "s per query: measured / estimated"):
        table.add_column(col, justify="left" if col == "model" else "right")
    for r in rows:
        if "measured_queries" in r:
            ratio = r["seconds_per_query_ratio"]
            table.add_row(r["model"], f"{r['estimated_queries']:.0f}", str(r["measured_queries"]),
                          "– (built resources)" if ratio is None else f"{ratio:.2f}")
    Console().print(table)
