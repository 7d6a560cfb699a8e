"""`robench analyze`: the diagnostics of Ebrahimi, Yang & Zhang, "How Does Adversarial
Fine-Tuning Benefit BERT?" (arXiv 2108.13602), on a run's fine-tuned checkpoint.

On N eval examples (chosen by the spec's seed with `robench.data.loading.subset`) it measures
1. word-order sensitivity (random word shuffles),
2. influential-word concentration (leave-one-out deletion importances),
3. representational diversity (token cosine within a sentence, effective rank of [CLS]),
4. distance from the pre-trained encoder (per-layer linear CKA against the spec's backbone),
and writes an `AnalysisRecord` to `<results_dir>/analysis/<analysis_id>.json`.
Definitions, choices and the paper's expected directions: docs/guide/analysis.md.

Python API:

    from robench.analysis import analyze
    record = analyze(RunSpec(model="freelb", train_size=4000), settings, device="cuda", n_examples=200)
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from robench.analysis.spec import AnalysisConfig, AnalysisRecord, analysis_id
from robench.analysis.syntax_config import SyntaxConfig
from robench.core.errors import RobenchError
from robench.core.files import atomic_write
from robench.core.packed import runs_to_read
from robench.core.paths import Settings, resolve_settings
from robench.runs.spec import RunSpec

if TYPE_CHECKING:
    import pandas as pd


def analysis_dir(settings: Settings) -> Path:
    return settings.results_dir / "analysis"


def analyze(spec: RunSpec, settings: Settings | None = None, device: str = "auto", n_examples: int = 100,
            shuffles: int = 5, console=None, force: bool = False, batch_size: int = 32,
            syntax: SyntaxConfig | None = None) -> AnalysisRecord:
    """Fine-tune (or reuse the cached checkpoint of) `spec`, measure the diagnostics, write the record.

    An existing record of the same spec and settings is returned unless `force`. `syntax` adds BLiMP
    through the frozen MLM head and the structural probe (`robench.analysis.syntax`).
    """
    settings = settings or resolve_settings()
    config = AnalysisConfig(n_examples, shuffles, batch_size, syntax)
    path = analysis_path(spec, config, settings)
    if not force and path.is_file():
        return read_analysis(path)
    from robench.analysis.run import measure  # torch and transformers: only when measuring

    record = measure(spec, settings, config, device, console)
    record.analysis_id = path.stem
    atomic_write(path, json.dumps(asdict(record), indent=2, default=str))
    return record


def analysis_path(spec: RunSpec, config: AnalysisConfig, settings: Settings) -> Path:
    """Where the analysis of `spec` with `config` is (or would be) recorded; tied to the data it reads."""
    from robench.runs.resolve import resolve_run

    resolved = resolve_run(spec, settings, attack=False)  # an analysis attacks nothing
    return analysis_dir(settings) / f"{analysis_id(resolved.spec, config, resolved.train_data)}.json"


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


def analysis_frame(results_dir: Path, cache_dir: Path | None = None) -> pd.DataFrame:
    """One row per (model setting, seed) from `<results_dir>/analysis/*.json`: the record with the most
    examples, then the newest, when a model setting was analysed more than once. The model setting is the
    checkpoint's (`robench.report.identity.ModelSettings`, told the run records of `<results_dir>/runs`), so an
    analysis joins every leaderboard row of its checkpoint."""
    import pandas as pd  # pandas, scipy and torch: only when tabulating (the CLI parser imports this package)

    from robench.core.records import iter_records
    from robench.report.identity import ModelSettings
    from robench.report.leaderboard_columns import ANALYSIS_KEYS, ANALYSIS_METRICS

    runs = runs_to_read(results_dir, cache_dir)
    ids = ModelSettings(iter_records(runs) if runs.is_dir() else ())
    rows = []
    for rec in iter_analyses(results_dir):
        row = {k: rec.spec.get(k) for k in ANALYSIS_KEYS}
        row.update(model_setting_id=ids.of_analysis(rec.spec, rec.resources, rec.checkpoint), seed=rec.spec.get("seed"),
                   examples=rec.metrics.get("examples"), created=rec.created)
        row.update({m: rec.metrics.get(m) for m in ANALYSIS_METRICS})
        rows.append(row)
    if not rows:
        raise RobenchError(f"no analysis records in {results_dir / 'analysis'}; run `robench analyze` first")
    frame = pd.DataFrame(rows)
    frame["train_size"] = frame["train_size"].fillna(-1).astype(int).astype(str).replace("-1", "full")
    frame = frame.sort_values(["examples", "created"]).drop_duplicates(ANALYSIS_KEYS + ["seed"], keep="last")
    return frame
