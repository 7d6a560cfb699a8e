"""`robench bench estimate`: the upfront cost estimate against real runs, stage by stage.

For each model, the estimate is made exactly as `robench run` makes it (the real model freshly timed
on this device), then the same spec runs for real in a scratch cache (nothing reused; the built attack
resources are shared) and the measured stage times are printed beside the estimated ones with their ratio.
A resource the cache lacks is built inside the first model's attack stage, as in a real run, so that stage's
estimate includes the estimate's build lines.
The defaults train real classifiers (1,000 SST-2 examples, one epoch): the estimate's queries per word were
measured against real classifiers, and is only meant for them.

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

    def spec(self, model: str, settings: Settings) -> RunSpec:
        """`robench run --preset quick` with these values."""
        from robench.runs.options import RunOptions, specs

        (made,) = specs(RunOptions(task=self.task, model=model, attack=self.attack, backbone=self.backbone,
                                   seeds=(self.seed,), train_size=self.train_size, eval_size=self.eval_size,
                                   epochs=self.epochs, preset=QUICK.name, data_source=self.data_source), settings)
        return made


def estimate_bench(options: EstimateBenchOptions, settings: Settings, console: Console | None = None) -> list[dict]:
    """Estimated vs measured seconds per stage for each model; prints a table and returns its rows."""
    from robench.classifier.device import pick_device
    from robench.runs.estimate import estimate
    from robench.runs.resolve import resolve_run
    from robench.runs.runner import run_resolved

    device, rows = pick_device(options.device), []
    with tempfile.TemporaryDirectory(prefix="robench-bench-estimate-") as tmp:
        scratch = _scratch_settings(settings, Path(tmp))
        for model in options.models:
            resolved = resolve_run(options.spec(model, settings), scratch)
            guess = estimate(resolved, device, train_cached=False, persist=False)
            record = run_resolved(resolved, str(device), console)
            measured = {"train": record.timings["train_stage_seconds"], "attack": record.timings["attack_seconds"]}
            builds = sum(b.seconds for b in guess.builds)  # built on first use, inside the attack stage
            for stage, est in (("train", guess.train_seconds), ("attack", guess.attack_seconds + builds)):
                rows.append({"model": model, "stage": stage, "estimated": est, "measured": measured[stage],
                             "ratio": measured[stage] / est, "dev_accuracy": record.metrics["dev_accuracy"]})
            # the attack's two factors apart: how many queries the search made, and how fast each one was (not
            # told apart from the builds' time in a stage that built resources)
            queries = record.timings["victim_queries"]
            rows[-1].update(estimated_queries=guess.attack_queries, measured_queries=queries,
                            seconds_per_query_ratio=None if builds else (measured["attack"] / queries) /
                            (guess.attack_seconds / guess.attack_queries))
    _print(rows, options, device)
    return rows


def dry_run_bench(options: EstimateBenchOptions, settings: Settings) -> list[dict]:
    """Wall seconds of `robench run --dry-run` for each model as a new process, with a fresh cache (it times the model)
    and then again (measurement cached); prints a table against `DRY_RUN_TARGET` and returns its rows."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="robench-bench-dry-run-") as tmp:
        scratch = _scratch_settings(settings, Path(tmp))
        for model in options.models:
            first, again = (_timed_dry_run(options, model, scratch) for _ in ("first", "again"))
            rows.append({"model": model, "first": first.wall, "first_cpu": first.cpu, "again": again.wall,
                         "again_cpu": again.cpu, "estimated": first.estimate, "target": DRY_RUN_TARGET})
    table = Table(title=f"robench run --dry-run ({options.task}, {options.attack}, train {options.train_size}, "
                        f"eval {options.eval_size}, device {options.device}), a new process, wall / CPU seconds: first "
                        "with no speed measurement cached (it times the model), then again")
    for col in ("model", "first", "again", f"first <= {DRY_RUN_TARGET:.0f} s", "first's estimate"):
        table.add_column(col, justify="left" if col in ("model", "first's estimate") else "right")
    for r in rows:
        table.add_row(r["model"], f"{r['first']:.1f} / {r['first_cpu']:.1f}", f"{r['again']:.1f} / "
                      f"{r['again_cpu']:.1f}", "yes" if r["first"] <= r["target"] else "no",
                      r["estimated"].partition(": ")[2])
    Console().print(table)
    return rows


@dataclass(frozen=True)
class DryRunTiming:
    wall: float
    cpu: float  # the process's user + system seconds
    estimate: str  # the estimate's first line, e.g. "estimate on cpu: total ~4 min"


def _timed_dry_run(options: EstimateBenchOptions, model: str, settings: Settings) -> DryRunTiming:
    import os
    import subprocess
    import sys
    import time

    from robench.core.errors import RobenchError

    spec = options.spec(model, settings)
    argv = [sys.executable, "-m", "robench.cli", "run", "--model", model, "--task", spec.task, "--attack",
            spec.attack, "--backbone", spec.backbone, "--train-size", str(spec.train_size), "--eval-size",
            str(spec.eval_size), "--epochs", str(spec.train.epochs), "--seed", str(spec.seed), "--device",
            options.device, "--data-source", spec.data_source, "--cache-dir", str(settings.cache_dir),
            "--results-dir", str(settings.results_dir), "--dry-run"]
    if settings.data_dir is not None:
        argv += ["--data-dir", str(settings.data_dir)]
    start, before = time.perf_counter(), os.times()
    done = subprocess.run(argv, capture_output=True, text=True)
    seconds, after = time.perf_counter() - start, os.times()
    if done.returncode != 0:
        raise RobenchError(f"the dry run of {model} failed: {done.stderr.strip().splitlines()[-1:]}")
    cpu = after.children_user + after.children_system - before.children_user - before.children_system
    estimate = next((line for line in done.stdout.splitlines() if line.startswith("estimate on ")), "")
    return DryRunTiming(seconds, cpu, estimate)


def _scratch_settings(settings: Settings, tmp: Path) -> Settings:
    """A fresh cache (no checkpoint reused) that shares the attack resources with `settings`' cache: those built
    already, and those the bench builds (so a second bench does not build them again)."""
    from robench.engine.resources.files import resources_dir

    (tmp / "cache").mkdir()
    built = resources_dir(settings)
    built.mkdir(parents=True, exist_ok=True)
    (tmp / "cache" / built.name).symlink_to(built, target_is_directory=True)
    return dataclasses.replace(settings, cache_dir=tmp / "cache", results_dir=tmp / "results")


def _print(rows: list[dict], options: EstimateBenchOptions, device) -> None:
    table = Table(title=f"Estimate vs measurement on {device}: {options.task}, {options.train_size} training "
                        f"examples x {options.epochs} epoch(s), {options.attack} on {options.eval_size} examples")
    for col in ("model", "dev acc.", "stage", "estimated s", "measured s", "measured / estimated"):
        table.add_column(col, justify="left" if col in ("model", "stage") else "right")
    for r in rows:  # dev accuracy: is the attacked model a real classifier, as the estimate assumes?
        table.add_row(r["model"], f"{100 * r['dev_accuracy']:.1f}%", r["stage"], f"{r['estimated']:.1f}",
                      f"{r['measured']:.1f}", f"{r['ratio']:.2f}")
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
