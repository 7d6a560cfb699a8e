"""Counter-fitting word vectors to linguistic constraints (Mrkšić et al., NAACL 2016).

"Counter-fitting Word Vectors to Linguistic Constraints" injects antonymy and
synonymy into pre-trained vectors by minimising, over the new vectors V',

    C(V') = k1 * AR(V') + k2 * SA(V') + k3 * VSP(V, V')

    AR  = sum over antonym pairs (u, w)   of  max(0, delta - d(v'_u, v'_w))   antonym repel
    SA  = sum over synonym pairs (u, w)   of  max(0, d(v'_u, v'_w) - gamma)   synonym attract
    VSP = sum over i, j in N(i)           of  max(0, d(v'_i, v'_j) - d(v_i, v_j))
          where N(i) = words within cosine distance rho of i in the ORIGINAL space

with d = cosine distance (1 - cos) on unit vectors. Paper hyperparameters (their
released config): k1 = k2 = k3 = 0.1, delta = 1.0, gamma = 0.0, rho = 0.2, 20 full-batch
gradient steps; after every step each vector is renormalised to unit length, and
each word's summed gradient is divided by the number of active constraints that
touched it (the authors' convergence trick).

This implementation follows that procedure, vectorised: every step computes all
active pair gradients at once and scatter-adds them per word (`torch.index_add_`). The
gradient of d(u, w) = 1 - u.w with respect to u, taken on the unit sphere, is u (u.w) - w.
Deviations: the constraint pairs and the VSP neighbourhoods are restricted to the
vocabulary passed in (robench uses the 50k most frequent alphabetic GloVe words);
N(i) is capped at the `max_vsp_neighbours` = 50 nearest words within rho (memory bound);
VSP pairs are used in both directions (the reference code keeps only i<j by a typo).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Iterable

import numpy as np
import torch


@dataclass(frozen=True)
class CounterFitConfig:
    k1: float = 0.1  # antonym repel weight
    k2: float = 0.1  # synonym attract weight
    k3: float = 0.1  # vector-space preservation weight
    delta: float = 1.0  # antonyms are pushed to at least this cosine distance
    gamma: float = 0.0  # synonyms are pulled to at most this cosine distance
    rho: float = 0.2  # VSP neighbourhood radius (cosine distance in the original space)
    steps: int = 20  # full-batch gradient steps
    max_vsp_neighbours: int = 50  # cap on |N(i)| (nearest first) to bound memory; 0 = no VSP

    def to_dict(self) -> dict:
        return asdict(self)


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Unit-length rows (float32); zero rows stay zero."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-6)


def pair_ids(pairs: Iterable[tuple[str, str]], index: dict[str, int]) -> np.ndarray:
    """Ordered id pairs (both directions) for pairs whose words are both in `index`, shape (P, 2)."""
    ids = {(index[a], index[b]) for a, b in pairs if a in index and b in index and a != b}
    ids |= {(j, i) for i, j in ids}
    return np.array(sorted(ids), dtype=np.int64).reshape(-1, 2)


def top_neighbours(vectors: np.ndarray, k: int, block: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """For unit rows, the k most cosine-similar other rows: (ids int32 [V, k], cos float32 [V, k]), best first."""
    x = torch.from_numpy(np.ascontiguousarray(vectors, dtype=np.float32))
    n = len(x)
    k = min(k, n - 1)
    ids = torch.empty((n, k), dtype=torch.int32)
    cos = torch.empty((n, k), dtype=torch.float32)
    with torch.inference_mode():
        for start in range(0, n, block):
            sims = x[start:start + block] @ x.T
            rows = torch.arange(sims.shape[0])
            sims[rows, start + rows] = -float("inf")  # never a word's own neighbour
            top = torch.topk(sims, k, dim=1, largest=True, sorted=True)
            ids[start:start + block] = top.indices.to(torch.int32)
            cos[start:start + block] = top.values
    return ids.numpy(), cos.numpy()


def vsp_pairs(vectors: np.ndarray, rho: float, max_neighbours: int) -> tuple[np.ndarray, np.ndarray]:
    """Ordered pairs (i, j), i != j, with original cosine distance <= rho (at most `max_neighbours`
    nearest per i), and their original distances."""
    if max_neighbours <= 0:
        return np.zeros((0, 2), dtype=np.int64), np.zeros(0, dtype=np.float32)
    ids, cos = top_neighbours(vectors, max_neighbours)
    rows, cols = np.nonzero(1.0 - cos <= rho)
    pairs = np.stack([rows, ids[rows, cols]], axis=1).astype(np.int64)
    return pairs, (1.0 - cos[rows, cols]).astype(np.float32)


def counter_fit(vectors: np.ndarray, antonyms: np.ndarray, synonyms: np.ndarray,
                config: CounterFitConfig = CounterFitConfig()) -> tuple[np.ndarray, dict]:
    """Counter-fit `vectors` ([V, D]) to antonym/synonym id pairs ([P, 2], both directions present).

    Returns the new unit vectors and a summary (pair counts, loss terms before/after).
    """
    x = normalise(vectors)
    antonyms = np.asarray(antonyms, dtype=np.int64).reshape(-1, 2)
    synonyms = np.asarray(synonyms, dtype=np.int64).reshape(-1, 2)
    ant_set = {tuple(p) for p in antonyms.tolist()}
    # A pair listed as both antonym and synonym is kept as an antonym only (as the authors do).
    synonyms = np.array([p for p in synonyms.tolist() if tuple(p) not in ant_set], dtype=np.int64).reshape(-1, 2)
    vsp, vsp_dist = vsp_pairs(x, config.rho, config.max_vsp_neighbours)
    if len(vsp) and ant_set:
        keep = np.array([tuple(p) not in ant_set for p in vsp.tolist()], dtype=bool)
        vsp, vsp_dist = vsp[keep], vsp_dist[keep]
    before = costs(x, antonyms, synonyms, vsp, vsp_dist, config)
    for _ in range(config.steps):
        x = _step(x, antonyms, synonyms, vsp, vsp_dist, config)
    summary = {"antonym_pairs": len(antonyms), "synonym_pairs": len(synonyms), "vsp_pairs": len(vsp),
               "cost_before": before, "cost_after": costs(x, antonyms, synonyms, vsp, vsp_dist, config)}
    return x, summary


def _step(x: np.ndarray, ant: np.ndarray, syn: np.ndarray, vsp: np.ndarray, vsp_dist: np.ndarray,
          config: CounterFitConfig) -> np.ndarray:
    """One full-batch step: per-word mean of the active constraints' gradients, then renormalise."""
    t = torch.from_numpy(x)
    update = torch.zeros_like(t)
    count = torch.zeros(len(t))

    def apply(pairs: np.ndarray, active, weight: float) -> None:
        pairs = torch.from_numpy(pairs)[torch.from_numpy(active)]
        if len(pairs):
            u, v = t[pairs[:, 0]], t[pairs[:, 1]]
            update.index_add_(0, pairs[:, 0], weight * (u * (u * v).sum(1, keepdim=True) - v))
            count.index_add_(0, pairs[:, 0], torch.ones(len(pairs)))

    if len(ant):  # repel: increase the distance of antonyms closer than delta
        apply(ant, _dist(x, ant) < config.delta, config.k1)
    if len(syn):  # attract: decrease the distance of synonyms farther than gamma
        apply(syn, _dist(x, syn) > config.gamma, -config.k2)
    if len(vsp) and config.k3 > 0:  # preserve: pull back neighbours that drifted apart
        apply(vsp, _dist(x, vsp) > vsp_dist, -config.k3)
    moved = count > 0
    t = t.clone()
    t[moved] += update[moved] / count[moved, None]
    return normalise(t.numpy())


def _dist(x: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Cosine distance of unit rows for each id pair."""
    if not len(pairs):
        return np.zeros(0, dtype=np.float32)
    return 1.0 - np.einsum("ij,ij->i", x[pairs[:, 0]], x[pairs[:, 1]])


def costs(x: np.ndarray, ant: np.ndarray, syn: np.ndarray, vsp: np.ndarray, vsp_dist: np.ndarray,
          config: CounterFitConfig) -> dict[str, float]:
    """The three hinge terms of the objective (unweighted sums) at unit vectors `x`."""
    return {"AR": float(np.maximum(0.0, config.delta - _dist(x, ant)).sum()),
            "SA": float(np.maximum(0.0, _dist(x, syn) - config.gamma).sum()),
            "VSP": float(np.maximum(0.0, _dist(x, vsp) - vsp_dist).sum())}
