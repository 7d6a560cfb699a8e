"""What a defence's training objective is: cross-entropy fine-tuning and the hooks of the training loop.

Subclasses (in `models/`) change how a step makes its gradients; `robench.training.loop` calls the hooks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable

from robench.core.paths import Settings
from robench.core.types import Task

if TYPE_CHECKING:  # annotations only: naming a defence imports no torch
    import torch
    from rich.console import Console
    from torch import nn


@dataclass
class TrainingContext:
    """What the training loop hands an objective before the first epoch (`Objective.prepare`).

    `texts` and `labels` are the training subset, in its order; `encode(texts, labels)` tokenizes task inputs
    into training features exactly as the loop does (list of dicts, one per input, with "labels").
    """

    model: nn.Module
    tokenizer: Any
    task: Task
    texts: list[tuple[str, ...]]
    labels: list[int]
    encode: Callable[[Any, Any], list[dict[str, Any]]]
    settings: Settings
    device: torch.device
    seed: int
    epochs: int
    batch_size: int
    max_length: int
    console: Console | None = None


class Objective:
    """Cross-entropy fine-tuning; subclasses change how a step makes its gradients.

    Hooks of the training loop (`robench.training.loop`), all optional: `prepare` (once, before the first
    epoch, with the loop's `TrainingContext`), `epoch_features` (the examples of one epoch: a2t adds its
    adversarial examples, SAFER its random substitutions), `planned_examples` (how many examples an epoch will
    have, for the learning-rate schedule), `epoch_report` (what the epoch's extra work cost, into the training
    record), and the class methods `check` (before any training: the schedule and resources) and `fingerprint`
    (resources that determine the weights, into the checkpoint key).
    """

    def __init__(self, model: nn.Module, params: Any) -> None:
        self.model = model
        self.params = params

    def step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Compute the loss for `batch`, call backward, return the detached loss."""
        loss = self.model(**batch).loss
        loss.backward()
        return loss.detach()

    def after_optimizer_step(self) -> None:
        """Hook run after each optimizer step (e.g. SMART's EMA teacher update)."""

    def prepare(self, context: TrainingContext) -> None:
        """Called once before the first epoch (load resources, keep the context)."""

    def epoch_features(self, epoch: int, features: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """The training features of 1-based `epoch`, given the clean ones; None: the clean features."""
        return None

    @classmethod
    def planned_examples(cls, params: Any, epoch: int, n_train: int) -> int:
        """How many examples 1-based `epoch` will train on (the learning-rate schedule's length, cost estimates)."""
        return n_train

    def epoch_report(self) -> dict[str, Any]:
        """What the last `epoch_features` call did and cost (merged into the epoch's training history)."""
        return {}

    @classmethod
    def check(cls, params: Any, train: Any, settings: Settings) -> None:
        """Before any training: raise a RobenchError for a schedule (`train`: the TrainConfig) or a missing
        resource this objective cannot train with (cheap checks only)."""

    @classmethod
    def extra_cost(cls, params: Any, train_words: list[int], epochs: int, eval_examples: int) -> dict[str, float]:
        """Work beyond the loop's optimisation steps and the attack's queries, in model queries (at the victim's
        measured rate), for cost estimates: "train" (a2t's training attack) and "attack" (SAFER's certificate).
        `train_words`: the word count of each training input; `eval_examples`: the examples attacked."""
        return {}

    @classmethod
    def fingerprint(cls, params: Any, settings: Settings) -> dict[str, Any] | None:
        """Identity of the external resources the weights depend on (None: none); part of the checkpoint key."""
        return None
