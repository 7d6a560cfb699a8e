"""`robench leaderboard --html PATH`: one self-contained static page built from the run records.

No network at view time: the CSS, the sorting script and the SVG plots are inline
(the plots are drawn here, in Python). Per task: a sortable table (click a header)
with one row per model setting, a scatter of clean vs robust accuracy, and a bar
chart of robust accuracy per attack. Every number comes from
`robench.leaderboard.records_frame` / `aggregate`; the page has no timestamp, so
the same records always give the same page.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from html import escape
from pathlib import Path

import pandas as pd

from robench.leaderboard import aggregate, format_cell, records_frame
from robench.results import RunRecord, atomic_write, iter_records

SETTING = ["model", "backbone", "train_size"]  # one table row per setting, within a task
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"]  # Okabe-Ito


@dataclass(frozen=True)
class Column:
    header: str
    title: str  # tooltip explaining the column


@dataclass(frozen=True)
class Cell:
    html: str
    sort: str  # what the sorting script compares: a number, text, or "" (missing: always last)


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
    return PAGE.format(records=len(frame), tasks=frame["task"].nunique(), body="\n".join(sections), css=CSS,
                       script=SCRIPT)


def _task_section(task: str, runs: pd.DataFrame, agg: pd.DataFrame, records: dict[str, RunRecord],
                  runs_dir: Path, page_dir: Path) -> str:
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
        cells = [Cell(escape(str(v)), str(v)) for v in setting]
        cells[2] = Cell(escape(str(setting[2])), "Infinity" if setting[2] == "full" else str(setting[2]))
        cells.append(Cell(str(int(c[("dev_accuracy", "count")])), str(int(c[("dev_accuracy", "count")]))))
        cells.append(_stat(c[("dev_accuracy", "mean")], c[("dev_accuracy", "std")], True))
        for metric, names, percent in (("robust_accuracy", attacks, True), ("attack_success_rate", success, True),
                                       ("avg_queries", queries, False)):
            for attack in names:
                row = stats.get((*setting, attack), {})
                cells.append(_stat(row.get(f"{metric}_mean"), row.get(f"{metric}_std"), percent))
        cells.append(_stat(c[("train_seconds", "mean")], c[("train_seconds", "std")], False))
        mine = runs[(runs[SETTING] == pd.Series(setting, index=SETTING)).all(axis=1)]
        ids = list(mine.sort_values(["attack", "seed"])["run_id"])
        cells.append(Cell(_resources([records[i] for i in ids]), ""))
        cells.append(Cell(_links(mine, attacks, runs_dir, page_dir), ""))
        rows.append(cells)

    points = [(label(s), a, stats[(*s, a)]) for s in settings for a in attacks if (*s, a) in stats]
    clean_of = {label(s): clean.loc[s][("dev_accuracy", "mean")] for s in settings}
    return SECTION.format(
        task=escape(task), slug=escape(_slug(task)), table=_table(task, columns, rows),
        scatter=scatter_svg(task, [(m, a, clean_of[m], p["robust_accuracy_mean"]) for m, a, p in points], attacks),
        bars=bars_svg(task, [(m, a, p["robust_accuracy_mean"], p["robust_accuracy_std"]) for m, a, p in points],
                      [label(s) for s in settings], attacks))


def _labeller(settings: list[tuple]):
    """Chart labels: the model name, plus backbone / train size where the task has several."""
    varying = [i for i in (1, 2) if len({s[i] for s in settings}) > 1]
    return lambda s: " ".join([str(s[0])] + [f"{SETTING[i]}={s[i]}" for i in varying])


def _attack_name(attack: str) -> str:
    return "AdvGLUE" if attack == "advglue" else attack


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text)


def _stat(mean, std, percent: bool) -> Cell:
    if mean is None or pd.isna(mean):
        return Cell("–", "")
    return Cell(escape(format_cell(mean, std, percent)), repr(float(mean)))


def _resources(recs: list[RunRecord]) -> str:
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
    body = "".join(f"<li><b>{escape(k)}</b>: {escape(v)}</li>" for k, v in items.items())
    summary = escape(items.get("device", "") or (recs[0].resources.get("backbone") or {}).get("name", "resources"))
    return f"<details><summary>{summary}</summary><ul>{body}</ul></details>"


def _links(runs: pd.DataFrame, attacks: list[str], runs_dir: Path, page_dir: Path) -> str:
    parts = []
    for attack in attacks:
        mine = runs[runs["attack"] == attack].sort_values("seed")
        links = " ".join(
            f'<a href="{escape(Path(os.path.relpath(runs_dir / (rid + ".json"), page_dir)).as_posix())}">'
            f's{int(seed)}</a>' for rid, seed in zip(mine["run_id"], mine["seed"]))
        if links:
            parts.append(f"<span>{escape(attack)}: {links}</span>")
    return "<br>".join(parts)


def _table(task: str, columns: list[Column], rows: list[list[Cell]]) -> str:
    head = "".join(f'<th scope="col" title="{escape(c.title)}">{escape(c.header)}</th>' for c in columns)
    body = "\n".join("<tr>" + "".join(f'<td data-sort="{escape(c.sort)}">{c.html}</td>' for c in row) + "</tr>"
                     for row in rows)
    return (f'<table class="board" id="table-{escape(_slug(task))}"><thead><tr>{head}</tr></thead>'
            f"<tbody>\n{body}\n</tbody></table>")


# ---------------------------------------------------------------- SVG plots (percent axes, 0-100)

W, H, LEFT, RIGHT, TOP, BOTTOM = 460, 340, 50, 130, 30, 45


def _x(v: float, lo: float = 0.0) -> float:
    return LEFT + (v - lo) / (1 - lo) * (W - LEFT - RIGHT)


def _y(v: float) -> float:
    return H - BOTTOM - v * (H - TOP - BOTTOM)


def _axes(title: str, xlabel: str, ylabel: str, xlo: float | None = 0.0) -> list[str]:
    """Title, y grid and ticks (0-100), and x ticks from `xlo` to 100 (none when `xlo` is None)."""
    out = [f'<text x="{W / 2:.0f}" y="18" class="title">{escape(title)}</text>']
    for t in range(0, 101, 20):
        y = _y(t / 100)
        out.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" class="grid"/>'
                   f'<text x="{LEFT - 6}" y="{y + 4:.1f}" class="tick" text-anchor="end">{t}</text>')
    if xlo is not None:
        step = 20 if xlo < 0.5 else 10
        for t in range(round(100 * xlo), 101, step):
            out.append(f'<text x="{_x(t / 100, xlo):.1f}" y="{H - BOTTOM + 16}" class="tick" '
                       f'text-anchor="middle">{t}</text>')
    out.append(f'<text x="{(LEFT + W - RIGHT) / 2:.0f}" y="{H - 8}" class="label" text-anchor="middle">'
               f"{escape(xlabel)}</text>")
    out.append(f'<text transform="translate(14 {(TOP + H - BOTTOM) / 2:.0f}) rotate(-90)" class="label" '
               f'text-anchor="middle">{escape(ylabel)}</text>')
    return out


def _legend(names: list[str], colors: dict[str, str]) -> list[str]:
    out = []
    for i, name in enumerate(names):
        y = TOP + 10 + 18 * i
        out.append(f'<rect x="{W - RIGHT + 12}" y="{y - 9}" width="11" height="11" fill="{colors[name]}"/>'
                   f'<text x="{W - RIGHT + 28}" y="{y}" class="tick">{escape(name)}</text>')
    return out


def _svg(kind: str, task: str, parts: list[str]) -> str:
    return (f'<svg class="plot {kind}" id="{kind}-{escape(_slug(task))}" viewBox="0 0 {W} {H}" width="{W}" '
            f'height="{H}" role="img" xmlns="http://www.w3.org/2000/svg">{"".join(parts)}</svg>')


def scatter_svg(task: str, points: list[tuple[str, str, float, float]], attacks: list[str]) -> str:
    """One point per (model, attack): x = clean accuracy, y = accuracy under that attack."""
    colors = {a: PALETTE[i % len(PALETTE)] for i, a in enumerate(attacks)}
    points = [p for p in points if pd.notna(p[2]) and pd.notna(p[3])]
    lowest = min((p[2] for p in points), default=0.0)  # zoom the x axis to the clean accuracies (steps of 10%)
    xlo = max(0.0, min(0.8, math.floor(10 * lowest - 0.5) / 10))
    parts = _axes(f"{task}: clean vs robust accuracy", "clean accuracy (%)", "accuracy under attack (%)", xlo)
    parts.append(f'<line x1="{_x(xlo, xlo):.1f}" y1="{_y(xlo):.1f}" x2="{_x(1, xlo):.1f}" y2="{_y(1):.1f}" '
                 'class="diag"><title>robust = clean</title></line>')
    for model, attack, clean, robust in points:
        x, y = _x(clean, xlo), _y(robust)
        tip = f"{model} / {attack}: clean {100 * clean:.1f}%, robust {100 * robust:.1f}%"
        parts.append(f'<g class="point"><circle cx="{x:.1f}" cy="{y:.1f}" r="5" fill="{colors[attack]}">'
                     f"<title>{escape(tip)}</title></circle>"
                     f'<text x="{x + 7:.1f}" y="{y + 3:.1f}" class="pt">{escape(model)}</text></g>')
    return _svg("scatter", task, parts + _legend([_attack_name(a) for a in attacks],
                                                 {_attack_name(a): c for a, c in colors.items()}))


def bars_svg(task: str, bars: list[tuple[str, str, float, float]], models: list[str], attacks: list[str]) -> str:
    """Grouped bars: one group per attack, one bar per model; whiskers show the std over seeds."""
    colors = {m: PALETTE[i % len(PALETTE)] for i, m in enumerate(models)}
    parts = _axes(f"{task}: accuracy under each attack", "attack", "accuracy under attack (%)", xlo=None)
    group = (W - LEFT - RIGHT) / max(len(attacks), 1)
    width = group * 0.8 / max(len(models), 1)
    values = {(m, a): (mean, std) for m, a, mean, std in bars}
    for gi, attack in enumerate(attacks):
        x0 = LEFT + gi * group + group * 0.1
        parts.append(f'<text x="{x0 + group * 0.4:.1f}" y="{H - BOTTOM + 16}" class="tick" text-anchor="middle">'
                     f"{escape(_attack_name(attack))}</text>")
        for mi, model in enumerate(models):
            mean, std = values.get((model, attack), (float("nan"), float("nan")))
            if pd.isna(mean):
                continue
            x, y = x0 + mi * width, _y(mean)
            tip = f"{model} / {attack}: {format_cell(mean, std, True)}%"
            parts.append(f'<rect class="bar" x="{x:.1f}" y="{y:.1f}" width="{width * 0.9:.1f}" '
                         f'height="{_y(0) - y:.1f}" fill="{colors[model]}"><title>{escape(tip)}</title></rect>')
            if pd.notna(std):
                cx = x + width * 0.45
                parts.append(f'<line class="whisker" x1="{cx:.1f}" x2="{cx:.1f}" y1="{_y(min(mean + std, 1)):.1f}" '
                             f'y2="{_y(max(mean - std, 0)):.1f}"/>')
    return _svg("bars", task, parts + _legend(models, colors))


# ---------------------------------------------------------------- page template

CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem; color: #1d1d1f; }
h1 { font-size: 1.6rem; margin-bottom: .2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
p.note { color: #555; max-width: 60rem; }
table.board { border-collapse: collapse; margin: 1rem 0; font-variant-numeric: tabular-nums; }
table.board th, table.board td { border-bottom: 1px solid #e4e4e4; padding: .35rem .6rem; text-align: right;
  vertical-align: top; }
table.board td:nth-child(-n+2), table.board th:nth-child(-n+2),
table.board td:nth-last-child(-n+2), table.board th:nth-last-child(-n+2) { text-align: left; }
table.board th { background: #f4f5f7; cursor: pointer; user-select: none; white-space: nowrap; }
table.board th:hover { background: #e8eaee; }
table.board th[aria-sort=ascending]::after { content: " \\25B2"; font-size: .7em; }
table.board th[aria-sort=descending]::after { content: " \\25BC"; font-size: .7em; }
table.board tbody tr:hover { background: #fafbfc; }
table.board td:last-child { text-align: left; white-space: nowrap; font-size: .85em; }
details ul { text-align: left; margin: .3rem 0; padding-left: 1rem; font-size: .85em; max-width: 28rem; }
.plots { display: flex; flex-wrap: wrap; gap: 1.5rem; }
svg.plot { background: #fff; border: 1px solid #eee; }
svg .grid { stroke: #eee; } svg .diag { stroke: #bbb; stroke-dasharray: 4 3; }
svg .tick { font-size: 11px; fill: #444; } svg .label { font-size: 12px; fill: #222; }
svg .title { font-size: 13px; font-weight: 600; text-anchor: middle; } svg .pt { font-size: 10px; fill: #333; }
svg .whisker { stroke: #222; stroke-width: 1.2; }
"""

SCRIPT = """
function compareCells(a, b) {
  if (a === b) return 0;
  const x = Number(a), y = Number(b);
  return (a !== "" && b !== "" && !isNaN(x) && !isNaN(y)) ? x - y : a.localeCompare(b);
}
document.querySelectorAll("table.board").forEach(function (table) {
  const headers = table.querySelectorAll("thead th");
  headers.forEach(function (th, col) {
    th.addEventListener("click", function () {
      const dir = th.getAttribute("aria-sort") === "ascending" ? -1 : 1;
      headers.forEach(function (h) { h.removeAttribute("aria-sort"); });
      th.setAttribute("aria-sort", dir === 1 ? "ascending" : "descending");
      const body = table.tBodies[0];
      const key = function (row) { return row.cells[col].dataset.sort; };
      Array.from(body.rows).sort(function (r, s) {
        const a = key(r), b = key(s);
        if (a === "" || b === "") return (a === "") - (b === "");  // missing values last either way
        return dir * compareCells(a, b);
      }).forEach(function (row) { body.appendChild(row); });
    });
  });
});
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>robench leaderboard</title>
<style>{css}</style>
</head>
<body>
<h1>robench leaderboard</h1>
<p class="note">{records} run records, {tasks} task(s). Each cell is the mean ± sample std over seeds.
Clean accuracy is the fine-tuned model's accuracy on the task's whole dev split; accuracy under an attack is
measured on the attack's evaluation subset (AdvGLUE: its dev split). Success rate = successful attacks /
examples correctly classified before the attack (TextAttack's convention). Click a column header to sort.
Generated by <code>robench leaderboard --html</code> from the records it links to.</p>
{body}
<script>{script}</script>
</body>
</html>
"""

SECTION = """<section id="task-{slug}">
<h2>{task}</h2>
{table}
<div class="plots">
{scatter}
{bars}
</div>
</section>"""
