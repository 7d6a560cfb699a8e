"""`robench leaderboard --html PATH`: one self-contained static page built from the run records.

No network at view time: the CSS, the sorting script and the SVG plots are inline.
The markup lives in Jinja templates under `robench/templates/` (`leaderboard.html.j2`
and its partials); this module computes what they show: per task, a sortable table
(click a header) with one row per model setting, a scatter of clean vs robust
accuracy, and a bar chart of robust accuracy per attack (coordinates computed here).
Every number comes from `robench.leaderboard.records_frame` / `aggregate`; the page
has no timestamp, so the same records always give the same page.

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

from robench.leaderboard import aggregate, format_mean_std, records_frame
from robench.results import RunRecord, atomic_write, iter_records
from robench.spec import slug

SETTING = ["model", "backbone", "train_size"]  # one table row per setting, within a task
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


def write_html(results_dir: Path, path: str | Path) -> Path:
    """Write the page for `<results_dir>/runs` to `path`; links to the records are relative to it."""
    runs_dir = Path(results_dir) / "runs"
    frame = records_frame(runs_dir)
    records = {rec.run_id: rec for rec in iter_records(runs_dir)}
    page = Path(path).resolve()
    atomic_write(page, render(frame, records, runs_dir.resolve(), page.parent))
    return page


def render(frame: pd.DataFrame, records: dict[str, RunRecord], runs_dir: Path, page_dir: Path) -> str:
    table = aggregate(frame)
    sections = [_task_section(task, frame[frame["task"] == task], table[table["task"] == task], records,
                              runs_dir, page_dir) for task in sorted(frame["task"].unique())]
    return _templates().get_template("leaderboard.html.j2").render(
        records=len(frame), tasks=frame["task"].nunique(), sections=sections)


@cache
def _templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("robench", "templates"), autoescape=False,
                             finalize=_escape, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["fixed"] = lambda value, digits=1: f"{value:.{digits}f}"
    env.globals["g"] = GEOMETRY
    return env


def _escape(value: Any) -> str:
    """Jinja's `finalize`: html.escape every output value except prebuilt Markup."""
    return value if isinstance(value, Markup) else escape(str(value))


def _task_section(task: str, runs: pd.DataFrame, agg: pd.DataFrame, records: dict[str, RunRecord],
                  runs_dir: Path, page_dir: Path) -> Section:
    attacks = sorted(agg["attack"].unique(), key=lambda a: (a != "advglue", a))
    settings = sorted({tuple(row) for row in runs[SETTING].itertuples(index=False)})
    label = _labeller(settings)
    per_seed = runs.groupby(SETTING + ["seed"], dropna=False)[["dev_accuracy", "train_seconds"]].first()
    clean = per_seed.groupby(level=list(range(len(SETTING))), dropna=False).agg(["mean", "std", "count"])
    stats = {tuple(r[k] for k in SETTING + ["attack"]): r for _, r in agg.iterrows()}

    def has(metric: str, attack: str) -> bool:
        return any(pd.notna(stats.get((*s, attack), {}).get(f"{metric}_mean")) for s in settings)

    success = [a for a in attacks if has("attack_success_rate", a)]
    queries = [a for a in attacks if has("avg_queries", a)]
    columns = [Column("Model", "defense (architecture+objective)"), Column("Backbone", "encoder fine-tuned"),
               Column("Train size", "fine-tuning examples per seed"), Column("Seeds", "seeds aggregated"),
               Column("Clean acc.", "accuracy on the task's whole dev split, mean ± std over seeds (%)")]
    columns += [Column(_attack_name(a) + " acc.", f"accuracy under {a}, mean ± std over seeds (%)") for a in attacks]
    columns += [Column(f"{a} success", f"attack success rate of {a}: successes / correctly classified (%)")
                for a in success]
    columns += [Column(f"{a} queries", f"average model queries per attacked example ({a})") for a in queries]
    columns += [Column("Train time (s)", "fine-tuning wall time per checkpoint, mean ± std over seeds"),
                Column("Resources", "backbone, data, device and attack resources (including substitutes)"),
                Column("Records", "the run record JSON files, by attack and seed")]

    rows = []
    for setting in settings:
        c = clean.loc[setting]
        cells = [_text(v, str(v)) for v in setting]
        cells[2] = _text(setting[2], "Infinity" if setting[2] == "full" else str(setting[2]))
        seeds = str(int(c[("dev_accuracy", "count")]))
        cells.append(_text(seeds, seeds))
        cells.append(_stat(c[("dev_accuracy", "mean")], c[("dev_accuracy", "std")], True))
        for metric, names, percent in (("robust_accuracy", attacks, True), ("attack_success_rate", success, True),
                                       ("avg_queries", queries, False)):
            for attack in names:
                row = stats.get((*setting, attack), {})
                cells.append(_stat(row.get(f"{metric}_mean"), row.get(f"{metric}_std"), percent))
        cells.append(_stat(c[("train_seconds", "mean")], c[("train_seconds", "std")], False))
        mine = runs[(runs[SETTING] == pd.Series(setting, index=SETTING)).all(axis=1)]
        ids = list(mine.sort_values(["attack", "seed"])["run_id"])
        cells.append(TableCell(_resources([records[i] for i in ids]), ""))
        cells.append(TableCell(_links(mine, attacks, runs_dir, page_dir), ""))
        rows.append(cells)

    points = [(label(s), a, stats[(*s, a)]) for s in settings for a in attacks if (*s, a) in stats]
    clean_of = {label(s): clean.loc[s][("dev_accuracy", "mean")] for s in settings}
    return Section(
        task=task, slug=_slug(task), columns=columns, rows=rows,
        scatter=scatter_plot(task, [(m, a, clean_of[m], p["robust_accuracy_mean"]) for m, a, p in points], attacks),
        bars=bars_plot(task, [(m, a, p["robust_accuracy_mean"], p["robust_accuracy_std"]) for m, a, p in points],
                       [label(s) for s in settings], attacks))


def _labeller(settings: list[tuple]):
    """Chart labels: the model name, plus backbone / train size where the task has several."""
    varying = [i for i in (1, 2) if len({s[i] for s in settings}) > 1]
    return lambda s: " ".join([str(s[0])] + [f"{SETTING[i]}={s[i]}" for i in varying])


def _attack_name(attack: str) -> str:
    return "AdvGLUE" if attack == "advglue" else attack


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text)


def _text(value: Any, sort: str) -> TableCell:
    return TableCell(Markup(escape(str(value))), sort)


def _stat(mean, std, percent: bool) -> TableCell:
    if mean is None or pd.isna(mean):
        return TableCell(Markup("–"), "")
    return _text(format_mean_std(mean, std, percent), repr(float(mean)))


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
    if not isinstance(run_id, str) or slug(run_id) != run_id or not (runs_dir / f"{run_id}.json").is_file():
        return None
    href = quote(Path(os.path.relpath(runs_dir / f"{run_id}.json", page_dir)).as_posix())  # ":" -> %3A
    return None if urlsplit(href).scheme or href.startswith("/") else href


def _links(runs: pd.DataFrame, attacks: list[str], runs_dir: Path, page_dir: Path) -> Markup:
    """Per attack, a link to each seed's record, relative to the page."""
    groups = []
    for attack in attacks:
        mine = runs[runs["attack"] == attack].sort_values("seed")
        links = [(href, int(seed)) for rid, seed in zip(mine["run_id"], mine["seed"])
                 if (href := record_href(runs_dir, rid, page_dir)) is not None]
        if links:
            groups.append((attack, links))
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


def bars_plot(task: str, bars: list[tuple[str, str, float, float]], models: list[str], attacks: list[str]) -> Plot:
    """Grouped bars: one group per attack, one bar per model; whiskers show the std over seeds."""
    colors = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}
    group = (W - LEFT - RIGHT) / max(len(attacks), 1)
    width = group * 0.8 / max(len(models), 1)
    values = {(m, a): (mean, std) for m, a, mean, std in bars}
    groups = []
    for gi, attack in enumerate(attacks):
        x0 = LEFT + gi * group + group * 0.1
        drawn = []
        for mi, model in enumerate(models):
            mean, std = values.get((model, attack), (float("nan"), float("nan")))
            if pd.isna(mean):
                continue
            x, y = x0 + mi * width, _y(mean)
            whisker = (x + width * 0.45, _y(min(mean + std, 1)), _y(max(mean - std, 0))) if pd.notna(std) else None
            drawn.append(Bar(x, y, width * 0.9, _y(0) - y, colors[model],
                             f"{model} / {attack}: {format_mean_std(mean, std, True)}%", whisker))
        groups.append(BarGroup(x0 + group * 0.4, _attack_name(attack), drawn))
    return _plot("bars", task, f"{task}: accuracy under each attack", "attack", None, colors, groups)
