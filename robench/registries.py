"""The three registries. Their entries are the only global mutable state in robench."""
from __future__ import annotations

from typing import TYPE_CHECKING

from robench.registry import Registry

if TYPE_CHECKING:
    from robench.types import AttackRecipe, Defense, Task

MODELS: Registry["Defense"] = Registry("models", "robench.models")
ATTACKS: Registry["AttackRecipe"] = Registry("attacks", "robench.attacks")
TASKS: Registry["Task"] = Registry("tasks", "robench.tasks")
