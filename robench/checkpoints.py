"""Load a saved sequence classifier (robench's own, IM-BERT included) as a Victim."""
from __future__ import annotations

from pathlib import Path

import torch

from robench.victim import Victim


def load_victim(path: Path, device: torch.device, **kwargs) -> Victim:
    """The checkpoint at `path` with its tokenizer, ready to query (`kwargs` go to `Victim`)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import robench.models  # noqa: F401  (registers IM-BERT's config and model with the Auto classes)

    model = AutoModelForSequenceClassification.from_pretrained(path)
    return Victim(model, AutoTokenizer.from_pretrained(path), device, **kwargs)
