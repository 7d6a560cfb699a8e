"""Contextual word similarity: how alike a word and its substitute are in their own sentence.

A listed synonym can be the wrong sense in context ("a witty script" -> "a spiritual script", "the script" ->
"the hand"): the lists and the sentence encoder's 15-word windows both let it pass. This scores a swap by the
packaged MiniLM (the all-MiniLM-L6-v2 weights the sentence encoder uses): the cosine between its last-layer
states at the word, mean over the word's pieces, in the text before and after the swap (at most `context`
words either side, so that no text is cut). It is the token-level half of BERTScore (Zhang et al., ICLR 2020),
one word at a time.

Measured on 160 hand-read successful TextFooler swaps (results/evidence-cpu/swap-reading, docs/studies/attacks.md
"Reading the swaps"): it separates the meaning-keeping swaps from the others with AUC 0.73, better than the
synonym table's cosine (0.67) or the number of lists naming the pair (0.56).
"""
from __future__ import annotations

import functools
from typing import Sequence

import numpy as np

from robench.core.paths import Settings

CACHE_LIMIT = 200_000  # scored swaps kept per process (the cache starts over past it)


class ContextSimilarity:
    """`scores(words, i, replacements)`: per replacement, the contextual cosine at word i (see the module). Each
    (window, word, replacement) is scored once per process: a search asks again about swaps it met before (a
    population search about the same swaps in each generation)."""

    def __init__(self, model, tokenizer, device, info: dict, context: int = 20) -> None:
        self.model, self.tokenizer, self.device, self.info, self.context = model, tokenizer, device, info, context
        self._cache: dict[tuple[tuple[str, ...], int, str], float] = {}

    def scores(self, words: Sequence[str], i: int, replacements: Sequence[str]) -> np.ndarray:
        if not replacements:
            return np.zeros(0, dtype=np.float32)
        start = max(i - self.context, 0)
        window, at = tuple(words[start:i + self.context + 1]), i - start
        todo = [r for r in dict.fromkeys(replacements) if (window, at, r) not in self._cache]
        if todo:
            if len(self._cache) + len(todo) > CACHE_LIMIT:
                self._cache.clear()
            self._cache.update(zip([(window, at, r) for r in todo], self._score(list(window), at, todo).tolist()))
        return np.array([self._cache[(window, at, r)] for r in replacements], dtype=np.float32)

    def _score(self, window: list[str], at: int, replacements: list[str]) -> np.ndarray:
        import torch

        from robench.classifier.device import autocast

        texts = [window] + [window[:at] + [r] + window[at + 1:] for r in replacements]
        batch = self.tokenizer(texts, is_split_into_words=True, padding=True, return_tensors="pt")
        with torch.inference_mode(), autocast(self.device):
            states = self.model(**batch.to(self.device)).last_hidden_state.float()
        rows = []
        for b in range(len(texts)):
            pieces = [t for t, w in enumerate(batch.word_ids(b)) if w == at]
            rows.append(states[b, pieces].mean(0))
        vectors = torch.nn.functional.normalize(torch.stack(rows), dim=-1)
        return (vectors[1:] @ vectors[0]).clamp(-1, 1).cpu().numpy()


@functools.lru_cache(maxsize=8)  # loaded once per process
def context_similarity(settings: Settings, device=None) -> ContextSimilarity:
    """The packaged MiniLM as a contextual word scorer (offline; `settings` keys the per-process cache)."""
    import torch
    from transformers import AutoModel

    from robench.classifier.backbone import load_tokenizer, resolve_backbone
    from robench.classifier.device import pick_device

    backbone = resolve_backbone("minilm")
    device = pick_device("auto") if device is None else torch.device(device)
    model = AutoModel.from_pretrained(backbone.location).to(device).eval()
    info = {"name": "minilm-context-similarity", "origin": f"{backbone.fingerprint} (all-MiniLM-L6-v2 weights), "
            "cosine of the last hidden states at the swapped word, mean over its word pieces",
            "substitute": False}
    return ContextSimilarity(model, load_tokenizer(backbone.location), device, info)
