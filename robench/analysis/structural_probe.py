"""A structural probe for dependency syntax (Hewitt & Manning, "A Structural Probe for Finding
Syntax in Word Representations", NAACL 2019).

For one layer's word representations h_1..h_n of a sentence, a rank-k linear map B (k × d) is
learnt so that the squared probe distance ||B(h_i − h_j)||² fits the path length between words
i and j in the dependency tree. Evaluation, as in the paper:

- **UUAS**: the minimum spanning tree of the predicted distances (over the non-punctuation words)
  against the gold tree's undirected edges between non-punctuation words; correct edges over gold
  edges, micro-averaged over the corpus.
- **DSpr.**: for every word, the Spearman correlation between its predicted and gold distances to
  every word of the sentence (the whole row, as in the paper's code); averaged per sentence length,
  then over the lengths 5–50.

Deviations from the paper: training on UD English-EWT dev and evaluating on EWT test (the paper
uses the PTB train/dev/test splits; EWT train is not available offline), a fixed number of epochs
instead of early stopping on a dev split, punctuation identified by UPOS `PUNCT` (the paper uses
PTB XPOS tags), sub-word states mean-pooled into words, default rank 64 (the paper's probes use
the full rank; it reports that rank ~64 already suffices).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import torch

from robench.analysis.conllu import Sentence
from robench.analysis.syntax_config import ProbeConfig
from robench.core.errors import RobenchError

# (input_ids, attention_mask) -> hidden states: embeddings, layer 1, ..., layer L; each [B, T, d]
HiddenStates = Callable[[torch.Tensor, torch.Tensor], Sequence[torch.Tensor]]


@dataclass
class LayerResult:
    layer: int
    uuas: float
    spearman: float
    train_loss: float  # mean L1 loss of the last epoch


# --------------------------------------------------------------------------- word states

@torch.inference_mode()
def word_states(hidden_states: HiddenStates, tokenizer, sentences: Sequence[Sentence], layers: Sequence[int],
                device: torch.device, batch_size: int = 32, max_length: int = 256,
                advance: Callable[[int], None] = lambda n: None) -> dict[int, list[torch.Tensor]]:
    """Per requested layer, one [n_words, d] float16 CPU tensor per sentence: the mean of each word's
    sub-word states. Sentences must fit in `max_length` tokens (filter with `fits` first)."""
    out: dict[int, list[torch.Tensor]] = {layer: [] for layer in layers}
    for start in range(0, len(sentences), batch_size):
        chunk = sentences[start:start + batch_size]
        enc = tokenizer([list(s.words) for s in chunk], is_split_into_words=True, padding=True,
                        truncation=True, max_length=max_length, return_tensors="pt")
        states = hidden_states(enc["input_ids"].to(device), enc["attention_mask"].to(device))
        if max(layers) >= len(states):
            raise RobenchError(f"probe layer {max(layers)} requested but the encoder has {len(states) - 1} layers")
        for row, sentence in enumerate(chunk):
            pool = _pooling(enc.word_ids(row), len(sentence), device)
            for layer in layers:
                out[layer].append((pool @ states[layer][row].float()).half().cpu())
        advance(len(chunk))
    return out


def fits(tokenizer, sentences: Sequence[Sentence], max_length: int) -> list[bool]:
    """Whether each sentence's sub-words (with [CLS], [SEP]) fit in `max_length` tokens."""
    ids = tokenizer([list(s.words) for s in sentences], is_split_into_words=True)["input_ids"]
    return [len(x) <= max_length for x in ids]


def _pooling(word_ids: list[int | None], n_words: int, device: torch.device) -> torch.Tensor:
    """[n_words, T] matrix averaging each word's sub-word positions."""
    pool = torch.zeros(n_words, len(word_ids), device=device)
    for position, word in enumerate(word_ids):
        if word is not None:
            pool[word, position] = 1.0
    counts = pool.sum(1, keepdim=True)
    if (counts == 0).any():
        raise RobenchError("a word has no sub-word tokens; cannot pool it (is the tokenizer a fast tokenizer?)")
    return pool / counts


# --------------------------------------------------------------------------- the probe

def probe_distances(b: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
    """Squared probe distances ||B(h_i − h_j)||² for [..., n, d] states: [..., n, n]."""
    t = states @ b.T
    sq = (t * t).sum(-1)
    return (sq[..., :, None] + sq[..., None, :] - 2 * t @ t.transpose(-1, -2)).clamp_min(0.0)


def train_probe(states: Sequence[torch.Tensor], distances: Sequence[torch.Tensor],
                config: ProbeConfig) -> tuple[torch.Tensor, float]:
    """Learn B (rank × d) with Adam on the paper's loss: per sentence, the L1 difference between
    predicted and gold distances over all word pairs divided by n², averaged over the batch.
    Returns B and the mean loss of the last epoch."""
    if not states:
        raise RobenchError("no sentences to train the structural probe on")
    generator = torch.Generator().manual_seed(config.seed)
    dim = states[0].shape[-1]
    b = torch.empty(config.rank, dim).uniform_(-0.05, 0.05, generator=generator).requires_grad_(True)
    optimizer = torch.optim.Adam([b], lr=config.lr)
    last = float("nan")
    for _ in range(config.epochs):
        order = torch.randperm(len(states), generator=generator).tolist()
        losses = []
        for start in range(0, len(order), config.batch_size):
            h, d, mask = _pad([states[i] for i in order[start:start + config.batch_size]],
                              [distances[i] for i in order[start:start + config.batch_size]])
            n = mask.sum(1).float()
            pair = mask[:, :, None] & mask[:, None, :]
            err = ((probe_distances(b, h) - d).abs() * pair).sum((1, 2)) / n ** 2
            loss = err.mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        last = float(np.mean(losses))
    return b.detach(), last


def _pad(states: list[torch.Tensor], distances: list[torch.Tensor]):
    n = max(len(s) for s in states)
    h = torch.zeros(len(states), n, states[0].shape[-1])
    d = torch.zeros(len(states), n, n)
    mask = torch.zeros(len(states), n, dtype=torch.bool)
    for i, (s, g) in enumerate(zip(states, distances)):
        h[i, :len(s)], d[i, :len(s), :len(s)], mask[i, :len(s)] = s.float(), g.float(), True
    return h, d, mask


@torch.inference_mode()
def predict(b: torch.Tensor, states: Sequence[torch.Tensor]) -> list[np.ndarray]:
    return [probe_distances(b, s.float()).numpy().astype(np.float64) for s in states]


# --------------------------------------------------------------------------- evaluation

def mst_edges(distances: np.ndarray) -> set[tuple[int, int]]:
    """Undirected edges (i < j) of the minimum spanning tree of a symmetric distance matrix.

    scipy's `minimum_spanning_tree` reads 0 as "no edge", so every off-diagonal weight is shifted
    to be positive first (adding a constant to every edge does not change which tree is minimal).
    """
    from scipy.sparse.csgraph import minimum_spanning_tree

    d = np.asarray(distances, dtype=np.float64)
    n = len(d)
    if n < 2:
        return set()
    sym = (d + d.T) / 2
    shifted = sym - sym.min() + 1.0
    np.fill_diagonal(shifted, 0.0)
    tree = minimum_spanning_tree(shifted).tocoo()
    return {(min(i, j), max(i, j)) for i, j in zip(tree.row.tolist(), tree.col.tolist())}


def uuas(predicted: Sequence[np.ndarray], sentences: Sequence[Sentence]) -> float:
    """Undirected unlabelled attachment score over non-punctuation words, micro-averaged."""
    correct = total = 0
    for dist, sentence in zip(predicted, sentences):
        keep = [i for i, tag in enumerate(sentence.upos) if tag != "PUNCT"]
        if len(keep) < 2:
            continue
        kept = set(keep)
        gold = {e for e in sentence.edges() if e[0] in kept and e[1] in kept}
        tree = mst_edges(dist[np.ix_(keep, keep)])
        correct += len({(keep[i], keep[j]) for i, j in tree} & gold)
        total += len(gold)
    return correct / total if total else float("nan")


def spearman(predicted: Sequence[np.ndarray], gold: Sequence[np.ndarray], lengths: range = range(5, 51)) -> float:
    """DSpr.: per word, the Spearman correlation of its predicted and gold distance rows; mean per
    sentence length, then mean over the lengths in `lengths` that occur."""
    from scipy.stats import rankdata

    by_length: dict[int, list[float]] = {}
    for p, g in zip(predicted, gold):
        n = len(p)
        if n not in lengths:
            continue
        rp, rg = rankdata(p, axis=1), rankdata(g, axis=1)
        rp, rg = rp - rp.mean(1, keepdims=True), rg - rg.mean(1, keepdims=True)
        denom = np.sqrt((rp * rp).sum(1) * (rg * rg).sum(1))
        rho = np.where(denom > 0, (rp * rg).sum(1) / np.where(denom > 0, denom, 1.0), np.nan)
        by_length.setdefault(n, []).extend(rho[np.isfinite(rho)].tolist())
    means = [float(np.mean(v)) for v in by_length.values() if v]
    return float(np.mean(means)) if means else float("nan")


def probe_layer(train_states: Sequence[torch.Tensor], train_sentences: Sequence[Sentence],
                test_states: Sequence[torch.Tensor], test_sentences: Sequence[Sentence], layer: int,
                config: ProbeConfig) -> LayerResult:
    """Train on one layer's training states, evaluate UUAS and DSpr. on its test states."""
    train_gold = [torch.from_numpy(s.distances()) for s in train_sentences]
    b, loss = train_probe(train_states, train_gold, config)
    predicted = predict(b, test_states)
    gold = [s.distances() for s in test_sentences]
    return LayerResult(layer, uuas(predicted, test_sentences), spearman(predicted, gold), loss)
