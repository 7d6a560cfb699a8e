"""`run(spec)`: train (or reuse) -> attack -> results. The CLI is a thin layer over this."""
from __future__ import annotations

import dataclasses
import time
from typing import Any

from rich.console import Console

from robench.backbones import resolve_backbone
from robench.checkpoints import load_victim
from robench.data import load_split, subset
from robench.defense import resolve_model
from robench.device import pick_device
from robench.metrics import textattack_metrics
from robench.params import make_params
from robench.registries import ATTACKS, TASKS
from robench.results import RunRecord, RunStore, git_commit, now, package_versions
from robench.settings import Settings, resolve_settings
from robench.spec import RunSpec
from robench.training import TrainedModel, fine_tune
from robench.types import AttackContext, ExampleResult


def validate(spec: RunSpec, settings: Settings) -> tuple[dict[str, Any], Any]:
    """Fail fast, before any training, on every bad name or setting in `spec`."""
    task = TASKS.get(spec.task)
    model_params = resolve_model(spec.model).resolve_params(spec.model_params)
    recipe = ATTACKS.get(spec.attack)
    attack_params = make_params(recipe.params, spec.attack_params, f"attack {spec.attack!r}")
    resolve_backbone(spec.backbone)
    if spec.data_source == "local":
        settings.require_data_dir()
    recipe.check(task, attack_params, settings)
    return model_params, attack_params


def train(spec: RunSpec, settings: Settings | None = None, device: str = "auto",
          console: Console | None = None) -> TrainedModel:
    """Fine-tune (or reuse the cached checkpoint of) `spec.model` on `spec.task`."""
    settings = settings or resolve_settings()
    TASKS.get(spec.task)
    resolve_model(spec.model).resolve_params(spec.model_params)
    return fine_tune(spec, settings, pick_device(device), console)


def run(spec: RunSpec, settings: Settings | None = None, device: str = "auto", console: Console | None = None,
        force: bool = False) -> RunRecord:
    """Run `spec` end to end and write its record; return the finished record if there is one."""
    settings = settings or resolve_settings()
    model_params, attack_params = validate(spec, settings)
    store = RunStore(settings.runs_dir, spec.run_id)
    if not force and (finished := store.finished()) is not None:
        return finished
    torch_device = pick_device(device)
    start = time.perf_counter()
    trained = fine_tune(spec, settings, torch_device, console)
    trained_at = time.perf_counter()

    task, recipe = TASKS.get(spec.task), ATTACKS.get(spec.attack)
    victim = load_victim(trained.checkpoint, torch_device, max_length=spec.train.max_length)
    eval_data = subset(load_split(task, "eval", settings.data_dir, spec.data_source), spec.eval_size, spec.seed)
    done = {} if force else store.load_partial()
    ctx = AttackContext(spec, task, victim, settings, eval_data, trained.record["dev_accuracy"], done,
                        store.append, console)
    output = recipe.attack(ctx, attack_params)
    results = sorted({**done, **{r.index: r for r in output.results}}.values(), key=lambda r: r.index)
    metrics = (recipe.summarize or _default_summary)(results, ctx)
    metrics["dev_accuracy"] = trained.record["dev_accuracy"]
    end = time.perf_counter()

    record = RunRecord(
        run_id=spec.run_id, spec=spec.to_dict(),
        hyperparameters={"train": dataclasses.asdict(spec.train), "model": model_params,
                         "attack": dataclasses.asdict(attack_params)},
        resources={
            "backbone": trained.record["backbone"],
            "data": {"source": spec.data_source, "data_dir": str(settings.data_dir) if settings.data_dir else None,
                     "task_note": task.note or None},
            "attack": output.resources,
            "device": str(torch_device),
        },
        metrics=metrics,
        timings={"train_seconds": trained.record["train_seconds"], "train_cached": trained.cached,
                 "train_examples_per_second": trained.record["train_examples_per_second"],
                 "train_stage_seconds": trained_at - start, "attack_seconds": end - trained_at,
                 "total_seconds": end - start, "victim_queries": victim.model_evaluations},
        checkpoint=str(trained.checkpoint), versions=package_versions(), git_commit=git_commit(), created=now(),
    )
    store.finish(record, results)
    return record


def _default_summary(results: list[ExampleResult], ctx: AttackContext) -> dict[str, Any]:
    metrics = textattack_metrics(results)
    out = dataclasses.asdict(metrics)
    out.update(out.pop("extra"))
    return out
