"""A RunSpec resolved once: every name looked up, every hyperparameter validated, before any work."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from robench.backbones import Backbone, resolve_backbone
from robench.defense import ComposedDefense, resolve_model
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
    defense: ComposedDefense
    model_params: dict[str, Any]  # the defense's hyperparameters, defaults filled in
    backbone: Backbone
    recipe: AttackRecipe | None = None  # None: training only
    attack_params: Any = None  # the recipe's params dataclass

    def hyperparameters(self) -> dict[str, Any]:
        """Training, defense and attack hyperparameters as recorded in a run record."""
        attack = dataclasses.asdict(self.attack_params) if self.attack_params is not None else None
        return {"train": dataclasses.asdict(self.spec.train), "model": self.model_params, "attack": attack}


def resolve_run(spec: RunSpec, settings: Settings, attack: bool = True) -> ResolvedRun:
    """Fail fast, before any training, on every bad name, hyperparameter or missing resource in `spec`."""
    task = TASKS.get(spec.task)
    defense = resolve_model(spec.model)
    model_params = defense.resolve_params(spec.model_params)
    backbone = resolve_backbone(spec.backbone)
    if spec.data_source == "local":
        settings.require_data_dir()
    if not attack:
        return ResolvedRun(spec, settings, task, defense, model_params, backbone)
    recipe = ATTACKS.get(spec.attack)
    attack_params = make_params(recipe.params, spec.attack_params, f"attack {spec.attack!r}")
    recipe.check(task, attack_params, settings)
    return ResolvedRun(spec, settings, task, defense, model_params, backbone, recipe, attack_params)
