"""Worst case over attacks, and gradient-masking flags (AutoAttack's checks, for text).

Worst case (RobustBench reports the best known attack): the runs of one trained
model (the same model setting, `robench.report.identity.model_setting_id`, and the same
training seed) are joined per example. Examples are matched by their eval-split
row AND their text: each run's per-example texts are mapped to rows of the eval
split it read (the record names the data dir and source; subsets keep the
split's order), so runs on different subset sizes meet on the examples they
share, whatever seed drew the subsets. Where that split cannot be read (another
machine's records), an example is keyed by its subset's size and seed, its
index in the subset and its text instead, which only matches runs on the same subset. When every run of a
task drew the same subset (size, seed and the recorded hash of its split rows), those keys join exactly the
examples rows would, and the split is not read (a report then needs no data and no `datasets`).
An example counts as robust only if no attack broke it (status "failed" in
every run; skipped = already wrong). Only examples with a non-error result in
every run are counted. AdvGLUE replay evaluates another split and is left out,
and so are records of an older format (as on the leaderboard).

Flags, after AutoAttack's checks (fra31/auto-attack, flags_doc.md):

* `zero_gradients`: the input gradient is zero or not finite on at least
  ZERO_GRADIENT_RATE of the clean inputs (a `gradient-swap` record's
  `gradient_check`; AutoAttack raises it for any input);
* `blackbox_stronger:<attack>`: a black-box or transfer attack leaves a lower
  accuracy than the strongest white-box attack on the same examples, beyond
  noise: the exact one-sided sign test on the examples one attack broke and the
  other did not has p < ALPHA (`robench.report.stats.exact_sign_pvalue`;
  conditional on the checkpoint, which is what the flag is about), so a one- or
  two-example difference does not raise it (AutoAttack: "Square Attack improves
  the robustness evaluation");
* `no_fall_with_budget:<attack>`: some examples survive the attack, and accuracy
  under attack at the run's full query budget (the most queries one example
  used) is not lower than at 1/8 of it. The curve comes from the per-example
  query counts of one run: the engine's greedy searches are deterministic and a
  budgeted run refuses the first request past the budget, so with budget B an
  example is broken iff the unbudgeted run broke it within B queries.

On the leaderboard a model setting's worst case is the mean over its seeds with
the design-effect Wilson interval over seeds x the examples every seed's join
kept (`robench.report.stats.binary_interval`), over the seeds that every eval-split
attack setting of the task reached (`complete_cases`): a worst case over fewer attacks
is not the same quantity. One record per (setting, seed)
(`robench.report.identity.one_per_seed`), as on the leaderboard.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np
import pandas as pd

from robench.core.errors import RobenchError
from robench.core.files import atomic_write
from robench.core.records import RECORD_FORMAT, RunRecord, examples_path, iter_records, read_examples
from robench.core.text import markdown_cell
from robench.core.types import ExampleResult
from robench.data.loading import split_rows
from robench.engine.metrics import budget_curve, budget_does_not_fall, masking_flags_of_run
from robench.engine.words import FIELD_SEPARATOR
from robench.report.identity import ModelSettings, one_per_seed
from robench.report.stats import ALPHA, binary_interval, exact_sign_pvalue

WHITE_BOX = ("gradient-swap",)  # recipes that use the model's gradients
NOT_ON_EVAL_SPLIT = ("advglue",)  # replays of another split: no per-example match
NO_BUDGET_CURVE = ("advglue", "transfer")  # replays: one or two queries per example
EXECUTION_PARAMS = ("concurrency", "encoder_batch_size", "mlm_batch_size")  # change speed, not results


def attack_tag(spec: dict[str, Any]) -> str:
    """The attack and its result-changing parameters: `gradient-swap[gradient=bpda]`."""
    params = {k: v for k, v in sorted((spec.get("attack_params") or {}).items()) if k not in EXECUTION_PARAMS}
    inner = ",".join(f"{k}={v}" for k, v in params.items())
    return f"{spec['attack']}[{inner}]" if inner else spec["attack"]


def _family(attack: str) -> str:
    return attack.partition(":")[0]


def is_white_box(spec: dict[str, Any]) -> bool:
    return _family(spec["attack"]) in WHITE_BOX


def model_key(record: RunRecord, ids: ModelSettings | None = None) -> str:
    """The trained model of a run: its model setting (`ModelSettings`) and training seed."""
    return f"{(ids or ModelSettings()).of_run(record)}-s{record.spec.get('seed')}"


class ExampleKeys:
    """Keys (eval-split row, text) of a run's examples; each eval split is read once, and only for a task whose
    `records` were not all drawn from one subset (on one subset, its keys join exactly what rows would)."""

    def __init__(self, records: Iterable[RunRecord] = ()) -> None:
        self._splits: dict[tuple, list[str] | None] = {}
        subsets: dict[str, set[tuple]] = defaultdict(set)
        for record in records:
            subsets[record.spec["task"]].add(_subset_of(record))
        self._one_subset = {task for task, seen in subsets.items() if len(seen) == 1 and next(iter(seen))[-1]}

    def split(self, record: RunRecord) -> list[str] | None:
        if record.spec["task"] in self._one_subset:
            return None
        data = (record.resources or {}).get("data") or {}
        where = (record.spec["task"], record.spec.get("data_source", "local"), data.get("data_dir"))
        if where not in self._splits:
            self._splits[where] = _split_texts(*where)
        return self._splits[where]

    def __call__(self, record: RunRecord, results: list[ExampleResult]) -> dict[tuple, ExampleResult]:
        ordered = sorted(results, key=lambda r: r.index)
        split = self.split(record)
        rows = split_rows(split, [r.original_text for r in ordered]) if split is not None else [None]
        if None not in rows:
            return {(row, r.original_text): r for row, r in zip(rows, ordered)}
        subset = (record.spec.get("eval_size"), record.spec.get("eval_seed"))
        return {("subset", *subset, r.index, r.original_text): r for r in ordered}


def _subset_of(record: RunRecord) -> tuple:
    """What fixes a run's eval subset: its size and seed, and the hash of the split rows it drew (None: not
    recorded, so the split is read)."""
    data = (record.resources or {}).get("data") or {}
    return record.spec.get("eval_size"), record.spec.get("eval_seed"), data.get("eval_indices_hash")


def _split_texts(task_name: str, source: str, data_dir: str | None) -> list[str] | None:
    from robench.data import TASKS
    from robench.data.loading import load_split, texts_of

    try:
        task = TASKS.get(task_name)
        data = load_split(task, "eval", Path(data_dir) if data_dir else None, source)
    except (RobenchError, OSError, ValueError):
        return None  # keyed by subset index and text instead (see the module docstring)
    return [FIELD_SEPARATOR.join(t) for t in texts_of(data, task)]


@dataclass
class WorstCase:
    """One trained model (model setting and training seed), over every attack run on it."""

    task: str
    model: str
    backbone: str
    train_size: str
    seed: int
    group: str  # the model setting (`robench.report.identity.model_setting_id`)
    examples: int  # examples with a non-error result in every run
    worst_case_accuracy: float | None
    accuracy: dict[str, float] = field(default_factory=dict)  # per attack label, on the same examples
    flags: list[str] = field(default_factory=list)
    runs: dict[str, str] = field(default_factory=dict)  # attack label -> run id
    # example key -> robust to every attack (the leaderboard's interval; not written to worstcase.json)
    robust: dict[tuple, bool] = field(default_factory=dict, repr=False)

    def summary(self) -> dict[str, Any]:
        """The JSON of worstcase.json: every field but the per-example outcomes."""
        return {k: v for k, v in asdict(self).items() if k != "robust"}


def run_labels(records: list[RunRecord]) -> list[str]:
    """`attack_tag` of each run; a tag two runs share (e.g. two subset sizes) gets its eval size and run id."""
    tags = [attack_tag(rec.spec) for rec in records]
    return [tag if tags.count(tag) == 1 else f"{tag} (eval {rec.spec.get('eval_size')}, {rec.run_id})"
            for tag, rec in zip(tags, records)]


def worst_case(members: list[tuple[RunRecord, list[ExampleResult]]], keys: ExampleKeys | None = None,
               ids: ModelSettings | None = None) -> WorstCase:
    """Join the runs of one trained model per example (eval-split row and text); flag masking."""
    spec, keys = members[0][0].spec, keys or ExampleKeys()
    labels = run_labels([rec for rec, _ in members])
    by_run = {label: {k: r for k, r in keys(rec, res).items() if r.status != "error"}
              for label, (rec, res) in zip(labels, members)}
    common = sorted(set.intersection(*(set(d) for d in by_run.values())), key=repr) if by_run else []
    joined = {label: {k: d[k] for k in common} for label, d in by_run.items()}
    accuracy = {label: _accuracy(list(d.values())) for label, d in joined.items()}
    robust = {k: all(d[k].status == "failed" for d in joined.values()) for k in common}
    train_size = "full" if spec.get("train_size") is None else str(spec["train_size"])
    return WorstCase(spec["task"], spec["model"], spec["backbone"], train_size, spec["seed"],
                     (ids or ModelSettings()).of_run(members[0][0]),
                     len(common), sum(robust.values()) / len(robust) if robust else None, accuracy,
                     _flags(members, labels, joined),
                     {label: rec.run_id for label, (rec, _) in zip(labels, members)}, robust)


def _accuracy(results: list[ExampleResult]) -> float | None:
    return sum(r.status == "failed" for r in results) / len(results) if results else None


def _flags(members: list[tuple[RunRecord, list[ExampleResult]]], labels: list[str],
           joined: dict[str, dict[tuple, ExampleResult]]) -> list[str]:
    flags: list[str] = []
    for label, (rec, results) in zip(labels, members):
        if "zero_gradients" in masking_flags_of_run(rec.metrics) and "zero_gradients" not in flags:
            flags.append("zero_gradients")
        if _family(rec.spec["attack"]) not in NO_BUDGET_CURVE and budget_does_not_fall(budget_curve(results)):
            flags.append(f"no_fall_with_budget:{label}")
    white = [label for label, (rec, _) in zip(labels, members) if is_white_box(rec.spec) and joined[label]]
    if not white:
        return flags
    strongest = min(white, key=lambda label: (_accuracy(list(joined[label].values())), label))
    for label, (rec, _) in zip(labels, members):
        if not is_white_box(rec.spec) and blackbox_stronger(joined[label], joined[strongest]):
            flags.append(f"blackbox_stronger:{label}")
    return flags


def blackbox_stronger(blackbox: dict[tuple, ExampleResult], whitebox: dict[tuple, ExampleResult]) -> bool:
    """Whether the black-box attack broke more of the shared examples than the white-box one, beyond noise:
    of the examples exactly one of them broke (status other than "failed"), the black-box attack's share is
    above 1/2 by the exact one-sided sign test at ALPHA."""
    shared = blackbox.keys() & whitebox.keys()
    more = sum(blackbox[k].status != "failed" and whitebox[k].status == "failed" for k in shared)
    fewer = sum(blackbox[k].status == "failed" and whitebox[k].status != "failed" for k in shared)
    return exact_sign_pvalue(more, fewer) < ALPHA


def worst_cases(runs_dir: Path, records: list[RunRecord] | None = None) -> list[WorstCase]:
    """Every trained model of `runs_dir` with at least one attack on the eval split; `records`: its current-format
    records, one per (setting, seed) (read from `runs_dir` when None)."""
    if records is None:
        records = one_per_seed([r for r in iter_records(runs_dir) if r.format == RECORD_FORMAT]).kept
    ids = ModelSettings(records)
    groups: dict[str, list[tuple[RunRecord, list[ExampleResult]]]] = defaultdict(list)
    for rec in records:
        if _family(rec.spec["attack"]) in NOT_ON_EVAL_SPLIT or not examples_path(runs_dir, rec.run_id).is_file():
            continue
        groups[model_key(rec, ids)].append((rec, read_examples(runs_dir, rec.run_id)))
    keys = ExampleKeys(rec for members in groups.values() for rec, _ in members)
    cases = [worst_case(sorted(m, key=lambda x: attack_tag(x[0].spec)), keys, ids) for m in groups.values()]
    return sorted(cases, key=lambda c: (c.task, c.model, c.backbone, c.train_size, c.seed, c.group))


def worst_case_frame(cases: list[WorstCase]) -> pd.DataFrame:
    rows = [{**{k: v for k, v in c.summary().items() if k not in ("accuracy", "flags", "runs")},
             "attacks": ";".join(sorted(c.accuracy)), "masking_flags": ";".join(c.flags)} for c in cases]
    return pd.DataFrame(rows)


def with_worst_case(table: pd.DataFrame, cases: list[WorstCase]) -> pd.DataFrame:
    """Leaderboard rows plus the worst-case accuracy of their model setting (mean, std over seeds, and the 95%
    interval over seeds and examples) and its flags."""
    if not cases or "model_setting_id" not in table.columns:
        return table
    frame, complete = worst_case_frame(cases), complete_cases(cases)
    extra = (worst_case_frame(complete).groupby("group")["worst_case_accuracy"].agg(["mean", "std"])
             if complete else pd.DataFrame(columns=["mean", "std"]))
    extra = extra.reindex(sorted(frame["group"].unique())).add_prefix("worst_case_accuracy_")
    bounds = {group: worst_case_interval([c for c in complete if c.group == group]) for group in extra.index}
    extra["worst_case_accuracy_ci_low"] = [bounds[g][0] for g in extra.index]
    extra["worst_case_accuracy_ci_high"] = [bounds[g][1] for g in extra.index]
    extra["masking_flags"] = frame.groupby("group")["masking_flags"].agg(
        lambda flags: ";".join(sorted({f for fs in flags for f in fs.split(";") if f})))
    extra.index.name = "group"
    extra = extra.reset_index().rename(columns={"group": "model_setting_id"})
    return table.merge(extra, on="model_setting_id", how="left")


def complete_cases(cases: list[WorstCase]) -> list[WorstCase]:
    """The trained models that every eval-split attack setting of their task reached: a worst case over fewer
    attacks than the other rows' is not comparable with theirs, so the leaderboard leaves it out (the row then
    has no worst case until its missing attacks land; worstcase.json still lists it with the attacks it has)."""
    def attacks(case: WorstCase) -> set[str]:
        return {label.partition(" (eval ")[0] for label in case.accuracy}

    per_task: dict[str, set[str]] = defaultdict(set)
    for case in cases:
        per_task[case.task] |= attacks(case)
    return [case for case in cases if attacks(case) == per_task[case.task]]


def worst_case_interval(cases: list[WorstCase]) -> tuple[float, float]:
    """The 95% interval of a model setting's worst case: its seeds x the examples every seed's join kept."""
    shared = set.intersection(*(set(c.robust) for c in cases)) if cases else set()
    if not shared:
        return float("nan"), float("nan")
    order = sorted(shared, key=repr)
    estimate = binary_interval(np.array([[c.robust[k] for k in order] for c in cases]))
    return estimate.low, estimate.high


def markdown(cases: list[WorstCase]) -> str:
    lines = ["| task | model | backbone | train_size | seed | examples | worst case | per attack | flags |",
             "|---|---|---|---|---|---|---|---|---|"]
    for c in cases:
        per = ", ".join(f"{a} {100 * v:.1f}" for a, v in c.accuracy.items() if v is not None)
        wc = "–" if c.worst_case_accuracy is None else f"{100 * c.worst_case_accuracy:.1f}"
        cells = [c.task, c.model, c.backbone, c.train_size, c.seed, c.examples, wc, per, "; ".join(c.flags) or "–"]
        lines.append("| " + " | ".join(markdown_cell(cell) for cell in cells) + " |")  # names come from users
    return "\n".join(lines) + "\n"


def write_worst_case(results_dir: Path, records: list[RunRecord] | None = None,
                     runs_dir: Path | None = None) -> list[WorstCase]:
    """`<results_dir>/worstcase.{json,md}`: one entry per trained model (model setting and training seed) of
    `runs_dir` (default `<results_dir>/runs`); `records` as for `worst_cases`."""
    import json

    cases = worst_cases(runs_dir or results_dir / "runs", records)
    atomic_write(results_dir / "worstcase.json", json.dumps([c.summary() for c in cases], indent=2))
    atomic_write(results_dir / "worstcase.md", markdown(cases))
    return cases
