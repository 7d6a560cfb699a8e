"""Per-setting confidence intervals and paired comparisons with a baseline, from the per-example CSVs.

`group_settings` gathers run records into settings (`robench.report.identity`), one record per (setting,
seed) by `robench.report.identity.one_per_seed`. `intervals` gives a setting's 95% intervals for clean
accuracy, accuracy under attack and attack success rate (crossed seeds x examples). `compare` pairs each
model's setting with the baseline model's at the same setting otherwise: the difference in accuracy under
attack over matched training seeds and the examples every seed of both attacked, its t interval and p-value
under crossed random seed and example effects, Holm's adjustment over the family of every comparison made,
and the verdict (`robench.report.stats`, docs/guide/statistics.md).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Iterable, Mapping

from robench.core.errors import RobenchError
from robench.core.records import RunRecord, read_examples
from robench.report.identity import attack_setting_id, one_per_seed, peer_id, setting_id, setting_label
from robench.report.single import single_arrays
from robench.report.stats import (
    FAILED,
    INSUFFICIENT,
    INTERVAL_METRICS,
    LESS_ROBUST,
    MIN_SEEDS,
    MISSING,
    MORE_ROBUST,
    NO_SHARED_EXAMPLES,
    NO_SHARED_SEEDS,
    NO_VARIATION,
    SAME,
    SKIPPED,
    SUCCESSFUL,
    TOO_FEW_EXAMPLES,
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
    seeds: tuple[int, ...]  # training seeds both have (empty: no shared seed labels)
    examples: int  # examples every one of those seeds of both models attacked
    difference: Estimate  # 95% interval, per comparison (nan without a test)
    p_value: float  # two-sided, unadjusted (nan without a test); deterministic quadrature, no Monte-Carlo error
    adjusted_p: float = float("nan")  # Holm over the family (`compare`)
    family: int = 0  # comparisons in the family
    test: PairedTest | None = None  # the paired test (None below two seeds or two examples, and for `single`)
    excluded: tuple[int, ...] = ()  # seeds left out: either model's checkpoint did not train (`untrained`)
    single: bool = False  # one given checkpoint against the baseline's seeds (`seeds`: the baseline's), `single`
    single_detectable: float = float("nan")  # `single`: the difference its test finds with 80% power

    @property
    def detectable(self) -> float:
        """The difference the test finds with 80% power at ALPHA (one comparison; nan without a test)."""
        if self.single:
            return self.single_detectable
        return self.test.detectable if self.test is not None and self.test.varies else float("nan")

    @property
    def verdict(self) -> str:
        """No shared seeds, no shared examples, too few examples (under two), insufficient seeds (under MIN_SEEDS),
        no variation (every cell alike: no interval), or `robench.report.stats.verdict` on the Holm-adjusted p-value."""
        if not self.seeds:
            return INSUFFICIENT if self.excluded else NO_SHARED_SEEDS
        if self.examples == 0 and not self.single:
            return NO_SHARED_EXAMPLES
        if self.examples < 2:
            return TOO_FEW_EXAMPLES
        if len(self.seeds) < MIN_SEEDS:
            return INSUFFICIENT
        if math.isnan(self.p_value):
            return NO_VARIATION
        return verdict(self.difference.value, self.adjusted_p, len(self.seeds))

    @property
    def significant(self) -> bool:
        return self.verdict in (MORE_ROBUST, LESS_ROBUST)


def compare(settings: list[Setting], runs_dir: Path, baseline: str,
            untrained: Mapping[str, str] | None = None) -> list[Comparison]:
    """Every non-baseline setting paired with each baseline setting that differs from it only in the model (a
    given checkpoint without such a peer: each of its seeds against the baseline's seeds attacked alike, `single`); the
    family is every comparison returned, and each with a p-value gets its Holm-adjusted p-value. A seed at which
    either model's checkpoint did not train (`untrained`: run id -> warning; by default
    `robench.report.untrained.untrained_runs` of the settings' records) is left out of the pair."""
    bases: dict[str, list[Setting]] = {}
    for s in settings:
        if s.spec["model"] == baseline:
            bases.setdefault(s.peer, []).append(s)
    if not bases:
        models = sorted({s.spec["model"] for s in settings})
        raise RobenchError(f"no run records of the baseline model {baseline!r} (models with records: {models})")
    if untrained is None:
        from robench.report.untrained import untrained_runs

        untrained = untrained_runs([r for s in settings for r in s.records], runs_dir)
    by_attack: dict[str, list[Setting]] = {}
    for b in (b for group in bases.values() for b in group):
        by_attack.setdefault(attack_setting_id(b.records[0]), []).append(b)
    out = []
    for s in settings:
        if s.spec["model"] == baseline:
            continue
        if peers := bases.get(s.peer, []):
            out += [paired(s, b, runs_dir, untrained) for b in peers]
        elif s.spec.get("checkpoint") is not None:  # a checkpoint of your own: each of its seeds against the seeds
            out += [single(replace(s, records=(r,)), b, runs_dir, untrained) for r in s.records
                    for b in by_attack.get(attack_setting_id(r), [])]
    return with_holm(out)


def nothing_compared(settings: list[Setting], baseline: str) -> str:
    """Why `compare` found nothing: no other model at a setting of the baseline, or no shared seed and example."""
    peers = {s.peer for s in settings if s.spec["model"] == baseline}
    if any(s.spec["model"] != baseline and s.peer in peers for s in settings):
        return (f"no shared examples: the models at a setting where {baseline} has runs share no training seed "
                f"with an attacked example in common with {baseline}'s (pairs are seed with seed, example with "
                "example)")
    return f"no other model has runs at a setting where {baseline} has"


def not_compared(settings: list[Setting], found: list[Comparison], baseline: str) -> list[tuple[Setting, str]]:
    """Each setting of another model that `compare` left out, with why: no row drops out without a word."""
    done = {c.setting.id for c in found}
    attacks = {attack_setting_id(s.records[0]) for s in settings if s.spec["model"] == baseline}
    out = []
    for s in settings:
        if s.spec["model"] == baseline or s.id in done:
            continue
        if s.spec.get("checkpoint") is not None:
            why = f"{baseline} has no runs at its attack setting (same task, attack, parameters and examples)"
        else:
            why = (f"{baseline} has no runs at its setting (the same but the model)" if
                   attack_setting_id(s.records[0]) not in attacks else
                   f"{baseline} has runs at its attack setting but with other training settings")
        out.append((s, why))
    return out


def with_holm(comparisons: list[Comparison]) -> list[Comparison]:
    """`comparisons` with their Holm-adjusted p-values over the family of all of them: one without a p-value
    (no shared seeds, too few examples, one seed, no variation) counts in the family with p = 1."""
    adjusted = holm([1.0 if math.isnan(c.p_value) else c.p_value for c in comparisons])
    return [replace(c, adjusted_p=float("nan") if math.isnan(c.p_value) else a, family=len(comparisons))
            for c, a in zip(comparisons, adjusted)]


def paired(setting: Setting, baseline: Setting, runs_dir: Path,
           untrained: Mapping[str, str] | None = None) -> Comparison:
    """`setting` against `baseline`, seed s with seed s (the seeds with an example attacked in both), on the
    examples every such seed of both attacked, leaving out the seeds where either record is in `untrained`;
    without a shared seed label, a comparison with no seeds."""
    mine = {r.spec["seed"]: r for r in setting.records}
    theirs = {r.spec["seed"]: r for r in baseline.records}
    matched = sorted(mine.keys() & theirs.keys())
    excluded = tuple(s for s in matched if {mine[s].run_id, theirs[s].run_id} & set(untrained or {}))
    shared, pairs = [s for s in matched if s not in excluded], {}
    for seed in shared:
        if _eval_hash(mine[seed]) != _eval_hash(theirs[seed]):
            raise RobenchError(f"runs {mine[seed].run_id} and {theirs[seed].run_id} share a setting but were "
                               "attacked on different examples (did the data change?); re-run one with --force")
        a, b = outcomes(runs_dir, mine[seed]), outcomes(runs_dir, theirs[seed])
        if cells := {i: SAME + (a[i] == FAILED) - (b[i] == FAILED) for i in a.keys() & b.keys()}:
            pairs[seed] = cells
    nan = float("nan")
    if not pairs:  # no shared seed label, or no example attacked in both: no difference
        return Comparison(setting, baseline, tuple(shared), 0, Estimate(nan, nan, nan), nan, excluded=excluded)
    codes = outcome_matrix(list(pairs.values()))
    test = paired_test(codes)
    if test is None:  # one seed, or under two examples every seed has: a difference, no test
        complete = codes[:, (codes != MISSING).all(axis=0)]
        value = float((complete - SAME).mean()) if complete.size else nan
        return Comparison(setting, baseline, tuple(pairs), complete.shape[1], Estimate(value, nan, nan), nan,
                          excluded=excluded)
    return Comparison(setting, baseline, tuple(pairs), test.examples, test.difference, test.p_value, test=test,
                      excluded=excluded)


def single(setting: Setting, baseline: Setting, runs_dir: Path,
           untrained: Mapping[str, str] | None = None) -> Comparison:
    """`setting`'s one checkpoint against every trained seed of `baseline` attacked alike, on the examples all of
    them have (`robench.report.single`); no test without two such seeds and two such examples."""
    (mine,) = setting.records
    bad = set(untrained or {})
    theirs = [r for r in baseline.records if r.run_id not in bad]
    for other in theirs:
        if _eval_hash(other) != _eval_hash(mine):
            raise RobenchError(f"runs {mine.run_id} and {other.run_id} share an attack setting but were attacked on "
                               "different examples (did the data change?); re-run the first with --force")
    excluded = tuple(r.spec["seed"] for r in baseline.records if r.run_id in bad)
    seeds, nan = tuple(r.spec["seed"] for r in theirs), float("nan")
    if mine.run_id in bad or len(theirs) < 2:
        return Comparison(setting, baseline, seeds, 0, Estimate(nan, nan, nan), nan,
                          excluded=excluded + ((mine.spec["seed"],) if mine.run_id in bad else ()), single=True)
    _same_texts(runs_dir, mine, theirs[0])
    codes = outcome_matrix([outcomes(runs_dir, r) for r in (mine, *theirs)])
    complete = codes[:, (codes != MISSING).all(axis=0)] == FAILED  # correct under attack
    if complete.shape[1] < 2:
        return Comparison(setting, baseline, seeds, complete.shape[1], Estimate(nan, nan, nan), nan,
                          excluded=excluded, single=True)
    value, low, high, se, df, p = (float(x) for x in single_arrays(complete[0], complete[1:]))
    detectable = detectable_difference(se, 1.0, int(df)) if se > 0 else nan  # seed share 1: Student's t on df
    return Comparison(setting, baseline, seeds, complete.shape[1], Estimate(value, low, high), p, excluded=excluded,
                      single=True, single_detectable=detectable)


def _same_texts(runs_dir: Path, mine: RunRecord, theirs: RunRecord) -> None:
    """The two runs attacked the same texts at the same indices (else a clear error)."""
    texts = {r.index: r.original_text for r in read_examples(runs_dir, theirs.run_id)}
    for r in read_examples(runs_dir, mine.run_id):
        if r.index in texts and texts[r.index] != r.original_text:
            raise RobenchError(f"runs {mine.run_id} and {theirs.run_id} share an attack setting but example "
                               f"{r.index} differs: they were not attacked on the same examples")


def _eval_hash(record: RunRecord) -> str | None:
    return (record.resources.get("data") or {}).get("eval_indices_hash")
