"""The leaderboard page's rows and table cells: one `BoardRow` per model setting, and the escaped markup of each
of its cells (rank, model, clean, each attack with its interval, verdict, audit and reading, worst case, links
to the seeds' runs)."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import pandas as pd
from markupsafe import Markup

from robench.core.records import record_path
from robench.report.leaderboard_columns import UNTRAINED_NOTE
from robench.report.leaderboard_markdown import format_difference
from robench.report.readings import Summary
from robench.report.stats import LESS_ROBUST, MORE_ROBUST, NOT_DISTINGUISHABLE
from robench.report.validity import COLUMNS as VALIDITY_COLUMNS
from robench.runs.spec import slug

PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#882255", "#000000"]  # Okabe-Ito+


SHAPES = ["circle", "square", "diamond", "triangle"]  # a second key once the colours run out


ATTACK_NAMES = {"advglue": "AdvGLUE", "textfooler": "TextFooler", "bert-attack": "BERT-Attack",
                "gradient-swap": "gradient-swap"}


VALIDITY = tuple(VALIDITY_COLUMNS.values())  # the validity audit's classes (robench.engine.audit)


@dataclass(frozen=True)
class Column:
    header: str
    title: str  # tooltip explaining the column
    cls: str = "num"  # "num" (right-aligned) or "text"


@dataclass(frozen=True)
class TableCell:
    html: Markup
    sort: str  # what the sorting script compares: a number, text, or "" (missing: always last)
    cls: str = "num"


@dataclass
class BoardRow:
    """One model setting of one task, with everything its cells and plots show."""

    model: str
    key: str  # model_setting_id
    label: str  # short: what differs from the defaults and from the other rows
    full: list[tuple[str, str]]  # the full resolved setting, (name, value)
    seeds: list[int]
    clean: tuple[float, float]  # dev accuracy: mean, std over seeds
    train_seconds: float | None
    attacks: dict[tuple[str, str], dict[str, Any]]  # attack variant -> its columns of the checkpoint row
    worst: dict[str, Any]  # worst-case accuracy: mean, std, ci_low, ci_high, flags
    certified: dict[str, Any] | None
    validity: dict[tuple[str, str], dict[str, float]]  # attack variant -> mean share of each audit class
    runs: dict[tuple[str, str], list[tuple[int, str]]]  # attack variant -> (seed, run id)
    readings: dict[tuple[str, str], Summary] = field(default_factory=dict)  # attack variant -> its blind reading
    fluency: dict[tuple[str, str], tuple[float, int]] = field(default_factory=dict)  # variant -> LM estimate, n
    rank_value: float = float("nan")  # what the rank is by (the table's rank_accuracy)
    rank: int | None = None
    untrained: str = ""  # the seeds whose checkpoint did not train (robench.runs.chance), e.g. "2 4"
    color: str = PALETTE[0]
    shape: str = SHAPES[0]

    @property
    def name(self) -> str:
        return f"{self.model} {self.label}".strip()


def pct(value: Any, digits: int = 1) -> str:
    return f"{100 * float(value):.{digits}f}"


def interval(stats: dict[str, Any], prefix: str) -> tuple[float, float] | None:
    """The 95% interval of `prefix`, or mean ± std when there is no per-example interval; None without either."""
    low, high = stats.get(f"{prefix}_ci_low"), stats.get(f"{prefix}_ci_high")
    if low is not None and pd.notna(low) and high is not None and pd.notna(high):
        return float(low), float(high)
    mean, std = stats.get(f"{prefix}_mean"), stats.get(f"{prefix}_std")
    if mean is not None and pd.notna(mean) and std is not None and pd.notna(std):
        return float(mean) - float(std), float(mean) + float(std)
    return None


def _spread(stats: dict[str, Any], prefix: str) -> str:
    """"[low, high]" (95% interval) or "± std"; "" without either."""
    low, high = stats.get(f"{prefix}_ci_low"), stats.get(f"{prefix}_ci_high")
    if low is not None and pd.notna(low) and high is not None and pd.notna(high):
        return f"[{pct(low)}, {pct(high)}]"
    std = stats.get(f"{prefix}_std")
    return f"± {pct(std)}" if std is not None and pd.notna(std) else ""


# (css class, symbol) of each verdict `robench.report.stats.verdict` gives; any other (insufficient seeds): unsure
VERDICT_MARKS = {MORE_ROBUST: ("up", "▲"), LESS_ROBUST: ("down", "▼"), NOT_DISTINGUISHABLE: ("same", "≈")}


def verdict(row: dict[str, Any], baseline: str) -> tuple[str, str, str] | None:
    """(css class, symbol, tooltip) of a cell's comparison with the baseline, or None when it has none.

    The comparison is the leaderboard table's (`robench.report.leaderboard.with_baseline`): its verdict column
    `robust_accuracy_diff_verdict` (`robench.report.compare.Comparison.verdict`)."""
    diff = row.get("robust_accuracy_diff")
    if diff is None or pd.isna(diff):
        return None
    said = row.get("robust_accuracy_diff_verdict")
    tip = f"{format_difference(row)} points vs {baseline}: {said}"
    return (*VERDICT_MARKS.get(said, ("unsure", "?")), tip)


def row_cells(row: BoardRow, variants, names, baseline: str | None, certified: bool, runs_dir: Path, page_dir: Path,
           run_pages: dict[str, Path]) -> list[TableCell]:
    rank = "–" if row.rank is None else str(row.rank)
    cells = [TableCell(Markup(escape(rank)), "" if row.rank is None else str(row.rank))]
    cells.append(TableCell(_model_cell(row, baseline), row.name, "text"))
    mean, std = row.clean
    clean = "–" if math.isnan(mean) else pct(mean) + ("" if math.isnan(std) else f" ± {pct(std)}")
    tip = "" if row.train_seconds is None or math.isnan(row.train_seconds) else \
        f"fine-tuning: {row.train_seconds:.0f} s per checkpoint (mean over seeds)"
    cells.append(TableCell(Markup(f'<span title="{escape(tip)}">{escape(clean)}</span>'),
                           "" if math.isnan(mean) else repr(mean)))
    for v in variants:
        cells.append(_attack_cell(row, v, names[v], baseline, runs_dir, page_dir, run_pages))
    cells.append(_worst_cell(row))
    if certified:
        cells.append(_value_cell({f"c_{k}": v for k, v in (row.certified or {}).items()}, "c"))
    cells.append(TableCell(Markup(escape(str(len(row.seeds)))), str(len(row.seeds))))
    examples = [row.attacks[v].get("examples") for v in variants if v in row.attacks]
    shown = [str(int(e)) for e in examples if e is not None and pd.notna(e)]
    distinct = list(dict.fromkeys(shown))
    tip = ", ".join(f"{names[v]} {int(row.attacks[v]['examples'])}" for v in variants
                    if v in row.attacks and pd.notna(row.attacks[v].get("examples")))
    cells.append(TableCell(Markup(f'<span title="{escape(tip)}">{escape(" / ".join(distinct) or "–")}</span>'),
                           distinct[0] if len(distinct) == 1 else ""))
    return cells


def _model_cell(row: BoardRow, baseline: str | None) -> Markup:
    full = "; ".join(f"{k}: {v}" for k, v in row.full)
    items = "".join(f"<li><b>{escape(k)}</b> {escape(v)}</li>" for k, v in row.full)
    base = ' <span class="base" title="the baseline of the verdicts">baseline</span>' \
        if baseline is not None and row.model == baseline else ""
    label = f'<span class="label" title="{escape(row.label)}">{escape(row.label)}</span>' if row.label else ""
    swatch = f'<span class="swatch" style="background:{row.color}"></span>'
    if row.untrained:
        seeds = ("seeds " if " " in row.untrained else "seed ") + row.untrained.replace(" ", ", ")
        label += f' <span class="untrained" title="{escape(UNTRAINED_NOTE)}">⚠ {escape(seeds)} did not train</span>'
    return Markup(f'{swatch}<span class="name"><b title="{escape(full)}">{escape(row.model)}</b>{base} {label}</span>'
                  f'<details class="full"><summary title="the full resolved setting">setting</summary>'
                  f'<ul>{items}</ul></details>')


def _attack_cell(row: BoardRow, variant, name: str, baseline: str | None, runs_dir: Path, page_dir: Path,
                 run_pages: dict[str, Path]) -> TableCell:
    stats = row.attacks.get(variant)
    if not stats or pd.isna(stats.get("robust_accuracy_mean")):
        return TableCell(Markup("–"), "")
    mean = float(stats["robust_accuracy_mean"])
    head = [f'<span class="v">{pct(mean)}</span>']
    if baseline is not None and (said := verdict(stats, baseline)) is not None:
        cls, symbol, tip = said
        head.append(f'<span class="sig {cls}" title="{escape(tip)}">{symbol}</span>')
    spread = _spread(stats, "robust_accuracy")
    details = [f"{name}: accuracy under attack {pct(mean)}% {spread}".rstrip()]
    for metric, text in (("attack_success_rate", "success rate"), ("clean_accuracy", "clean on the attacked "
                                                                                       "examples")):
        if pd.notna(stats.get(f"{metric}_mean")):
            details.append(f"{text} {pct(stats[f'{metric}_mean'])}% {_spread(stats, metric)}".rstrip())
    if pd.notna(stats.get("avg_queries_mean")):
        details.append(f"{float(stats['avg_queries_mean']):.1f} queries per example")
    if spread:
        head.append(f'<span class="ci">{escape(spread)}</span>')
    extra = []
    audit = row.validity.get(variant)
    if audit:
        listed = audit.get("synonym", 0.0) + audit.get("inflection", 0.0)
        antonym = audit.get("antonym")
        tip = ", ".join(f"{c} {pct(audit[c])}%" for c in VALIDITY if c in audit)
        if "antonym_examples" in audit:
            tip += f"; examples with an antonym swap {pct(audit['antonym_examples'])}%"
        warn = " warn" if antonym else ""
        text = f"listed synonyms {pct(listed, 0)}%" + (f" · ant. {pct(antonym)}%" if antonym is not None else "")
        tip = f"swaps (list membership, not validity): {tip}"
        extra.append(f'<span class="audit{warn}" title="{escape(tip)}">{escape(text)}</span>')
        details.append(tip)
    if (estimate := row.fluency.get(variant)) is not None:
        tip = (f"LM-judged fluent share of {estimate[1]} successful examples: an estimate from the language model's "
               "score, calibrated on blind readings (robench.engine.fluency), not a reading")
        extra.append(f'<span class="lmfl" title="{escape(tip)}">LM-fluent ~{pct(estimate[0], 0)}%</span>')
        details.append(tip + f": {pct(estimate[0], 0)}%")
    if (reading := row.readings.get(variant)) is not None:
        tip = "; ".join(f"{label}: {value}" for label, value in reading.facts()[1:])
        extra.append(f'<span class="read" title="{escape(tip)}">read valid {escape(reading.valid.text())}</span>')
        details.append(f"blind reading: {tip}")
    links = _links(row.runs.get(variant, []), runs_dir, page_dir, run_pages)
    if links:
        extra.append(f'<span class="runs">{links}</span>')
    return TableCell(Markup(f'<span title="{escape(chr(10).join(details))}">' + "".join(head) + "</span>"
                            + "".join(extra)), repr(mean))


def _value_cell(stats: dict[str, Any], prefix: str, mark: str = "") -> TableCell:
    """A percentage with its interval (or ± std) on a second line; "–" without a value."""
    mean = stats.get(f"{prefix}_mean")
    if mean is None or pd.isna(mean):
        return TableCell(Markup("–"), "")
    spread = _spread(stats, prefix)
    return TableCell(Markup(f'<span class="v">{pct(mean)}</span>{mark}'
                            + (f'<span class="ci">{escape(spread)}</span>' if spread else "")), repr(float(mean)))


def _worst_cell(row: BoardRow) -> TableCell:
    w = row.worst
    flags = f' <span class="flag" title="masking flags: {escape(w["flags"].replace(";", ", "))}">⚑</span>' \
        if w.get("flags") else ""
    return _value_cell({f"w_{k}": w.get(k) for k in ("mean", "std", "ci_low", "ci_high")}, "w", flags)


def record_href(runs_dir: Path, run_id: Any, page_dir: Path) -> str | None:
    """A relative, percent-encoded link from the page to `<runs_dir>/<run_id>.json`, or None when `run_id`
    (a record field) is not a plain file name of an existing record: never `javascript:`, `//host` or `/path`."""
    if not isinstance(run_id, str) or slug(run_id) != run_id or not record_path(runs_dir, run_id).is_file():
        return None
    href = quote(Path(os.path.relpath(record_path(runs_dir, run_id), page_dir)).as_posix())  # ":" -> %3A
    return None if urlsplit(href).scheme or href.startswith("/") else href


def _links(runs: list[tuple[int, str]], runs_dir: Path, page_dir: Path, run_pages: dict[str, Path]) -> str:
    """A link to each seed's run page (or its record, when it has no per-example results), relative to the page."""
    links = []
    for seed, rid in runs:
        if (href := record_href(runs_dir, rid, page_dir)) is None:
            continue  # not a plain file name of an existing record: no link
        if rid in run_pages:
            href = quote(Path(os.path.relpath(run_pages[rid], page_dir)).as_posix())
        links.append(f'<a href="{escape(href)}" title="run {escape(rid)}">s{seed}</a>')
    return " ".join(links)


def dom_id(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text)
