"""Per-setting confidence intervals and paired comparisons with a baseline, from the per-example CSVs.

`group_settings` gathers run records into settings (`robench.report.identity`). `intervals` gives a setting's
95% two-level bootstrap intervals for clean accuracy, accuracy under attack and attack success rate.
`compare` pairs each model's setting with the baseline model's at the same setting otherwise: the
difference in accuracy under attack over the shared examples of matched training seeds, its paired
bootstrap interval and a paired permutation test (`robench.report.stats`, docs/statistics.md).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from robench.core.errors import RobenchError
from robench.core.records import RunRecord, read_examples
from robench.report.identity import peer_id, setting_id, setting_label
from robench.report.stats import (
    FAILED,
    METRICS,
    SAME,
    SKIPPED,
    SUCCESSFUL,
    Estimate,
    bootstrap_interval,
    bootstrap_intervals,
    outcome_matrix,
    paired_difference,
    paired_permutation_pvalue,
)

STATUS = {"skipped": SKIPPED, "failed": FAILED, "successful": SUCCESSFUL}  # "error" rows are left out


@dataclass(frozen=True)
class Setting:
    id: str
    label: str  # what differs from the defaults (robench.report.identity.setting_label)
    peer: str  # the setting without the model (robench.report.identity.peer_id)
    records: tuple[RunRecord, ...]  # one per training seed, by seed

    @property
    def spec(self) -> dict:
        return self.records[0].spec

    @property
    def seeds(self) -> list[int]:
        return [r.spec["seed"] for r in self.records]


def group_settings(records: Iterable[RunRecord]) -> list[Setting]:
    """One Setting per setting id, in order of first appearance; the newest record wins per seed."""
    by_id: dict[str, dict[int, RunRecord]] = {}
    for rec in sorted(records, key=lambda r: r.created):
        by_id.setdefault(setting_id(rec), {})[rec.spec["seed"]] = rec
    settings = []
    for sid, by_seed in by_id.items():
        recs = tuple(by_seed[s] for s in sorted(by_seed))
        settings.append(Setting(sid, setting_label(recs[0]), peer_id(recs[0]), recs))
    return settings


def outcomes(runs_dir: Path, record: RunRecord) -> dict[int, int]:
    """Example index -> SKIPPED / FAILED / SUCCESSFUL, from the run's per-example CSV (errors left out)."""
    return {r.index: STATUS[r.status] for r in read_examples(runs_dir, record.run_id) if r.status in STATUS}


def intervals(setting: Setting, runs_dir: Path) -> dict[str, float]:
    """`<metric>_ci_low` / `<metric>_ci_high` for each metric the setting's records report."""
    codes = outcome_matrix([outcomes(runs_dir, r) for r in setting.records])
    if codes.size == 0:
        return {}
    reported = {metric: statistic for metric, statistic in METRICS.items()  # AdvGLUE: no clean acc., success rate
                if any(r.metrics.get(metric) is not None for r in setting.records)}
    out: dict[str, float] = {}
    for metric, estimate in bootstrap_intervals(codes, reported).items():
        out[f"{metric}_ci_low"], out[f"{metric}_ci_high"] = estimate.low, estimate.high
    return out


@dataclass(frozen=True)
class Comparison:
    """A model against the baseline at one setting: accuracy under attack, model minus baseline."""

    setting: Setting
    baseline: Setting
    seeds: tuple[int, ...]  # training seeds both have
    examples: int  # shared examples per seed
    difference: Estimate
    p_value: float

    @property
    def significant(self) -> bool:
        return not self.difference.contains(0.0)

    @property
    def verdict(self) -> str:
        if not self.significant:
            return "not distinguishable from the baseline"
        return "more robust than the baseline" if self.difference.value > 0 else "less robust than the baseline"


def compare(settings: list[Setting], runs_dir: Path, baseline: str) -> list[Comparison]:
    """Every non-baseline setting paired with each baseline setting that differs from it only in the model."""
    bases: dict[str, list[Setting]] = {}
    for s in settings:
        if s.spec["model"] == baseline:
            bases.setdefault(s.peer, []).append(s)
    if not bases:
        models = sorted({s.spec["model"] for s in settings})
        raise RobenchError(f"no run records of the baseline model {baseline!r} (models with records: {models})")
    out = []
    for s in settings:
        if s.spec["model"] != baseline:
            out += [c for b in bases.get(s.peer, []) if (c := paired(s, b, runs_dir)) is not None]
    return out


def paired(setting: Setting, baseline: Setting, runs_dir: Path) -> Comparison | None:
    """`setting` against `baseline` on the examples both attacked, seed by seed; None if they share none."""
    mine = {r.spec["seed"]: r for r in setting.records}
    theirs = {r.spec["seed"]: r for r in baseline.records}
    seeds = tuple(sorted(mine.keys() & theirs.keys()))
    pairs = []
    for seed in seeds:
        if _eval_hash(mine[seed]) != _eval_hash(theirs[seed]):
            raise RobenchError(f"runs {mine[seed].run_id} and {theirs[seed].run_id} share a setting but were "
                               "attacked on different examples (did the data change?); re-run one with --force")
        a, b = outcomes(runs_dir, mine[seed]), outcomes(runs_dir, theirs[seed])
        pairs.append({i: SAME + (a[i] == FAILED) - (b[i] == FAILED) for i in a.keys() & b.keys()})
    if not any(pairs):
        return None
    codes = outcome_matrix(pairs)
    return Comparison(setting, baseline, seeds, min(len(p) for p in pairs),
                      bootstrap_interval(codes, paired_difference), paired_permutation_pvalue(codes))


def _eval_hash(record: RunRecord) -> str | None:
    return (record.resources.get("data") or {}).get("eval_indices_hash")
