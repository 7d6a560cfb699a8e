"""What an attack recipe is, what it returns per example, and TextAttack-style metrics.

Conventions follow TextAttack so numbers are comparable:
* skipped    - the clean prediction was already wrong; not attacked;
* failed     - attacked, the model still predicts the gold label;
* successful - attacked, the prediction flipped;
* error      - the recipe raised on this example; recorded, left out of the metrics.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np
from rich.console import Console

from robench.settings import Settings
from robench.spec import RunSpec
from robench.tasks import Task
from robench.victim import Victim

Status = Literal["skipped", "failed", "successful", "error"]


@dataclass
class ExampleResult:
    """One attacked example; one row of the per-example CSV."""

    index: int  # row in the evaluated split
    label: int
    original_text: str
    perturbed_text: str
    original_prediction: int
    perturbed_prediction: int
    status: Status
    queries: int = 0
    num_words: int = 0
    words_perturbed: int = 0
    error: str = ""


@dataclass
class AttackContext:
    """What a recipe gets: the victim, the data to attack, and where to persist progress."""

    spec: RunSpec
    task: Task
    victim: Victim
    settings: Settings
    eval_data: Any  # datasets.Dataset: the eval subset
    dev_accuracy: float  # the fine-tuned model's accuracy on the whole eval split
    done: dict[int, ExampleResult]  # results of an interrupted earlier attempt, by index
    record: Callable[[ExampleResult], None]  # persist one finished example at once
    console: Console | None = None


@dataclass
class AttackRecipe:
    """A registry entry under `robench.attacks`.

    `attack(ctx, params)` returns one ExampleResult per attacked example.
    `check(task, params, settings)` rejects, *before* training, a task the recipe cannot
    handle or a resource it needs that is missing (cheap checks: no model loading).
    `resources(params, settings)` names every external resource the recipe uses.
    `summarize(results, ctx)` turns results into metrics (TextAttack's by default).
    """

    name: str
    summary: str
    attack: Callable[[AttackContext, Any], list[ExampleResult]]
    params: type
    check: Callable[[Task, Any, Settings], None] = lambda task, params, settings: None
    resources: Callable[[Any, Settings], dict[str, Any]] = lambda params, settings: {}
    summarize: Callable[[list[ExampleResult], AttackContext], dict[str, Any]] | None = None


@dataclass
class AttackMetrics:
    examples: int
    clean_accuracy: float
    robust_accuracy: float  # accuracy under attack
    attack_success_rate: float | None
    skipped: int
    failed: int
    successful: int
    errors: int
    avg_perturbed_word_pct: float | None
    avg_words_per_input: float | None
    avg_queries: float | None
    extra: dict[str, Any] = field(default_factory=dict)


def _mean(values: list[float]) -> float | None:
    return float(np.mean(values)) if values else None


def textattack_metrics(results: list[ExampleResult]) -> AttackMetrics:
    """TextAttack's summary: errors are reported but excluded from every ratio."""
    ok = [r for r in results if r.status != "error"]
    count = {s: sum(r.status == s for r in ok) for s in ("skipped", "failed", "successful")}
    n, attacked = len(ok), count["failed"] + count["successful"]
    successes = [r for r in ok if r.status == "successful"]
    return AttackMetrics(
        examples=n,
        clean_accuracy=attacked / n if n else 0.0,
        robust_accuracy=count["failed"] / n if n else 0.0,
        attack_success_rate=count["successful"] / attacked if attacked else None,
        skipped=count["skipped"], failed=count["failed"], successful=count["successful"],
        errors=len(results) - n,
        avg_perturbed_word_pct=_mean([100 * r.words_perturbed / max(r.num_words, 1) for r in successes]),
        avg_words_per_input=_mean([r.num_words for r in ok]),
        avg_queries=_mean([r.queries for r in ok if r.status != "skipped"]),
    )
