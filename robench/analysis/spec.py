"""What an analysis is configured by (`AnalysisConfig`), its id, and what it records (`AnalysisRecord`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from robench.analysis.syntax_config import SyntaxConfig
from robench.core.errors import RobenchError
from robench.core.hashing import content_hash
from robench.runs.spec import RunSpec

ANALYSIS_FORMAT = 1  # bump when a change would change the numbers of an existing record
CHUNK = 16  # examples per batched victim call in the word probes (a progress step)


@dataclass(frozen=True)
class AnalysisConfig:
    examples: int = 100  # eval examples, chosen by the spec's seed
    shuffles: int = 5  # random word shuffles per example
    batch_size: int = 32  # examples per forward pass when reading hidden states
    syntax: SyntaxConfig | None = None  # BLiMP and the structural probe (docs/guide/analysis.md); None: skipped

    def __post_init__(self) -> None:
        for name in ("examples", "shuffles", "batch_size"):
            if getattr(self, name) <= 0:
                raise RobenchError(f"analysis {name} must be positive, got {getattr(self, name)}")


@dataclass
class AnalysisRecord:
    analysis_id: str
    run_id: str  # the run record of the same spec, if one is written, has this id
    spec: dict[str, Any]
    config: dict[str, Any]
    metrics: dict[str, float]  # flat scalars (see docs/guide/analysis.md)
    cka_per_layer: list[float]  # [embeddings, layer 1, ..., layer L]
    resources: dict[str, Any]
    timings: dict[str, float]
    checkpoint: str
    versions: dict[str, str | None] = field(default_factory=dict)
    git_commit: str | None = None
    created: str = ""
    kind: str = "analysis"
    syntax: dict[str, Any] | None = None  # BLiMP per set / field, probe per layer, both encoders (--syntax)


def analysis_id(spec: RunSpec, config: AnalysisConfig, data: str) -> str:
    """Content hash of everything that determines the analysis: the spec without its attack settings, the
    analysis settings, and `data`, the fingerprint of the task's train and eval data it reads."""
    d = spec.to_dict()
    for key in ("attack", "attack_params", "eval_size", "eval_seed", "data_fingerprint"):
        d.pop(key)
    settings = {k: v for k, v in asdict(config).items() if not (k == "syntax" and v is None)}
    key = content_hash({"format": ANALYSIS_FORMAT, "spec": d, "config": settings, "data": data})
    return f"{spec.task}-{spec.model}-s{spec.seed}".replace(":", "_").replace("+", "_") + f"-{key}"
