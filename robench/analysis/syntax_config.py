"""Settings of `robench analyze --syntax` (no torch import: the CLI and the record read them).

BLiMP: Warstadt et al. 2020 (robench.analysis.blimp); structural probe: Hewitt & Manning 2019
(robench.analysis.structural_probe); the orchestration: robench.analysis.syntax.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from robench.core.errors import RobenchError

FIELDS = ("morphology", "syntax", "semantics", "syntax_semantics")
ANAPHOR_SETS = ("anaphor_gender_agreement", "anaphor_number_agreement")


@dataclass(frozen=True)
class BlimpConfig:
    pll_pairs: int = 20  # pairs per set scored by pseudo-log-likelihood (47 sets)
    prefix_pairs: int = 200  # pairs per one-prefix set (20 sets, including the anaphor-agreement sets)
    batch_size: int = 128  # masked sequences per forward pass

    def __post_init__(self) -> None:
        for name in ("pll_pairs", "prefix_pairs", "batch_size"):
            if not 0 < getattr(self, name):
                raise RobenchError(f"BLiMP {name} must be positive, got {getattr(self, name)}")


@dataclass(frozen=True)
class ProbeConfig:
    rank: int = 64
    epochs: int = 20
    lr: float = 1e-3
    batch_size: int = 32  # sentences per optimisation step
    seed: int = 0
    train_sentences: int | None = None  # first N sentences of EWT dev (None: all 2,001)
    test_sentences: int | None = None  # first N sentences of EWT test (None: all 2,077)
    layers: tuple[int, ...] | None = None  # hidden-state indices (0 = embeddings); None: every layer
    max_length: int = 256  # sub-word tokens per sentence; longer sentences are left out (counted)

    def __post_init__(self) -> None:
        for name in ("rank", "epochs", "batch_size", "max_length"):
            if getattr(self, name) <= 0:
                raise RobenchError(f"probe {name} must be positive, got {getattr(self, name)}")
        for name in ("train_sentences", "test_sentences"):
            value = getattr(self, name)
            if value is not None and value < 2:
                raise RobenchError(f"probe {name} must be at least 2, got {value}")


@dataclass(frozen=True)
class SyntaxConfig:
    blimp: BlimpConfig = field(default_factory=BlimpConfig)
    probe: ProbeConfig = field(default_factory=ProbeConfig)


def syntax_rows(metrics: dict[str, float]) -> Sequence[tuple[str, str, str]]:
    """(label, metric key, format) rows of the analysis summary table for the syntax metrics."""
    rows = []
    for key, label in (("blimp_anaphor_gender_agreement", "BLiMP anaphor gender agreement"),
                       ("blimp_anaphor_number_agreement", "BLiMP anaphor number agreement"),
                       *((f"blimp_{f}", f"BLiMP {f}") for f in FIELDS), ("blimp_overall", "BLiMP overall"),
                       ("probe_uuas_best", "Structural probe UUAS, best layer"),
                       ("probe_spearman_best", "Structural probe DSpr., best layer")):
        if key in metrics:
            kind = "f" if "spearman" in key else "%"
            rows += [(label, key, kind), ("  pre-trained backbone", f"backbone_{key}", kind)]
    return rows
