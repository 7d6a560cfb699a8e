"""Input gradients through the whole victim model, for white-box attacks and masking checks.

`word_gradients` returns, for each text, the gradient of the cross-entropy loss
with respect to the input (word-piece) embeddings, summed over the word pieces
of each word of the perturbed text field. Autograd is switched on explicitly
(also inside `torch.no_grad` / `torch.inference_mode`), so a model whose forward
behaves differently with autograd on differentiates its real computation: for
IM-BERT that is the unrolled IM-connection solver, not the detached inference
path (a detached path would leave the loss without a graph and raise, never
return a silent zero).

`bpda(model)` is Athalye et al.'s (2018) Backward Pass Differentiable
Approximation for IM-BERT: the forward value of each IM-connection is the
solver's, the backward pass is the explicit layer's.

`GradientVictim` wraps a `Victim` so that gradient requests travel the engine's
"predict" path and are charged to the example's query counter: 2 queries per
text (one forward, one backward), within the example's budget.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from typing import Any, Iterator, Literal, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from robench.classifier.victim import QueryBudgetExceeded, QueryCounter, Text, Victim
from robench.engine.words import Words

GradientMode = Literal["unrolled", "bpda"]
GRADIENT_QUERIES = 2  # a gradient costs a forward and a backward pass


@dataclass(frozen=True)
class GradQuery:
    """A request for the loss gradient of `text` with gold label `label`."""

    text: Text
    label: int


@dataclass(frozen=True)
class WordGradients:
    """Loss and per-word embedding gradients of one text (rows follow `Words.of(text).words`)."""

    loss: float
    grads: np.ndarray  # (words, hidden): sum over each word's word pieces
    norm: float  # L2 norm of the gradient over all input embeddings (every token)


@contextlib.contextmanager
def bpda(model: torch.nn.Module) -> Iterator[None]:
    """Inside: every submodule that provides a `bpda_forward` hook (a defence whose forward runs an optimisation
    loop, such as IM-BERT's solver) runs it instead of its forward: the loop's value with a differentiable
    surrogate's gradient (BPDA, Athalye et al. 2018). The engine knows no defence by name."""
    layers = [m for m in model.modules() if callable(getattr(type(m), "bpda_forward", None))]
    for layer in layers:
        layer.forward = layer.bpda_forward  # instance attribute, removed on exit
    try:
        yield
    finally:
        for layer in layers:
            del layer.forward


def _word_spans(words: Words) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for sep, word in zip(words.seps, words.words):
        pos += len(sep)
        spans.append((pos, pos + len(word)))
        pos += len(word)
    return spans


def _word_of_tokens(victim: Victim, enc: Any, row: int, words: Words, n_fields: int) -> list[int]:
    """For each token of `row`: the index of the word of the last field it belongs to, or -1."""
    spans = _word_spans(words)
    out = []
    for seq, (a, b) in zip(enc.sequence_ids(row), enc["offset_mapping"][row].tolist()):
        owner = -1
        if seq == n_fields - 1 and b > a:
            owner = next((i for i, (s, e) in enumerate(spans) if a < e and b > s), -1)
        out.append(owner)
    return out


def word_gradients(victim: Victim, queries: Sequence[GradQuery], mode: GradientMode = "unrolled"
                   ) -> list[WordGradients]:
    """Loss gradients w.r.t. the input embeddings, summed per word, one forward+backward per batch."""
    out: list[WordGradients] = []
    for start in range(0, len(queries), victim.batch_size):
        out += _batch_gradients(victim, queries[start:start + victim.batch_size], mode)
    return out


def _batch_gradients(victim: Victim, queries: Sequence[GradQuery], mode: GradientMode) -> list[WordGradients]:
    fields = list(zip(*[q.text for q in queries]))
    model = victim.model
    with torch.inference_mode(False), torch.enable_grad(), (bpda(model) if mode == "bpda" else
                                                             contextlib.nullcontext()):
        enc = victim.tokenizer(*fields, padding=True, truncation=True, max_length=victim.max_length,
                               return_tensors="pt", return_offsets_mapping=True)  # normal, not inference, tensors
        inputs = {k: v.to(victim.device) for k, v in enc.items() if k != "offset_mapping"}
        labels = torch.tensor([q.label for q in queries], device=victim.device)
        embeds = model.get_input_embeddings()(inputs.pop("input_ids")).detach().requires_grad_(True)
        logits = model(inputs_embeds=embeds, **inputs).logits.float()
        losses = F.cross_entropy(logits, labels, reduction="none")
        (grad,) = torch.autograd.grad(losses.sum(), embeds)  # examples are independent: one backward
    grad = grad.detach().float().cpu().numpy()
    results = []
    for row, query in enumerate(queries):
        words = Words.of(query.text)
        owners = np.asarray(_word_of_tokens(victim, enc, row, words, len(fields)))
        per_word = np.zeros((len(words.words), grad.shape[-1]), dtype=np.float32)
        for i in range(len(words.words)):
            per_word[i] = grad[row][owners == i].sum(axis=0)
        real = enc["attention_mask"][row].bool().numpy()
        results.append(WordGradients(float(losses[row].detach()), per_word,
                                     float(np.linalg.norm(grad[row][real]))))
    return results


class GradientVictim:
    """A `Victim` that also answers `GradQuery` items, charging 2 queries for each.

    Everything else is delegated to the wrapped victim. A request whose texts and
    gradients together would pass the example's budget is refused whole (nothing
    evaluated, nothing charged), like `Victim.predict_many`.
    """

    def __init__(self, victim: Victim, mode: GradientMode = "unrolled") -> None:
        self.inner, self.mode = victim, mode
        self.gradient_calls = 0  # texts whose gradient was computed
        self.gradient_seconds = 0.0  # wall time computing them (forward and backward)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def predict_many(self, requests: Sequence[tuple[Sequence[Any], QueryCounter | None]]) -> list[Any]:
        admitted: list[list | QueryBudgetExceeded] = []
        for items, counter in requests:
            items = list(items)
            cost = sum(GRADIENT_QUERIES if isinstance(x, GradQuery) else 1 for x in items)
            try:
                if counter is not None:
                    counter.charge(cost)
                admitted.append(items)
            except QueryBudgetExceeded as exc:
                admitted.append(exc)
        ok = [items for items in admitted if isinstance(items, list)]
        texts = [[x for x in items if not isinstance(x, GradQuery)] for items in ok]
        probs = iter(self.inner.predict_many([(t, None) for t in texts]))
        grads_needed = [x for items in ok for x in items if isinstance(x, GradQuery)]
        self.gradient_calls += len(grads_needed)
        began = time.perf_counter()
        grads = iter(word_gradients(self.inner, grads_needed, self.mode))
        self.gradient_seconds += time.perf_counter() - began
        out: list[Any] = []
        for items in admitted:
            if isinstance(items, QueryBudgetExceeded):
                out.append(items)
                continue
            rows = next(probs)
            if not any(isinstance(x, GradQuery) for x in items):
                out.append(rows)  # a plain prediction request: the victim's array
                continue
            it = iter(rows)
            out.append([next(grads) if isinstance(x, GradQuery) else next(it) for x in items])
        return out
