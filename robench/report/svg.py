"""SVG plots as data: texts, lines and marks in pixels (`Plot`, drawn by `templates/_plot.svg.j2`), with the
geometry they need: an upper estimate of a text's width, axes with round ticks, and point labels placed so that
none collides with another label, a point or a whisker (`place_labels`). Knows nothing of leaderboards."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Iterable

# SVG text: the page sets this font stack for plots; widths are estimated with DejaVu Sans' advance widths
# (the widest common sans-serif; Verdana's are within 3%), so a label placed here fits in any of them.
FONT_SIZE = {"tick": 11, "label": 12, "title": 13, "pt": 11, "row": 11}


_NARROW, _WIDE = set("ijlI.,:;'!|()[] f-t"), set("mwMW@%")


@dataclass(frozen=True)
class Text:
    x: float
    y: float
    text: str
    cls: str  # tick, label, title, pt (a point's label), row (a dot plot's row label)
    anchor: str = "start"  # start, middle, end
    rotate: bool = False  # the y-axis label: rotated -90 degrees about (x, y)
    tip: str | None = None


@dataclass(frozen=True)
class Line:
    x1: float
    y1: float
    x2: float
    y2: float
    cls: str  # grid, whisker, base (the baseline's value), frame


@dataclass(frozen=True)
class Mark:
    x: float
    y: float
    color: str
    shape: str
    tip: str


@dataclass(frozen=True)
class Plot:
    """What `_plot.svg.j2` draws: lines, then marks, then text; `legend` goes below it as HTML."""

    id: str
    kind: str  # scatter or dots
    width: int
    height: int
    lines: list[Line]
    marks: list[Mark]
    texts: list[Text]
    legend: list[tuple[str, str, str]] = field(default_factory=list)  # colour, shape, text


def text_width(text: str, cls: str) -> float:
    """An upper estimate of `text`'s rendered width in pixels (DejaVu Sans advance widths, rounded up)."""
    size = FONT_SIZE[cls]
    em = sum(0.34 if ch in _NARROW else 1.0 if ch in _WIDE else 0.84 if ch in "=+<>~^" else
             0.78 if ch.isupper() else 0.66 if ch.isdigit() else 0.64 for ch in text)
    return em * size * (1.1 if cls == "title" else 1.0) + 2


def text_box(t: Text) -> tuple[float, float, float, float]:
    """(x0, y0, x1, y1) that the text surely lies in (baseline at y; ascent 0.95 em, descent 0.3 em)."""
    size, width = FONT_SIZE[t.cls], text_width(t.text, t.cls)
    x0 = t.x - width if t.anchor == "end" else t.x - width / 2 if t.anchor == "middle" else t.x
    if t.rotate:  # rotated -90 degrees about (x, y): the text runs upwards
        return t.x - 0.95 * size, t.y - (x0 - t.x) - width, t.x + 0.3 * size, t.y - (x0 - t.x)
    return x0, t.y - 0.95 * size, x0 + width, t.y + 0.3 * size


def overlaps(a: tuple[float, float, float, float], b: tuple[float, float, float, float], pad: float = 1.0) -> bool:
    return a[0] < b[2] + pad and b[0] < a[2] + pad and a[1] < b[3] + pad and b[1] < a[3] + pad


def fit(text: str, cls: str, width: float) -> str:
    """`text`, cut with an ellipsis to fit `width` pixels."""
    if text_width(text, cls) <= width:
        return text
    while text and text_width(text + "…", cls) > width:
        text = text[:-1]
    return text.rstrip() + "…"


def nice_axis(low: float, high: float, ticks: int = 5, floor: float = 0.0, ceiling: float = 1.0
              ) -> tuple[float, float, list[float]]:
    """An axis (fractions) covering [low, high] with about `ticks` round steps (0.5, 1, 2, 5, 10, 20 points),
    inside [floor, ceiling]."""
    if math.isnan(low) or math.isnan(high):
        low, high = floor, ceiling
    span = max(high - low, 0.01)
    step = next((s for s in (0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.25) if span / s <= ticks), 0.25)
    lo = max(floor, math.floor(low / step + 1e-9) * step)
    hi = min(ceiling, math.ceil(high / step - 1e-9) * step)
    if hi <= lo:
        hi = min(ceiling, lo + step)
        lo = hi - step
    count = round((hi - lo) / step)
    return lo, hi, [lo + i * step for i in range(count + 1)]


def _tick_label(value: float, step: float) -> str:
    return f"{100 * value:.1f}" if step < 0.01 - 1e-12 else f"{100 * value:.0f}"


@dataclass(frozen=True)
class Frame:
    """A plot area: pixel box and the data ranges of its axes."""

    left: float
    top: float
    right: float
    bottom: float
    x: tuple[float, float]
    y: tuple[float, float]

    def px(self, v: float) -> float:
        return self.left + (v - self.x[0]) / (self.x[1] - self.x[0]) * (self.right - self.left)

    def py(self, v: float) -> float:
        return self.bottom - (v - self.y[0]) / (self.y[1] - self.y[0]) * (self.bottom - self.top)


def x_axis(frame: Frame, ticks: list[float], texts: list[Text], lines: list[Line], label: str) -> None:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 0.01
    for t in ticks:
        x = frame.px(t)
        lines.append(Line(x, frame.top, x, frame.bottom, "grid"))
        _add_tick(texts, Text(x, frame.bottom + 17, _tick_label(t, step), "tick", "middle"))
    texts.append(Text((frame.left + frame.right) / 2, frame.bottom + 35, label, "label", "middle"))


def _add_tick(texts: list[Text], tick: Text) -> None:
    """Add a tick label unless it would touch a label already there (the two axes' labels at the origin)."""
    if not any(overlaps(text_box(tick), text_box(t)) for t in texts):
        texts.append(tick)


def y_axis(frame: Frame, ticks: list[float], texts: list[Text], lines: list[Line], label: str) -> None:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 0.01
    for t in ticks:
        y = frame.py(t)
        lines.append(Line(frame.left, y, frame.right, y, "grid"))
        _add_tick(texts, Text(frame.left - 6, y + 4, _tick_label(t, step), "tick", "end"))
    texts.append(Text(15, (frame.top + frame.bottom) / 2, label, "label", "middle", rotate=True))


def place_labels(points: list[tuple[float, float, str, str]], area: tuple[float, float, float, float],
                 fixed: Iterable[Text] = (), obstacles: Iterable[tuple[float, float, float, float]] = ()
                 ) -> list[Text]:
    """Labels for points (x, y, text, short text) that overlap no other label, no point, no `fixed` text and
    none of the `obstacles` (boxes: the whiskers), inside `area`: each tries positions around its point, nearest
    first, with its text and then its short text; a point whose labels all collide gets none (the legend names
    it)."""
    marks = [(x - 6, y - 6, x + 6, y + 6) for x, y, _, _ in points]
    taken = [text_box(t) for t in fixed] + list(obstacles)
    placed: list[Text] = []
    offsets = [(8, 4, "start"), (-8, 4, "end"), (0, -9, "middle"), (0, 17, "middle"), (8, -6, "start"),
               (-8, -6, "end"), (8, 14, "start"), (-8, 14, "end")]
    offsets += [(dx * k, dy * k - (4 * (k - 1) if dy > 0 else 0), a) for k in (2, 3) for dx, dy, a in offsets[:8]]
    order = sorted(range(len(points)), key=lambda i: (points[i][1], points[i][0]))
    for i in order:
        x, y, text, short = points[i]
        for candidate in (text, short):
            if not candidate:
                continue
            spot = next((t for dx, dy, anchor in offsets
                         if _free(t := Text(x + dx, y + dy, candidate, "pt", anchor), area, taken, marks, i)), None)
            if spot is not None:
                placed.append(spot)
                taken.append(text_box(spot))
                break
    return placed


def _free(t: Text, area, taken, marks, own: int) -> bool:
    box = text_box(t)
    if box[0] < area[0] + 1 or box[2] > area[2] - 1 or box[1] < area[1] + 1 or box[3] > area[3] - 1:
        return False
    return not any(overlaps(box, b) for b in taken) and \
        not any(overlaps(box, m, 0.5) for j, m in enumerate(marks) if j != own) and not overlaps(box, marks[own], 0)
