"""Aggregate run records into a leaderboard: mean ± std over seeds per setting."""
from __future__ import annotations

from pathlib import Path

import pandas as pd

from robench.errors import RobenchError
from robench.results import atomic_write, iter_records

KEYS = ["task", "model", "attack", "backbone", "train_size"]
METRICS = ["dev_accuracy", "clean_accuracy", "robust_accuracy", "accuracy_drop", "attack_success_rate",
           "avg_perturbed_word_pct", "avg_words_per_input", "avg_queries", "train_seconds"]
PERCENT = {"dev_accuracy", "clean_accuracy", "robust_accuracy", "accuracy_drop", "attack_success_rate",
           "shuffle_flip_rate", "top1_share", "top3_share"}
# `robench analyze` columns (leaderboard --with-analysis); an analysis does not depend on the attack
ANALYSIS_KEYS = ["task", "model", "backbone", "train_size"]
ANALYSIS_METRICS = ["shuffle_flip_rate", "shuffle_gold_prob_abs_change", "top1_share", "top3_share", "gini",
                    "entropy", "token_cosine", "cls_effective_rank", "cka_mean", "cka_last"]
DIGITS = {"shuffle_gold_prob_abs_change": 3, "gini": 3, "entropy": 2, "token_cosine": 3, "cka_mean": 3,
          "cka_last": 3}  # decimals in Markdown (default 1)


def records_frame(runs_dir: Path) -> pd.DataFrame:
    """One row per run record: its setting, seed, metrics and training time."""
    rows = []
    for rec in iter_records(runs_dir):
        row = {k: rec.spec.get(k) for k in KEYS}
        row.update(seed=rec.spec.get("seed"), run_id=rec.run_id, train_seconds=rec.timings.get("train_seconds"))
        row.update({k: v for k, v in rec.metrics.items() if not isinstance(v, (dict, list))})
        rows.append(row)
    if not rows:
        raise RobenchError(f"no run records in {runs_dir}; run `robench run` first")
    frame = pd.DataFrame(rows)
    frame["train_size"] = frame["train_size"].fillna(-1).astype(int).astype(str).replace("-1", "full")
    return frame


def aggregate(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean and (sample) std over seeds for every setting; `seeds` counts the runs."""
    return mean_std(frame, KEYS, [m for m in METRICS if m in frame.columns], "seeds")


def mean_std(frame: pd.DataFrame, keys: list[str], metrics: list[str], count: str) -> pd.DataFrame:
    """Per group of `keys`: `<metric>_mean` and `<metric>_std` (sample std), and the group size as `count`."""
    numeric = frame[keys + metrics].copy()
    numeric[metrics] = numeric[metrics].apply(pd.to_numeric, errors="coerce")
    grouped = numeric.groupby(keys, sort=True, dropna=False)
    table = grouped[metrics].agg(["mean", "std"])
    table.columns = [f"{m}_{stat}" for m, stat in table.columns]
    table.insert(0, count, grouped.size())
    return table.reset_index()


def markdown(table: pd.DataFrame) -> str:
    metrics = [m for m in METRICS + ANALYSIS_METRICS if f"{m}_mean" in table.columns]
    header = KEYS + ["seeds"] + metrics
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in table.iterrows():
        cells = [str(row[k]) for k in KEYS + ["seeds"]]
        cells += [format_mean_std(row[f"{m}_mean"], row[f"{m}_std"], m in PERCENT, DIGITS.get(m, 1)) for m in metrics]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def format_mean_std(mean: float | None, std: float | None, percent: bool, digits: int = 1) -> str:
    """"mean ± std" with `digits` decimals (x100 when `percent`); "mean" when std is missing, "–" when both are.

    The one place robench writes a mean over seeds (leaderboards, the HTML page, the benchmarks)."""
    if pd.isna(mean):
        return "–"
    scale = 100.0 if percent else 1.0
    text = f"{mean * scale:.{digits}f}"
    return text if pd.isna(std) else f"{text} ± {std * scale:.{digits}f}"


def analysis_frame(results_dir: Path) -> pd.DataFrame:
    """One row per (setting, seed) from `<results_dir>/analysis/*.json`: the record with the most
    examples, then the newest, when a setting was analysed more than once."""
    from robench.analysis import iter_analyses

    rows = []
    for rec in iter_analyses(results_dir):
        row = {k: rec.spec.get(k) for k in ANALYSIS_KEYS}
        row.update(seed=rec.spec.get("seed"), examples=rec.metrics.get("examples"), created=rec.created)
        row.update({m: rec.metrics.get(m) for m in ANALYSIS_METRICS})
        rows.append(row)
    if not rows:
        raise RobenchError(f"no analysis records in {results_dir / 'analysis'}; run `robench analyze` first")
    frame = pd.DataFrame(rows)
    frame["train_size"] = frame["train_size"].fillna(-1).astype(int).astype(str).replace("-1", "full")
    frame = frame.sort_values(["examples", "created"]).drop_duplicates(ANALYSIS_KEYS + ["seed"], keep="last")
    return frame


def with_analysis(table: pd.DataFrame, analyses: pd.DataFrame) -> pd.DataFrame:
    """`table` (from `aggregate`) plus mean and std over seeds of each analysis metric, and `analysis_seeds`."""
    extra = mean_std(analyses, ANALYSIS_KEYS, ANALYSIS_METRICS, "analysis_seeds")
    return table.merge(extra, on=ANALYSIS_KEYS, how="left")


def write_leaderboard(results_dir: Path, analysis: bool = False) -> tuple[pd.DataFrame, Path, Path]:
    table = aggregate(records_frame(results_dir / "runs"))
    if analysis:
        table = with_analysis(table, analysis_frame(results_dir))
    csv_path, md_path = results_dir / "leaderboard.csv", results_dir / "leaderboard.md"
    atomic_write(csv_path, table.to_csv(index=False, float_format="%.6f"))
    atomic_write(md_path, markdown(table))
    return table, csv_path, md_path
