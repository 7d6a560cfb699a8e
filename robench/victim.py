"""The model under attack: batched, cached, counted prediction.

Every model evaluation an attack makes goes through `Victim.predict_proba`, so
the query count and budget are enforced in one place (as OpenAttack does).
Uncached inputs are sorted by length and batched with dynamic padding; the
forward pass runs under `torch.inference_mode` and, on CUDA, bf16 autocast.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from robench.device import autocast

Text = tuple[str, ...]  # one string per task text field


class Victim:
    def __init__(self, model, tokenizer, device: torch.device, *, batch_size: int = 64,
                 max_length: int = 128) -> None:
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.queries = 0  # model evaluations of inputs not already in the cache
        self._cache: dict[Text, np.ndarray] = {}

    @classmethod
    def from_checkpoint(cls, path: Path, device: torch.device, **kwargs) -> "Victim":
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        model = AutoModelForSequenceClassification.from_pretrained(path)
        return cls(model, AutoTokenizer.from_pretrained(path), device, **kwargs)

    @property
    def num_labels(self) -> int:
        return self.model.config.num_labels

    def predict_proba(self, inputs: Sequence[Text]) -> np.ndarray:
        """Class probabilities, shape (len(inputs), num_labels), in input order."""
        inputs = [tuple(x) for x in inputs]
        todo = list(dict.fromkeys(x for x in inputs if x not in self._cache))
        if todo:
            self.queries += len(todo)
            todo.sort(key=lambda x: sum(len(s) for s in x))
            for start in range(0, len(todo), self.batch_size):
                chunk = todo[start:start + self.batch_size]
                for text, probs in zip(chunk, self._forward(chunk)):
                    self._cache[text] = probs
        if not inputs:
            return np.zeros((0, self.num_labels), dtype=np.float32)
        return np.stack([self._cache[x] for x in inputs])

    def predict(self, inputs: Sequence[Text]) -> np.ndarray:
        return self.predict_proba(inputs).argmax(axis=1)

    def encode(self, batch: Sequence[Text]) -> dict[str, torch.Tensor]:
        """Tokenize with dynamic padding (to the longest input in the batch)."""
        fields = list(zip(*batch))
        enc = self.tokenizer(*fields, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        return {k: v.to(self.device) for k, v in enc.items()}

    @torch.inference_mode()
    def _forward(self, batch: Sequence[Text]) -> np.ndarray:
        with autocast(self.device):
            logits = self.model(**self.encode(batch)).logits
        return torch.softmax(logits.float(), dim=-1).cpu().numpy()


def accuracy(victim: Victim, texts: Sequence[Text], labels: Sequence[int]) -> float:
    preds = victim.predict(texts)
    return float(np.mean(preds == np.asarray(labels)))
