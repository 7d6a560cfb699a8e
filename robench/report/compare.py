"""Per-setting confidence intervals and paired comparisons with a baseline, from the per-example CSVs.

`group_settings` gathers run records into settings (`robench.report.identity`), one record per (setting,
seed) by `robench.report.identity.one_per_seed`. `intervals` gives a setting's 95% intervals for clean
accuracy, accuracy under attack and attack success rate (crossed seeds x examples). `compare` pairs each
model's setting with the baseline model's at the same setting otherwise: the difference in accuracy under
attack over matched training seeds and the examples every seed of both attacked, its t interval and p-value
under crossed random seed and example effects, Holm's adjustment over the family of every comparison made,
and the verdict (`robench.report.stats`, docs/statistics.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable

from robench.core.errors import RobenchError
from robench.core.records import RunRecord, read_examples
from robench.report.identity import one_per_seed, peer_id, setting_id, setting_label
from robench.report.stats import (
    FAILED,
    INSUFFICIENT,
    INTERVAL_METRICS,
    LESS_ROBUST,
    MIN_SEEDS,
    MISSING,
    MORE_ROBUST,
    SAME,
    SKIPPED,
    SUCCESSFUL,
    Estimate,
    PairedTest,
    detectable_difference,
    holm,
    outcome_matrix,
    paired_test,
    proportion_intervals,
    verdict,
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
    """One Setting per setting id, in order of first appearance; one record per seed (`one_per_seed`)."""
    by_id: dict[str, list[RunRecord]] = {}
    for rec in one_per_seed(list(records)).kept:
        by_id.setdefault(setting_id(rec), []).append(rec)
    settings = []
    for sid, recs in by_id.items():
        ordered = tuple(sorted(recs, key=lambda r: r.spec["seed"]))
        settings.append(Setting(sid, setting_label(ordered[0]), peer_id(ordered[0]), ordered))
    return settings


def outcomes(runs_dir: Path, record: RunRecord) -> dict[int, int]:
    """Example index -> SKIPPED / FAILED / SUCCESSFUL, from the run's per-example CSV (errors left out)."""
    return {r.index: STATUS[r.status] for r in read_examples(runs_dir, record.run_id) if r.status in STATUS}


def intervals(setting: Setting, runs_dir: Path) -> dict[str, float]:
    """`<metric>_ci_low` / `<metric>_ci_high` for each metric the setting's records report."""
    codes = outcome_matrix([outcomes(runs_dir, r) for r in setting.records])
    if codes.size == 0:
        return {}
    reported = [metric for metric in INTERVAL_METRICS  # AdvGLUE: no clean accuracy, no success rate
                if any(r.metrics.get(metric) is not None for r in setting.records)]
    out: dict[str, float] = {}
    for metric, estimate in proportion_intervals(codes, reported).items():
        out[f"{metric}_ci_low"], out[f"{metric}_ci_high"] = estimate.low, estimate.high
    return out


@dataclass(frozen=True)
class Comparison:
    """A model against the baseline at one setting: accuracy under attack, model minus baseline."""

    setting: Setting
    baseline: Setting
    seeds: tuple[int, ...]  # training seeds both have, with shared examples
    examples: int  # examples every one of those seeds of both models attacked
    difference: Estimate  # 95% t interval, per comparison (nan without two seeds)
    p_value: float  # two-sided, unadjusted (nan without two seeds); closed form, no Monte-Carlo error
    adjusted_p: float = float("nan")  # Holm over the family (`compare`)
    family: int = 0  # comparisons in the family
    detectable: float = float("nan")  # the difference found with 80% power at ALPHA (one comparison)

    @property
    def verdict(self) -> str:
        """`robench.report.stats.verdict`: below MIN_SEEDS matched seeds "insufficient seeds", else the
        Holm-adjusted p-value at ALPHA."""
        if len(self.seeds) < MIN_SEEDS or math.isnan(self.adjusted_p):  # nan: no test
            return INSUFFICIENT
        return verdict(self.difference.value, self.adjusted_p, len(self.seeds))

    @property
    def significant(self) -> bool:
        return self.verdict in (MORE_ROBUST, LESS_ROBUST)


def compare(settings: list[Setting], runs_dir: Path, baseline: str) -> list[Comparison]:
    """Every non-baseline setting paired with each baseline setting that differs from it only in the model;
    the family is every comparison returned that has a p-value, and each gets its Holm-adjusted p-value."""
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
    return with_holm(out)


def nothing_compared(settings: list[Setting], baseline: str) -> str:
    """Why `compare` found nothing: no other model at a setting of the baseline, or no shared seed and example."""
    peers = {s.peer for s in settings if s.spec["model"] == baseline}
    if any(s.spec["model"] != baseline and s.peer in peers for s in settings):
        return (f"no shared examples: the models at a setting where {baseline} has runs share no training seed "
                f"with an attacked example in common with {baseline}'s (pairs are seed with seed, example with "
                "example)")
    return f"no other model has runs at a setting where {baseline} has"


def with_holm(comparisons: list[Comparison]) -> list[Comparison]:
    """`comparisons` with their Holm-adjusted p-values over the family of those that have a p-value."""
    tested = [i for i, c in enumerate(comparisons) if not math.isnan(c.p_value)]
    adjusted = dict(zip(tested, holm([comparisons[i].p_value for i in tested])))
    return [replace(c, adjusted_p=adjusted.get(i, float("nan")), family=len(tested))
            for i, c in enumerate(comparisons)]


def paired(setting: Setting, baseline: Setting, runs_dir: Path) -> Comparison | None:
    """`setting` against `baseline`, seed s with seed s, on the examples every matched seed of both attacked;
    None if they share no seed and example."""
    mine = {r.spec["seed"]: r for r in setting.records}
    theirs = {r.spec["seed"]: r for r in baseline.records}
    pairs = {}
    for seed in sorted(mine.keys() & theirs.keys()):
        if _eval_hash(mine[seed]) != _eval_hash(theirs[seed]):
            raise RobenchError(f"runs {mine[seed].run_id} and {theirs[seed].run_id} share a setting but were "
                               "attacked on different examples (did the data change?); re-run one with --force")
        a, b = outcomes(runs_dir, mine[seed]), outcomes(runs_dir, theirs[seed])
        if shared := {i: SAME + (a[i] == FAILED) - (b[i] == FAILED) for i in a.keys() & b.keys()}:
            pairs[seed] = shared
    if not pairs:
        return None
    codes = outcome_matrix(list(pairs.values()))
    test: PairedTest | None = paired_test(codes)
    if test is None:  # one seed: a difference, but no seed-level test
        complete = codes[:, (codes != MISSING).all(axis=0)]
        value = float((complete - SAME).mean()) if complete.size else float("nan")
        nan = float("nan")
        return Comparison(setting, baseline, tuple(pairs), complete.shape[1], Estimate(value, nan, nan), nan)
    return Comparison(setting, baseline, tuple(pairs), test.examples, test.difference, test.p_value,
                      detectable=detectable_difference(test.se, test.df))


def _eval_hash(record: RunRecord) -> str | None:
    return (record.resources.get("data") or {}).get("eval_indices_hash")
