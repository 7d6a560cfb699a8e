"""`robench leaderboard --html PATH`: one self-contained static page built from the run records.

What a reader sees, per task (a selector switches tasks when there are several):

* one row per **model setting** (one checkpoint recipe; its training seeds are aggregated), **ranked by the
  worst-case accuracy under attack** (an example counts only if no word-level attack broke it,
  `robench.report.worstcase`; without per-example results, by the lowest accuracy under a single attack);
* columns: rank, model (what the row differs in from the defaults as a short label; the full resolved setting
  in a tooltip and an expandable cell), clean dev accuracy, each attack's accuracy under attack with its 95%
  interval, its swap audit where recorded (the share of listed synonyms: list membership, not validity), the
  blind reading where `robench annotate` stored one (valid to a reader, Wilson interval), and links to each
  seed's run page, the worst case, certified accuracy where recorded, seeds and examples. What every row shares
  is said once, above the table;
* with a baseline (`--baseline MODEL`, else `bert` when the task has it), each accuracy-under-attack cell is
  marked with the comparison's verdict against the baseline at the same setting;
* sortable columns (click a header);
* plots: clean vs worst-case accuracy with interval whiskers and labels placed so that none collide (a label
  that finds no free spot is left out: the legend below the plot names every point), and one dot plot per
  attack with each row's interval.

Every number but the blind readings (`robench.report.readings`) comes from the leaderboard's checkpoint table
(`robench.report.leaderboard.leaderboard_tables`, the table `leaderboard.csv` is written from: its rows, rank and
columns); the page only arranges it. No network
at view time: CSS, script and SVG are inline. No timestamp: the same records give the same page byte for byte.
The markup lives in Jinja templates (`templates/leaderboard.html.j2` and its
partials); every `{{ value }}` is escaped with `html.escape` unless it is `Markup` built here from escaped
parts.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from functools import cache
from html import escape
from pathlib import Path
from typing import Any, Iterable
from urllib.parse import quote, urlsplit

import jinja2
import pandas as pd
from markupsafe import Markup

from robench.core.files import atomic_write
from robench.core.packed import runs_to_read
from robench.core.records import RunRecord, record_path
from robench.report.leaderboard import (
    RANK_BY,
    REPLAYS,
    UNTRAINED_NOTE,
    Records,
    format_difference,
    frame_of,
    leaderboard_tables,
    load_records,
    setting_names,
)
from robench.report.readings import Summary, readings_by_run, summarize
from robench.report.run_page import write_run_pages
from robench.report.stats import LESS_ROBUST, MORE_ROBUST, NOT_DISTINGUISHABLE
from robench.report.validity import COLUMNS as VALIDITY_COLUMNS
from robench.report.worstcase import worst_cases
from robench.runs.spec import TrainConfig, slug

DEFAULT_BASELINE = "bert"  # verdicts are against it when --baseline is not given and the task has it
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#882255", "#000000"]  # Okabe-Ito+
SHAPES = ["circle", "square", "diamond", "triangle"]  # a second key once the colours run out
ATTACK_NAMES = {"advglue": "AdvGLUE", "textfooler": "TextFooler", "bert-attack": "BERT-Attack",
                "gradient-swap": "gradient-swap"}
VALIDITY = tuple(VALIDITY_COLUMNS.values())  # the validity audit's classes (robench.engine.audit)

# SVG text: the page sets this font stack for plots; widths are estimated with DejaVu Sans' advance widths
# (the widest common sans-serif; Verdana's are within 3%), so a label placed here fits in any of them.
FONT_SIZE = {"tick": 11, "label": 12, "title": 13, "pt": 11, "row": 11}
_NARROW, _WIDE = set("ijlI.,:;'!|()[] f-t"), set("mwMW@%")


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
    rank_value: float = float("nan")  # what the rank is by (the table's rank_accuracy)
    rank: int | None = None
    untrained: str = ""  # the seeds whose checkpoint did not train (robench.runs.chance), e.g. "2 4"
    color: str = PALETTE[0]
    shape: str = SHAPES[0]

    @property
    def name(self) -> str:
        return f"{self.model} {self.label}".strip()


@dataclass(frozen=True)
class Section:
    task: str
    slug: str
    shared: list[str]  # what every row of the task shares, said once
    rank_by: str  # what the rank column is by (for the note)
    baseline: str | None
    columns: list[Column]
    rows: list[list[TableCell]]
    scatter: Plot
    dots: list[Plot]


def write_html(results_dir: Path, path: str | Path, baseline: str | None = None,
               table: pd.DataFrame | None = None, cache_dir: Path | None = None, run_pages: bool = False) -> Path:
    """Write the page for `<results_dir>/runs` to `path`, and only with `run_pages` (as `leaderboard --run-pages`)
    beside it `runs/<run_id>.html`, the page of each included run with per-example results
    (`robench.report.run_page`, 0.5 s a run; without, a seed links to its record); links are relative to the
    pages. `table`: the checkpoint table already computed for `leaderboard.csv` (with this `baseline`), if any. A
    packed `results_dir` is read from its unpacked copy under `cache_dir` (`robench.core.packed`)."""
    runs_dir = runs_to_read(Path(results_dir), cache_dir)
    records = load_records(runs_dir)
    page = Path(path).resolve()
    pages = write_run_pages(runs_dir, [rec.run_id for rec in records.current], page.parent / "runs", back=page) \
        if run_pages else {}
    atomic_write(page, render(records, page.parent, baseline, pages, table))
    return page


def board_table(records: Records, baseline: str | None) -> pd.DataFrame:
    """The table the page shows: the checkpoint table `leaderboard.csv` is written from, with the worst case."""
    cases = worst_cases(records.runs_dir, records.current)
    return leaderboard_tables(records, baseline, cases).checkpoints


def page_baseline(records: Records, baseline: str | None) -> str | None:
    """The model verdicts are against: `baseline`, else DEFAULT_BASELINE when some record has it."""
    if baseline is not None:
        return baseline
    return DEFAULT_BASELINE if any(rec.spec.get("model") == DEFAULT_BASELINE for rec in records.current) else None


def render(records: Records, page_dir: Path, baseline: str | None = None,
           run_pages: dict[str, Path] | None = None, table: pd.DataFrame | None = None) -> str:
    """The leaderboard page; each seed links to its run's page in `run_pages`, else to its JSON record."""
    frame = frame_of(records.current)
    baseline = page_baseline(records, baseline)
    if table is None or (baseline is not None and "baseline" not in table.columns):
        table = board_table(records, baseline)
    by_id = {rec.run_id: rec for rec in records.current}
    prefix = {variant: name for name, variant in setting_names(frame).items()}  # the checkpoint table's columns
    tasks = sorted(frame["task"].unique())
    sections = [_section(task, frame[frame["task"] == task], table[table["task"] == task], by_id, prefix,
                         records.runs_dir.resolve(), page_dir, baseline, run_pages or {}) for task in tasks]
    return _templates().get_template("leaderboard.html.j2").render(
        records=len(frame), sections=sections, skipped=records.older)


@cache
def _templates() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("robench.report", "templates"), autoescape=False,
                             finalize=_escape, keep_trailing_newline=True, undefined=jinja2.StrictUndefined)
    env.filters["fixed"] = lambda value, digits=1: f"{value:.{digits}f}"
    return env


def _escape(value: Any) -> str:
    """Jinja's `finalize`: html.escape every output value except prebuilt Markup."""
    return value if isinstance(value, Markup) else escape(str(value))


# ---------------------------------------------------------------- rows

def _section(task: str, runs: pd.DataFrame, board: pd.DataFrame, records: dict[str, RunRecord],
             prefix: dict[tuple[str, str], str], runs_dir: Path, page_dir: Path, baseline: str | None,
             run_pages: dict[str, Path]) -> Section:
    variants = sorted(set(zip(runs["attack"], runs["attack_label"])), key=lambda v: (v[0] not in REPLAYS, v))
    names = _attack_names(variants)
    rows = _rows(runs, board, {v: prefix[v] for v in variants})
    if baseline is not None and not any(r.model == baseline for r in rows):
        baseline = None  # this task has no baseline row: no verdicts
    rank_by = RANK_BY[board["rank_by"].iloc[0]]
    shared = _shared(rows, records, runs)
    _label_rows(rows, records, runs)
    for i, row in enumerate(rows):
        row.color, row.shape = PALETTE[i % len(PALETTE)], SHAPES[(i // len(PALETTE)) % len(SHAPES)]
    certified = any(r.certified for r in rows)
    validity = {v for r in rows for v in r.validity}
    _add_readings(rows, runs_dir)
    read = {v for r in rows for v in r.readings}
    columns = [Column("Rank", f"by {rank_by}, highest first; equal values share a rank. Ranks inside each "
                              "other's intervals are not distinguishable"),
               Column("Model", "defence, and what its setting differs in from the defaults and from the other "
                               "rows (hover the name, or open “setting”, for the full resolved setting)", "text"),
               Column("Clean", "correct out of the task's whole dev split, mean ± std over seeds (%)")]
    versus = f"; ▲ / ▼ / ≈: the verdict of the paired comparison with {baseline}" if baseline else ""
    counts = {v: _examples_of(rows, v) for v in variants}
    for v in variants:
        audit = "; then the share of its swaps that are listed synonyms or inflections, and antonyms, both out of " \
                "every swap it made (swap audit: list membership, not validity)" if v in validity else ""
        audit += "; then the share of successful examples a blind reader accepted (label kept, meaning kept, " \
                 "fluent: robench annotate), with its Wilson 95% interval" if v in read else ""
        columns.append(Column(names[v], f"correct under {names[v]} out of the {counts[v]} examples it attacked "
                                        "per seed (an example wrong before the attack counts as broken), mean [95% "
                                        f"interval over seeds and examples] (%){versus}{audit}; s0, s1, …: each "
                                        "seed's run"))
    columns.append(Column("Worst case", "correct under every word-level attack, out of the examples they all "
                                        "attacked (robench.report.worstcase), mean over seeds [95% interval], or "
                                        "± std; ⚑: masking flags"))
    if certified:
        columns.append(Column("Certified", "examples whose prediction provably holds under the defence's "
                                           "perturbation set, out of the attacked examples, mean over seeds (%)"))
    shown = " / ".join(dict.fromkeys(str(counts[v]) for v in variants))
    columns += [Column("Seeds", "training seeds aggregated"),
                Column("Examples", f"examples attacked per seed, per attack in column order ({shown}: "
                                   + ", ".join(f"{names[v]} {counts[v]}" for v in variants)
                                   + "): the denominator of each attack's accuracy")]
    cells = [_cells(row, variants, names, baseline, certified, runs_dir, page_dir, run_pages) for row in rows]
    return Section(task=task, slug=_slug(task), shared=shared, rank_by=rank_by, baseline=baseline,
                   columns=columns, rows=cells, scatter=scatter_plot(task, rows, rank_by),
                   dots=[dot_plot(task, rows, v, names[v], baseline) for v in variants])


def _examples_of(rows: list[BoardRow], variant: tuple[str, str]) -> str:
    """The examples `variant` attacked per seed ("148"; "100-300" where rows differ; "?" without a count)."""
    counts = sorted({int(r.attacks[variant]["examples"]) for r in rows if variant in r.attacks
                     and pd.notna(r.attacks[variant].get("examples"))})
    return "?" if not counts else str(counts[0]) if len(counts) == 1 else f"{counts[0]}-{counts[-1]}"


def _attack_names(variants: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """Column names: the attack's display name, plus its setting label when the attack appears more than once."""
    attacks = [a for a, _ in variants]
    return {v: ATTACK_NAMES.get(v[0], v[0]) + (f" {v[1]}" if attacks.count(v[0]) > 1 and v[1] else "")
            for v in variants}


def _rows(runs: pd.DataFrame, board: pd.DataFrame, prefix: dict[tuple[str, str], str]) -> list[BoardRow]:
    """One row per checkpoint row of `board` (one task's), in its rank order; `prefix`: each attack variant's
    column prefix."""
    rows = []
    for _, row in board.iterrows():
        mine = runs[runs["model_setting_id"] == row["model_setting_id"]]
        attacks = {v: cells for v, name in prefix.items()
                   if pd.notna((cells := {k.removeprefix(f"{name}."): x for k, x in row.items()
                                          if k.startswith(f"{name}.")}).get("attack_label"))}
        runs_of = {v: [(int(s), rid) for s, rid in sorted(zip(g["seed"], g["run_id"]))]
                   for v, g in mine.groupby(["attack", "attack_label"])}
        worst = {k: row.get(f"worst_case_accuracy_{k}") for k in ("mean", "std", "ci_low", "ci_high")}
        worst["flags"] = row.get("masking_flags") if isinstance(row.get("masking_flags"), str) else ""
        certified = {k: row.get(f"certified_accuracy_{k}") for k in ("mean", "std", "ci_low", "ci_high")} \
            if pd.notna(row.get("certified_accuracy_mean")) else None
        rows.append(BoardRow(
            model=str(row["model"]), key=str(row["model_setting_id"]), label="", full=[],
            seeds=sorted(int(s) for s in mine.drop_duplicates("seed")["seed"]),
            clean=(_num(row["dev_accuracy_mean"]), _num(row["dev_accuracy_std"])),
            train_seconds=_num(row.get("train_seconds_mean")), attacks=attacks, worst=worst, certified=certified,
            validity=_validity(attacks), runs=runs_of, rank_value=_num(row["rank_accuracy"]),
            rank=None if pd.isna(row["rank"]) else int(row["rank"]),
            untrained=row["untrained_seeds"] if isinstance(row.get("untrained_seeds"), str) else ""))
    return rows


def _add_readings(rows: list[BoardRow], runs_dir: Path) -> None:
    """Each row's blind readings (robench.report.readings) per attack variant, pooled over its seeds' runs."""
    by_run = readings_by_run(runs_dir, [rid for r in rows for runs in r.runs.values() for _, rid in runs])
    for row in rows:
        for variant, runs in row.runs.items():
            if readings := [x for _, rid in runs for x in by_run.get(rid, [])]:
                row.readings[variant] = summarize(readings)


def _num(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _validity(attacks: dict[tuple[str, str], dict[str, Any]]) -> dict[tuple[str, str], dict[str, float]]:
    """Per attack variant: the leaderboard's swap-audit columns (robench.report.validity), mean over seeds."""
    out = {}
    for variant, row in attacks.items():
        shares = {cls: float(row[f"{col}_mean"]) for col, cls in VALIDITY_COLUMNS.items()
                  if pd.notna(row.get(f"{col}_mean"))}
        if pd.notna(row.get("antonym_example_rate_mean")):
            shares["antonym_examples"] = float(row["antonym_example_rate_mean"])
        if shares:
            out[variant] = shares
    return out


# ---------------------------------------------------------------- settings: shared once, differences per row

def _facets(rec: RunRecord, default_params: dict[str, Any] | None) -> dict[str, str]:
    """A model setting as comparable facets: backbone, train size, each training value, data source, and each
    model parameter that differs from the model's defaults (`param:NAME`)."""
    spec, hyper = rec.spec, rec.hyperparameters or {}
    facets = {"backbone": _backbone_name(rec)}
    if not spec.get("checkpoint"):  # a given checkpoint: robench trained nothing, so no training setting applies
        facets["train size"] = "whole split" if spec.get("train_size") is None else f"{spec['train_size']:,}"
        for k, v in sorted((spec.get("train") or {}).items()):
            facets[f"train:{k}"] = _value(v)
    facets["data"] = str(spec.get("data_source", "local"))
    for k, v in sorted((hyper.get("model") or {}).items()):
        if default_params is None or _plain(default_params.get(k)) != _plain(v):
            facets[f"param:{k}"] = _value(v)
    return facets


def _default_params(model: str) -> dict[str, Any] | None:
    from robench.report.identity import resolved_model_params

    try:
        return resolved_model_params({"model": model})
    except Exception:  # noqa: BLE001 - a plugin that is not installed here: every parameter counts as changed
        return None


def _shared(rows: list[BoardRow], records: dict[str, RunRecord], runs: pd.DataFrame) -> list[str]:
    """What every row shares (said once above the table): backbone, train size, training values that differ
    from the defaults, data source, and each attack's settings."""
    facets = [_row_facets(r, records, runs) for r in rows]
    common = {k: v for k, v in facets[0].items() if all(f.get(k) == v for f in facets[1:])} if facets else {}
    defaults = {k: _value(v) for k, v in TrainConfig().__dict__.items()}
    train = [f"{k[6:]}={v}" for k, v in common.items() if k.startswith("train:") and defaults.get(k[6:]) != v]
    out = [f"backbone {common['backbone']}"] if "backbone" in common else []
    if "train size" in common:
        out.append(f"{common['train size']} training examples")
    if train:
        out.append("training " + " ".join(train) + " (defaults otherwise)")
    if common.get("data", "local") != "local":
        out.append(f"data from the {common['data']}")
    attack_labels = sorted({(a, lab) for a, lab in zip(runs["attack"], runs["attack_label"]) if lab})
    out += [f"{ATTACK_NAMES.get(a, a)}: {lab}" for a, lab in attack_labels]
    return out


def _row_facets(row: BoardRow, records: dict[str, RunRecord], runs: pd.DataFrame) -> dict[str, str]:
    rid = runs[runs["model_setting_id"] == row.key]["run_id"].iloc[0]
    return _facets(records[rid], _default_params(row.model))


def _label_rows(rows: list[BoardRow], records: dict[str, RunRecord], runs: pd.DataFrame) -> None:
    """Each row's short label (its model parameters changed from the defaults, and whatever else varies between
    rows) and its full resolved setting."""
    facets = {r.key: _row_facets(r, records, runs) for r in rows}
    varying = {k for f in facets.values() for k in f if len({g.get(k) for g in facets.values()}) > 1}
    for r in rows:
        f = facets[r.key]
        parts = [f"{k[6:]}={v}" for k, v in f.items() if k.startswith("param:")]
        parts += [f"{k.removeprefix('train:')}={v}" if k.startswith("train:") else f"{k} {v}"
                  for k, v in f.items() if k in varying and not k.startswith("param:")]
        r.label = " ".join(parts)
        rec = records[runs[runs["model_setting_id"] == r.key]["run_id"].iloc[0]]
        hyper = rec.hyperparameters or {}
        r.full = [("model", r.model),
                  ("model parameters", " ".join(f"{k}={_value(v)}" for k, v in sorted((hyper.get("model") or {})
                                                                                         .items())) or "none"),
                  ("backbone", _backbone(rec)), *_training(rec, f),
                  ("data", _data(rec)), ("seeds", " ".join(map(str, r.seeds))),
                  ("train time per checkpoint", "–" if r.train_seconds is None or math.isnan(r.train_seconds)
                   else f"{r.train_seconds:.0f} s"),
                  ("model setting id", r.key)]
        device = (rec.resources or {}).get("device")
        if device is not None:
            r.full.append(("device", str(device)))


def _backbone(rec: RunRecord) -> str:
    info = (rec.resources or {}).get("backbone") or {}
    name = _backbone_name(rec)
    return f"{name} ({info['fingerprint']})" if info.get("fingerprint") else name


def _backbone_name(rec: RunRecord) -> str:
    """A robench-trained row's backbone; a given checkpoint's architecture as its config names it (records written
    before it was kept: the config's model type)."""
    given = (rec.resources or {}).get("model") or {}
    info = (rec.resources or {}).get("backbone") or {}
    return str(given.get("architecture") or info.get("name") or rec.spec.get("backbone"))


def _training(rec: RunRecord, facets: dict[str, str]) -> list[tuple[str, str]]:
    """The full setting's training rows: what robench trained with, or that it trained nothing."""
    if rec.spec.get("checkpoint"):
        length = (rec.spec.get("train") or {}).get("max_length")
        return [("training", f"none by robench (a given checkpoint; inputs truncated at {length} tokens)")]
    train = " ".join(f"{k}={_value(v)}" for k, v in sorted((rec.spec.get("train") or {}).items()))
    return [("train size", facets["train size"]), ("training", train)]


def _data(rec: RunRecord) -> str:
    info = (rec.resources or {}).get("data") or {}
    source = str(info.get("source") or rec.spec.get("data_source", "local"))
    return f"{source} ({info['fingerprint']})" if info.get("fingerprint") else source


def _plain(obj: Any) -> Any:
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def _value(value: Any) -> str:
    if isinstance(value, (list, tuple)):
        return ",".join(_value(v) for v in value)
    if isinstance(value, float) and value != 0 and abs(value) < 1e-3:
        mantissa, exponent = f"{value:e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return f"{value:g}" if isinstance(value, float) else str(value)


# ---------------------------------------------------------------- cells

def _pct(value: Any, digits: int = 1) -> str:
    return f"{100 * float(value):.{digits}f}"


def _interval(stats: dict[str, Any], prefix: str) -> tuple[float, float] | None:
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
        return f"[{_pct(low)}, {_pct(high)}]"
    std = stats.get(f"{prefix}_std")
    return f"± {_pct(std)}" if std is not None and pd.notna(std) else ""


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


def _cells(row: BoardRow, variants, names, baseline: str | None, certified: bool, runs_dir: Path, page_dir: Path,
           run_pages: dict[str, Path]) -> list[TableCell]:
    rank = "–" if row.rank is None else str(row.rank)
    cells = [TableCell(Markup(escape(rank)), "" if row.rank is None else str(row.rank))]
    cells.append(TableCell(_model_cell(row, baseline), row.name, "text"))
    mean, std = row.clean
    clean = "–" if math.isnan(mean) else _pct(mean) + ("" if math.isnan(std) else f" ± {_pct(std)}")
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
    head = [f'<span class="v">{_pct(mean)}</span>']
    if baseline is not None and (said := verdict(stats, baseline)) is not None:
        cls, symbol, tip = said
        head.append(f'<span class="sig {cls}" title="{escape(tip)}">{symbol}</span>')
    spread = _spread(stats, "robust_accuracy")
    details = [f"{name}: accuracy under attack {_pct(mean)}% {spread}".rstrip()]
    for metric, text in (("attack_success_rate", "success rate"), ("clean_accuracy", "clean on the attacked "
                                                                                       "examples")):
        if pd.notna(stats.get(f"{metric}_mean")):
            details.append(f"{text} {_pct(stats[f'{metric}_mean'])}% {_spread(stats, metric)}".rstrip())
    if pd.notna(stats.get("avg_queries_mean")):
        details.append(f"{float(stats['avg_queries_mean']):.1f} queries per example")
    if spread:
        head.append(f'<span class="ci">{escape(spread)}</span>')
    extra = []
    audit = row.validity.get(variant)
    if audit:
        listed = audit.get("synonym", 0.0) + audit.get("inflection", 0.0)
        antonym = audit.get("antonym")
        tip = ", ".join(f"{c} {_pct(audit[c])}%" for c in VALIDITY if c in audit)
        if "antonym_examples" in audit:
            tip += f"; examples with an antonym swap {_pct(audit['antonym_examples'])}%"
        warn = " warn" if antonym else ""
        text = f"listed synonyms {_pct(listed, 0)}%" + (f" · ant. {_pct(antonym)}%" if antonym is not None else "")
        tip = f"swaps (list membership, not validity): {tip}"
        extra.append(f'<span class="audit{warn}" title="{escape(tip)}">{escape(text)}</span>')
        details.append(tip)
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
    return TableCell(Markup(f'<span class="v">{_pct(mean)}</span>{mark}'
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


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text)


# ---------------------------------------------------------------- text geometry

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


# ---------------------------------------------------------------- axes

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


def _x_axis(frame: Frame, ticks: list[float], texts: list[Text], lines: list[Line], label: str) -> None:
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


def _y_axis(frame: Frame, ticks: list[float], texts: list[Text], lines: list[Line], label: str) -> None:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 0.01
    for t in ticks:
        y = frame.py(t)
        lines.append(Line(frame.left, y, frame.right, y, "grid"))
        _add_tick(texts, Text(frame.left - 6, y + 4, _tick_label(t, step), "tick", "end"))
    texts.append(Text(15, (frame.top + frame.bottom) / 2, label, "label", "middle", rotate=True))


# ---------------------------------------------------------------- plots

SCATTER = {"W": 540, "H": 390, "LEFT": 58, "RIGHT": 18, "TOP": 34, "BOTTOM": 50}
DOTS = {"W": 400, "ROW": 22, "LEFT": 172, "RIGHT": 18, "TOP": 34, "BOTTOM": 48}


def scatter_plot(task: str, rows: list[BoardRow], rank_by: str) -> Plot:
    """Clean (dev) accuracy against the rank's accuracy under attack, one point per row with its whiskers
    (dev: ± std over seeds; under attack: the 95% interval, or ± std), and labels that never collide."""
    g = SCATTER
    worst = rank_by.startswith("worst")
    points = []
    for r in rows:
        y_span = _interval({f"w_{k}": r.worst.get(k) for k in ("mean", "std", "ci_low", "ci_high")}, "w") \
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
    _x_axis(frame, x_ticks, texts, lines, "clean dev accuracy (%)")
    _y_axis(frame, y_ticks, texts, lines, ("worst-case" if worst else "lowest") + " accuracy under attack (%)")
    marks = []
    for r, x, y, x_span, y_span in points:
        px, py = frame.px(x), frame.py(y)
        if x_span:
            lines.append(Line(frame.px(max(x_span[0], x_lo)), py, frame.px(min(x_span[1], x_hi)), py, "whisker"))
        if y_span:
            lines.append(Line(px, frame.py(min(y_span[1], y_hi)), px, frame.py(max(y_span[0], y_lo)), "whisker"))
        tip = f"#{r.rank} {r.name}: clean {_pct(x)}%, {'worst case' if worst else 'lowest'} {_pct(y)}%"
        marks.append(Mark(px, py, r.color, r.shape, tip))
    whiskers = [(min(w.x1, w.x2) - 1, min(w.y1, w.y2) - 1, max(w.x1, w.x2) + 1, max(w.y1, w.y2) + 1)
                for w in lines if w.cls == "whisker"]
    texts += place_labels([(m.x, m.y, f"{r.model} {r.label}".strip(), r.model) for m, (r, *_) in zip(marks, points)],
                          (frame.left, frame.top, frame.right, frame.bottom), texts, whiskers)
    legend = [(r.color, r.shape, f"#{r.rank or '–'} {r.name}") for r in rows]
    return Plot(f"scatter-{_slug(task)}", "scatter", g["W"], g["H"], lines, marks, texts, legend)


def _lowest_interval(row: BoardRow) -> tuple[float, float] | None:
    lowest = [(a["robust_accuracy_mean"], a) for a in row.attacks.values() if pd.notna(a.get("robust_accuracy_mean"))]
    return _interval(min(lowest, key=lambda p: p[0])[1], "robust_accuracy") if lowest else None


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


def dot_plot(task: str, rows: list[BoardRow], variant: tuple[str, str], name: str, baseline: str | None) -> Plot:
    """One attack: each row's accuracy under it (dot) and 95% interval (whisker), rows in rank order; a dashed
    line at the baseline's value."""
    g = DOTS
    height = g["TOP"] + g["ROW"] * max(len(rows), 1) + g["BOTTOM"]
    values = []
    for r in rows:
        stats = r.attacks.get(variant)
        if stats and pd.notna(stats.get("robust_accuracy_mean")):
            values.append((r, float(stats["robust_accuracy_mean"]), _interval(stats, "robust_accuracy")))
    spread = [v for _, m, span in values for v in ([m] + list(span or ()))]
    lo, hi, ticks = nice_axis(min(spread, default=0.0), max(spread, default=1.0), 4)
    frame = Frame(g["LEFT"], g["TOP"], g["W"] - g["RIGHT"], height - g["BOTTOM"], (lo, hi), (0, 1))
    lines: list[Line] = []
    texts = [Text(g["W"] / 2, 20, fit(f"{task}: accuracy under {name}", "title", g["W"] - 8), "title", "middle")]
    _x_axis(frame, ticks, texts, lines, f"accuracy under {ATTACK_NAMES.get(variant[0], variant[0])} (%)")
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
        text = f"{_pct(mean)}%" + (f" [{_pct(span[0])}, {_pct(span[1])}]" if span else "")
        marks.append(Mark(frame.px(mean), y, r.color, r.shape, f"#{r.rank} {r.name} / {name}: {text}"))
    return Plot(f"dots-{_slug(task)}-{_slug(name)}", "dots", g["W"], height, lines, marks, texts)
