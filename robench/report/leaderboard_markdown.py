"""The leaderboard tables as Markdown (`leaderboard.md`, `settings.md`), and the one way robench writes a mean over
seeds, a 95% interval and a paired difference from the baseline (the leaderboards, the HTML page, the benches)."""
from __future__ import annotations

import pandas as pd

from robench.core.text import markdown_cell
from robench.report.leaderboard_columns import (
    ANALYSIS_METRICS,
    DIGITS,
    METRICS,
    PERCENT,
    RANK_BY,
    ROW,
    UNTRAINED_NOTE,
)
from robench.report.stats import ALPHA, INCONCLUSIVE, MIN_SEEDS, NO_VERDICT, comparisons


def checkpoint_markdown(table: pd.DataFrame) -> str:
    """`leaderboard.md`: the checkpoint table (`leaderboard_tables`), one row per checkpoint in rank order, one
    column per attack setting (accuracy under attack with its 95% interval; mean ± std without per-example data),
    dev accuracy, the worst case, certified accuracy and masking flags, the analysis metrics, and with a baseline
    each attack setting's paired difference; then what each setting name stands for."""
    names = [c.removesuffix(".attack_label") for c in table.columns if c.endswith(".attack_label")]
    own = [m for m in ("worst_case_accuracy", "certified_accuracy") if f"{m}_mean" in table.columns]
    flags = "masking_flags" in table.columns
    analysis = [m for m in ANALYSIS_METRICS if f"{m}_mean" in table.columns]
    baseline = markdown_cell(table["baseline"].iloc[0]) if "baseline" in table.columns and len(table) else None
    untrained = ["untrained_seeds"] if "untrained_seeds" in table.columns else []
    header = ["task", "rank", "model", "setting", "backbone", "train_size", "seeds", *untrained, "dev_accuracy",
              *names, *own,
              *(["masking_flags"] if flags else []), *analysis, *(f"{n} vs {baseline}" for n in names if baseline)]
    lines = ["| " + " | ".join(_text(h) for h in header) + " |", "|" + "---|" * len(header)]
    for _, row in table.iterrows():
        settings = {n: _setting_of(row, n) for n in names}
        label = row["model_label"] if isinstance(row.get("model_label"), str) and row["model_label"] else "default"
        cells = [_text(row[k]) for k in ("task", "rank", "model")] + [_text(label)]
        cells += [_text(row[k]) for k in ("backbone", "train_size", "seeds")]
        cells += [_seeds_cell(row[k]) for k in untrained] + [_metric_cell(row, "dev_accuracy")]
        cells += [_metric_cell(settings[n], "robust_accuracy") if pd.notna(settings[n].get("attack_label")) else "–"
                  for n in names]
        cells += [_metric_cell(row, m) for m in own]
        if flags:
            cells.append(_text(row["masking_flags"]) if isinstance(row["masking_flags"], str)
                         and row["masking_flags"] else "–")
        cells += [_metric_cell(row, m) for m in analysis]
        cells += [format_difference(settings[n]) for n in names if baseline]
        lines.append("| " + " | ".join(cells) + " |")
    ranked = table["rank_by"].dropna().unique() if "rank_by" in table.columns else []
    notes = [f"rank: within its task, by {' or '.join(RANK_BY[r] for r in ranked)}, highest first; equal values "
             "share a rank"] if len(ranked) else []
    if "rank" in table.columns and table["rank"].isna().any():
        notes.append("no rank: a checkpoint without a result under some attack setting of its task (its runs have "
                     "not all landed), or without a value")
    labels = {n: table[f"{n}.attack_label"].dropna() for n in names}
    notes += [f"{_text(n)}: {_text(v.iloc[0])}" for n, v in labels.items()
              if len(v) and v.iloc[0] and not n.endswith(v.iloc[0])]  # a name that is not its label already
    if untrained:
        notes.append(UNTRAINED_NOTE)
    if baseline:
        notes.append(_baseline_note(table, [f"{n}.robust_accuracy_diff_family" for n in names]))
    return "\n".join(lines) + "\n" + "".join(f"\n{note}\n" for note in notes)


def _setting_of(row: pd.Series, name: str) -> dict:
    """One attack setting's cells of a checkpoint row, under their per-setting names (`robust_accuracy_mean`)."""
    return {k.removeprefix(f"{name}."): v for k, v in row.items() if k.startswith(f"{name}.")}


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
    untrained = ["untrained_seeds"] if "untrained_seeds" in table.columns else []
    header = ROW + untrained + metrics + flags + ([f"robust_accuracy vs {markdown_cell(table['baseline'].iloc[0])}"]
                                                  if baseline else [])
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in table.iterrows():
        cells = [_text(row[k]) for k in ROW] + [_seeds_cell(row[k]) for k in untrained]
        cells += [format_interval(row[f"{m}_mean"], row[f"{m}_ci_low"], row[f"{m}_ci_high"], m in PERCENT)
                  if pd.notna(row.get(f"{m}_ci_low")) else
                  format_mean_std(row[f"{m}_mean"], row[f"{m}_std"], m in PERCENT, DIGITS.get(m, 1)) for m in metrics]
        cells += [markdown_cell(row[f]) if isinstance(row[f], str) and row[f] else "–" for f in flags]
        if baseline:
            cells.append(format_difference(row))
        lines.append("| " + " | ".join(cells) + " |")
    if untrained:
        lines.append("\n" + UNTRAINED_NOTE)
    if baseline:
        lines.append("\n" + _baseline_note(table, ["robust_accuracy_diff_family"]))
    return "\n".join(lines) + "\n"


def _baseline_note(table: pd.DataFrame, family_columns: list[str]) -> str:
    names = [c.removesuffix("_family") + "_family_name" for c in family_columns]
    pairs = pd.concat([table[[n, c]].set_axis(["name", "size"], axis=1) for n, c in zip(names, family_columns)
                       if c in table.columns and n in table.columns] or [pd.DataFrame(columns=["name", "size"])])
    sizes = pairs.dropna().drop_duplicates("name").sort_values("name", key=lambda n: n != "exploratory")
    families = "; ".join(f"{name}: {comparisons(int(size))}" for name, size in zip(sizes["name"], sizes["size"]))
    return (f"p: the paired test (crossed seeds x examples, the seed part of the variance random on its S - 1 df); "
            f"Holm: adjusted over the comparison's family, named in brackets with its size ({families or 'none'}); "
            f"more or less robust: Holm p < {ALPHA:g} with at least {MIN_SEEDS} matched seeds; inconclusive: not, "
            "and differences up to the printed D cannot be ruled out (D: the difference the verdict finds with 80% "
            f"power, at Holm's first step, alpha {ALPHA:g} / family size); no verdict, and why: insufficient seeds, no "
            "shared seeds, too few examples, no variation")


def _seeds_cell(seeds: object) -> str:
    """An `untrained_seeds` value as a Markdown cell that cannot be read as a count: "seed 0", "seeds 2 4"."""
    if not isinstance(seeds, str) or not seeds:
        return "–"
    return _text(("seeds " if " " in seeds else "seed ") + seeds)


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


def _p_text(p) -> str:
    """A p-value as the tables print it; "–" without one (a column left out, or every cell alike)."""
    return "–" if p is None or pd.isna(p) else f"{p:.3g}"


def format_difference(row) -> str:
    """A row's paired difference from the baseline with its verdict, family and the verdict's detectable D:
    "+2.1 [-1.0, +5.2] p=0.21 Holm 0.63 (exploratory, 22): inconclusive: differences up to 9.1 points cannot be
    ruled out"; "... more robust than the baseline (D 7.5)" (a claim's verdict likewise); the reason alone where
    there is no verdict ("–
    (insufficient seeds)")."""
    diff, verdict = row.get("robust_accuracy_diff"), row.get("robust_accuracy_diff_verdict")
    if diff is None or pd.isna(diff):
        return "–" + (f" ({verdict})" if isinstance(verdict, str) and verdict else "")
    low, high = row.get("robust_accuracy_diff_ci_low"), row.get("robust_accuracy_diff_ci_high")
    text = f"{100 * diff:+.1f}"
    if low is None or pd.isna(low):
        return text + (f" ({verdict})" if isinstance(verdict, str) and verdict else "")
    detectable = row.get("robust_accuracy_diff_detectable_holm")
    p, holm = row.get("robust_accuracy_diff_p"), row.get("robust_accuracy_diff_p_holm")
    text += (f" [{100 * low:+.1f}, {100 * high:+.1f}] p={_p_text(p)} Holm {_p_text(holm)} "
             f"({row.get('robust_accuracy_diff_family_name')}, {int(row['robust_accuracy_diff_family'])}): {verdict}")
    if verdict not in NO_VERDICT and not str(verdict).startswith(INCONCLUSIVE) and detectable is not None \
            and pd.notna(detectable):
        text += f" (D {100 * detectable:.1f})"  # a decided verdict (or a claim's): its D beside it
    return text
