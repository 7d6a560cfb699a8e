"""What a registered model ("defense") is, and how two of them compose.

A defense supplies an *architecture* (how the network is built from a
backbone), a training *objective* (how one step computes the loss and its
gradients), or both:

* `bert`   = plain architecture + cross-entropy
* `imbert` = IM-connection architecture (objective: cross-entropy)
* `freelb`, `smart` = objectives on the plain architecture

Names joined with `+` compose: `imbert+freelb` takes the architecture from
`imbert` and the objective from `freelb`.  Each component declares its
hyperparameters as a dataclass with the paper's defaults; overrides are
validated against those fields and the resolved values are recorded.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

from robench.core.errors import RobenchError
from robench.core.params import make_params
from robench.core.registry import Registry
from robench.core.types import NoParams
from robench.training.objective import Objective

if TYPE_CHECKING:  # annotations only: resolving a model's name and settings (reports) imports no torch
    from torch import nn


class Architecture(Protocol):
    def __call__(self, backbone: str, num_labels: int, params: Any) -> nn.Module: ...


@dataclass(frozen=True)
class Defense:
    """A registry entry under `robench.models`."""

    name: str
    summary: str
    architecture: Architecture | None = None  # None: plain BERT
    objective: type[Objective] | None = None  # None: cross-entropy
    params: type = NoParams  # dataclass of this component's hyperparameters


MODELS: Registry[Defense] = Registry("models", "robench.models")  # the defences (`robench list models`)


def plain_bert(backbone: str, num_labels: int, params: Any) -> nn.Module:
    from transformers import AutoModelForSequenceClassification

    return AutoModelForSequenceClassification.from_pretrained(backbone, num_labels=num_labels)


@dataclass(frozen=True)
class ComposedDefense:
    """The resolved architecture + objective pair for a (possibly composite) model name."""

    name: str
    parts: tuple[Defense, ...]

    @property
    def _arch_part(self) -> Defense | None:
        return next((p for p in self.parts if p.architecture is not None), None)

    @property
    def _objective_part(self) -> Defense | None:
        return next((p for p in self.parts if p.objective is not None), None)

    def resolve_params(self, overrides: dict[str, Any]) -> dict[str, Any]:
        """All hyperparameters with defaults filled in; unknown keys are an error."""
        known = {f.name for part in self.parts for f in dataclasses.fields(part.params)}
        if unknown := sorted(set(overrides) - known):
            raise RobenchError(f"unknown hyperparameter(s) {unknown} for model {self.name!r} "
                               f"(known: {', '.join(sorted(known)) or 'none'})")
        resolved: dict[str, Any] = {}
        for part in self.parts:
            names = {f.name for f in dataclasses.fields(part.params)}
            mine = {k: v for k, v in overrides.items() if k in names}
            resolved.update(dataclasses.asdict(make_params(part.params, mine, f"model {part.name!r}")))
        return resolved

    def _params_for(self, part: Defense | None, resolved: dict[str, Any]) -> Any:
        if part is None:
            return NoParams()
        names = {f.name for f in dataclasses.fields(part.params)}
        return part.params(**{k: v for k, v in resolved.items() if k in names})

    def build(self, backbone: str, num_labels: int, resolved: dict[str, Any]) -> nn.Module:
        part = self._arch_part
        build: Callable = part.architecture if part is not None else plain_bert
        return build(backbone, num_labels, self._params_for(part, resolved))

    def objective(self, model: nn.Module, resolved: dict[str, Any]) -> Objective:
        part = self._objective_part
        cls = part.objective if part is not None else Objective
        return cls(model, self._params_for(part, resolved))

    def check_training(self, resolved: dict[str, Any], train: Any, settings: Any) -> None:
        """Before any training: the objective's own checks of the schedule and its resources (`Objective.check`)."""
        part = self._objective_part
        if part is not None:
            part.objective.check(self._params_for(part, resolved), train, settings)

    def epoch_sizes(self, resolved: dict[str, Any], n_train: int, epochs: int) -> list[int]:
        """Examples per epoch: the training subset, plus what the objective adds (`Objective.planned_examples`)."""
        part = self._objective_part
        cls = part.objective if part is not None else Objective
        params = self._params_for(part, resolved)
        return [cls.planned_examples(params, epoch, n_train) for epoch in range(1, epochs + 1)]

    def extra_cost(self, resolved: dict[str, Any], train_words: list[int], epochs: int,
                   eval_examples: int) -> dict[str, float]:
        """The objective's work beyond optimisation steps and attack queries (`Objective.extra_cost`)."""
        part = self._objective_part
        if part is None:
            return {}
        return part.objective.extra_cost(self._params_for(part, resolved), train_words, epochs, eval_examples)

    def training_fingerprint(self, resolved: dict[str, Any], settings: Any) -> dict[str, Any] | None:
        """The identity of the external resources training depends on (the objective's `fingerprint`, e.g. the
        synonym table a2t attacks with), or None when the weights depend on none."""
        part = self._objective_part
        if part is None:
            return None
        return part.objective.fingerprint(self._params_for(part, resolved), settings)


def resolve_model(name: str) -> ComposedDefense:
    """`bert`, `imbert`, `imbert+freelb`, ... -> a ComposedDefense."""
    parts = tuple(MODELS.get(n.strip()) for n in name.split("+"))
    if sum(p.architecture is not None for p in parts) > 1:
        raise RobenchError(f"model {name!r} combines two architectures; combine one architecture with objectives")
    if sum(p.objective is not None for p in parts) > 1:
        raise RobenchError(f"model {name!r} combines two training objectives; pick one")
    return ComposedDefense(name, parts)
