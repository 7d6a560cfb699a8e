"""An upfront estimate of a run's cost, from a few seconds of timing the real model on the real device.

* start-up  = this process's seconds from its start to the estimate, less the time spent measuring speeds (the CLI
  adds it: imports and reading the data, which a new process for the run does again);
* builds    = each attack resource the run builds on first use and that is not in the cache yet (the lexicon's
  relations, the synonym lexicon, the fluency language model's conversion), at its known cost (the seconds its
  phase line names);
* training  = optimisation steps x the measured seconds per step of this defense's objective at this batch
  size (so IM-BERT's solver, FreeLB's ascent steps and SMART's regulariser are all in the measurement)
  + one evaluation of the dev split (after the last epoch) at the measured inference rate + loading the model;
* attack    = the recipe's fixed `load_seconds` (loading its resources, auditing the swaps) + the eval examples'
  model queries, each as long as its text (`query_length`), / the measured inference rate in words per second,
  where a search attack makes `recipe.query_cost_per_word` queries per word of its input (measured on SST-2,
  docs/guide/presets.md) and a replay attack one per example, times `SEARCH_OVERHEAD` for the work outside the
  victim (candidates, POS tags, sentence encoder: 10% of TextFooler's time when profiled, docs/studies/results.md),
  + the record's fluency scoring: the two texts of half the examples (`FLUENCY_SUCCESS_SHARE`: the share
  that succeeds is not known before the run; 9-58% of 300 on the reference's word-level attacks), at the
  language model's idle rate (`robench.engine.fluency.LM_WORDS_PER_SECOND`) on this machine now.

Speed measurements (`ModelSpeed`) are cached under `<cache_dir>/estimates/`, keyed by the defence and its
cost-relevant parameters (a parameter declared `bounded(..., cost=False)`, a step size, is left out), backbone,
device, torch threads, task and the content fingerprint of its train and eval data (`ResolvedRun.train_data`: two
task files of one name but other texts never share a measurement), batch size, maximum length and the code version
(`code_version`: robench's version, torch's, and the source of the training loop, the victim and the defences),
with the checksum of their values: one measurement serves every seed and eval size of a setting. A checkpoint robench
did not train is timed too (loading it and its inference rate: seconds), keyed by its weights' identity instead of the
defence and backbone; its estimate has no training, and its dev pass only until that is cached
(`robench.runs.devpass`). A measurement records when and under what load (`robench.core.machine.load`) it was
taken, and the estimate says both. Staleness: a measurement is taken again when the machine's CPU share now differs
materially from the one it was taken under (`robench.core.machine.load_differs`), when it is older than
SPEED_MAX_AGE, on `--remeasure`, and when its cache file is damaged, edited or holds a value that is not a positive
finite number (with a warning). A first-use build's expected seconds are its seconds on the reference machine idle
scaled by a short probe of this machine as it is now (`robench.core.progress.expected_seconds`).
`robench bench estimate` compares the estimate with real runs.
"""
from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path

import torch

from robench.core.machine import load
from robench.runs.resolve import ResolvedRun
from robench.runs.speed import (
    Measured,
    Say,
    duration,
    model_speed,
    query_length,
)

SEARCH_OVERHEAD = 1.15  # attack time outside the victim's forward passes (profiled: ~10% for TextFooler)
log = logging.getLogger(__name__)
CPU_HOUR_ADVICE = 3600.0

# the share of attacked examples taken to succeed, for the fluency scoring of their records (unknown before the run;
# on the reference checkpoint of bench estimate --protocol reference: BERT-Attack 9%, gradient-swap 56%, TextFooler 58%)
FLUENCY_SUCCESS_SHARE = 0.5

@dataclass(frozen=True)
class Build:
    """An attack resource a run builds on first use, and what building it costs."""

    what: str
    seconds: float


@dataclass(frozen=True)
class CostEstimate:
    train_seconds: float | None  # None: the checkpoint is cached, or given (`given`): nothing to train
    attack_seconds: float | None  # None: training only
    train_examples: int
    attack_examples: int
    device: str
    attack_queries: float = 0.0  # the model queries the attack estimate assumes
    builds: tuple[Build, ...] = ()  # resources the run builds (not in the cache yet)
    startup_seconds: float | None = None  # a new process's imports and data reading (None: not counted)
    measuring_seconds: float = 0.0  # what making this estimate spent timing the model (no part of the run)
    given: bool = False  # the run attacks a checkpoint robench did not train
    dev_seconds: float | None = None  # a given checkpoint's dev pass (None: cached, or none)
    dev_examples: int = 0
    speed: str | None = None  # when and under what load the speed behind it was measured (`Measured.describe`)

    @property
    def total_seconds(self) -> float:
        return ((self.train_seconds or 0.0) + (self.attack_seconds or 0.0) + (self.startup_seconds or 0.0)
                + (self.dev_seconds or 0.0) + sum(b.seconds for b in self.builds))

    def with_startup(self, seconds: float | None) -> CostEstimate:
        return dataclasses.replace(self, startup_seconds=None if seconds is None else max(seconds, 0.0))

    def lines(self) -> list[str]:
        """The total, then one indented line per part: start-up, each build, training (or the given checkpoint's
        dev pass), attack; last, when the speed behind it was measured."""
        parts = []
        if self.startup_seconds is not None:
            parts.append(f"start-up ~{duration(self.startup_seconds)} (imports and reading the data, as measured "
                         "in this process)")
        parts += [f"build {b.what} ~{duration(b.seconds)} (first use, expected on this machine now; cached after)"
                  for b in self.builds]
        if self.given:
            parts.append("train: none (a given checkpoint)")
            parts.append("dev pass: cached (measured before for this checkpoint and data)" if self.dev_seconds is None
                         else f"dev pass ~{duration(self.dev_seconds)} (the whole eval split, {self.dev_examples} "
                              "examples; once per checkpoint and data)")
        else:
            parts.append("train: cached checkpoint" if self.train_seconds is None else
                         f"train ~{duration(self.train_seconds)} ({self.train_examples} examples)")
        if self.attack_seconds is not None:
            parts.append(f"attack ~{duration(self.attack_seconds)} ({self.attack_examples} examples)")
        if self.speed is not None:
            parts.append(self.speed)
        return [f"estimate on {self.device}: total ~{duration(self.total_seconds)}", *(f"  {p}" for p in parts)]

    def advice(self, grid: bool = False) -> str | None:
        """How to bring a long CPU run (or grid) down, or None."""
        if not self.device.startswith("cpu") or self.total_seconds <= CPU_HOUR_ADVICE:
            return None
        if grid:
            return ("over an hour on a CPU: lower train_size, epochs or eval_size in the grid config, drop cells, "
                    "add workers (a Ray cluster: --address), or run on a GPU (--device cuda)")
        return ("over an hour on a CPU: lower --train-size, --epochs or --eval-size, run on a GPU (--device cuda), "
                "or, with --preset paper, use --preset quick (the default; on a GPU the paper preset takes minutes)")


def total_estimate(estimates: list[CostEstimate], device: torch.device) -> CostEstimate:
    """Several runs' estimates added up (a grid, a protocol: the sum of its jobs' work, before parallel workers
    divide it); a given checkpoint's dev pass is counted once (its later runs find it cached)."""
    trains = [e.train_seconds for e in estimates if e.train_seconds is not None]
    attacks = [e.attack_seconds for e in estimates if e.attack_seconds is not None]
    builds = tuple(dict.fromkeys(b for e in estimates for b in e.builds))  # each resource is built once
    dev = next((e for e in estimates if e.dev_seconds is not None), None)
    return CostEstimate(sum(trains) if trains else None, sum(attacks) if attacks else None,
                        sum(e.train_examples for e in estimates if e.train_seconds is not None),
                        sum(e.attack_examples for e in estimates), str(device), builds=builds,
                        measuring_seconds=sum(e.measuring_seconds for e in estimates),
                        given=bool(estimates) and all(e.given for e in estimates),
                        dev_seconds=dev.dev_seconds if dev is not None else None,
                        dev_examples=dev.dev_examples if dev is not None else 0,
                        speed=next((e.speed for e in estimates if e.speed is not None), None))


def estimate(run: ResolvedRun, device: torch.device, train_cached: bool, persist: bool = True,
             memo: dict[Path, Measured] | None = None, say: Say | None = None,
             remeasure: bool = False) -> CostEstimate:
    """The estimated cost of `run` on `device` (timing the model first unless a measurement of its speed is cached
    and was taken under a load like this one's), without the start-up (`CostEstimate.with_startup`: the CLI knows
    its process's).

    `persist=False` caches no new measurement; `memo` keeps measurements across calls in one process; `say` hears
    when it has to time the model, and how long that took; `remeasure` times it even when a measurement is
    cached."""
    from robench.runs import devpass

    spec = run.spec
    texts = run.texts()  # the data, read once: everything below works on these texts
    start = time.perf_counter()
    measured = model_speed(run, device, texts, persist, {} if memo is None else memo, say, remeasure)
    measuring = time.perf_counter() - start
    speed, rate = measured.speed, measured.speed.words_per_second
    attacked = len(texts.attacked) if texts.attacked is not None else 0
    # the defence's own work: a2t's training attack, SAFER's certificate (in model queries at the measured rate)
    extra = run.defense.extra_cost(run.model_params, [len(t[-1].split()) for t in texts.train], spec.train.epochs,
                                   attacked) if spec.trains else {}
    dev_seconds = sum(map(query_length, texts.dev)) / rate
    train_seconds = None
    if spec.trains and not train_cached:
        sizes = run.defense.epoch_sizes(run.model_params, len(texts.train), spec.train.epochs)  # a2t adds examples
        steps = sum(math.ceil(n / spec.train.batch_size) for n in sizes)
        train_seconds = (speed.load_seconds + steps * speed.seconds_per_step + dev_seconds
                         + SEARCH_OVERHEAD * extra.get("train", 0.0) * _mean_length(texts.train) / rate)
    attack_seconds, queries = None, 0.0
    if texts.attacked is not None:
        queries, length = _queries(run, texts.attacked)
        overhead = SEARCH_OVERHEAD if run.recipe.query_cost_per_word else 1.0
        attack_seconds = (speed.load_seconds + run.recipe.load_seconds + overhead * length / rate
                          + extra.get("attack", 0.0) * _mean_length(texts.attacked) / rate
                          + _fluency_seconds(run, texts.attacked))
    given_dev = None if spec.trains or devpass.cached(run) is not None else dev_seconds
    return CostEstimate(train_seconds, attack_seconds, len(texts.train), attacked, str(device), queries,
                        builds=resource_builds(run), measuring_seconds=measuring, given=not spec.trains,
                        dev_seconds=given_dev, dev_examples=len(texts.dev), speed=measured.describe(load()))


def resource_builds(run: ResolvedRun) -> tuple[Build, ...]:
    """The resources `run` will build, each absent from the cache: the lexicon's relations (every word-swap
    attack's validity audit reads them) and the synonym lexicon (any recipe or defence whose `synonym_source` is
    "lexicon"), each at its expected seconds on this machine now. A built copy is recognised as `robench resources
    list` does: by its folder in the cache."""
    from robench.core.progress import expected_seconds
    from robench.engine.resources.causal_lm import CONVERT_SECONDS, conversion_pending
    from robench.engine.resources.files import resources_dir
    from robench.engine.resources.lexicon import RELATIONS_BUILD_SECONDS
    from robench.engine.resources.lexicon_table import LEXICON_BUILD_SECONDS

    built = resources_dir(run.settings)
    builds = []
    if _builds_relations(run) and not any(built.glob("relations-*/relations.json")):
        builds.append(("the lexicon's relations", RELATIONS_BUILD_SECONDS))
    if _uses_lexicon(run) and not any(built.glob("lexicon-*/info.json")):
        builds.append(("the synonym lexicon", LEXICON_BUILD_SECONDS))
    if run.recipe is not None and conversion_pending(run.settings):  # every attack's record scores fluency
        builds.append(("the fluency language model (converted from GGUF)", CONVERT_SECONDS))
    if not builds:
        return ()
    scale = expected_seconds(1.0)  # one probe for all of them
    return tuple(Build(what, float(seconds) * scale) for what, seconds in builds)


def _fluency_seconds(run: ResolvedRun, attacked: list[tuple[str, ...]]) -> float:
    """The record's fluency scoring (`robench.engine.fluency.run_fluency`): each successful example's original and
    adversarial text scored by the language model, with FLUENCY_SUCCESS_SHARE of the attacked examples taken to
    succeed; nothing without the LM."""
    from robench.core.errors import RobenchError
    from robench.engine.fluency import scoring_seconds
    from robench.engine.resources.causal_lm import lm_source

    try:
        lm_source(run.settings)
    except RobenchError:
        return 0.0
    return scoring_seconds(FLUENCY_SUCCESS_SHARE * 2 * sum(len(t[-1].split()) for t in attacked))


def _builds_relations(run: ResolvedRun) -> bool:
    return (run.recipe is not None and run.recipe.word_swaps) or _uses_lexicon(run)


def _uses_lexicon(run: ResolvedRun) -> bool:
    """Whether the attack's or the defence's parameters name the synonym lexicon as their synonym source."""
    return any((params or {}).get("synonym_source") == "lexicon" for params in run.hyperparameters().values())


def process_seconds() -> float | None:
    """Wall seconds since this process started (None where the system does not say: /proc is Linux's)."""
    import os

    try:
        started_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(uptime - started_ticks / os.sysconf("SC_CLK_TCK"), 0.0)


def _mean_length(texts: list[tuple[str, ...]]) -> float:
    return sum(map(query_length, texts)) / len(texts) if texts else 0.0


def _queries(run: ResolvedRun, texts: list[tuple[str, ...]]) -> tuple[float, float]:
    """The attack's model queries on `texts`, and their total `query_length` (a variant is about as long as its
    text: word attacks swap words; the importance step's deletions are one word shorter)."""
    per_word = run.recipe.query_cost_per_word if run.recipe is not None else 0.0
    counts = [1 + per_word * len(text[-1].split()) for text in texts]  # word attacks perturb the last field
    return sum(counts), sum(n * query_length(text) for n, text in zip(counts, texts))


