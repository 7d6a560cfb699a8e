"""The measures behind `robench analyze`, on plain arrays (no model, no data): how concentrated an attribution is
(Gini, entropy, top-k share) and how representations spread and compare (effective rank, mean pairwise cosine,
linear CKA).

Every function here has a closed-form answer on hand-made inputs; the unit
tests check those answers (tests/test_analysis.py).
"""
from __future__ import annotations

import numpy as np
import torch


def gini(values: np.ndarray) -> float:
    """Gini coefficient of non-negative values: 0 when uniform, (n-1)/n for one-hot; NaN if they sum to 0."""
    x = np.sort(_nonnegative(values))
    n, total = len(x), x.sum()
    if total <= 0:
        return float("nan")
    ranks = np.arange(1, n + 1)
    return float(np.sum((2 * ranks - n - 1) * x) / (n * total))


def entropy(values: np.ndarray) -> float:
    """Shannon entropy (nats) of `values` normalised to sum 1; 0·log 0 = 0; NaN if they sum to 0."""
    x = _nonnegative(values)
    total = x.sum()
    if total <= 0:
        return float("nan")
    p = x[x > 0] / total
    return float(-np.sum(p * np.log(p)))


def top_k_share(values: np.ndarray, k: int) -> float:
    """Share of the total held by the k largest values (1 when there are at most k); NaN if they sum to 0."""
    x = _nonnegative(values)
    total = x.sum()
    if total <= 0:
        return float("nan")
    return float(np.sort(x)[::-1][:k].sum() / total)


def effective_rank(matrix: np.ndarray) -> float:
    """Roy & Vetterli (2007): exp of the entropy of the singular values normalised by their sum (L1).

    n for an n×n identity, 1 for any rank-1 matrix; NaN for the zero matrix. No centring is done here.
    """
    s = np.linalg.svd(np.asarray(matrix, dtype=np.float64), compute_uv=False)
    h = entropy(s)
    return float(np.exp(h)) if np.isfinite(h) else float("nan")


def mean_pairwise_cosine(vectors: np.ndarray) -> float:
    """Mean cosine similarity over all unordered pairs of distinct rows (NaN with fewer than 2 rows)."""
    v = np.asarray(vectors, dtype=np.float64)
    n = len(v)
    if n < 2:
        return float("nan")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    unit = v / np.where(norms > 0, norms, 1.0)
    gram = unit @ unit.T
    return float((gram.sum() - np.trace(gram)) / (n * (n - 1)))


class LinearCKA:
    """Linear CKA (Kornblith et al., 2019) between paired rows of X and Y, accumulated over batches.

    CKA = ‖Ỹᵀ X̃‖²_F / (‖X̃ᵀ X̃‖_F ‖Ỹᵀ Ỹ‖_F) with X̃, Ỹ column-centred over all rows seen.
    Only d×d sums are kept (float64, on the inputs' device), so memory does not grow with the
    number of rows and the value equals the one computed on all rows at once.
    """

    def __init__(self) -> None:
        self.n = 0
        self._sums: dict[str, torch.Tensor] = {}

    def update(self, x, y) -> "LinearCKA":
        x, y = torch.as_tensor(x).double(), torch.as_tensor(y).double()
        if x.ndim != 2 or y.ndim != 2 or len(x) != len(y):
            raise ValueError(f"CKA needs two 2-D arrays with the same number of rows, got {tuple(x.shape)} "
                             f"and {tuple(y.shape)}")
        parts = {"xx": x.T @ x, "yy": y.T @ y, "yx": y.T @ x, "x": x.sum(0), "y": y.sum(0)}
        for key, value in parts.items():
            self._sums[key] = self._sums[key] + value if key in self._sums else value
        self.n += len(x)
        return self

    def value(self) -> float:
        if self.n < 2:
            return float("nan")
        s, n = self._sums, self.n
        mx, my = s["x"] / n, s["y"] / n
        xx = s["xx"] - n * torch.outer(mx, mx)
        yy = s["yy"] - n * torch.outer(my, my)
        yx = s["yx"] - n * torch.outer(my, mx)
        denom = torch.linalg.norm(xx) * torch.linalg.norm(yy)
        return float(torch.linalg.norm(yx) ** 2 / denom) if denom > 0 else float("nan")


def linear_cka(x, y) -> float:
    """Linear CKA between two representations of the same n items (rows)."""
    return LinearCKA().update(x, y).value()


def _nonnegative(values: np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64).ravel()
    if np.any(x < 0):
        raise ValueError("expected non-negative values (clip importances at 0 first)")
    return x
