"""`robench leaderboard --html PATH`: one self-contained static page built from the run records.

No network at view time: the CSS, the sorting script and the SVG plots are inline.
The markup lives in Jinja templates under `robench/templates/` (`leaderboard.html.j2`
and its partials); this module computes what they show: per task, a sortable table
(click a header) with one row per model setting and one column per attack setting,
a scatter of clean vs robust accuracy, and a bar chart of robust accuracy per attack
with its 95% interval (coordinates computed here). Every number comes from
`robench.report.leaderboard.leaderboard_table` (intervals and the comparison with a baseline
included); the page has no timestamp, so the same records always give the same page.

Escaping: every `{{ value }}` is escaped with `html.escape` unless it is `Markup`
(HTML built here from escaped parts), so the page is byte-identical to the records'.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from functools import cache
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import jinja2
import pandas as pd
from markupsafe import Markup

from robench.core.files import atomic_write
from robench.core.records import RunRecord, record_path
from robench.report.leaderboard import (
    Records,
    format_difference,
    format_interval,
    format_mean_std,
    frame_of,
    leaderboard_table,
    load_records,
)
from robench.report.run_page import write_run_pages
from robench.runs.spec import slug

ROW_KEYS = ["model", "model_label", "backbone", "train_size", "model_setting_id"]  # a table row: a model setting
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]  # Okabe-Ito
GEOMETRY = {"W": 460, "H": 340, "LEFT": 50, "RIGHT": 130, "TOP": 30, "BOTTOM": 45}  # SVG plots (pixels)
W, H, LEFT, RIGHT, TOP, BOTTOM = GEOMETRY.values()


@dataclass(frozen=True)
class Column:
    header: str
    title: str  # tooltip explaining the column


@dataclass(frozen=True)
class TableCell:
    html: Markup
    sort: str  # what the sorting script compares: a number, text, or "" (missing: always last)


@dataclass(frozen=True)
class Plot:
    """What `_plot.svg.j2` draws: percent axes (ticks as (label, pixel)), `marks` for the kind, a legend."""

    kind: str  # "scatter" (marks: Point) or "bars" (marks: BarGroup)
    slug: str
    title: str
    xlabel: str
    ylabel: str
    yticks: list[tuple[int, float]]
    xticks: list[tuple[int, float]]
    legend: list[tuple[str, str, int]]  # name, colour, y
    marks: list[Any]
    diagonal: tuple[float, float, float, float] | None = None  # scatter: the robust = clean line (x1, y1, x2, y2)


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    color: str
    tip: str
    label: str


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    color: str
    tip: str
    whisker: tuple[float, float, float] | None  # x, y of mean + std, y of mean - std


@dataclass(frozen=True)
class BarGroup:
    x: float  # centre of the attack's label
    label: str
    bars: list[Bar]


@dataclass(frozen=True)
class Section:
    task: str
    slug: str
    columns: list[Column]
    rows: list[list[TableCell]]
    scatter: Plot
    bars: Plot


def write_html(results_dir: Path, path: str | Path, baseline: str | None = None) -> Path:
    """Write the page for `<results_dir>/runs` to `path`, and beside it `runs/<run_id>.html`, the page of each
    included run with per-example results (`robench.report.run_page`); links are relative to the pages.
    With `baseline`, accuracy-under-attack cells that differ significantly from it are marked."""
    runs_dir = Path(results_dir) / "runs"
    records = load_records(runs_dir)
    page = Path(path).resolve()
    run_pages = write_run_pages(runs_dir, [rec.run_id for rec in records.current], page.parent / "runs", back=page)
    atomic_write(page, render(records, page.parent, baseline, run_pages))
    return page


def render(records: Records, page_dir: Path, baseline: str | None = None,
           run_pages: dict[str, Path] | None = None) -> str:
    """The leaderboard page; each seed links to its run's page in `run_pages`, else to its JSON record."""
    frame = frame_of(records.current)
    table = leaderboard_table(records, baseline)
    by_id = {rec.run_id: rec for rec in records.current}
    runs_dir = records.runs_dir.resolve()
    tasks = sorted(frame["task"].unique())
    sections = [_task_section(task, frame[frame["task"] == task], table[table["task"] == task], by_id, runs_dir,
                              page_dir, baseline, run_pages or {}) for task in tasks]
    return _templates().get_template("leaderboard.html.j2").render(
        records=len(frame), tasks=len(tasks), sections=sections, skipped=records.older, baseline=baseline)


@cache
def _templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("robench.report", "templates"), autoescape=False,
                             finalize=_escape, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["fixed"] = lambda value, digits=1: f"{value:.{digits}f}"
    env.globals["g"] = GEOMETRY
    return env


def _escape(value: Any) -> str:
    """Jinja's `finalize`: html.escape every output value except prebuilt Markup."""
    return value if isinstance(value, Markup) else escape(str(value))


def _task_section(task: str, runs: pd.DataFrame, agg: pd.DataFrame, records: dict[str, RunRecord],
                  runs_dir: Path, page_dir: Path, baseline: str | None, run_pages: dict[str, Path]) -> Section:
    """One row per model setting (ROW_KEYS), one column per attack setting (attack and its label)."""
    variant_of = {r.setting_id: (r.attack, r.attack_label) for r in runs.itertuples()}
    variants = sorted(set(variant_of.values()), key=lambda v: (v[0] != "advglue", v))
    attacks = [a for a, _ in variants]
    raw = {v: v[0] + (f" {v[1]}" if attacks.count(v[0]) > 1 and v[1] else "") for v in variants}  # in links
    vname = {v: _attack_name(v[0]) + raw[v][len(v[0]):] for v in variants}  # in headers and plots
    settings = sorted({tuple(row) for row in runs[ROW_KEYS].itertuples(index=False)})
    label = _labeller(settings)
    per_seed = runs.groupby(ROW_KEYS + ["seed"], dropna=False)[["dev_accuracy", "train_seconds"]].first()
    clean = per_seed.groupby(level=list(range(len(ROW_KEYS))), dropna=False).agg(["mean", "std", "count"])
    stats = {(r["model_setting_id"], *variant_of[r["setting_id"]]): r for _, r in agg.iterrows()}

    def has(metric: str, variant: tuple[str, str]) -> bool:
        return any(pd.notna(stats.get((s[-1], *variant), {}).get(f"{metric}_mean")) for s in settings)

    success = [v for v in variants if has("attack_success_rate", v)]
    queries = [v for v in variants if has("avg_queries", v)]
    versus = f"; marked where the paired difference from {baseline} is significant" if baseline else ""
    columns = [Column("Model", "defense (architecture+objective)"),
               Column("Setting", "what differs from the defaults: model parameters, training, data source"),
               Column("Backbone", "encoder fine-tuned"),
               Column("Train size", "fine-tuning examples per seed"), Column("Seeds", "seeds aggregated"),
               Column("Clean acc.", "accuracy on the task's whole dev split, mean ± std over seeds (%)")]
    columns += [Column(vname[v] + " acc.", f"accuracy under {vname[v]}, mean [95% interval over seeds and "
                                           f"examples] (%){versus}") for v in variants]
    columns += [Column(f"{vname[v]} success", f"attack success rate of {vname[v]}: successes / correctly "
                                              "classified, mean [95% interval] (%)") for v in success]
    columns += [Column(f"{vname[v]} queries", f"average model queries per attacked example ({vname[v]})")
                for v in queries]
    columns += [Column("Train time (s)", "fine-tuning wall time per checkpoint, mean ± std over seeds"),
                Column("Resources", "backbone, data, device and attack resources (including substitutes)"),
                Column("Records", "each run's adversarial examples (or its record), by attack and seed")]

    rows = []
    for setting in settings:
        c = clean.loc[setting]
        model, model_label, backbone, train_size, model_setting = setting
        cells = [_text(model, model), _text(model_label or "default", model_label or "default"),
                 _text(backbone, backbone), _text(train_size, "Infinity" if train_size == "full" else train_size)]
        seeds = str(int(c[("dev_accuracy", "count")]))
        cells.append(_text(seeds, seeds))
        cells.append(_stat(c[("dev_accuracy", "mean")], c[("dev_accuracy", "std")], True))
        for metric, names, percent in (("robust_accuracy", variants, True), ("attack_success_rate", success, True),
                                       ("avg_queries", queries, False)):
            for variant in names:
                row = stats.get((model_setting, *variant), {})
                cell = _stat(row.get(f"{metric}_mean"), row.get(f"{metric}_std"), percent,
                             row.get(f"{metric}_ci_low"), row.get(f"{metric}_ci_high"))
                cells.append(_marked(cell, row, baseline) if metric == "robust_accuracy" else cell)
        cells.append(_stat(c[("train_seconds", "mean")], c[("train_seconds", "std")], False))
        mine = runs[runs["model_setting_id"] == model_setting]
        ids = list(mine.sort_values(["attack", "seed"])["run_id"])
        cells.append(TableCell(_resources([records[i] for i in ids]), ""))
        cells.append(TableCell(_links(mine, variants, raw, runs_dir, page_dir, run_pages), ""))
        rows.append(cells)

    points = [(label(s), vname[v], stats[(s[-1], *v)]) for s in settings for v in variants if (s[-1], *v) in stats]
    clean_of = {label(s): clean.loc[s][("dev_accuracy", "mean")] for s in settings}
    names = [vname[v] for v in variants]
    return Section(
        task=task, slug=_slug(task), columns=columns, rows=rows,
        scatter=scatter_plot(task, [(m, a, clean_of[m], p["robust_accuracy_mean"]) for m, a, p in points], names),
        bars=bars_plot(task, [(m, a, p["robust_accuracy_mean"], _whisker(p)) for m, a, p in points],
                       [label(s) for s in settings], names))


def _whisker(row) -> tuple[float, float] | None:
    """The interval a bar's whisker spans: the 95% interval, or mean ± std without per-example data."""
    low, high = row.get("robust_accuracy_ci_low"), row.get("robust_accuracy_ci_high")
    if low is not None and pd.notna(low):
        return float(low), float(high)
    mean, std = row.get("robust_accuracy_mean"), row.get("robust_accuracy_std")
    return (mean - std, mean + std) if pd.notna(std) else None


def _marked(cell: TableCell, row, baseline: str | None) -> TableCell:
    """Append ▲ / ▼ to an accuracy-under-attack cell whose paired difference from the baseline is significant."""
    diff = row.get("robust_accuracy_diff") if baseline else None
    if diff is None or pd.isna(diff):
        return cell
    low, high = row["robust_accuracy_diff_ci_low"], row["robust_accuracy_diff_ci_high"]
    if low <= 0 <= high:
        return cell
    tip = format_difference(row) + f" points vs {baseline}"
    mark = f'<span class="sig {"up" if diff > 0 else "down"}" title="{escape(tip)}">{"▲" if diff > 0 else "▼"}</span>'
    return TableCell(Markup(f"{cell.html} {mark}"), cell.sort)


def _labeller(settings: list[tuple]):
    """Chart labels: the model name, plus its setting label, backbone, train size where the task has several."""
    varying = [i for i in (2, 3) if len({s[i] for s in settings}) > 1]

    def label(s: tuple) -> str:
        model, setting = str(s[0]), str(s[1])
        head = setting if setting.startswith(model + "[") else " ".join(p for p in (model, setting) if p)
        return " ".join([head] + [f"{ROW_KEYS[i]}={s[i]}" for i in varying])
    return label


def _attack_name(attack: str) -> str:
    return "AdvGLUE" if attack == "advglue" else attack


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text)


def _text(value: Any, sort: str) -> TableCell:
    return TableCell(Markup(escape(str(value))), sort)


def _stat(mean, std, percent: bool, low=None, high=None) -> TableCell:
    """"mean [low, high]" when the interval is known, else "mean ± std"; sorted by the mean."""
    if mean is None or pd.isna(mean):
        return TableCell(Markup("–"), "")
    text = format_interval(mean, low, high, percent) if low is not None and pd.notna(low) else \
        format_mean_std(mean, std, percent)
    return _text(text, repr(float(mean)))


def _resources(recs: list[RunRecord]) -> Markup:
    """A collapsed list of every resource the row's records name (backbone, data, device, attack resources)."""
    items: dict[str, str] = {}
    for rec in recs:
        res = rec.resources
        backbone = res.get("backbone") or {}
        items["backbone"] = f"{backbone.get('name', '')} ({backbone.get('fingerprint', '')})"
        if res.get("device") is not None:
            items["device"] = str(res["device"])
        data = res.get("data") or {}
        items["data"] = str(data.get("source", ""))
        for key, value in (res.get("attack") or {}).items():
            text = value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
            items[f"{rec.spec.get('attack')}: {key}"] = text
    summary = items.get("device", "") or (recs[0].resources.get("backbone") or {}).get("name", "resources")
    return Markup(_templates().get_template("_resources.html.j2").render(summary=summary, items=items))


def record_href(runs_dir: Path, run_id: Any, page_dir: Path) -> str | None:
    """A relative, percent-encoded link from the page to `<runs_dir>/<run_id>.json`, or None when `run_id`
    (a record field) is not a plain file name of an existing record: never `javascript:`, `//host` or `/path`."""
    if not isinstance(run_id, str) or slug(run_id) != run_id or not record_path(runs_dir, run_id).is_file():
        return None
    href = quote(Path(os.path.relpath(record_path(runs_dir, run_id), page_dir)).as_posix())  # ":" -> %3A
    return None if urlsplit(href).scheme or href.startswith("/") else href


def _links(runs: pd.DataFrame, variants: list[tuple[str, str]], names: dict[tuple[str, str], str],
           runs_dir: Path, page_dir: Path, run_pages: dict[str, Path]) -> Markup:
    """Per attack setting, a link to each seed's run page (or record, when it has no per-example results),
    relative to the page."""
    groups = []
    for variant in variants:
        mine = runs[(runs["attack"] == variant[0]) & (runs["attack_label"] == variant[1])].sort_values("seed")
        links = []
        for rid, seed in zip(mine["run_id"], mine["seed"]):
            if (href := record_href(runs_dir, rid, page_dir)) is None:
                continue  # not a plain file name of an existing record: no link
            if rid in run_pages:
                href = quote(Path(os.path.relpath(run_pages[rid], page_dir)).as_posix())
            links.append((href, int(seed)))
        if links:
            groups.append((names[variant], links))
    return Markup(_templates().get_template("_links.html.j2").render(groups=groups))


# ---------------------------------------------------------------- SVG plots (percent axes, 0-100)

def _x(v: float, lo: float = 0.0) -> float:
    return LEFT + (v - lo) / (1 - lo) * (W - LEFT - RIGHT)


def _y(v: float) -> float:
    return H - BOTTOM - v * (H - TOP - BOTTOM)


def _plot(kind: str, task: str, title: str, xlabel: str, xlo: float | None, legend: dict[str, str],
          marks: list[Any], diagonal: tuple[float, float, float, float] | None = None) -> Plot:
    """Y ticks 0-100 every 20; x ticks from `xlo` to 100 (none when `xlo` is None); legend entries in order."""
    xticks = [] if xlo is None else [(t, _x(t / 100, xlo)) for t in range(round(100 * xlo), 101,
                                                                          20 if xlo < 0.5 else 10)]
    return Plot(kind=kind, slug=_slug(task), title=title, xlabel=xlabel, ylabel="accuracy under attack (%)",
                yticks=[(t, _y(t / 100)) for t in range(0, 101, 20)], xticks=xticks,
                legend=[(name, color, TOP + 10 + 18 * i) for i, (name, color) in enumerate(legend.items())],
                marks=marks, diagonal=diagonal)


def scatter_plot(task: str, points: list[tuple[str, str, float, float]], attacks: list[str]) -> Plot:
    """One point per (model, attack): x = clean accuracy, y = accuracy under that attack."""
    colors = {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(attacks)}
    points = [p for p in points if pd.notna(p[2]) and pd.notna(p[3])]
    lowest = min((p[2] for p in points), default=0.0)  # zoom the x axis to the clean accuracies (steps of 10%)
    xlo = max(0.0, min(0.8, math.floor(10 * lowest - 0.5) / 10))
    marks = [Point(_x(clean, xlo), _y(robust), colors[attack],
                   f"{model} / {attack}: clean {100 * clean:.1f}%, robust {100 * robust:.1f}%", model)
             for model, attack, clean, robust in points]
    return _plot("scatter", task, f"{task}: clean vs robust accuracy", "clean accuracy (%)", xlo,
                 {_attack_name(a): c for a, c in colors.items()}, marks,
                 diagonal=(_x(xlo, xlo), _y(xlo), _x(1, xlo), _y(1)))


def bars_plot(task: str, bars: list[tuple[str, str, float, tuple[float, float] | None]], models: list[str],
              attacks: list[str]) -> Plot:
    """Grouped bars: one group per attack, one bar per model; whiskers span the given (low, high) interval."""
    colors = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}
    group = (W - LEFT - RIGHT) / max(len(attacks), 1)
    width = group * 0.8 / max(len(models), 1)
    values = {(m, a): (mean, span) for m, a, mean, span in bars}
    groups = []
    for gi, attack in enumerate(attacks):
        x0 = LEFT + gi * group + group * 0.1
        drawn = []
        for mi, model in enumerate(models):
            mean, span = values.get((model, attack), (float("nan"), None))
            if pd.isna(mean):
                continue
            x, y = x0 + mi * width, _y(mean)
            whisker = (x + width * 0.45, _y(min(span[1], 1)), _y(max(span[0], 0))) if span is not None else None
            text = f"{100 * mean:.1f}" + (f" [{100 * span[0]:.1f}, {100 * span[1]:.1f}]" if span else "")
            drawn.append(Bar(x, y, width * 0.9, _y(0) - y, colors[model], f"{model} / {attack}: {text}%", whisker))
        groups.append(BarGroup(x0 + group * 0.4, _attack_name(attack), drawn))
    return _plot("bars", task, f"{task}: accuracy under each attack", "attack", None, colors, groups)
