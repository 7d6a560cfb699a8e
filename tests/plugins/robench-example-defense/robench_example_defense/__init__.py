"""`example`: label-smoothing fine-tuning as a third-party robench defense.

Szegedy et al., "Rethinking the Inception Architecture for Computer Vision",
CVPR 2016 (label smoothing), used here only to show the plugin interface: a
package declares an entry point in the group `robench.models` and robench
finds it with no change to robench itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F

from robench.core.params import bounded, check_fields
from robench.training.defense import Defense
from robench.training.objective import Objective


@dataclass(frozen=True)
class LabelSmoothingParams:
    smoothing: float = bounded(0.1, 0, 1, high_open=True)  # epsilon: the share of the target spread uniformly

    def __post_init__(self) -> None:
        check_fields(self)  # type, finiteness and range of every field


class LabelSmoothing(Objective):
    def step(self, batch):
        labels = batch["labels"]
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        logits = self.model(**inputs).logits
        loss = F.cross_entropy(logits.float(), labels, label_smoothing=self.params.smoothing)
        loss.backward()
        return loss.detach()


EXAMPLE = Defense("example", "Label-smoothing fine-tuning (example plugin)", objective=LabelSmoothing,
                  params=LabelSmoothingParams)
