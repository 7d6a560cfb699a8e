"""Aggregate run records into a leaderboard: one row per checkpoint, mean ± std over training seeds, and 95%
intervals over seeds and examples.

Two tables, written by one call (`write_leaderboard`; their columns are named in `leaderboard_columns`, their
Markdown written by `leaderboard_markdown`):

* `leaderboard.{csv,md}`: one row per **checkpoint** (task and `model_setting_id`, the checkpoint's identity,
  `robench.report.identity`), ranked within its task as the HTML page ranks (`rank_checkpoints`). The AdvGLUE
  replay and the word-level attacks of one model are columns of one row. The page shows the same table
  (`robench.report.leaderboard_page`).
* `settings.{csv,md}`: one row per **setting** (the whole spec but the training seed), for machines: the long
  table the checkpoint table is pivoted from; rows of one checkpoint share `model_setting_id`.

`leaderboard.csv` columns. Per checkpoint: `task` (`NAME@DATA` where records of one task name read different
data: `task_names`), `rank` (1 = best; equal values share a rank; empty
without a value or while some attack setting of its task has no result for it), `rank_by`
(`worst_case_accuracy`, or `lowest_robust_accuracy` where some complete checkpoint of the task has no worst
case), `rank_accuracy` (the value ranked by), `model`, `model_label` (what its setting differs in from the
defaults), `backbone`, `train_size`, `seeds` (training seeds over all its runs), `untrained_seeds` (those
whose checkpoint did not train, `robench.runs.chance`; the column only when some did; also in `settings.csv`),
`dev_accuracy_{mean,std}` (the whole dev split, over those seeds; no interval: records keep no per-example
dev predictions), `train_seconds_{mean,std}`, `worst_case_accuracy_{mean,std,ci_low,ci_high}` and
`masking_flags` (`robench.report.worstcase`), `certified_accuracy_*` (defences with a certificate, from its
first attack setting that records one), `model_setting_id`, with a baseline `baseline`, and with
`--with-analysis` the analysis columns (`ANALYSIS_METRICS`, mean and std, and `analysis_seeds`). Then, per
attack setting, columns prefixed with the setting's name and a dot (`setting_names`: the attack's name, e.g.
`textfooler.robust_accuracy_mean`, or the attack setting's label where one attack has several settings):
`attack_label`, `seeds`, `examples` (attacked per seed), each per-setting metric of `METRICS` as `_mean`,
`_std` and, where per-example data give one, the 95% interval `_ci_low`, `_ci_high` (`robust_accuracy`,
`clean_accuracy` on the attacked examples, `attack_success_rate`, `accuracy_drop`, `dev_minus_robust`,
`perturbed_word_rate`, the validity rates, `avg_words_per_input`, `avg_queries`), `setting_id`, and with a
baseline the DIFF columns (paired difference in accuracy under attack from the baseline, its interval, p,
Holm p, matched seeds, verdict, family size). A prefixed column that no checkpoint has a value in is left out.

`settings.csv` columns: ROW, then every metric's `_mean`, `_std` (and `_ci_low`, `_ci_high`), LABELS, IDS,
with a baseline `baseline` and DIFF (before `setting_id`), the worst case and masking flags of the row's
checkpoint, and the analysis columns.

Clean accuracy, accuracy under attack, attack success rate and the worst case get 95% intervals over seeds x
examples from the per-example CSVs, and with a baseline model each setting gets the paired difference in
accuracy under attack, its Holm-adjusted p-value over the family and the verdict (`robench.report.compare`,
docs/guide/statistics.md). Records that do not verify (`robench.report.verify`) are skipped with a warning, records of
an older format are skipped, and one record is kept per (setting, seed), the
newest (`Records.note` says how many, and where).

Units: every accuracy, drop and rate in both CSVs is a fraction in [0, 1] (the Markdown shows them in percent);
`avg_words_per_input` counts words, `avg_queries` model queries per attacked example, `train_seconds` seconds.
"""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from robench.core.errors import RobenchError
from robench.core.files import atomic_write
from robench.core.hashing import content_hash
from robench.core.packed import runs_to_read
from robench.core.records import RECORD_FORMAT, RunRecord, iter_records
from robench.core.text import csv_name
from robench.report.compare import Comparison, Published, Setting, compare, group_settings, intervals
from robench.report.identity import ModelSettings, attack_label, model_label, one_per_seed, setting_id, setting_label
from robench.report.leaderboard_columns import (
    ANALYSIS_KEYS,
    ANALYSIS_METRICS,
    CHECKPOINT,
    DIFF,
    IDS,
    KEYS,
    LABELS,
    METRICS,
    OWN,
    REPLAYS,
    ROW,
)
from robench.report.leaderboard_markdown import (
    checkpoint_markdown,
    setting_markdown,
)
from robench.report.reference import BASELINE, published_among
from robench.report.stats import INTERVAL_METRICS
from robench.report.untrained import untrained_runs
from robench.report.validity import validity_columns
from robench.report.verify import record_fault
from robench.report.worstcase import WorstCase, with_worst_case, write_worst_case

log = logging.getLogger(__name__)


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
    """The records of `runs_dir` that verify (`robench.report.verify.record_fault`; one that does not is skipped
    with a warning naming why), one per (setting, seed)."""
    current, older = [], 0
    for rec in iter_records(runs_dir):
        if rec.format != RECORD_FORMAT:
            older += 1
        elif (fault := record_fault(rec, runs_dir)) is not None:
            log.warning("skipping run record %s: %s; re-run it (or delete it)", rec.run_id, fault)
        else:
            current.append(rec)
    if not current and not older:
        if present := len(list(Path(runs_dir).glob("*.json"))):
            raise RobenchError(f"none of the {present} record file(s) in {runs_dir} is a usable run record (the "
                               "warnings above say why): re-run those runs with --force, or restore their files")
        raise RobenchError(f"no run records in {runs_dir}; run `robench run` first")
    chosen = one_per_seed(current)
    return Records(runs_dir, chosen.kept, older, tuple((d.run_id, k.run_id) for d, k in chosen.replaced))


def records_frame(runs_dir: Path) -> pd.DataFrame:
    """One row per current-format run record: its setting, seed, metrics and training time."""
    return frame_of(load_records(runs_dir).current)


def frame_of(records: list[RunRecord]) -> pd.DataFrame:
    ids = ModelSettings(records)  # the checkpoint's identity (AdvGLUE records take their checkpoint's)
    tasks = task_names(records)
    rows = []
    for rec in records:
        row = {k: rec.spec.get(k) for k in KEYS}
        row["task"] = tasks[rec.run_id]
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


def task_names(records: list[RunRecord]) -> dict[str, str]:
    """Each record's task as the tables name it (by run id): its name, or `name@DATA` (the first 8 characters of
    its data's fingerprint) where records of one task name read different data (two task files named alike), so
    they are never ranked, aggregated or compared as one task."""
    data = {rec.run_id: task_data(rec) for rec in records}
    variants: dict[str, set[str]] = {}
    for rec in records:
        if data[rec.run_id] is not None:
            variants.setdefault(rec.spec.get("task"), set()).add(data[rec.run_id])
    return {rec.run_id: f"{rec.spec.get('task')}@{data[rec.run_id][:8]}"
            if len(variants.get(rec.spec.get("task"), ())) > 1 and data[rec.run_id] is not None
            else rec.spec.get("task") for rec in records}


def task_data(record: RunRecord) -> str | None:
    """The identity of the task data `record` was trained and evaluated on: a task file's train and eval files'
    hashes, else the data fingerprint without the attack's own files; None for records that name neither."""
    source = record.spec.get("task_source")
    if isinstance(source, dict) and isinstance(source.get("sha256"), dict):
        return content_hash({k: source["sha256"].get(k) for k in ("train", "eval")})
    return (record.resources.get("data") or {}).get("train_fingerprint")


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


def with_untrained(table: pd.DataFrame, frame: pd.DataFrame, keys: list[str], untrained: dict[str, str]
                   ) -> pd.DataFrame:
    """`untrained_seeds` after `seeds`: per group of `keys`, the training seeds of its runs whose checkpoint did not
    train (`robench.runs.chance`), e.g. "2 4"; the column only when some run did not."""
    failed = frame[frame["run_id"].isin(untrained)]
    if failed.empty:
        return table
    seeds = failed.groupby(keys)["seed"].agg(lambda s: " ".join(str(int(x)) for x in sorted(set(s))))
    table = table.copy()
    column = [seeds.get(tuple(k) if len(keys) > 1 else k[0], "") for k in table[keys].itertuples(index=False)]
    table.insert(table.columns.get_loc("seeds") + 1, "untrained_seeds", column)
    return table


def with_baseline(table: pd.DataFrame, settings: list[Setting], runs_dir: Path, baseline: str,
                  untrained: dict[str, str] | None = None, published: Published | None = None) -> pd.DataFrame:
    """`baseline` and the DIFF columns: accuracy under attack of the row's model minus the baseline's, at the
    same setting otherwise (paired over matched seeds and shared examples), the unadjusted and Holm-adjusted
    p-values, the matched seeds, the verdict (`Comparison.verdict_text`), the family's size and name and the
    verdict's and the unadjusted test's detectable differences; empty for the baseline's rows. `published`: the
    shipped protocol the records hold (`robench.report.compare.published_families`)."""
    found: dict[str, list[Comparison]] = {}
    for c in compare(settings, runs_dir, baseline, untrained, published):
        found.setdefault(c.setting.id, []).append(c)
    cells = [weakest(found.get(sid, [])) for sid in table["setting_id"]]
    values = [(c.difference.value, c.difference.low, c.difference.high, c.p_value, c.adjusted_p, len(c.seeds),
               verdict, c.family, c.family_name, c.detectable_adjusted, c.detectable) if c else
              (None,) * len(DIFF) for c, verdict in cells]
    table = table.copy()
    at = table.columns.get_loc("setting_id")
    table.insert(at, "baseline", baseline)
    for offset, name in enumerate(DIFF, 1):
        table.insert(at + offset, name, [v[offset - 1] for v in values])
    return table


def weakest(comparisons: list[Comparison]) -> tuple[Comparison | None, str | None]:
    """The comparison a setting's row shows, with its verdict as printed. A checkpoint of your own run at several
    seeds has one comparison per seed (`robench.report.compare.single`); its row shows the weakest of them, the
    largest Holm-adjusted p-value (a verdict the row states holds at every seed), and says so."""
    if not comparisons:
        return None, None
    shown = max(comparisons, key=lambda c: 2.0 if c.adjusted_p is None else c.adjusted_p)
    if len(comparisons) == 1:
        return shown, shown.verdict_text
    which = f"seed {shown.setting.records[0].spec['seed']}, " if shown.single else ""
    return shown, f"{shown.verdict_text} ({which}the weakest of {len(comparisons)} comparisons; each: robench compare)"


@dataclass(frozen=True)
class Tables:
    """The two leaderboards of one set of records (see the module docstring for their columns)."""

    checkpoints: pd.DataFrame  # leaderboard.csv and the HTML page: one row per checkpoint, ranked
    settings: pd.DataFrame  # settings.csv: one row per setting


def leaderboard_tables(records: Records, baseline: str | None = None,
                       cases: list[WorstCase] | None = None) -> Tables:
    """The leaderboards of `records`: per setting `aggregate`, then intervals, then the comparison with
    `baseline` (over a shipped protocol's records, `robench.report.reference.published_among`, its published
    verdicts stay as published: `robench.report.compare.published_families`); per checkpoint the pivot of that
    (`checkpoint_table`), ranked; both with the worst case of `cases` (`robench.report.worstcase.worst_cases`)."""
    frame = frame_of(records.current)
    if frame.empty:
        return Tables(pd.DataFrame(columns=CHECKPOINT[:2] + ["model", "backbone", "train_size", "model_setting_id"]),
                      pd.DataFrame(columns=ROW + IDS))
    groups = group_settings(records.current)
    untrained = untrained_runs(records.current, records.runs_dir)
    settings = with_untrained(with_intervals(aggregate(frame), groups, records.runs_dir), frame, ["setting_id"],
                              untrained)
    if baseline:
        published = published_among(records.current) if baseline == BASELINE else None
        settings = with_baseline(settings, groups, records.runs_dir, baseline, untrained, published)
    checkpoints = checkpoint_table(frame, settings)
    checkpoints = with_untrained(checkpoints, frame, ["task", "model_setting_id"], untrained)
    checkpoints = rank_checkpoints(with_worst_case(checkpoints, cases or []))
    lead = [c for c in CHECKPOINT if c in checkpoints.columns]
    checkpoints = checkpoints[lead + [c for c in checkpoints.columns if c not in lead]]
    return Tables(checkpoints, with_worst_case(settings, cases or []))


def setting_names(table: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """Each attack setting of `table` (its `attack` and `attack_label` columns) by the name that prefixes its
    columns in the checkpoint table, in column order (replays first, then by attack and label): the attack's
    name where it has one setting, else the setting's label (`textfooler[k=20] eval=10`)."""
    variants = sorted(set(zip(table["attack"], table["attack_label"])), key=lambda v: (v[0] not in REPLAYS, v))
    attacks = [attack for attack, _ in variants]
    return {attack if attacks.count(attack) == 1 else
            label if label.startswith(f"{attack}[") else f"{attack} {label}".strip(): (attack, label)
            for attack, label in variants}


def checkpoint_table(frame: pd.DataFrame, settings: pd.DataFrame) -> pd.DataFrame:
    """One row per checkpoint (task and `model_setting_id`) of the per-setting `settings` made from the runs
    `frame`: seeds, dev accuracy and training time over the seeds of all its runs, certified accuracy from its
    first setting that has one, then each attack setting's columns prefixed with its name (`setting_names`);
    prefixed columns without any value are left out. Unranked."""
    keys = ["task", "model_setting_id"]
    per_seed = frame.drop_duplicates(keys + ["seed"]).reindex(columns=[*frame.columns, *(
        m for m in OWN if m not in frame.columns)])  # a record without dev accuracy (robench.evaluate) has none
    table = mean_std(per_seed, keys, OWN, "seeds")
    names = ["model", "model_label", "backbone", "train_size"] + (["baseline"] if "baseline" in settings else [])
    table = table.merge(settings.drop_duplicates(keys)[keys + names], on=keys, how="left")
    if "certified_accuracy_mean" in settings.columns:
        certified = [c for c in settings.columns if c.startswith("certified_accuracy_")]
        first = settings.dropna(subset=["certified_accuracy_mean"]).drop_duplicates(keys)
        table = table.merge(first[keys + certified], on=keys, how="left")
    metrics = [m for m in METRICS if m not in OWN + ["certified_accuracy", "worst_case_accuracy"]]
    columns = ["attack_label", "seeds", "examples"] + [f"{m}_{stat}" for m in metrics
                                                       for stat in ("mean", "std", "ci_low", "ci_high")] + \
        ["setting_id"] + DIFF
    parts = []
    for name, (attack, label) in setting_names(settings).items():
        rows = settings[(settings["attack"] == attack) & (settings["attack_label"] == label)]
        if rows.duplicated(keys).any():
            raise RobenchError(f"two attack settings of one checkpoint share the label {attack} {label!r}; "
                               "give them different attack parameters or eval sizes")
        part = rows.set_index(keys)[[c for c in columns if c in rows.columns]].add_prefix(f"{name}.")
        parts.append(part.dropna(axis=1, how="all"))
    return table.join(pd.concat(parts, axis=1), on=keys)


def headline_columns(rows: pd.DataFrame, columns: list[str]) -> list[str]:
    """Of `columns` (`<setting name>.robust_accuracy_mean`), per attack setting up to its eval size (the name
    without `eval=N`), the one on the most examples per seed (`<setting name>.examples`): one eval set per
    setting ranks the board."""
    best: dict[str, tuple[float, str]] = {}
    for column in columns:
        name = column.removesuffix(".robust_accuracy_mean")
        key = re.sub(r"\s*\beval=\d+", "", name).strip()
        examples = pd.to_numeric(rows.get(f"{name}.examples", pd.Series(dtype=float))).max()
        size = float(examples) if pd.notna(examples) else 0.0
        if key not in best or size > best[key][0]:
            best[key] = (size, column)
    chosen = {column for _, column in best.values()}
    return [c for c in columns if c in chosen]


def rank_checkpoints(table: pd.DataFrame) -> pd.DataFrame:
    """`table` (one row per checkpoint) sorted by task and rank, with `rank`, `rank_by` and `rank_accuracy`:
    within a task, by worst-case accuracy under attack where every checkpoint has one, else by the lowest
    accuracy under a single attack; highest first, ties in order of dev accuracy, model, `model_setting_id`;
    equal values share a rank. Of one attack setting at several eval sizes only the largest counts
    (`headline_columns`): a smaller run neither sets a rank nor leaves the others unranked. A checkpoint without
    a value, or without a result under some attack setting of its task (its runs are still to land), has no rank
    and comes last. The page's order."""
    robust = [c for c in table.columns if c.endswith(".robust_accuracy_mean")]
    parts = []
    for _, rows in table.groupby("task", sort=True):
        attacked = rows[headline_columns(rows, [c for c in robust if rows[c].notna().any()])].apply(pd.to_numeric)
        complete = attacked.notna().all(axis=1)  # every attack setting of the task: else no rank yet
        worst = ("worst_case_accuracy_mean" in rows.columns
                 and rows.loc[complete, "worst_case_accuracy_mean"].notna().all())
        value = pd.to_numeric(rows["worst_case_accuracy_mean"] if worst else attacked.min(axis=1)).astype(float)
        value = value.where(complete)
        order = pd.DataFrame({"missing": value.isna(), "value": -value.fillna(0.0),
                              "dev": -pd.to_numeric(rows["dev_accuracy_mean"]).fillna(0.0),
                              "model": rows["model"].astype(str), "key": rows["model_setting_id"].astype(str)})
        index = order.sort_values(list(order.columns), kind="stable").index
        known = value.dropna().to_numpy()
        rank = [pd.NA if pd.isna(v) else 1 + int((known > v + 1e-12).sum()) for v in value[index]]
        parts.append(rows.loc[index].assign(rank=pd.array(rank, dtype="Int64"),
                                            rank_by="worst_case_accuracy" if worst else "lowest_robust_accuracy",
                                            rank_accuracy=value[index]))
    return pd.concat(parts, ignore_index=True) if parts else table.assign(rank=None, rank_by=None, rank_accuracy=None)


def with_analysis(table: pd.DataFrame, analyses: pd.DataFrame) -> pd.DataFrame:
    """`table` (either leaderboard table) plus mean and std over seeds of each analysis metric, and
    `analysis_seeds`, joined on the checkpoint (an analysis does not depend on the attack)."""
    extra = mean_std(analyses, ANALYSIS_KEYS, ANALYSIS_METRICS, "analysis_seeds")
    return table.merge(extra, on=ANALYSIS_KEYS, how="left")


def csv_text(table: pd.DataFrame) -> str:
    """`table` as CSV, every text cell and header safe from spreadsheet formula injection and row splitting
    (`robench.core.text.csv_name`): names come from records."""
    text_columns = [c for c in table.columns if not pd.api.types.is_numeric_dtype(table[c])]
    safe = table.assign(**{c: table[c].map(csv_name) for c in text_columns})
    return safe.rename(columns=csv_name).to_csv(index=False, float_format="%.6f")


def write_leaderboard(results_dir: Path, analyses: pd.DataFrame | None = None, baseline: str | None = None,
                      cache_dir: Path | None = None, output: Path | None = None) -> tuple[pd.DataFrame, Path, Path]:
    """Write `<results_dir>/leaderboard.{csv,md}` (one row per checkpoint) and `settings.{csv,md}` (one row per
    setting) from `<results_dir>/runs`, and `worstcase.{json,md}`; return the checkpoint table and the paths of
    `leaderboard.csv` and `leaderboard.md`. `analyses`: `robench.analysis.analysis_frame`'s rows, joined to both
    tables on the checkpoint (`leaderboard --with-analysis`). A packed `results_dir` is read from its unpacked copy
    under `cache_dir` (`robench.core.packed`). `output`: the folder written to instead of `results_dir`
    (`leaderboard --output DIR`)."""
    records = load_records(runs_to_read(results_dir, cache_dir))
    results_dir = Path(output) if output is not None else results_dir
    results_dir.mkdir(parents=True, exist_ok=True)
    tables = leaderboard_tables(records, baseline, write_worst_case(results_dir, records.current, records.runs_dir))
    checkpoints, settings = tables.checkpoints, tables.settings
    if analyses is not None:
        checkpoints, settings = with_analysis(checkpoints, analyses), with_analysis(settings, analyses)
    for name, table, text in (("settings", settings, setting_markdown(settings)),
                              ("leaderboard", checkpoints, checkpoint_markdown(checkpoints))):
        atomic_write(results_dir / f"{name}.csv", csv_text(table))
        atomic_write(results_dir / f"{name}.md", text)
    return checkpoints, results_dir / "leaderboard.csv", results_dir / "leaderboard.md"
