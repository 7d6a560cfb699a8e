"""Aggregate run records into a leaderboard: one row per setting, mean ± std over training seeds, and 95%
intervals over seeds and examples.

A setting is the whole spec but the training seed (`robench.report.identity`); rows of one checkpoint (the
AdvGLUE replay and the word-level attacks of one model) share `model_setting_id`. Clean accuracy, accuracy
under attack, attack success rate and the worst case get 95% intervals over seeds x examples from the
per-example CSVs, and with a baseline model each row gets the paired difference in accuracy under attack, its
Holm-adjusted p-value over the family and the verdict (`robench.report.compare`, docs/statistics.md).
Records of an older format are skipped, and one record is kept per (setting, seed), the newest (`Records.note`
says how many, and where).

Units: every accuracy, drop and rate in the CSV is a fraction in [0, 1] (the Markdown shows them in percent);
`avg_words_per_input` counts words, `avg_queries` model queries per attacked example, `train_seconds` seconds.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from robench.core.errors import RobenchError
from robench.core.files import atomic_write
from robench.core.records import RECORD_FORMAT, RunRecord, iter_records
from robench.core.text import markdown_cell
from robench.report.compare import Setting, compare, group_settings, intervals
from robench.report.identity import ModelSettings, attack_label, model_label, one_per_seed, setting_id, setting_label
from robench.report.stats import ALPHA, INSUFFICIENT, INTERVAL_METRICS, LESS_ROBUST, MIN_SEEDS, MORE_ROBUST
from robench.report.validity import VALIDITY_METRICS, validity_columns
from robench.report.worstcase import with_worst_case, write_worst_case

KEYS = ["task", "model", "attack", "backbone", "train_size"]
ROW = KEYS + ["setting", "seeds", "examples"]  # the leading columns of every leaderboard row
IDS = ["setting_id", "model_setting_id"]  # trailing columns: the setting and its model part (robench.report.identity)
LABELS = ["model_label", "attack_label"]  # the two parts of the `setting` label (before IDS)
METRICS = ["dev_accuracy", "clean_accuracy", "robust_accuracy", "accuracy_drop", "dev_minus_robust",
           "attack_success_rate", "perturbed_word_rate",
           "avg_words_per_input", "avg_queries", "train_seconds", "worst_case_accuracy",
           *VALIDITY_METRICS,  # the swap audit of word-level attacks (robench.report.validity)
           "certified_accuracy"]  # certified-robust accuracy: defences with a certificate only (SAFER)
PERCENT = {"dev_accuracy", "clean_accuracy", "robust_accuracy", "accuracy_drop", "dev_minus_robust",
           "attack_success_rate", "perturbed_word_rate",
           "worst_case_accuracy", *VALIDITY_METRICS, "certified_accuracy",
           "robust_accuracy_diff", "shuffle_flip_rate", "top1_share", "top3_share",
           "blimp_anaphor_gender_agreement", "blimp_anaphor_number_agreement", "blimp_overall", "probe_uuas_best"}
DIFF = ["robust_accuracy_diff", "robust_accuracy_diff_ci_low", "robust_accuracy_diff_ci_high",
        "robust_accuracy_diff_p", "robust_accuracy_diff_p_holm", "robust_accuracy_diff_seeds",
        "robust_accuracy_diff_verdict", "robust_accuracy_diff_family"]  # with a baseline: model minus baseline
# `robench analyze` columns (leaderboard --with-analysis); an analysis does not depend on the attack
ANALYSIS_KEYS = ["task", "model", "backbone", "train_size", "model_setting_id"]
ANALYSIS_METRICS = ["shuffle_flip_rate", "shuffle_gold_prob_abs_change", "top1_share", "top3_share", "gini",
                    "entropy", "token_cosine", "cls_effective_rank", "cka_mean", "cka_last",
                    # `robench analyze --syntax` (empty for analyses without it)
                    "blimp_anaphor_gender_agreement", "blimp_anaphor_number_agreement", "blimp_overall",
                    "probe_uuas_best", "probe_spearman_best"]
DIGITS = {"shuffle_gold_prob_abs_change": 3, "gini": 3, "entropy": 2, "token_cosine": 3, "cka_mean": 3,
          "cka_last": 3, "probe_spearman_best": 3}  # decimals in Markdown (default 1)


@dataclass(frozen=True)
class Records:
    """The run records of a runs directory: those of the current format, one per (setting, seed)
    (`robench.report.identity.one_per_seed`), how many older ones were skipped and which duplicates were set
    aside."""

    runs_dir: Path
    current: list[RunRecord]
    older: int
    duplicates: tuple[tuple[str, str], ...] = ()  # (run id set aside, run id kept for its setting and seed)

    @property
    def note(self) -> str | None:
        notes = []
        if self.older:
            notes.append(f"skipped {self.older} run record(s) of an older format in {self.runs_dir}: their eval "
                         "subset was chosen by the training seed; re-run them to include them")
        if self.duplicates:
            shown = ", ".join(f"{kept} over {dropped}" for dropped, kept in self.duplicates[:3])
            more = f" and {len(self.duplicates) - 3} more" if len(self.duplicates) > 3 else ""
            notes.append(f"resolved {len(self.duplicates)} duplicate record(s) of one setting and seed in "
                         f"{self.runs_dir}, keeping the newest: {shown}{more}")
        return "\n".join(notes) or None


def load_records(runs_dir: Path) -> Records:
    current, older = [], 0
    for rec in iter_records(runs_dir):
        if rec.format == RECORD_FORMAT:
            current.append(rec)
        else:
            older += 1
    if not current and not older:
        raise RobenchError(f"no run records in {runs_dir}; run `robench run` first")
    chosen = one_per_seed(current)
    return Records(runs_dir, chosen.kept, older, tuple((d.run_id, k.run_id) for d, k in chosen.replaced))


def records_frame(runs_dir: Path) -> pd.DataFrame:
    """One row per current-format run record: its setting, seed, metrics and training time."""
    return frame_of(load_records(runs_dir).current)


def frame_of(records: list[RunRecord]) -> pd.DataFrame:
    ids = ModelSettings(records)  # the checkpoint's identity (AdvGLUE records take their checkpoint's)
    rows = []
    for rec in records:
        row = {k: rec.spec.get(k) for k in KEYS}
        row.update(setting=setting_label(rec), model_label=model_label(rec), attack_label=attack_label(rec),
                   setting_id=setting_id(rec),
                   model_setting_id=ids.of_run(rec),
                   seed=rec.spec.get("seed"), run_id=rec.run_id, train_seconds=rec.timings.get("train_seconds"),
                   eval_examples=(rec.resources.get("data") or {}).get("eval_examples"))
        row.update({k: v for k, v in rec.metrics.items() if not isinstance(v, (dict, list))})
        row.update(derived_metrics(rec.metrics))
        row.update(validity_columns(rec.metrics))
        row["_trained"] = rec.spec.get("checkpoint") is None  # False: a given checkpoint or model was attacked
        rows.append(row)
    frame = pd.DataFrame(rows, columns=None if rows else KEYS + ["setting", "seed", "run_id"] + IDS)
    frame["train_size"] = frame["train_size"].fillna(-1).astype(int).astype(str).replace("-1", "full")
    if rows:
        frame.loc[~frame.pop("_trained").astype(bool), "train_size"] = "–"
    return frame


def derived_metrics(metrics: dict) -> dict[str, float | None]:
    """The leaderboard's own definitions: `accuracy_drop` is clean minus robust accuracy on the attacked
    examples (none without a clean accuracy); `dev_minus_robust` is the whole dev split's accuracy minus the
    accuracy under attack on another set, only where the attack has no clean accuracy of its own (AdvGLUE: 872
    dev sentences against its 148); `perturbed_word_rate` is the record's percent as a fraction."""
    clean, robust, dev = (metrics.get(k) for k in ("clean_accuracy", "robust_accuracy", "dev_accuracy"))
    pct = metrics.get("avg_perturbed_word_pct")
    return {"accuracy_drop": clean - robust if clean is not None and robust is not None else None,
            "dev_minus_robust": dev - robust if clean is None and dev is not None and robust is not None else None,
            "perturbed_word_rate": pct / 100 if pct is not None else None}


def aggregate(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per setting: mean and (sample) std over seeds of every metric; `seeds` counts the runs,
    `examples` the examples attacked per seed."""
    metrics = [m for m in METRICS if m in frame.columns]
    table = mean_std(frame, ["setting_id"], metrics, "seeds")
    first = frame.drop_duplicates("setting_id").set_index("setting_id").loc[table["setting_id"]]
    table["examples"] = pd.array(first["eval_examples"].to_numpy(), dtype="Int64")
    for column in KEYS + ["setting", *LABELS, "model_setting_id"]:
        table[column] = first[column].to_numpy()
    columns = ROW + [c for c in table.columns if c.endswith(("_mean", "_std"))] + LABELS + IDS
    return table[columns].sort_values(KEYS + ["setting"], kind="stable").reset_index(drop=True)


def mean_std(frame: pd.DataFrame, keys: list[str], metrics: list[str], count: str) -> pd.DataFrame:
    """Per group of `keys`: `<metric>_mean` and `<metric>_std` (sample std), and the group size as `count`."""
    numeric = frame[keys + metrics].copy()
    numeric[metrics] = numeric[metrics].apply(pd.to_numeric, errors="coerce")
    grouped = numeric.groupby(keys, sort=True, dropna=False)
    table = grouped[metrics].agg(["mean", "std"])
    table.columns = [f"{m}_{stat}" for m, stat in table.columns]
    table.insert(0, count, grouped.size())
    return table.reset_index()


def with_intervals(table: pd.DataFrame, settings: list[Setting], runs_dir: Path) -> pd.DataFrame:
    """`<metric>_ci_low` / `_ci_high` after each metric's mean and std (empty where a run has no per-example CSV)."""
    by_id = {s.id: s for s in settings}
    rows = []
    for sid in table["setting_id"]:
        try:
            rows.append(intervals(by_id[sid], runs_dir))
        except RobenchError:  # a record without its per-example CSV: no interval
            rows.append({})
    extra = pd.DataFrame(rows, index=table.index)
    for metric in reversed(INTERVAL_METRICS):
        if f"{metric}_std" not in table.columns:
            continue
        at = table.columns.get_loc(f"{metric}_std") + 1
        for side in ("ci_high", "ci_low"):
            column = f"{metric}_{side}"
            table.insert(at, column, extra[column] if column in extra else float("nan"))
    return table


def with_baseline(table: pd.DataFrame, settings: list[Setting], runs_dir: Path, baseline: str) -> pd.DataFrame:
    """`baseline` and the DIFF columns: accuracy under attack of the row's model minus the baseline's, at the
    same setting otherwise (paired over matched seeds and shared examples), the unadjusted and Holm-adjusted
    p-values, the matched seeds, the verdict and the family size; empty for the baseline's rows."""
    found = {c.setting.id: c for c in reversed(compare(settings, runs_dir, baseline))}
    cells = [found.get(sid) for sid in table["setting_id"]]
    values = [(c.difference.value, c.difference.low, c.difference.high, c.p_value, c.adjusted_p, len(c.seeds),
               c.verdict, c.family) if c else (None,) * len(DIFF) for c in cells]
    table = table.copy()
    at = table.columns.get_loc("setting_id")
    table.insert(at, "baseline", baseline)
    for offset, name in enumerate(DIFF, 1):
        table.insert(at + offset, name, [v[offset - 1] for v in values])
    # the comparison's own verdict (robench.report.compare.Comparison.verdict), which the HTML page marks per cell
    table.insert(at + len(DIFF) + 1, "robust_accuracy_verdict", [c.verdict if c else None for c in cells])
    return table


def leaderboard_table(records: Records, baseline: str | None = None) -> pd.DataFrame:
    """The leaderboard of `records`: `aggregate`, then intervals, then the comparison with `baseline`."""
    frame = frame_of(records.current)
    if frame.empty:
        return pd.DataFrame(columns=ROW + IDS)
    settings = group_settings(records.current)
    table = with_intervals(aggregate(frame), settings, records.runs_dir)
    return with_baseline(table, settings, records.runs_dir, baseline) if baseline else table


def markdown(table: pd.DataFrame) -> str:
    """`leaderboard.md`: the checkpoint table (`checkpoint_markdown`), then one row per setting."""
    by_checkpoint = checkpoint_markdown(table)
    head = f"## One row per checkpoint\n\n{by_checkpoint}\n## One row per setting\n\n" if by_checkpoint else ""
    return head + setting_markdown(table)


def checkpoint_markdown(table: pd.DataFrame) -> str:
    """One row per task and model setting (the checkpoint's identity, `model_setting_id`), one column per attack
    setting: the AdvGLUE replay and the word-level attacks of one model are columns of one row. Cells: accuracy
    under attack with its 95% interval (mean ± std without per-example data); dev accuracy, the worst case and
    the masking flags of the checkpoint."""
    if table.empty or not set(LABELS) <= set(table.columns):
        return ""
    pairs = zip(table["attack"], table["attack_label"])
    attacks = sorted({(a, lab if isinstance(lab, str) else "") for a, lab in pairs},
                     key=lambda v: (v[0] != "advglue", v))  # AdvGLUE first, as on the page
    flags = "masking_flags" in table.columns
    worst = "worst_case_accuracy_mean" in table.columns
    names = [v[1] if v[1].startswith(f"{v[0]}[") else " ".join(p for p in v if p) for v in attacks]
    header = ["task", "model", "setting", "backbone", "train_size", "seeds", "dev_accuracy", *names] + \
        (["worst_case_accuracy"] if worst else []) + (["masking_flags"] if flags else [])
    lines = ["| " + " | ".join(_text(h) for h in header) + " |", "|" + "---|" * len(header)]
    for _, group in table.groupby(["task", "model_setting_id"], sort=False):
        first = group.iloc[0]
        label = first["model_label"] if isinstance(first["model_label"], str) and first["model_label"] else "default"
        by_attack = {(r["attack"], r["attack_label"] if isinstance(r["attack_label"], str) else ""): r
                     for _, r in group.iterrows()}
        cells = [_text(first[k]) for k in ("task", "model")] + [_text(label)]
        cells += [_text(first[k]) for k in ("backbone", "train_size")] + [_text(int(group["seeds"].max()))]
        cells.append(_metric_cell(first, "dev_accuracy"))
        cells += [_metric_cell(by_attack[v], "robust_accuracy") if v in by_attack else "–" for v in attacks]
        if worst:
            cells.append(_metric_cell(first, "worst_case_accuracy"))
        if flags:
            cells.append(_text(first["masking_flags"]) if isinstance(first["masking_flags"], str)
                         and first["masking_flags"] else "–")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _metric_cell(row, metric: str) -> str:
    if pd.notna(row.get(f"{metric}_ci_low")):
        return format_interval(row[f"{metric}_mean"], row[f"{metric}_ci_low"], row[f"{metric}_ci_high"],
                               metric in PERCENT)
    return format_mean_std(row.get(f"{metric}_mean"), row.get(f"{metric}_std"), metric in PERCENT,
                           DIGITS.get(metric, 1))


def setting_markdown(table: pd.DataFrame) -> str:
    """One row per setting: every metric (with its interval where there is one), flags, the comparison."""
    metrics = [m for m in METRICS + ANALYSIS_METRICS if f"{m}_mean" in table.columns]
    baseline = "baseline" in table.columns
    flags = ["masking_flags"] if "masking_flags" in table.columns else []  # robench.report.worstcase
    header = ROW + metrics + flags + ([f"robust_accuracy vs {markdown_cell(table['baseline'].iloc[0])}"]
                                      if baseline else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in table.iterrows():
        cells = [_text(row[k]) for k in ROW]
        cells += [format_interval(row[f"{m}_mean"], row[f"{m}_ci_low"], row[f"{m}_ci_high"], m in PERCENT)
                  if pd.notna(row.get(f"{m}_ci_low")) else
                  format_mean_std(row[f"{m}_mean"], row[f"{m}_std"], m in PERCENT, DIGITS.get(m, 1)) for m in metrics]
        cells += [markdown_cell(row[f]) if isinstance(row[f], str) and row[f] else "–" for f in flags]
        if baseline:
            cells.append(format_difference(row))
        lines.append("| " + " | ".join(cells) + " |")
    if baseline:
        family = table["robust_accuracy_diff_family"].dropna()
        size = int(family.iloc[0]) if len(family) else 0
        lines.append(f"\np: the paired test (crossed seeds x examples, t on Satterthwaite df); Holm: adjusted over "
                     f"the family of {size} comparisons; starred: more or less robust (Holm p < {ALPHA:g}, at least "
                     f"{MIN_SEEDS} matched seeds); fewer seeds: insufficient seeds, no verdict")
    return "\n".join(lines) + "\n"


def _text(value) -> str:
    """A name or count as one Markdown cell: task and model names come from users, so HTML, `|` and controls in
    them are escaped (`robench.core.text.markdown_cell`) and cannot inject markup or shift the columns."""
    return "–" if value is None or pd.isna(value) else markdown_cell(value)


def format_mean_std(mean: float | None, std: float | None, percent: bool, digits: int = 1) -> str:
    """"mean ± std" with `digits` decimals (x100 when `percent`); "mean" when std is missing, "–" when both are.

    The one place robench writes a mean over seeds (leaderboards, the HTML page, the benchmarks)."""
    if pd.isna(mean):
        return "–"
    scale = 100.0 if percent else 1.0
    text = f"{mean * scale:.{digits}f}"
    return text if pd.isna(std) else f"{text} ± {std * scale:.{digits}f}"


def format_interval(mean: float | None, low: float, high: float, percent: bool, digits: int = 1) -> str:
    """"mean [low, high]" with `digits` decimals (x100 when `percent`); "–" without a mean."""
    if mean is None or pd.isna(mean):
        return "–"
    scale = 100.0 if percent else 1.0
    return f"{mean * scale:.{digits}f} [{low * scale:.{digits}f}, {high * scale:.{digits}f}]"


def format_difference(row) -> str:
    """A row's paired difference from the baseline: "+2.1 [-1.0, +5.2] p=0.21 Holm 0.63", starred when the
    verdict is more or less robust, "(insufficient seeds)" below MIN_SEEDS matched seeds."""
    diff = row.get("robust_accuracy_diff")
    if diff is None or pd.isna(diff):
        return "–"
    low, high = row.get("robust_accuracy_diff_ci_low"), row.get("robust_accuracy_diff_ci_high")
    text = f"{100 * diff:+.1f}"
    if low is not None and pd.notna(low):
        text += (f" [{100 * low:+.1f}, {100 * high:+.1f}] p={row['robust_accuracy_diff_p']:.3g} "
                 f"Holm {row['robust_accuracy_diff_p_holm']:.3g}")
    verdict = row.get("robust_accuracy_diff_verdict")
    if verdict in (MORE_ROBUST, LESS_ROBUST):
        return text + " *"
    return text + (" (insufficient seeds)" if verdict == INSUFFICIENT else "")


def with_analysis(table: pd.DataFrame, analyses: pd.DataFrame) -> pd.DataFrame:
    """`table` (from `aggregate`) plus mean and std over seeds of each analysis metric, and `analysis_seeds`,
    joined on the model setting (an analysis does not depend on the attack)."""
    extra = mean_std(analyses, ANALYSIS_KEYS, ANALYSIS_METRICS, "analysis_seeds")
    return table.merge(extra, on=ANALYSIS_KEYS, how="left")


def write_leaderboard(results_dir: Path, analyses: pd.DataFrame | None = None,
                      baseline: str | None = None) -> tuple[pd.DataFrame, Path, Path]:
    """Write `<results_dir>/leaderboard.{csv,md}` from `<results_dir>/runs`; return the table and the paths.
    `analyses`: `robench.analysis.analysis_frame`'s rows, joined as columns (`leaderboard --with-analysis`)."""
    records = load_records(results_dir / "runs")
    table = leaderboard_table(records, baseline)
    table = with_worst_case(table, write_worst_case(results_dir, records.current))  # over attacks; masking flags
    if analyses is not None:
        table = with_analysis(table, analyses)
    csv_path, md_path = results_dir / "leaderboard.csv", results_dir / "leaderboard.md"
    atomic_write(csv_path, table.to_csv(index=False, float_format="%.6f"))
    atomic_write(md_path, markdown(table))
    return table, csv_path, md_path
