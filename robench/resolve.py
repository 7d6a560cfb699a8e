"""A RunSpec resolved once: every name looked up, every hyperparameter validated, before any work."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from robench.backbones import Backbone, resolve_backbone
from robench.defense import ComposedDefense, resolve_model
from robench.errors import RobenchError
from robench.fingerprint import files_fingerprint, task_fingerprint
from robench.params import make_params
from robench.registries import ATTACKS, TASKS
from robench.settings import Settings
from robench.spec import RunSpec, content_hash
from robench.types import AttackRecipe, Task

MAX_SEED = 2**32 - 1  # numpy's (and so transformers.set_seed's) limit


@dataclass(frozen=True)
class ResolvedRun:
    """What a run needs, looked up from its spec once and passed down to training and the attack."""

    spec: RunSpec
    settings: Settings
    task: Task
    defense: ComposedDefense
    model_params: dict[str, Any]  # the defense's hyperparameters, defaults filled in
    backbone: Backbone
    train_data: str  # fingerprint of the task's train and eval data
    recipe: AttackRecipe | None = None  # None: training only
    attack_params: Any = None  # the recipe's params dataclass

    def hyperparameters(self) -> dict[str, Any]:
        """Training, defense and attack hyperparameters as recorded in a run record."""
        attack = dataclasses.asdict(self.attack_params) if self.attack_params is not None else None
        return {"train": dataclasses.asdict(self.spec.train), "model": self.model_params, "attack": attack}


def resolve_run(spec: RunSpec, settings: Settings, attack: bool = True) -> ResolvedRun:
    """Fail fast, before any training, on every bad name, hyperparameter, missing resource or data file in
    `spec`; fingerprint the data the run reads."""
    check_spec(spec)
    task = TASKS.get(spec.task)
    defense = resolve_model(spec.model)
    model_params = defense.resolve_params(spec.model_params)
    backbone = resolve_backbone(spec.backbone)
    if backbone.max_positions is not None and spec.train.max_length > backbone.max_positions:
        raise RobenchError(f"--max-length {spec.train.max_length} exceeds the {backbone.max_positions} positions "
                           f"of backbone {spec.backbone!r}; use --max-length {backbone.max_positions} or less")
    if spec.data_source == "local":
        settings.require_data_dir()
    recipe = attack_params = None
    if attack:
        recipe = ATTACKS.get(spec.attack)
        attack_params = make_params(recipe.params, spec.attack_params, f"attack {spec.attack!r}")
        recipe.check(task, attack_params, settings)
    train_data = task_fingerprint(task, settings, spec.data_source)
    data = train_data  # the run's fingerprint adds the files the recipe reads itself (AdvGLUE's)
    if recipe is not None and recipe.data_files and spec.data_source == "local":
        data = content_hash([train_data, files_fingerprint(settings.data_dir, recipe.data_files, settings.cache_dir)])
    spec = dataclasses.replace(spec, data_fingerprint=data)
    return ResolvedRun(spec, settings, task, defense, model_params, backbone, train_data, recipe, attack_params)


def check_spec(spec: RunSpec) -> None:
    """Seeds, subset sizes and the data source (the training hyperparameters check themselves)."""
    for flag, seed in (("--seed", spec.seed), ("--eval-seed", spec.eval_seed)):
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise RobenchError(f"{flag} must be an integer from 0 to {MAX_SEED}, got {seed!r}")
    for flag, size in (("--train-size", spec.train_size), ("--eval-size", spec.eval_size)):
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise RobenchError(f"{flag} must be a positive integer (or omitted for the whole split), got {size!r}")
    if spec.data_source not in ("local", "hub"):
        raise RobenchError(f"--data-source must be 'local' or 'hub', got {spec.data_source!r}")
