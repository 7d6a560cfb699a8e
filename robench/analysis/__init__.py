"""`robench analyze`: the diagnostics of Ebrahimi, Yang & Zhang, "How Does Adversarial
Fine-Tuning Benefit BERT?" (arXiv 2108.13602), on a run's fine-tuned checkpoint.

On N eval examples (chosen by the spec's seed with `robench.tasks.subset`) it measures
1. word-order sensitivity (random word shuffles),
2. influential-word concentration (leave-one-out deletion importances),
3. representational diversity (token cosine within a sentence, effective rank of [CLS]),
4. distance from the pre-trained encoder (per-layer linear CKA against the spec's backbone),
and writes an `AnalysisRecord` to `<results_dir>/analysis/<analysis_id>.json`.
Definitions, choices and the paper's expected directions: docs/analysis.md.

Python API:

    from robench.analysis import analyze
    record = analyze(RunSpec(model="freelb", train_size=4000), settings, device="cuda", n_examples=200)
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from robench.errors import RobenchError
from robench.results import atomic_write, git_commit, now, package_versions
from robench.settings import Settings, resolve_settings
from robench.spec import RunSpec, content_hash

ANALYSIS_FORMAT = 1  # bump when a change would change the numbers of an existing record
CHUNK = 16  # examples per batched victim call in the word probes (a progress step)


@dataclass(frozen=True)
class AnalysisConfig:
    examples: int = 100  # eval examples, chosen by the spec's seed
    shuffles: int = 5  # random word shuffles per example
    batch_size: int = 32  # examples per forward pass when reading hidden states

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
    metrics: dict[str, float]  # flat scalars (see docs/analysis.md)
    cka_per_layer: list[float]  # [embeddings, layer 1, ..., layer L]
    resources: dict[str, Any]
    timings: dict[str, float]
    checkpoint: str
    versions: dict[str, str | None] = field(default_factory=dict)
    git_commit: str | None = None
    created: str = ""
    kind: str = "analysis"


def analysis_id(spec: RunSpec, config: AnalysisConfig) -> str:
    """Content hash of everything that determines the analysis (the attack settings do not)."""
    d = spec.to_dict()
    for key in ("attack", "attack_params", "eval_size"):
        d.pop(key)
    key = content_hash({"format": ANALYSIS_FORMAT, "spec": d, "config": asdict(config)})
    return f"{spec.task}-{spec.model}-s{spec.seed}".replace(":", "_").replace("+", "_") + f"-{key}"


def analysis_dir(settings: Settings) -> Path:
    return settings.results_dir / "analysis"


def analyze(spec: RunSpec, settings: Settings | None = None, device: str = "auto", n_examples: int = 100,
            shuffles: int = 5, console=None, force: bool = False, batch_size: int = 32) -> AnalysisRecord:
    """Fine-tune (or reuse the cached checkpoint of) `spec`, measure the diagnostics, write the record.

    An existing record of the same spec and settings is returned unless `force`.
    """
    settings = settings or resolve_settings()
    config = AnalysisConfig(n_examples, shuffles, batch_size)
    path = analysis_dir(settings) / f"{analysis_id(spec, config)}.json"
    if not force and path.is_file():
        return read_analysis(path)
    from robench.analysis.run import measure

    record = measure(spec, settings, config, device, console)
    record.analysis_id = path.stem
    atomic_write(path, json.dumps(asdict(record), indent=2, default=str))
    return record


def read_analysis(path: Path) -> AnalysisRecord:
    try:
        return AnalysisRecord(**json.loads(path.read_text(encoding="utf-8")))
    except (json.JSONDecodeError, TypeError) as exc:
        raise RobenchError(f"analysis record {path} is malformed ({exc}); delete it to re-run") from exc


def iter_analyses(results_dir: Path) -> Iterator[AnalysisRecord]:
    for path in sorted((results_dir / "analysis").glob("*.json")):
        record = read_analysis(path)
        if record.kind == "analysis":
            yield record


# --- CLI -------------------------------------------------------------------------------

ROWS = [  # label, metric key, format
    ("Dev accuracy (whole eval split)", "dev_accuracy", "%"),
    ("Accuracy on the analysed examples", "sample_accuracy", "%"),
    ("Shuffle: prediction changes", "shuffle_flip_rate", "%"),
    ("Shuffle: gold-prob drop (mean)", "shuffle_gold_prob_drop", "f"),
    ("Shuffle: |gold-prob change| (mean)", "shuffle_gold_prob_abs_change", "f"),
    ("Deletion: top-1 word share", "top1_share", "%"),
    ("Deletion: top-3 words share", "top3_share", "%"),
    ("Deletion: Gini", "gini", "f"),
    ("Deletion: entropy (nats)", "entropy", "f"),
    ("Token cosine within sentence (last layer)", "token_cosine", "f"),
    ("  pre-trained backbone", "backbone_token_cosine", "f"),
    ("[CLS] effective rank (centred)", "cls_effective_rank", "f"),
    ("  pre-trained backbone", "backbone_cls_effective_rank", "f"),
    ("CKA to pre-trained, mean over layers 1..L", "cka_mean", "f"),
    ("CKA to pre-trained, last layer", "cka_last", "f"),
]


def summary_table(record: AnalysisRecord):
    from rich.table import Table

    spec, m = record.spec, record.metrics
    table = Table(title=f"analysis of {spec['model']} on {spec['task']} ({spec['backbone']}, seed {spec['seed']}, "
                        f"{m['examples']} examples, {record.config['shuffles']} shuffles each)")
    table.add_column("Metric")
    table.add_column("Value", justify="right")
    for label, key, kind in ROWS:
        value = m.get(key)
        if value is not None:
            table.add_row(label, f"{100 * value:.2f}%" if kind == "%" else f"{value:.4f}")
    layers = ", ".join(f"{v:.3f}" for v in record.cka_per_layer)
    table.add_row("CKA per layer (emb, 1..L)", layers)
    return table
