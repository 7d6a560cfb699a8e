"""`run(spec)`: train (or reuse) -> attack -> results. The CLI is a thin layer over this."""
from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from robench.checkpoints import load_victim
from robench.data import load_split, subset_indices, texts_of
from robench.device import pick_device
from robench.estimate import Estimate, estimate
from robench.locks import file_lock
from robench.metrics import textattack_metrics
from robench.resolve import ResolvedRun, resolve_run
from robench.results import RunRecord, RunStore, git_commit, now, package_versions
from robench.settings import Settings, resolve_settings
from robench.spec import RunSpec, content_hash
from robench.training import TrainedModel, checkpoint_key, fine_tune, is_cached
from robench.types import AttackContext, ExampleResult, Source, Task
from robench.words import join_fields

OnEstimate = Callable[[Estimate], None]


@dataclass(frozen=True)
class RunPlan:
    """What `run` or `train` would do, without doing it (`--dry-run`)."""

    spec: RunSpec
    checkpoint: Path
    checkpoint_cached: bool
    record: Path | None  # None: training only
    record_finished: bool
    estimate: Estimate | None  # None: nothing left to do


def plan(spec: RunSpec, settings: Settings | None = None, device: str = "auto", attack: bool = True) -> RunPlan:
    """Validate `spec` and say where its checkpoint and record go, whether they exist, and what the rest costs.

    Trains nothing and writes nothing (the calibration behind the estimate is not cached either)."""
    settings = settings or resolve_settings()
    resolved = resolve_run(spec, settings, attack=attack)
    checkpoint = settings.checkpoints_dir / checkpoint_key(resolved)
    cached = is_cached(checkpoint)
    spec = resolved.spec  # with its data fingerprint, so the run id is the one `run` uses
    record = settings.runs_dir / f"{spec.run_id}.json" if attack else None
    finished = attack and RunStore(settings.runs_dir, spec.run_id).finished() is not None
    todo = not finished and (attack or not cached)
    cost = estimate(resolved, pick_device(device), cached, persist=False) if todo else None
    return RunPlan(spec, checkpoint, cached, record, finished, cost)


def train(spec: RunSpec, settings: Settings | None = None, device: str = "auto",
          console: Console | None = None, on_estimate: OnEstimate | None = None) -> TrainedModel:
    """Fine-tune (or reuse the cached checkpoint of) `spec.model` on `spec.task`.

    `on_estimate` receives the cost estimate before any training starts (none when the checkpoint is cached)."""
    resolved = resolve_run(spec, settings or resolve_settings(), attack=False)
    torch_device = pick_device(device)
    if on_estimate is not None and not is_cached(resolved.settings.checkpoints_dir / checkpoint_key(resolved)):
        on_estimate(estimate(resolved, torch_device, train_cached=False))
    return fine_tune(resolved, torch_device, console)


def run(spec: RunSpec, settings: Settings | None = None, device: str = "auto", console: Console | None = None,
        force: bool = False, on_estimate: OnEstimate | None = None) -> RunRecord:
    """Run `spec` end to end and write its record; return the finished record if there is one.

    The run id is that of the resolved spec (with its data fingerprint). A second process running the same
    spec waits for the first, then returns its record. `on_estimate` receives the cost estimate of the
    remaining stages before any of them starts."""
    settings = settings or resolve_settings()
    resolved = resolve_run(spec, settings)
    store = RunStore(settings.runs_dir, resolved.spec.run_id)
    with file_lock(store.lock_path, f"waiting for another process running {resolved.spec.run_id}"):
        if not force and (finished := store.finished()) is not None:
            return finished
        return _run(resolved, store, device, console, force, on_estimate)


def _run(resolved: ResolvedRun, store: RunStore, device: str, console: Console | None, force: bool,
         on_estimate: OnEstimate | None) -> RunRecord:
    spec, settings = resolved.spec, resolved.settings
    torch_device = pick_device(device)
    if on_estimate is not None:
        cached = is_cached(settings.checkpoints_dir / checkpoint_key(resolved))
        on_estimate(estimate(resolved, torch_device, cached))
    start = time.perf_counter()
    trained = fine_tune(resolved, torch_device, console)
    trained_at = time.perf_counter()

    task, recipe, attack_params = resolved.task, resolved.recipe, resolved.attack_params
    victim = load_victim(trained.checkpoint, torch_device, max_length=spec.train.max_length)
    split = (recipe.examples or _task_eval_split)(task, settings, spec.data_source)
    rows = subset_indices(len(split), spec.eval_size, spec.eval_seed)  # never the training seed: paired runs
    eval_data = split if len(rows) == len(split) else split.select(rows)
    ctx = AttackContext(spec, task, victim, settings, eval_data, trained.record["dev_accuracy"], {},
                        store.append, console)
    if force:
        store.partial_path.unlink(missing_ok=True)
    done = ctx.done = store.load_partial(_matches(eval_data, task))

    def record_progress(result: ExampleResult) -> None:  # the cost so far travels with each result
        store.append(result, {"attack_seconds": done.attack_seconds + time.perf_counter() - trained_at,
                              "victim_queries": done.victim_queries + victim.model_evaluations})

    ctx.record = record_progress
    output = recipe.attack(ctx, attack_params)
    results = sorted({**done, **{r.index: r for r in output.results}}.values(), key=lambda r: r.index)
    metrics = (recipe.summarize or _default_summary)(results, ctx)
    metrics["dev_accuracy"] = trained.record["dev_accuracy"]
    end = time.perf_counter()

    record = RunRecord(
        run_id=spec.run_id, spec=spec.to_dict(), hyperparameters=resolved.hyperparameters(),
        resources={
            "backbone": trained.record["backbone"],
            "data": {"source": spec.data_source, "data_dir": str(settings.data_dir) if settings.data_dir else None,
                     "task_note": task.note or None, "fingerprint": spec.data_fingerprint,
                     "eval_examples": len(rows), "eval_indices_hash": content_hash(rows)},
            "attack": output.resources,
            "device": str(torch_device),
        },
        metrics=metrics,
        timings={"train_seconds": trained.record["train_seconds"], "train_cached": trained.cached,
                 "train_examples_per_second": trained.record["train_examples_per_second"],
                 "train_stage_seconds": trained_at - start,
                 "attack_seconds": done.attack_seconds + end - trained_at,
                 "total_seconds": done.attack_seconds + end - start,
                 "victim_queries": done.victim_queries + victim.model_evaluations, "resumed_examples": len(done)},
        checkpoint=str(trained.checkpoint), versions=package_versions(), git_commit=git_commit(), created=now(),
    )
    store.finish(record, results)
    return record


def _task_eval_split(task: Task, settings: Settings, source: Source):
    return load_split(task, "eval", settings.data_dir, source)


def _matches(examples, task: Task):
    """A check that a resumed result belongs to `examples`: index in range, same label and text."""
    texts, labels = texts_of(examples, task), list(examples["label"])

    def check(result: ExampleResult) -> str | None:
        if result.index >= len(texts):
            return f"index {result.index} is outside the {len(texts)} examples of this run"
        if result.label != labels[result.index]:
            return f"example {result.index} has label {result.label}, the data says {labels[result.index]}"
        if (result.original_text or result.perturbed_text) != join_fields(texts[result.index]):
            return f"the text of example {result.index} is not the data's"
        return None

    return check


def _default_summary(results: list[ExampleResult], ctx: AttackContext) -> dict[str, Any]:
    metrics = textattack_metrics(results)
    out = dataclasses.asdict(metrics)
    out.update(out.pop("extra"))
    return out
