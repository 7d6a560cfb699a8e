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
from dataclasses import dataclass
from functools import cache
from html import escape
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd
from markupsafe import Markup

from robench.core.files import atomic_write
from robench.core.packed import runs_to_read
from robench.core.records import RunRecord
from robench.report.leaderboard import Records, frame_of, leaderboard_tables, load_records, setting_names
from robench.report.leaderboard_cells import (
    ATTACK_NAMES,
    PALETTE,
    SHAPES,
    BoardRow,
    Column,
    TableCell,
    dom_id,
    row_cells,
)
from robench.report.leaderboard_columns import RANK_BY, REPLAYS
from robench.report.leaderboard_plots import dot_plot, scatter_plot
from robench.report.readings import readings_by_run, summarize
from robench.report.run_page import write_run_pages
from robench.report.svg import Plot
from robench.report.validity import COLUMNS as VALIDITY_COLUMNS
from robench.report.worstcase import worst_cases
from robench.runs.spec import TrainConfig

DEFAULT_BASELINE = "bert"  # verdicts are against it when --baseline is not given and the task has it


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
    _add_fluency(rows, records)
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
    cells = [row_cells(row, variants, names, baseline, certified, runs_dir, page_dir, run_pages) for row in rows]
    return Section(task=task, slug=dom_id(task), shared=shared, rank_by=rank_by, baseline=baseline,
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


def _add_fluency(rows: list[BoardRow], records: dict[str, RunRecord]) -> None:
    """Each row's LM-judged fluent share per attack variant (robench.engine.fluency), pooled over its seeds' runs
    (weighted by their successful examples); an estimate, shown beside any reading, never as validity."""
    for row in rows:
        for variant, runs in row.runs.items():
            got = [f for _, rid in runs if rid in records and isinstance(f := records[rid].metrics.get("fluency"), dict)
                   and f.get("lm_fluent_share") is not None]
            if scored := sum(f["scored"] for f in got):
                row.fluency[variant] = (sum(f["lm_fluent_share"] * f["scored"] for f in got) / scored, scored)


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
