"""The model under attack: batched, cached, counted prediction.

Every model evaluation an attack makes goes through `Victim.predict_many` (or
its one-request form `predict_proba`), so query counting and the query budget
are enforced in one place, at the victim boundary (as OpenAttack does).

* Uncached inputs are sorted by length (in tokens for a Hugging Face model) and
  batched with dynamic padding (to the longest input of each batch, never to the
  model's maximum length); the batches are cut where padding plus a per-batch cost
  is least (`cut_batches`), at most `batch_size` inputs each.
* Predictions are cached by text: asking twice costs one forward pass.
  `Victim.model_evaluations` counts the inputs actually run through the model,
  `forward_seconds` the time spent running them (tokenising included), and
  `evaluated_inputs` and `evaluated_batches` list them, so a bench can time the same
  inputs again (`time_batch`): in the attack's own batches, and as one plain sorted
  pass (`sorted_batches`), the raw rate an attack is compared with.
* Each attacked example carries a `QueryCounter`. Every text it asks about is
  one query, cached or not (TextAttack's count, `QueryCounter.queries`). A
  request that would take the counter past its budget raises
  `QueryBudgetExceeded` and is not evaluated.
* The forward pass runs under `torch.inference_mode` and, on CUDA, bf16 autocast; the
  batch size follows the device (64 on CPU, 512 on CUDA) unless given.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from robench.classifier.device import autocast, batch_overhead_for, batch_size_for
from robench.core.errors import RobenchError
from robench.core.text import excerpt

if TYPE_CHECKING:  # torch is imported where a model runs: naming a recipe and reading its parameters loads none
    import torch

Text = tuple[str, ...]  # one string per task text field


class ModelFailure(RobenchError):
    """The model under attack raised, or returned logits that are not finite numbers of the right shape.

    Not an example's result: the engine lets it through, so the run stops with a clear error (and no record)
    instead of scoring a failing model. Examples finished before it are kept for a resume.
    """


class QueryBudgetExceeded(Exception):
    """An attack asked for more model queries than its per-example budget allows.

    Not a `RobenchError`: the attack engine catches it and records the example
    as a failed attack (TextAttack's convention for an exhausted query budget).
    """

    def __init__(self, queries: int, requested: int, budget: int) -> None:
        super().__init__(f"query budget of {budget} exhausted ({queries} used, {requested} more requested)")
        self.queries, self.requested, self.budget = queries, requested, budget


@dataclass
class QueryCounter:
    """The queries charged to one attacked example (every text asked about, cached or not), and its budget."""

    budget: int | None = None  # None: unlimited
    queries: int = 0

    def charge(self, n: int) -> None:
        if self.budget is not None and self.queries + n > self.budget:
            raise QueryBudgetExceeded(self.queries, n, self.budget)
        self.queries += n


class BaseVictim:
    """Prediction caching, query counting and budgets; subclasses say how a batch becomes probabilities."""

    def __init__(self, *, batch_size: int = 64, label_order: Sequence[int] | None = None,
                 batch_overhead: int | None = None) -> None:
        self.batch_size = batch_size
        # one more batch's cost in padded tokens (robench.classifier.device); None: chunks of batch_size, as for a
        # model function whose cost per call is unknown (a remote API may charge per call)
        self.batch_overhead = batch_overhead
        self.label_order = list(label_order) if label_order is not None else None  # task label -> model output
        self.model_evaluations = 0  # inputs run through the model (cache misses); not per-example queries
        self.forward_calls = 0  # batches sent through the model
        self.forward_seconds = 0.0  # wall time inside `_forward` (tokenising, the model, softmax)
        self._cache: dict[Text, np.ndarray] = {}
        self._batch_sizes: list[int] = []  # of the batches the cached inputs were evaluated in, in order

    @property
    def num_labels(self) -> int:
        raise NotImplementedError

    def reset(self) -> None:
        """Forget cached predictions and zero the counters."""
        self.model_evaluations, self.forward_calls, self.forward_seconds, self._cache = 0, 0, 0.0, {}
        self._batch_sizes = []

    @property
    def evaluated_inputs(self) -> list[Text]:
        """Every input run through the model since the last reset, in the order it was first evaluated."""
        return list(self._cache)

    def predict_proba(self, inputs: Sequence[Text], counter: QueryCounter | None = None) -> np.ndarray:
        """Class probabilities, shape (len(inputs), num_labels), in input order.

        Charges `counter` one query per input; raises `QueryBudgetExceeded` if that
        would exceed its budget (nothing is evaluated then).
        """
        (out,) = self.predict_many([(inputs, counter)])
        if isinstance(out, QueryBudgetExceeded):
            raise out
        return out

    def predict_many(self, requests: Sequence[tuple[Sequence[Text], QueryCounter | None]]
                     ) -> list[np.ndarray | QueryBudgetExceeded]:
        """Answer several requests (one per attacked example) with shared forward passes.

        Each request is charged to its own counter; a request over its budget gets
        a `QueryBudgetExceeded` back instead of probabilities and costs nothing.
        """
        admitted: list[list[Text] | QueryBudgetExceeded] = []
        for inputs, counter in requests:
            texts = [tuple(x) for x in inputs]
            try:
                if counter is not None:
                    counter.charge(len(texts))
                admitted.append(texts)
            except QueryBudgetExceeded as exc:
                admitted.append(exc)
        self._fill([x for texts in admitted if isinstance(texts, list) for x in texts])
        return [texts if isinstance(texts, QueryBudgetExceeded) else self._lookup(texts) for texts in admitted]

    def predict(self, inputs: Sequence[Text]) -> np.ndarray:
        return self.predict_proba(inputs).argmax(axis=1)

    def _fill(self, inputs: Sequence[Text]) -> None:
        """Evaluate every input not yet cached, shortest first, in batches of `batch_size`."""
        todo = list(dict.fromkeys(x for x in inputs if x not in self._cache))
        if not todo:
            return
        self.model_evaluations += len(todo)
        for chunk in self.sorted_batches(todo):
            self._batch_sizes.append(len(chunk))
            for text, row in zip(chunk, self._probs(chunk)):
                self._cache[text] = row

    def sorted_batches(self, inputs: Sequence[Text]) -> list[list[Text]]:
        """`inputs` shortest first, cut into batches (`cut_batches`, or chunks of `batch_size` without a
        `batch_overhead`): how `_fill` runs them."""
        inputs = list(inputs)
        lengths = self._lengths(inputs)
        order = sorted(range(len(inputs)), key=lengths.__getitem__)
        if self.batch_overhead is None:
            cuts = [(a, min(a + self.batch_size, len(order))) for a in range(0, len(order), self.batch_size)]
        else:
            cuts = cut_batches([lengths[j] for j in order], self.batch_size, self.batch_overhead)
        return [[inputs[j] for j in order[a:b]] for a, b in cuts]

    def _lengths(self, inputs: list[Text]) -> list[int]:
        """The padded length each input would take in a batch; here characters, a tokenizer's victim: tokens."""
        return [sum(len(s) for s in x) for x in inputs]

    @property
    def evaluated_batches(self) -> list[list[Text]]:
        """The batches `evaluated_inputs` went through the model in (an attack's real batches, in order)."""
        inputs, out = self.evaluated_inputs, []
        for size in self._batch_sizes:
            out.append(inputs[:size])
            inputs = inputs[size:]
        return out

    def time_batch(self, batch: Sequence[Text]) -> float:
        """Seconds to run one batch through the model as `_fill` runs it, with no cache, no counter and no query
        charged (a bench times the same inputs again: the raw forward rate)."""
        saved = self.forward_calls, self.forward_seconds
        start = time.perf_counter()
        self._probs(list(batch))
        self.forward_calls, self.forward_seconds = saved
        return time.perf_counter() - start

    def _probs(self, chunk: list[Text]) -> np.ndarray:
        """Probabilities of one batch in the task's label order; every model failure is a `ModelFailure`."""
        probs = self.model_outputs(chunk)
        return probs if self.label_order is None else probs[:, self.label_order]

    def model_outputs(self, chunk: Sequence[Text]) -> np.ndarray:
        """Probabilities of one batch in the model's own output order, not cached and charged to no query (a
        victim that runs another victim's model itself, as SAFER's vote, calls it); every model failure, and a
        non-finite output, is a `ModelFailure`."""
        self.forward_calls += 1
        began = time.perf_counter()
        try:
            probs = self._forward(chunk)
        except ModelFailure:
            raise
        except Exception as exc:  # noqa: BLE001 - any failure of the model is the run's failure
            raise ModelFailure(f"the model raised {type(exc).__name__}: {excerpt(exc, 200, quote=False)}") from exc
        finally:
            self.forward_seconds += time.perf_counter() - began
        if not np.isfinite(probs).all():
            raise ModelFailure(f"the model returned non-finite probabilities (NaN or inf) for "
                               f"{int((~np.isfinite(probs).all(axis=1)).sum())} of {len(chunk)} inputs")
        return probs

    def _lookup(self, texts: list[Text]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.num_labels), dtype=np.float32)
        return np.stack([self._cache[x] for x in texts])

    def _forward(self, batch: Sequence[Text]) -> np.ndarray:
        """Probabilities for `batch`, columns in the model's own output order."""
        raise NotImplementedError


class Victim(BaseVictim):
    """A Hugging Face sequence classifier and its tokenizer."""

    def __init__(self, model, tokenizer, device: torch.device, *, batch_size: int | None = None,
                 max_length: int = 128, label_order: Sequence[int] | None = None,
                 batch_overhead: int | None = None) -> None:
        """`batch_size` and `batch_overhead` None: the device's (`robench.classifier.device`: 64 inputs and 64 tokens
        on CPU, 512 inputs and 8192 tokens on CUDA)."""
        super().__init__(batch_size=batch_size or batch_size_for(device), label_order=label_order,
                         batch_overhead=batch_overhead_for(device) if batch_overhead is None else batch_overhead)
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.device = device
        self.max_length = max_length

    @property
    def num_labels(self) -> int:
        return self.model.config.num_labels

    def _lengths(self, inputs: list[Text]) -> list[int]:
        if not inputs:
            return []
        ids = self.tokenizer(*zip(*inputs), truncation=True, max_length=self.max_length)["input_ids"]
        return [len(row) for row in ids]

    def encode(self, batch: Sequence[Text]) -> dict[str, torch.Tensor]:
        """Tokenize with dynamic padding (to the longest input in the batch)."""
        fields = list(zip(*batch))
        enc = self.tokenizer(*fields, padding=True, truncation=True, max_length=self.max_length,
                             return_tensors="pt")
        return {k: v.to(self.device) for k, v in enc.items()}

    def _forward(self, batch: Sequence[Text]) -> np.ndarray:
        import torch

        with torch.inference_mode(), autocast(self.device):
            logits = self.model(**self.encode(batch)).logits.float()
        _require_finite(logits.cpu().numpy(), len(batch), "the model")
        return torch.softmax(logits, dim=-1).cpu().numpy()


class CallableVictim(BaseVictim):
    """Any model as a function `list[str] | list[tuple[str, str]] -> logits` (shape: inputs x labels).

    Single-sentence tasks pass strings, sentence-pair tasks (text_a, text_b) tuples; the logits'
    columns are in the task's label order (or reordered by `label_order`). Like TextAttack's
    model wrapper, but with robench's batching, caching and query counting.
    """

    def __init__(self, fn: Callable[[list], Any], num_labels: int, *, batch_size: int = 64,
                 label_order: Sequence[int] | None = None, device: torch.device | None = None) -> None:
        import torch

        super().__init__(batch_size=batch_size, label_order=label_order)
        self.fn = fn
        self._num_labels = num_labels
        self.device = device or torch.device("cpu")  # where recipes put their own models (encoders, MLMs)

    @property
    def num_labels(self) -> int:
        return self._num_labels

    def _forward(self, batch: Sequence[Text]) -> np.ndarray:
        import torch

        inputs = [x[0] if len(x) == 1 else tuple(x) for x in batch]
        out = self.fn(inputs)
        if isinstance(out, torch.Tensor):
            out = out.detach().float().cpu().numpy()
        try:
            logits = np.asarray(out, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ModelFailure(f"the model function returned {type(out).__name__} values that are not numbers "
                               f"({excerpt(exc, 60, quote=False)}); return logits: numbers of shape ({len(batch)}, "
                               f"{self._num_labels})") from exc
        if logits.shape != (len(batch), self._num_labels):
            raise ModelFailure(f"the model function returned logits of shape {logits.shape} for {len(batch)} "
                               f"inputs; expected ({len(batch)}, {self._num_labels})")
        _require_finite(logits, len(batch), "the model function")
        logits = logits - logits.max(axis=1, keepdims=True)
        probs = np.exp(logits)
        return (probs / probs.sum(axis=1, keepdims=True)).astype(np.float32)


def cut_batches(lengths: Sequence[int], max_size: int, overhead: float) -> list[tuple[int, int]]:
    """Where to cut inputs sorted by length (ascending) into batches: (start, end) spans of at most `max_size`
    inputs that minimise the padded tokens (each batch pads to its longest input) plus `overhead` per batch.

    Exact, by dynamic programming over the cut points (O(n x max_size), vectorised): a round of an attack holds a
    few hundred inputs of spread-out lengths, which fixed-size chunks would pad to their longest."""
    n = len(lengths)
    cost = np.zeros(n + 1)
    start = np.zeros(n + 1, dtype=np.int64)
    for end in range(1, n + 1):
        first = max(0, end - max_size)
        options = cost[first:end] + overhead + (end - np.arange(first, end)) * lengths[end - 1]
        best = int(np.argmin(options))
        cost[end], start[end] = options[best], first + best
    spans, end = [], n
    while end:
        spans.append((int(start[end]), end))
        end = int(start[end])
    return spans[::-1]


def _require_finite(logits: np.ndarray, inputs: int, what: str) -> None:
    bad = ~np.isfinite(logits).all(axis=1)
    if bad.any():
        raise ModelFailure(f"{what} returned non-finite logits (NaN or inf) for {int(bad.sum())} of {inputs} "
                           "inputs; a model's scores must be finite numbers")


def defended(victim: Victim, settings: Any) -> BaseVictim:
    """`victim` as its model's defence answers queries: a model whose class provides `robench_victim(victim,
    settings)` (SAFER's vote over random substitutions) wraps the plain victim, so attacks, dev accuracy and
    cost estimates all query the defended prediction; any other model's victim is returned unchanged. The
    engine knows no defence by name."""
    hook = getattr(type(victim.model), "robench_victim", None)
    return hook(victim.model, victim, settings) if callable(hook) else victim


def accuracy(victim: BaseVictim, texts: Sequence[Text], labels: Sequence[int]) -> float:
    preds = victim.predict(texts)
    return float(np.mean(preds == np.asarray(labels)))
