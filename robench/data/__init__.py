"""Task data: loading and validating splits, the built-in tasks, tasks from the user's files, data fingerprints.

`TASKS` is the tasks' registry (the defences' is `robench.training.defense.MODELS`, the attack recipes'
`robench.engine.attack.ATTACKS`): its first lookup imports `robench.data.tasks`, which registers the built-ins.
The registries' entries are the only global mutable state.
"""
from robench.core.registry import Registry
from robench.core.types import Task

TASKS: Registry[Task] = Registry("tasks", "robench.data.tasks")
