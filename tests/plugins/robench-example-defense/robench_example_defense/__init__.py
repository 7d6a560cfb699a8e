"""`example`: label-smoothing fine-tuning as a third-party robench defense.

Szegedy et al., "Rethinking the Inception Architecture for Computer Vision",
CVPR 2016 (label smoothing), used here only to show the plugin interface: a
package declares an entry point in the group `robench.models` and robench
finds it with no change to robench itself.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch.nn.functional as F

from robench.core.types import Defense, Objective


@dataclass(frozen=True)
class LabelSmoothingParams:
    smoothing: float = 0.1


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
