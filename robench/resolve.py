"""A RunSpec resolved once: every name looked up, every hyperparameter validated, before any work."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from robench.backbones import Backbone, resolve_backbone
from robench.checkpoints import checkpoint_label_order, parse_label_map
from robench.data import load_split
from robench.defense import ComposedDefense, resolve_model
from robench.errors import RobenchError
from robench.file_tasks import has_train_file, task_from_definition
from robench.params import make_params
from robench.registries import ATTACKS, TASKS
from robench.settings import Settings
from robench.spec import RunSpec
from robench.types import AttackRecipe, Task


@dataclass(frozen=True)
class ResolvedRun:
    """What a run needs, looked up from its spec once and passed down to training and the attack."""

    spec: RunSpec
    settings: Settings
    task: Task
    defense: ComposedDefense | None  # None: the run attacks a given model (spec.checkpoint)
    model_params: dict[str, Any]  # the defense's hyperparameters, defaults filled in
    backbone: Backbone | None
    recipe: AttackRecipe | None = None  # None: training only
    attack_params: Any = None  # the recipe's params dataclass
    label_order: tuple[int, ...] | None = None  # a saved checkpoint's output for each task label

    def hyperparameters(self) -> dict[str, Any]:
        """Training, defense and attack hyperparameters as recorded in a run record (of a given model's
        training settings only the input length applies)."""
        attack = dataclasses.asdict(self.attack_params) if self.attack_params is not None else None
        train = dataclasses.asdict(self.spec.train) if self.spec.trains else {"max_length": self.spec.train.max_length}
        return {"train": train, "model": self.model_params, "attack": attack}


def resolve_run(spec: RunSpec, settings: Settings, attack: bool = True) -> ResolvedRun:
    """Fail fast, before any training, on every bad name, hyperparameter or missing resource in `spec`."""
    if spec.trains and spec.task_source is not None and not has_train_file(spec.task_source):
        raise RobenchError(f"task {spec.task!r} has no train file, so there is nothing to fine-tune on: attack an "
                           "existing model with --checkpoint (robench.evaluate in Python), or add a train file")
    task = resolve_task(spec)
    defense, model_params, backbone, order = None, {}, None, None
    if spec.trains:
        defense = resolve_model(spec.model)
        model_params = defense.resolve_params(spec.model_params)
        backbone = resolve_backbone(spec.backbone)
    elif spec.checkpoint.get("kind") == "checkpoint":
        order = checkpoint_label_order(spec.checkpoint["location"], task,
                                       parse_label_map(spec.checkpoint.get("label_map")))
    if spec.data_source == "local" and task.uses_data_dir:
        settings.require_data_dir()
    if not attack:
        return ResolvedRun(spec, settings, task, defense, model_params, backbone, label_order=order)
    recipe = ATTACKS.get(spec.attack)
    attack_params = make_params(recipe.params, spec.attack_params, f"attack {spec.attack!r}")
    recipe.check(task, attack_params, settings)
    return ResolvedRun(spec, settings, task, defense, model_params, backbone, recipe, attack_params, order)


def resolve_task(spec: RunSpec) -> Task:
    """A registered task, or the task read from the files in `spec.task_source` (read and validated now: the
    user's files are small, and their errors should come before any model is loaded)."""
    if spec.task_source is None:
        return TASKS.get(spec.task)
    task = task_from_definition(spec.task_source)
    for split in ("train", "eval") if spec.trains else ("eval",):
        load_split(task, split, None, spec.data_source)
    return task
