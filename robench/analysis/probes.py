"""Model probes of `robench analyze`: word shuffles, leave-one-out deletions, hidden states.

Words are whitespace-separated tokens of each text field. For pair tasks
(RTE, QNLI, ...) words are shuffled within their own field, and deletion runs
over the words of every field.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np
import torch

from robench.analysis.measures import LinearCKA, entropy, gini, mean_pairwise_cosine, top_k_share

Text = tuple[str, ...]
PredictProba = Callable[[Sequence[Text]], np.ndarray]


def shuffled(text: Text, rng: np.random.Generator) -> Text:
    """`text` with the words of each field in a random order (one permutation per field)."""
    out = []
    for part in text:
        words = part.split()
        out.append(" ".join(words[i] for i in rng.permutation(len(words))))
    return tuple(out)


def deletions(text: Text) -> list[Text]:
    """One variant per word of `text` with that word removed (fields in order, words left to right)."""
    out = []
    for f, part in enumerate(text):
        words = part.split()
        for i in range(len(words)):
            variant = list(text)
            variant[f] = " ".join(words[:i] + words[i + 1:])
            out.append(tuple(variant))
    return out


def shuffle_effects(predict_proba: PredictProba, texts: Sequence[Text], labels: np.ndarray, shuffles: int,
                    rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(prediction changed, gold probability original − shuffled), each of shape (len(texts), shuffles).

    The generator is consumed example by example, shuffle by shuffle, so the shuffles do not
    depend on how the examples are chunked.
    """
    variants = [shuffled(t, rng) for t in texts for _ in range(shuffles)]
    probs = predict_proba(list(texts) + variants)
    orig, shuf = probs[:len(texts)], probs[len(texts):].reshape(len(texts), shuffles, -1)
    rows = np.arange(len(texts))
    changed = shuf.argmax(-1) != orig.argmax(-1)[:, None]
    drop = orig[rows, labels][:, None] - np.take_along_axis(shuf, labels[:, None, None], axis=2)[..., 0]
    return changed, drop


def deletion_importances(predict_proba: PredictProba, texts: Sequence[Text], labels: np.ndarray) -> list[np.ndarray]:
    """Leave-one-out importance of every word: gold probability of the input minus that without the word."""
    variants = [deletions(t) for t in texts]
    probs = predict_proba(list(texts) + [v for vs in variants for v in vs])
    gold = probs[np.arange(len(texts)), labels]
    out, start = [], len(texts)
    for i, vs in enumerate(variants):
        out.append(gold[i] - probs[start:start + len(vs), labels[i]])
        start += len(vs)
    return out


@dataclass
class Concentration:
    """Influential-word concentration of one input's clipped deletion importances."""

    top1_share: float
    top3_share: float
    gini: float
    entropy: float

    @classmethod
    def of(cls, importances: np.ndarray) -> "Concentration | None":
        """None when no word supports the gold class (all importances ≤ 0): the shares are undefined."""
        clipped = np.clip(importances, 0.0, None)
        if clipped.sum() <= 0:
            return None
        return cls(top_k_share(clipped, 1), top_k_share(clipped, 3), gini(clipped), entropy(clipped))


@dataclass
class RepresentationStats:
    """Accumulates the representation metrics over batches."""

    layers: int
    token_cosine: list[float] = field(default_factory=list)  # fine-tuned, one per sentence
    backbone_token_cosine: list[float] = field(default_factory=list)  # pre-trained, one per sentence
    cls: list[np.ndarray] = field(default_factory=list)
    backbone_cls: list[np.ndarray] = field(default_factory=list)
    cka: list[LinearCKA] = field(init=False)  # one per hidden state: embeddings, layer 1, ..., layer L

    def __post_init__(self) -> None:
        self.cka = [LinearCKA() for _ in range(self.layers)]

    @torch.inference_mode()
    def update(self, tuned: Sequence[torch.Tensor], pretrained: Sequence[torch.Tensor], attention_mask: torch.Tensor,
               content_mask: torch.Tensor) -> None:
        """Hidden states (embeddings + each layer) of one batch from both models, and its masks.

        `attention_mask` marks real tokens (CKA rows: every real token, [CLS]/[SEP] included);
        `content_mask` marks real tokens that are not special tokens (cosine rows).
        """
        real = attention_mask.bool()
        for acc, a, b in zip(self.cka, tuned, pretrained):
            acc.update(a[real].float(), b[real].float())
        for states, cosines, cls in ((tuned, self.token_cosine, self.cls),
                                     (pretrained, self.backbone_token_cosine, self.backbone_cls)):
            last = states[-1].float()
            cls.append(last[:, 0].cpu().numpy())
            for row, mask in zip(last, content_mask.bool()):
                cosines.append(mean_pairwise_cosine(row[mask].cpu().numpy()))


def summarize_words(changed: np.ndarray, drop: np.ndarray, importances: list[np.ndarray]) -> dict[str, float]:
    """Word-order sensitivity and influential-word concentration over all examples."""
    conc = [c for c in (Concentration.of(imp) for imp in importances) if c is not None]
    out = {
        "shuffle_flip_rate": float(changed.mean()),
        "shuffle_gold_prob_drop": float(drop.mean()),
        "shuffle_gold_prob_abs_change": float(np.abs(drop).mean()),
        "concentration_examples": len(conc),
        "mean_words": float(np.mean([len(imp) for imp in importances])),
    }
    for key in ("top1_share", "top3_share", "gini", "entropy"):
        out[key] = float(np.mean([getattr(c, key) for c in conc])) if conc else float("nan")
    return out
