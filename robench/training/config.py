"""The fine-tuning hyperparameters every defence shares."""
from __future__ import annotations

from dataclasses import dataclass

from robench.core.params import bounded, check_fields


@dataclass(frozen=True)
class TrainConfig:
    """Fine-tuning hyperparameters shared by every defense; an ill-typed, non-finite or out-of-range
    value raises `robench.core.params.BadValue` (a ValueError) on construction."""

    epochs: int = bounded(3, 1, 1000)  # upper ends: sane, so an absurd value is an error before any work
    lr: float = bounded(5e-5, 0, 1, low_open=True)
    batch_size: int = bounded(32, 1, 65536)
    warmup_ratio: float = bounded(0.1, 0, 1)
    weight_decay: float = bounded(0.01, 0)
    max_length: int = bounded(128, 8)  # tokens; at most the backbone's position limit (checked on resolve)
    max_grad_norm: float = bounded(1.0, 0, low_open=True)

    def __post_init__(self) -> None:
        check_fields(self)
