"""The leaderboard page's plots: clean against worst-case accuracy (`scatter_plot`), and one dot plot per attack
with each row's interval (`dot_plot`); drawn with `robench.report.svg`."""
from __future__ import annotations

import math

import pandas as pd

from robench.report.leaderboard_cells import ATTACK_NAMES, BoardRow, dom_id, interval, pct
from robench.report.svg import Frame, Line, Mark, Plot, Text, fit, nice_axis, place_labels, x_axis, y_axis

SCATTER = {"W": 540, "H": 390, "LEFT": 58, "RIGHT": 18, "TOP": 34, "BOTTOM": 50}


DOTS = {"W": 400, "ROW": 22, "LEFT": 172, "RIGHT": 18, "TOP": 34, "BOTTOM": 48}


def scatter_plot(task: str, rows: list[BoardRow], rank_by: str) -> Plot:
    """Clean (dev) accuracy against the rank's accuracy under attack, one point per row with its whiskers
    (dev: ± std over seeds; under attack: the 95% interval, or ± std), and labels that never collide."""
    g = SCATTER
    worst = rank_by.startswith("worst")
    points = []
    for r in rows:
        y_span = interval({f"w_{k}": r.worst.get(k) for k in ("mean", "std", "ci_low", "ci_high")}, "w") \
            if worst else _lowest_interval(r)
        if math.isnan(r.clean[0]) or math.isnan(r.rank_value):
            continue
        x_span = (r.clean[0] - r.clean[1], r.clean[0] + r.clean[1]) if not math.isnan(r.clean[1]) else None
        points.append((r, r.clean[0], r.rank_value, x_span, y_span))
    xs = [v for _, x, _, xs_, _ in points for v in ([x] + list(xs_ or ()))]
    ys = [v for _, _, y, _, ys_ in points for v in ([y] + list(ys_ or ()))]
    x_lo, x_hi, x_ticks = nice_axis(min(xs, default=0.0), max(xs, default=1.0), 5)
    y_lo, y_hi, y_ticks = nice_axis(min(ys, default=0.0), max(ys, default=1.0), 5)
    frame = Frame(g["LEFT"], g["TOP"], g["W"] - g["RIGHT"], g["H"] - g["BOTTOM"], (x_lo, x_hi), (y_lo, y_hi))
    lines: list[Line] = []
    texts = [Text(g["W"] / 2, 20, f"{task}: clean vs {'worst-case' if worst else 'lowest'} accuracy", "title",
                  "middle")]
    x_axis(frame, x_ticks, texts, lines, "clean dev accuracy (%)")
    y_axis(frame, y_ticks, texts, lines, ("worst-case" if worst else "lowest") + " accuracy under attack (%)")
    marks = []
    for r, x, y, x_span, y_span in points:
        px, py = frame.px(x), frame.py(y)
        if x_span:
            lines.append(Line(frame.px(max(x_span[0], x_lo)), py, frame.px(min(x_span[1], x_hi)), py, "whisker"))
        if y_span:
            lines.append(Line(px, frame.py(min(y_span[1], y_hi)), px, frame.py(max(y_span[0], y_lo)), "whisker"))
        tip = f"#{r.rank} {r.name}: clean {pct(x)}%, {'worst case' if worst else 'lowest'} {pct(y)}%"
        marks.append(Mark(px, py, r.color, r.shape, tip))
    whiskers = [(min(w.x1, w.x2) - 1, min(w.y1, w.y2) - 1, max(w.x1, w.x2) + 1, max(w.y1, w.y2) + 1)
                for w in lines if w.cls == "whisker"]
    texts += place_labels([(m.x, m.y, f"{r.model} {r.label}".strip(), r.model) for m, (r, *_) in zip(marks, points)],
                          (frame.left, frame.top, frame.right, frame.bottom), texts, whiskers)
    legend = [(r.color, r.shape, f"#{r.rank or '–'} {r.name}") for r in rows]
    return Plot(f"scatter-{dom_id(task)}", "scatter", g["W"], g["H"], lines, marks, texts, legend)


def _lowest_interval(row: BoardRow) -> tuple[float, float] | None:
    lowest = [(a["robust_accuracy_mean"], a) for a in row.attacks.values() if pd.notna(a.get("robust_accuracy_mean"))]
    return interval(min(lowest, key=lambda p: p[0])[1], "robust_accuracy") if lowest else None


def dot_plot(task: str, rows: list[BoardRow], variant: tuple[str, str], name: str, baseline: str | None) -> Plot:
    """One attack: each row's accuracy under it (dot) and 95% interval (whisker), rows in rank order; a dashed
    line at the baseline's value."""
    g = DOTS
    height = g["TOP"] + g["ROW"] * max(len(rows), 1) + g["BOTTOM"]
    values = []
    for r in rows:
        stats = r.attacks.get(variant)
        if stats and pd.notna(stats.get("robust_accuracy_mean")):
            values.append((r, float(stats["robust_accuracy_mean"]), interval(stats, "robust_accuracy")))
    spread = [v for _, m, span in values for v in ([m] + list(span or ()))]
    lo, hi, ticks = nice_axis(min(spread, default=0.0), max(spread, default=1.0), 4)
    frame = Frame(g["LEFT"], g["TOP"], g["W"] - g["RIGHT"], height - g["BOTTOM"], (lo, hi), (0, 1))
    lines: list[Line] = []
    texts = [Text(g["W"] / 2, 20, fit(f"{task}: accuracy under {name}", "title", g["W"] - 8), "title", "middle")]
    x_axis(frame, ticks, texts, lines, f"accuracy under {ATTACK_NAMES.get(variant[0], variant[0])} (%)")
    marks = []
    y_of = {r.key: g["TOP"] + g["ROW"] * (i + 0.5) for i, r in enumerate(rows)}
    for r in rows:
        texts.append(Text(g["LEFT"] - 8, y_of[r.key] + 4, fit(f"#{r.rank or '–'} {r.name}", "row",
                                                               g["LEFT"] - 14), "row", "end", tip=r.name))
    for r, mean, span in values:
        y = y_of[r.key]
        if span:
            lines.append(Line(frame.px(max(span[0], lo)), y, frame.px(min(span[1], hi)), y, "whisker"))
        if baseline is not None and r.model == baseline:
            lines.append(Line(frame.px(mean), frame.top, frame.px(mean), frame.bottom, "base"))
        text = f"{pct(mean)}%" + (f" [{pct(span[0])}, {pct(span[1])}]" if span else "")
        marks.append(Mark(frame.px(mean), y, r.color, r.shape, f"#{r.rank} {r.name} / {name}: {text}"))
    return Plot(f"dots-{dom_id(task)}-{dom_id(name)}", "dots", g["W"], height, lines, marks, texts)
