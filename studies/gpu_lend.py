#!/usr/bin/env python3
"""GPU evidence that fits one lend (issue 48): the most valuable figures first, nothing lost when time runs out.

    python studies/gpu_lend.py --plan                       # expected seconds per step; exit 1 over --limit
    python studies/gpu_lend.py --bundle "$OUT"              # on the lent machine (docs/studies/gpu.md)

Steps, in priority order, each writing its records and tables into --out as it finishes (--steps: by default
those the pack of studies/gpu_prepare.py serves, `PACK_STEPS`):

1. attack: robench's TextFooler on the whole SST-2 dev split (wall time, fraction of the raw forward rate and the
   profile: `robench.bench.attack`); then the estimate's calibration (`robench.runs.estimate`) of the claim models
   on this device.
   textattack: robench beside `textattack:textfooler` on a subset through the same victim. TextAttack imports
   packages its TextFooler path never calls and the machine lacks; the step's process gets stand-ins for them
   that fail on use (`NOT_CARRIED`), and the step fails if one was used.
2. probe: how many concurrent training jobs saturate the device: 1, 2, 4, 8 processes train the slowest claim
   model at once, started together; the throughput of each count, and the smallest count within 90% of the best.
3. claims: bert vs imbert on AdvGLUE-sst2, 5 seeds each, at the largest SST-2 training size whose estimated
   wall time fits the time left (sized from the calibration and the probe when they are measured), `robench run`
   jobs in parallel on the one device; `robench compare`'s verdict and the IM-BERT claim's beside the CPU one.
4. extra: the positive control (a2t) and other defences at that size, in whatever time is left.

Resuming: finished run records are skipped (`robench run` resumes by run id), a finished step's tables are kept,
and the chosen training size and job count are kept in `<out>/state.json`, so a second lend continues where the
first stopped. After each step the summary of every step so far is printed (the command's output tail carries
the figures) and written to `<out>/summary.md`; with --bundle DIR, `DIR/evidence-gpu.tar.gz` (the whole out dir)
and `DIR/summary.md` are refreshed too (two files: the device tool returns at most eight).
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.abc
import importlib.machinery
import json
import math
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tarfile
import threading
import time
import traceback
import types
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[1]
H200_RESULTS = REPO / "results" / "evidence-h200"  # the committed H200 timings (one partial lend), packed
H200_MLM = REPO / "results" / "evidence-h200" / "mlm-build.json"  # MiniLM training steps at batch 256 there
GPU_GRID = REPO / "results" / "grid-gpu.toml"  # the GPU protocol: training values and model parameters
CPU_CLAIMS = REPO / "results" / "reference" / "claims.json"
CLAIMS_SCRIPT = REPO / "studies" / "claims.py"
STEPS = ("attack", "textattack", "probe", "claims", "extra")
PACK_STEPS = ("attack", "textattack", "probe", "claims")  # what studies/gpu_prepare.py's pack serves (its STEPS)
IMBERT_CLAIM = ("IM-BERT, AdvGLUE-sst2, +8.3 points", 8.3)  # its paper (arXiv 2505.06889; studies/claims.py)
# What `import textattack` (0.3.11) imports but its TextFooler path through robench never calls, and the H200 image
# lacks (so the pack leaves them out, docs/studies/gpu.md): flair (its POS tagger and tokenizer; TextFooler tags
# with NLTK) and what flair pulls in, jieba and pinyin/OpenHowNet (Chinese text and swaps), the other recipes'
# constraints and swaps, and the loggers. In the textattack step's process each is a stand-in (`StandIns`).
NOT_CARRIED = ("flair", "jieba", "pinyin", "OpenHowNet", "Levenshtein", "editdistance", "bert_score",
               "language_tool_python", "lemminflect", "more_itertools", "num2words", "word2number", "langdetect",
               "terminaltables")

# Allowances the plan uses until a lend has measured them (then <out>/calibration.json holds the measurement):
PROCESS_START_S = 3.0  # a fresh Python importing torch, transformers and robench: 2.6 s of CPU time on the
#                        2-core development machine (CUDA's start is in the H200 records' overhead)
WARM_UP_S = 20.0  # the attack's resources: synonym table, sentence encoder, tagger
TEXTATTACK_IMPORT_S = 5.0  # the textattack step's `import textattack`, the stand-ins in place: 4.4-4.8 s of CPU time
#                            here after torch, transformers and robench (2 loaded cores)
# From the committed profiles (docs/studies/attacks.md "Performance", MR 100 ex., CPU): robench's attack outside the
# victim, the encoder apart (POS, candidates, search, bookkeeping, engine, outside: 1.83 s / 100 examples), and
# TextAttack's time outside its victim forwards (45.6 s x (1 - 46.5%) / 100 examples). Both stay on the CPU.
ROBENCH_CPU_S_PER_EXAMPLE = 0.0183
TEXTATTACK_CPU_S_PER_EXAMPLE = 0.244
STEP_TO_FORWARD = 3.0  # a training step (forward, backward, optimiser) costs at least 3 forwards of its batch:
#                        the victim's forward rate is at least 3x the MLM build's training rate (batch 256)
SATURATED = 0.9  # the job count whose throughput is within this of the best saturates the device
FINAL_RESERVE_S = 10.0  # the last summary and bundle
INSTALL_S = 50.0  # studies/gpu-lend.sh before this script, the pack unpacked and robench installed: 50 s measured
#                  on the 2-core development machine at a load average of 14 (the H200 machine has 16 cores)


class LendError(Exception):
    """Bad input or a plan over the limit: one line, non-zero exit."""


class StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Importing a module under one of `roots` (installed or not) gives a stand-in: any attribute is a class that
    can be subclassed, and calling or instantiating it raises and is recorded in `used`, so that a use that the
    caller swallows is still found."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = frozenset(roots)
        self.used: list[str] = []

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name.partition(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _StandInModule(spec.name, self)

    def exec_module(self, module: types.ModuleType) -> None:
        pass

    def stand_in(self, name: str) -> type:
        used = self.used

        class _StandIn(type):
            def __call__(cls, *args: Any, **kwargs: Any) -> Any:
                used.append(cls.__qualname__)
                raise LendError(f"{cls.__qualname__} was called, but its package was not carried to the GPU "
                                "machine (studies/gpu_lend.py, NOT_CARRIED)")

            def __getattr__(cls, attr: str) -> Any:
                if attr.startswith("__"):
                    raise AttributeError(attr)
                return _StandIn(attr, (), {"__qualname__": f"{cls.__qualname__}.{attr}"})

        return _StandIn(name.rpartition(".")[2], (), {"__qualname__": name})


class _StandInModule(types.ModuleType):
    def __init__(self, name: str, finder: StandIns) -> None:
        super().__init__(name)
        self._finder = finder

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        value = self._finder.stand_in(f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value


@contextlib.contextmanager
def standing_in(roots: tuple[str, ...]) -> Iterator[StandIns]:
    """Stand-ins for `roots` while the block runs (first on the import path); LendError after it when one was
    used."""
    finder = StandIns(roots)
    sys.meta_path.insert(0, finder)
    try:
        yield finder
    finally:
        sys.meta_path.remove(finder)
    if finder.used:
        raise LendError(f"the step used packages that were not carried: {', '.join(sorted(set(finder.used)))}")


@dataclass(frozen=True)
class Protocol:
    """What the lend measures and at which sizes (`h200`: the issue's; `tiny`: the CPU test's)."""

    name: str
    task: str = "sst2"
    backbone: str = "minilm"
    victim_train_size: int = 2000  # the attack bench's victim: bert, as `robench bench attack` trains it
    victim_epochs: int = 2
    attack_examples: int | None = None  # robench's TextFooler; None: the whole dev split
    textattack_examples: int = 100  # robench beside textattack:textfooler, the same examples and victim (as many
    #                                 as the CPU benches of docs/studies/attacks.md)
    synonym_source: str = "lexicon"
    sentence_encoder: str = "minilm"
    models: tuple[str, ...] = ("bert", "imbert")  # the claim: baseline first
    extra_models: tuple[str, ...] = ("a2t", "freelb", "smart", "pgd", "ascc")
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4)
    probe_jobs: tuple[int, ...] = (1, 2, 4, 8)
    probe_steps: int = 8
    # the claims' floor, below the CPU reference's 3,000 (the claim is only new above it): in the worst case
    # (concurrent jobs no faster than one) the textattack step leaves the claims less; at run time the probe's
    # speed-up sizes them
    min_train_size: int = 2000
    max_train_size: int = 67349  # the whole SST-2 train split
    size_step: int = 100
    train: dict[str, Any] = field(default_factory=dict)  # over grid-gpu.toml's [train]
    model_params: dict[str, dict[str, Any]] = field(default_factory=dict)  # over grid-gpu.toml's [model_params]


PROTOCOLS = {
    "h200": Protocol("h200"),
    "tiny": Protocol("tiny", victim_train_size=32, victim_epochs=1, attack_examples=4, textattack_examples=2,
                     sentence_encoder="use-m3", extra_models=("freelb",), seeds=(0,),
                     probe_jobs=(1, 2), probe_steps=2, min_train_size=32, max_train_size=64, size_step=16,
                     train={"epochs": 1, "lr": 1e-3, "batch_size": 16, "max_length": 32},
                     model_params={"imbert": {"im_layers": [0, 1]}}),
}


@dataclass(frozen=True)
class Paths:
    out: Path  # records, tables, state: what a lend brings back
    cache: Path  # checkpoints and built resources: stays on the machine
    data: Path | None
    bundle: Path | None

    @property
    def state(self) -> Path:
        return self.out / "state.json"


# ---------------------------------------------------------------- costs and the plan

@dataclass(frozen=True)
class Costs:
    """What the plan sizes from: the committed H200 records, replaced by a lend's own measurements when present."""

    train_rate: dict[str, float]  # training examples per second of one job alone
    job_overhead: dict[str, float]  # a job's seconds beyond its training loop (model load, dev pass, AdvGLUE)
    forward_rate: float  # victim forwards per second on attack-shaped inputs
    process_start: float
    warm_up: float
    speedup: dict[int, float]  # aggregate training throughput of J concurrent jobs over one job's
    basis: dict[str, str]  # where each figure came from


def load_costs(out: Path) -> Costs:
    """The H200 records' rates (the slowest record per model at >= 4,000 examples: the plan errs long), the
    forward rate bounded below by the H200 MLM build's training rate (`STEP_TO_FORWARD`), then
    `<out>/calibration.json` and `<out>/saturation.json` where a lend wrote them."""
    rates: dict[str, float] = {}
    overhead: dict[str, float] = {}
    for line in (H200_RESULTS / "records.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        model, t = record["spec"]["model"], record["timings"]
        if record["spec"]["train_size"] >= 4000:
            rates[model] = min(rates.get(model, math.inf), t["train_examples_per_second"])
        extra = t["train_stage_seconds"] - t["train_seconds"] + t["attack_seconds"]
        overhead[model] = max(overhead.get(model, 0.0), extra)
    if "bert" not in rates:
        raise LendError(f"no committed H200 bert record in {H200_RESULTS}/records.jsonl")
    mlm = json.loads(H200_MLM.read_text(encoding="utf-8"))
    forward = STEP_TO_FORWARD * mlm["config"]["batch_size"] / mlm["seconds_per_step"]
    basis = {"train_rate": "H200 records (results/evidence-h200/records.jsonl)",
             "forward_rate": "a lower bound: 3 x the H200 MLM build's training rate",
             "process_start": "allowance", "warm_up": "allowance", "speedup": "none measured: 1x"}
    costs = Costs(rates, overhead, forward, PROCESS_START_S, WARM_UP_S, {1: 1.0}, basis)
    measured = _read_json(out / "calibration.json")
    if measured:
        cal = measured.get("calibrations", {})
        changes: dict[str, Any] = {"train_rate": {**rates, **{m: c["examples_per_second"] for m, c in cal.items()}}}
        if cal:
            basis["train_rate"] = f"estimate calibration on {measured['device']} ({', '.join(cal)}), else H200 records"
        for key in ("forward_rate", "process_start", "warm_up"):
            if measured.get(key):
                changes[key] = measured[key]
                basis[key] = f"measured on {measured['device']}"
        costs = replace(costs, **changes, basis=basis)
    saturation = _read_json(out / "saturation.json")
    if saturation:
        one = saturation["rounds"][0]["examples_per_second"]
        speedup = {r["jobs"]: r["examples_per_second"] / one for r in saturation["rounds"]}
        costs = replace(costs, speedup=speedup, basis={**costs.basis, "speedup": "probe (saturation.json)"})
    return costs


def _read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


@dataclass(frozen=True)
class Dev:
    """The words per dev text (what the attack's query count follows)."""

    words: list[int]

    def queries(self, n: int | None, per_word: float) -> float:
        return sum(1 + per_word * w for w in self.words[:n])


def dev_words(protocol: Protocol, data: Path | None) -> Dev:
    from robench.core.paths import resolve_settings
    from robench.core.registry import TASKS
    from robench.data.loading import load_split, texts_of

    settings = resolve_settings(data)
    task = TASKS.get(protocol.task)
    texts = texts_of(load_split(task, "eval", settings.data_dir, "local"), task)
    return Dev([len(t[-1].split()) for t in texts])


@functools.cache
def gpu_grid():
    """`results/grid-gpu.toml`, the GPU protocol (robench.grid.config.GridConfig)."""
    from robench.grid.config import load_config

    return load_config(GPU_GRID)


def train_values(protocol: Protocol) -> dict[str, Any]:
    base = {k: getattr(gpu_grid().train, k) for k in ("epochs", "lr", "batch_size", "max_length")}
    return {**base, **protocol.train}


def model_params(protocol: Protocol, model: str) -> dict[str, Any]:
    return {**gpu_grid().model_params.get(model, {}), **protocol.model_params.get(model, {})}


def attack_seconds(protocol: Protocol, costs: Costs, dev: Dev) -> float:
    """Victim training, resources, robench on the whole split, then the claim models' calibration."""
    victim = protocol.victim_train_size * protocol.victim_epochs / costs.train_rate["bert"] + \
        costs.job_overhead["bert"]
    calibrations = sum(4 * train_values(protocol)["batch_size"] / costs.train_rate[m] + costs.job_overhead[m]
                       for m in protocol.models)
    robench, _ = _query_costs_per_word()
    return (costs.process_start + costs.warm_up + victim
            + one_attack(costs, dev, protocol.attack_examples, robench, ROBENCH_CPU_S_PER_EXAMPLE) + calibrations)


def textattack_seconds(protocol: Protocol, costs: Costs, dev: Dev) -> float:
    """robench and TextAttack on the subset, through the victim of the attack step (cached)."""
    robench, textattack = _query_costs_per_word()
    subset = protocol.textattack_examples
    return (costs.process_start + costs.warm_up + TEXTATTACK_IMPORT_S
            + one_attack(costs, dev, subset, robench, ROBENCH_CPU_S_PER_EXAMPLE)
            + one_attack(costs, dev, subset, textattack, TEXTATTACK_CPU_S_PER_EXAMPLE))


def one_attack(costs: Costs, dev: Dev, n: int | None, per_word: float, cpu_per_example: float) -> float:
    """An attack on the first `n` dev texts: its forwards (the estimate's queries per word and search overhead)
    and two replays of them, and its CPU-side work."""
    from robench.runs.estimate import SEARCH_OVERHEAD

    forwards = dev.queries(n, per_word) / costs.forward_rate
    return (SEARCH_OVERHEAD + 2) * forwards + cpu_per_example * len(dev.words[:n])


def _query_costs_per_word() -> tuple[float, float]:
    from robench.engine.attack import ATTACKS

    return ATTACKS.get("textfooler").query_cost_per_word, ATTACKS.get("textattack:textfooler").query_cost_per_word


def probe_seconds(protocol: Protocol, costs: Costs) -> float:
    """Worst case: the workers' start, then every round's steps as if the device ran the jobs one after another."""
    model = probe_model(protocol, costs)
    step = train_values(protocol)["batch_size"] / costs.train_rate[model]
    return costs.process_start + costs.job_overhead[model] + sum(
        (protocol.probe_steps + 1) * jobs * step for jobs in protocol.probe_jobs)


def probe_model(protocol: Protocol, costs: Costs) -> str:
    """The claim model whose training is slowest per example (the committed rates say imbert)."""
    return min(protocol.models, key=lambda m: costs.train_rate.get(m, math.inf))


def jobs_and_speedup(costs: Costs, state_jobs: int | None) -> tuple[int, float]:
    """The concurrent job count (the state's, else the smallest within SATURATED of the best measured) and the
    speed-up over one job that the plan may count on (1 until measured)."""
    best = max(costs.speedup.values())
    jobs = state_jobs or min(j for j, s in costs.speedup.items() if s >= SATURATED * best)
    return jobs, costs.speedup.get(jobs, 1.0)


def claims_seconds(protocol: Protocol, costs: Costs, size: int, jobs: int, done: dict[str, int] | None = None
                   ) -> float:
    """The claim jobs still to run (`done`: finished seeds per model), each one's start, overhead and training at
    its model's rate alone, in `run_models`' order (seeds outermost, `slowest_first`), `jobs` at a time."""
    epochs = train_values(protocol)["epochs"]
    alone = {m: costs.process_start + costs.job_overhead[m] + size * epochs / costs.train_rate[m]
             for m in protocol.models}
    order = [m for i, _ in enumerate(protocol.seeds) for m in slowest_first(protocol.models, costs)
             if i >= (done or {}).get(m, 0)]
    return makespan([alone[m] for m in order], jobs, costs.speedup)


def slowest_first(models: tuple[str, ...], costs: Costs) -> tuple[str, ...]:
    """The running order of a seed's models: the slowest first, so that a lend cut short leaves paired seeds."""
    return tuple(sorted(models, key=lambda m: costs.train_rate.get(m, 0.0)))


def makespan(alone: list[float], slots: int, speedup: dict[int, float]) -> float:
    """Seconds until the last of the jobs ends (`alone`: each one's seconds on the device by itself), started in
    order, `slots` at a time: with n running, each advances at `shared_speedup(speedup, n) / n` of its lone pace.
    The 2026-12-04 lend's sizing counted only the total work over the speed-up; the ninth job, started when a fast
    one ended, outran the limit."""
    queue, running, seconds = list(alone), [], 0.0
    while queue or running:
        while queue and len(running) < slots:
            running.append(queue.pop(0))
        pace = shared_speedup(speedup, len(running)) / len(running)
        first = min(running)
        seconds += first / pace
        running = [left - first for left in running if left - first > 1e-9]
    return seconds


def shared_speedup(speedup: dict[int, float], jobs: int) -> float:
    """The throughput of `jobs` concurrent jobs over one job's: the measured curve, linear between its points,
    flat beyond its largest (1 everywhere until measured: the jobs share the device, nothing gained)."""
    points = sorted({1: 1.0, **speedup}.items())
    if jobs >= points[-1][0]:
        return points[-1][1]
    (j0, s0), (j1, s1) = next((a, b) for a, b in zip(points, points[1:]) if a[0] <= jobs <= b[0])
    return s0 + (s1 - s0) * (jobs - j0) / (j1 - j0)


def finished_seeds(out: Path, protocol: Protocol, size: int) -> dict[str, int]:
    """Finished AdvGLUE records per model at this training size in `<out>/runs` or packed in `<out>` (what a
    resumed lend skips)."""
    from robench.core.packed import RECORDS

    packed = out / RECORDS
    texts = [path.read_text(encoding="utf-8") for path in (out / "runs").glob("*.json")]
    texts += packed.read_text(encoding="utf-8").splitlines() if packed.is_file() else []
    done: dict[str, int] = {}
    for text in texts:
        spec = json.loads(text).get("spec", {})
        if spec.get("attack") == "advglue" and spec.get("train_size") == size and spec.get("seed") in protocol.seeds:
            done[spec["model"]] = done.get(spec["model"], 0) + 1
    return done


def largest_size(protocol: Protocol, costs: Costs, budget: float, jobs: int) -> int | None:
    """The largest training size (a multiple of size_step, within the protocol's bounds) whose claims fit `budget`;
    None when not even the smallest does."""
    sizes = range(protocol.min_train_size, protocol.max_train_size + 1, protocol.size_step)
    fitting = [s for s in sizes if claims_seconds(protocol, costs, s, jobs) <= budget]
    return fitting[-1] if fitting else None


@dataclass(frozen=True)
class PlanLine:
    step: str
    seconds: float
    basis: str


def make_plan(protocol: Protocol, paths: Paths, limit: float, state: dict[str, Any], steps: tuple[str, ...]
              ) -> tuple[list[PlanLine], int]:
    """The expected seconds of each of `steps` (the others: 0, not run) and the claims' training size (the state's,
    or the largest that fits the time the steps before it leave)."""
    costs = load_costs(paths.out)
    dev = dev_words(protocol, paths.data)
    n = protocol.attack_examples or len(dev.words)
    before = {
        "attack": (0.0 if "attack" in state else attack_seconds(protocol, costs, dev),
                   f"victim {protocol.victim_train_size}x{protocol.victim_epochs}, TextFooler on {n} dev texts, "
                   f"calibration of {', '.join(protocol.models)}; forwards at {costs.forward_rate:.0f}/s "
                   f"({costs.basis['forward_rate']})"),
        "textattack": (0.0 if "textattack" in state else textattack_seconds(protocol, costs, dev),
                       f"robench and textattack:textfooler on {protocol.textattack_examples} dev texts; "
                       f"TextAttack's CPU-side work {TEXTATTACK_CPU_S_PER_EXAMPLE} s per example"),
        "probe": (0.0 if "saturation" in state else probe_seconds(protocol, costs),
                  f"{probe_model(protocol, costs)} x {protocol.probe_steps} steps at "
                  f"{', '.join(map(str, protocol.probe_jobs))} jobs, as if run one after another"),
    }
    before = {k: (v if k in steps else (0.0, "not served by the pack: not run")) for k, v in before.items()}
    spent = sum(seconds for seconds, _ in before.values())
    jobs, speedup = jobs_and_speedup(costs, state.get("jobs"))
    size = state.get("train_size") or largest_size(protocol, costs, limit - INSTALL_S - spent - FINAL_RESERVE_S,
                                                   jobs) or protocol.min_train_size
    done = finished_seeds(paths.out, protocol, size)
    claims = claims_seconds(protocol, costs, size, jobs, done) if "claims" in steps else 0.0
    claims_basis = (f"{' vs '.join(protocol.models)} x {len(protocol.seeds)} seeds at {size} sentences "
                    f"({sum(done.values())} done), {jobs} jobs, speed-up {speedup:.2f}x ({costs.basis['speedup']}); "
                    f"rates: {costs.basis['train_rate']}") if "claims" in steps else "not served by the pack: not run"
    extra = (f"{', '.join(protocol.extra_models)}: only in the time left" if "extra" in steps
             else "not served by the pack: not run")
    lines = [PlanLine("install", INSTALL_S, "studies/gpu-lend.sh: the pack unpacked, robench installed")]
    lines += [PlanLine(k, seconds, basis if seconds or k not in steps else "measured already")
              for k, (seconds, basis) in before.items()]
    lines += [PlanLine("claims", claims, claims_basis), PlanLine("extra", 0.0, extra),
              PlanLine("summary", FINAL_RESERVE_S, "compare, summary, bundle")]
    return lines, size


def print_plan(lines: list[PlanLine], limit: float, size: int) -> bool:
    total = sum(line.seconds for line in lines)
    print("| step | expected s | from |\n|---|---|---|")
    for line in lines:
        print(f"| {line.step} | {line.seconds:.0f} | {line.basis} |")
    fits = total <= limit
    print(f"| total | {total:.0f} | limit {limit:.0f} s: {'fits' if fits else 'OVER THE LIMIT'} |")
    print(f"claims' training size: {size} SST-2 sentences")
    return fits


# ---------------------------------------------------------------- running jobs under the deadline

@dataclass
class Job:
    name: str
    command: list[str]
    started: float = 0.0
    seconds: float = 0.0
    returncode: int | None = None
    killed: bool = False


def run_jobs(jobs: list[Job], slots: int, deadline: float, logs: Path) -> list[Job]:
    """Run `jobs`, `slots` at a time, each in its own process group with its output in `logs`; at the deadline
    every job still running is stopped (its state stays resumable: `robench run` resumes by run id). Jobs run in
    `logs`, not the checkout, where `python -m` would import the source tree's `robench` before the installed one."""
    logs.mkdir(parents=True, exist_ok=True)
    queue, running = list(jobs), []
    while queue or running:
        while queue and len(running) < slots and time.monotonic() < deadline:
            job = queue.pop(0)
            log = open(logs / f"{job.name}.log", "w", encoding="utf-8")
            job.started = time.monotonic()
            running.append((job, subprocess.Popen(job.command, stdout=log, stderr=subprocess.STDOUT, env=job_env(slots),
                                                  start_new_session=True, cwd=logs), log))
        if time.monotonic() >= deadline:
            queue.clear()
            for job, proc, _ in running:
                job.killed = proc.poll() is None
                _stop(proc)
        for item in list(running):
            job, proc, log = item
            if proc.poll() is not None:
                job.returncode, job.seconds = proc.returncode, time.monotonic() - job.started
                log.close()
                running.remove(item)
                if job.returncode != 0 and not job.killed:
                    tail = (logs / f"{job.name}.log").read_text(encoding="utf-8").splitlines()[-3:]
                    print(f"job {job.name} failed ({job.returncode}): " + " / ".join(tail), flush=True)
        time.sleep(0.05)
    return jobs


def job_env(slots: int) -> dict[str, str]:
    """The environment of one of `slots` concurrent jobs: the cores shared out among them (unless set already)."""
    threads = str(max(1, (os.cpu_count() or 1) // slots))
    return {"OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads, **os.environ}


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the job's own process group, SIGKILL after 5 s."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def common_flags(args: argparse.Namespace, paths: Paths) -> list[str]:
    flags = ["--cache-dir", str(paths.cache), "--results-dir", str(paths.out), "--device", args.device]
    return flags + (["--data-dir", str(paths.data)] if paths.data else [])


# ---------------------------------------------------------------- step 1: the attack bench

def attack_options(protocol: Protocol, device: str, examples: int):
    from robench.bench import attack as bench

    return bench.AttackBenchOptions(
        examples=examples, task=protocol.task, backbone=protocol.backbone, train_size=protocol.victim_train_size,
        epochs=protocol.victim_epochs, synonym_source=protocol.synonym_source,
        sentence_encoder=protocol.sentence_encoder, stock=False, device=device)


def attack_step(protocol: Protocol, paths: Paths, device: str) -> None:
    """In a child process: robench's TextFooler on the whole split (its table and profile in `<out>/bench/`, kept:
    not measured again), then the estimate's calibration of the claim models (`<out>/calibration.json`)."""
    from robench.classifier.device import pick_device
    from robench.core.paths import resolve_settings

    settings = resolve_settings(paths.data, paths.cache, paths.out)
    n = protocol.attack_examples or len(dev_words(protocol, paths.data).words)
    options = attack_options(protocol, device, n)
    device = str(pick_device(device))
    measured = _read_json(paths.out / "calibration.json") or {}
    target = paths.out / "bench" / f"attack-{protocol.task}-{n}-robench"
    if not target.with_suffix(".md").is_file():
        measured.update(attack_whole_split(protocol, options, settings, device, target))
        _write_calibration(paths, measured, device)
    measured["calibrations"] = calibrate(protocol, paths, settings, device)
    _write_calibration(paths, measured, device)


def textattack_step(protocol: Protocol, paths: Paths, device: str) -> None:
    """In a child process: robench beside TextAttack's TextFooler on the subset, through the attack step's victim
    (`robench bench attack`'s comparison: `<out>/bench/attack-<task>-<n>.{csv,md}`)."""
    from robench.bench import attack as bench
    from robench.core.paths import resolve_settings

    settings = resolve_settings(paths.data, paths.cache, paths.out)
    check_cut_covers_textattack(protocol, settings)
    bench.compare_attacks(attack_options(protocol, device, protocol.textattack_examples), settings, None)


def check_cut_covers_textattack(protocol: Protocol, settings) -> None:
    """With a cut (`ROBENCH_LEXICON_CUT`, cut to the words of the dev split as robench splits them), every word of
    the dev split as TextAttack splits it (`words_from_text`, lower-cased as its swaps ask) must be one the cut
    answers for: a word outside it would get no candidates from TextAttack, silently."""
    from robench.attacks.textattack.compat import load_textattack

    from robench.core.registry import TASKS
    from robench.data.loading import load_split, texts_of
    from robench.engine.resources import cut

    folder = cut.cut_dir()
    if folder is None:
        return
    load_textattack(settings)
    from textattack.shared.utils import words_from_text

    task = TASKS.get(protocol.task)
    texts = [t for row in texts_of(load_split(task, "eval", settings.data_dir, "local"), task) for t in row]
    missing = sorted({w.lower() for t in texts for w in words_from_text(t)} - cut.load_cut_table(folder).covered)
    if missing:
        raise LendError(f"the cut {folder} lacks {len(missing)} words TextAttack splits the dev split into "
                        f"({', '.join(missing[:5])}, ...): pack it again with these words")


def attack_whole_split(protocol: Protocol, options, settings, device: str, target: Path) -> dict[str, float]:
    """robench's TextFooler alone on `options.examples` texts, timed as `robench bench attack` times it (its
    one-off setup outside the timed region: the checkpoint, the recipe's resources, the audit's lexicon); writes
    its table and profile at `target`; returns the warm-up seconds and the raw forward rate it measured."""
    from robench.bench import attack as bench
    from robench.classifier.device import pick_device
    from robench.engine.resources.lexicon import lexicon
    from robench.runs.resolve import resolve_run
    from robench.runs.runner import train_checkpoint

    resolved = resolve_run(bench.specs(options, "local", settings)[bench.ROBENCH], settings)
    train_checkpoint(resolved, pick_device(device))
    start = time.perf_counter()  # `bench.warm_up` less its textattack import (the textattack step's)
    resolved.recipe.load_resources(resolved.attack_params, settings, pick_device(device))
    lexicon(settings)
    measured = {"warm_up": time.perf_counter() - start}
    side = bench.attack(resolved, device, None)
    setup = (f"(bert/{protocol.backbone}, train {protocol.victim_train_size}x{protocol.victim_epochs} ep, "
             f"{options.examples} examples, {device}, synonyms {protocol.synonym_source}, encoder "
             f"{protocol.sentence_encoder}; {bench.machine()})")
    bench.write(bench.compare([side]), ["metric", bench.ROBENCH], f"TextFooler on {protocol.task}, robench {setup}",
                target)
    bench.write(bench.profile_rows([side]), ["part", bench.ROBENCH], f"Profile of TextFooler {setup}",
                target.with_name(target.name + "-profile"))
    return {**measured, "forward_rate": side.raw_rate} if side.raw_rate else measured


def calibrate(protocol: Protocol, paths: Paths, settings, device: str) -> dict[str, dict[str, float]]:
    """`robench.runs.estimate.model_speed` of each claim model at the claims' training values, on this device."""
    from robench.classifier.device import pick_device
    from robench.runs.estimate import model_speed
    from robench.runs.resolve import resolve_run

    out = {}
    for spec in claim_specs(replace(protocol, seeds=protocol.seeds[:1]), protocol.models, protocol.min_train_size,
                            paths):
        run = resolve_run(spec[1], settings)
        cal = model_speed(run, pick_device(device), run.texts(), persist=True, memo={}).speed
        out[spec[1].model] = {**asdict(cal), "examples_per_second": spec[1].train.batch_size / cal.seconds_per_step}
    return out


def _write_calibration(paths: Paths, measured: dict[str, Any], device: str) -> None:
    from robench.core.files import atomic_write

    atomic_write(paths.out / "calibration.json", json.dumps({**measured, "device": device}, indent=1) + "\n")


# ---------------------------------------------------------------- step 2: how many jobs saturate the device

def probe_worker(protocol: Protocol, paths: Paths, device: str, index: int, folder: Path) -> None:
    """One probe process: build the slowest claim model and its objective as `robench.runs.estimate.measure` does,
    take one warm-up step, say it is ready, then time `probe_steps` steps in every round it belongs to."""
    import torch
    from transformers import DataCollatorWithPadding

    from robench.classifier.backbone import load_tokenizer
    from robench.classifier.device import pick_device
    from robench.core.files import atomic_write
    from robench.core.paths import resolve_settings
    from robench.data.loading import load_split, subset
    from robench.runs.resolve import resolve_run
    from robench.training.loop import encode, make_optimizer, train_step, training_context

    settings = resolve_settings(paths.data, paths.cache, paths.out)
    torch_device = pick_device(device)
    model = probe_model(protocol, load_costs(paths.out))
    _, spec = claim_specs(replace(protocol, seeds=protocol.seeds[:1]), (model,), protocol.min_train_size, paths)[0]
    run = resolve_run(spec, settings)
    tokenizer = load_tokenizer(run.backbone.location)
    model = run.defense.build(run.backbone.location, run.task.num_labels, run.model_params).to(torch_device)
    sample = subset(load_split(run.task, "train", settings.data_dir, "local"), spec.train.batch_size, index)
    batch = {k: v.to(torch_device) for k, v in DataCollatorWithPadding(tokenizer)(
        encode(tokenizer, run.task, sample, spec.train.max_length)).items()}
    objective = run.defense.objective(model, run.model_params)
    objective.prepare(training_context(model, tokenizer, run.task, sample, settings, torch_device, spec.seed,
                                       spec.train))
    steps = protocol.probe_steps + 1
    optimizer, scheduler = make_optimizer(model, spec.train, total_steps=steps * len(protocol.probe_jobs) + 1)
    model.train()

    def step() -> None:
        train_step(objective, optimizer, scheduler, batch, torch_device, spec.train.max_grad_norm)

    step()
    (folder / f"ready-{index}").touch()
    for jobs in protocol.probe_jobs:
        _wait_for(folder / f"go-{jobs}")
        if index >= jobs:
            continue
        start = time.perf_counter()
        for _ in range(protocol.probe_steps):
            step()
        if torch_device.type == "cuda":
            torch.cuda.synchronize(torch_device)
        seconds = time.perf_counter() - start
        atomic_write(folder / f"result-{jobs}-{index}.json", json.dumps({"seconds": seconds}))


def _wait_for(path: Path, timeout: float = 600.0) -> None:
    end = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > end:
            raise LendError(f"waited {timeout:.0f} s for {path}")
        time.sleep(0.005)


def probe_step(protocol: Protocol, paths: Paths, args: argparse.Namespace, deadline: float) -> None:
    """Start max(probe_jobs) workers, wait until all are ready, then release 1, 2, 4, ... of them together; the
    throughput of a round = its examples / its slowest worker's seconds. It may take 3 times its planned worst
    case; rounds finished by then are kept. Writes `<out>/saturation.json`."""
    from robench.core.files import atomic_write

    folder = paths.cache / "probe"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    costs = load_costs(paths.out)
    deadline = min(deadline, time.monotonic() + 3 * probe_seconds(protocol, costs))
    count = max(protocol.probe_jobs)
    command = [sys.executable, __file__, *protocol_flags(args), "--probe-worker", "--probe-dir", str(folder)]
    logs = [(folder / f"worker-{i}.log").open("w", encoding="utf-8") for i in range(count)]
    procs = [subprocess.Popen([*command, "--probe-index", str(i)], env=job_env(count), start_new_session=True,
                              cwd=folder, stdout=log, stderr=subprocess.STDOUT) for i, log in enumerate(logs)]
    try:
        rounds = _probe_rounds(protocol, folder, procs, deadline)
    finally:
        for proc, log in zip(procs, logs):
            _stop(proc)
            log.close()
    model, batch = probe_model(protocol, costs), train_values(protocol)["batch_size"]
    for r in rounds:
        r["speedup"] = r["examples_per_second"] / rounds[0]["examples_per_second"]
    best = max(r["examples_per_second"] for r in rounds)
    jobs = min(r["jobs"] for r in rounds if r["examples_per_second"] >= SATURATED * best)
    atomic_write(paths.out / "saturation.json", json.dumps(
        {"model": model, "batch_size": batch, "steps": protocol.probe_steps, "device": args.device,
         "rounds": rounds, "saturating_jobs": jobs}, indent=1) + "\n")


def _probe_rounds(protocol: Protocol, folder: Path, procs: list[subprocess.Popen], deadline: float) -> list[dict]:
    """The rounds measured before the deadline (at least one)."""
    batch = train_values(protocol)["batch_size"]
    _wait_all([folder / f"ready-{i}" for i in range(len(procs))], procs, deadline, folder)
    rounds: list[dict] = []
    for jobs in protocol.probe_jobs:
        sampler = GpuSampler()
        (folder / f"go-{jobs}").touch()
        results = [folder / f"result-{jobs}-{i}.json" for i in range(jobs)]
        try:
            _wait_all(results, procs, deadline, folder)
        except TimeoutError:
            if not rounds:
                raise LendError("the probe ran out of time before its first round") from None
            print(f"the probe ran out of time at {jobs} jobs; keeping the rounds before", flush=True)
            break
        finally:
            utilization = sampler.stop()
        seconds = [json.loads(p.read_text())["seconds"] for p in results]
        rounds.append({"jobs": jobs, "examples_per_second": jobs * protocol.probe_steps * batch / max(seconds),
                       "seconds_per_step": statistics.mean(seconds) / protocol.probe_steps,
                       "gpu_utilization": utilization})
    return rounds


def _wait_all(paths: list[Path], procs: list[subprocess.Popen], deadline: float, folder: Path) -> None:
    """Until every path exists; LendError when a worker failed (with its log's last line), TimeoutError at the
    deadline."""
    while not all(p.exists() for p in paths):
        for i, proc in enumerate(procs):
            if proc.poll() not in (None, 0):
                last = ((folder / f"worker-{i}.log").read_text(encoding="utf-8").strip().splitlines() or [""])[-1]
                raise LendError(f"probe worker {i} failed: {last}")
        if time.monotonic() > deadline:
            raise TimeoutError
        time.sleep(0.01)


class GpuSampler:
    """Mean GPU utilization (%) from `nvidia-smi` every 0.2 s while a probe round runs; None without one."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True) if shutil.which("nvidia-smi") else None
        if self.thread:
            self.thread.start()

    def _sample(self) -> None:
        while not self.done.wait(0.2):
            out = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu", "--format=csv,noheader,nounits"],
                                 capture_output=True, text=True, check=False).stdout.split()
            self.samples += [float(x) for x in out[:1] if x.replace(".", "").isdigit()]

    def stop(self) -> float | None:
        self.done.set()
        if self.thread:
            self.thread.join()
        return statistics.mean(self.samples) if self.samples else None


# ---------------------------------------------------------------- steps 3 and 4: the claims, then the extras

def claim_specs(protocol: Protocol, models: tuple[str, ...], size: int, paths: Paths) -> list[tuple[list[str], Any]]:
    """(robench run flags, RunSpec) per model and seed, seeds outermost, the models in the order given. The specs
    go through `robench.runs.options.specs`, as the CLI's do."""
    from robench.core.params import parse_assignments
    from robench.core.paths import resolve_settings
    from robench.runs.options import RunOptions, specs

    settings = resolve_settings(paths.data, paths.cache, paths.out)
    values = train_values(protocol)
    out = []
    for seed in protocol.seeds:
        for model in models:
            params = [f"{k}={json.dumps(v)}" for k, v in model_params(protocol, model).items()]
            flags = ["--model", model, "--attack", "advglue", "--seed", str(seed), "--preset", "paper",
                     "--train-size", str(size), "--backbone", protocol.backbone, "--task", protocol.task,
                     *(x for k, v in values.items() for x in (f"--{k.replace('_', '-')}", str(v))),
                     *(x for p in params for x in ("--param", p))]
            options = RunOptions(task=protocol.task, model=model, backbone=protocol.backbone, seeds=(seed,),
                                 preset="paper", train_size=size, model_params=parse_assignments(params), **values)
            out.append((flags, specs(options, settings)[0]))
    return out


def run_models(protocol: Protocol, models: tuple[str, ...], paths: Paths, args: argparse.Namespace, size: int,
               jobs: int, deadline: float) -> dict[str, int]:
    """The models' `robench run` jobs that have no finished record, `jobs` at a time until the deadline; each
    job's start-up (its wall time less the record's) goes into `<out>/calibration.json`."""
    from robench.core.paths import resolve_settings
    from robench.grid.driver import plan_cells

    settings = resolve_settings(paths.data, paths.cache, paths.out)
    pairs = claim_specs(protocol, slowest_first(models, load_costs(paths.out)), size, paths)
    cells, _ = plan_cells([spec for _, spec in pairs], settings)
    todo = [(flags, cell) for (flags, _), cell in zip(pairs, cells) if cell.state != "skipped"]
    command = [sys.executable, "-m", "robench.cli", "run", "--quiet", "--no-estimate", *common_flags(args, paths)]
    done = run_jobs([Job(cell.spec.run_id, [*command, *flags]) for flags, cell in todo], jobs, deadline,
                    paths.cache / "logs")
    _record_start_up(paths, [job for job in done if job.returncode == 0])
    return {"finished before": len(cells) - len(todo), "ran": sum(j.returncode == 0 for j in done),
            "failed": sum(j.returncode not in (0, None) and not j.killed for j in done),
            "stopped at the limit": sum(j.killed for j in done), "not started": sum(j.started == 0 for j in done)}


def _record_start_up(paths: Paths, jobs: list[Job]) -> None:
    from robench.core.files import atomic_write

    records = [_read_json(paths.out / "runs" / f"{job.name}.json") for job in jobs]
    gaps = [job.seconds - r["timings"]["total_seconds"] for job, r in zip(jobs, records) if r]
    measured = _read_json(paths.out / "calibration.json")
    if gaps and measured:
        measured["process_start"] = statistics.median(gaps)
        atomic_write(paths.out / "calibration.json", json.dumps(measured, indent=1) + "\n")


# ---------------------------------------------------------------- the summary

def summary(protocol: Protocol, paths: Paths, state: dict[str, Any]) -> str:
    parts = [f"# GPU lend: {protocol.name} protocol (run {state.get('runs', 1)} on this out dir)", "",
             _attack_summary(protocol, paths), _probe_summary(paths), _claims_summary(paths, state)]
    return "\n".join(p for p in parts if p) + "\n"


def _csv_rows(path: Path) -> dict[str, list[str]]:
    import csv

    if not path.is_file():
        return {}
    return {row[0]: row[1:] for row in csv.reader(path.open(encoding="utf-8"))}


ATTACK_ROWS = ("examples (errors)", "clean accuracy", "accuracy under attack", "attack wall time (s)",
               "seconds per example", "victim forwards (inputs run through the model)",
               "raw forward rate, same inputs, at the attack's load (per second)",
               "  fraction of the raw rate (target: 85%)",
               "  difference to robench (points; target: within 2)", "  robench speed-up, wall (target: 5x)",
               "same adversarial text as robench")


def _attack_summary(protocol: Protocol, paths: Paths) -> str:
    bench = paths.out / "bench"
    full = next(iter(sorted(bench.glob(f"attack-{protocol.task}-*-robench.csv"))), None) if bench.is_dir() else None
    full_rows = _csv_rows(full) if full else {}
    parity = _csv_rows(bench / f"attack-{protocol.task}-{protocol.textattack_examples}.csv")
    if not full_rows and not parity:
        return ""
    lines = ["## 1. Attack bench (TextFooler; target: whole SST-2 dev split in <= 30 s)", "",
             "| metric | robench, whole split | robench, subset | textattack:textfooler, subset |", "|---|---|---|---|"]
    for name in ATTACK_ROWS:
        cells = [(full_rows.get(name) or ["-"])[0], *(parity.get(name) or ["-", "-"])]
        if any(c != "-" for c in cells):
            lines.append(f"| {name.strip()} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _probe_summary(paths: Paths) -> str:
    saturation = _read_json(paths.out / "saturation.json")
    if not saturation:
        return ""
    lines = [f"## 2. Concurrent training jobs on one device ({saturation['model']}, batch {saturation['batch_size']}, "
             f"{saturation['steps']} steps each)", "",
             "| jobs | examples/s, all jobs | speed-up over 1 job | s per step, mean job | GPU utilization |",
             "|---|---|---|---|---|"]
    for r in saturation["rounds"]:
        util = "-" if r["gpu_utilization"] is None else f"{r['gpu_utilization']:.0f}%"
        lines.append(f"| {r['jobs']} | {r['examples_per_second']:.0f} | {r['speedup']:.2f}x | "
                     f"{r['seconds_per_step']:.3f} | {util} |")
    lines.append(f"\nSaturated (within {SATURATED:.0%} of the best) at **{saturation['saturating_jobs']} jobs**.")
    return "\n".join(lines) + "\n"


def _claims_summary(paths: Paths, state: dict[str, Any]) -> str:
    from robench.core.packed import runs_to_read
    from robench.core.records import iter_records
    from robench.report.compare import compare, group_settings

    runs = runs_to_read(paths.out, paths.cache)
    records = [r for r in iter_records(runs) if r.spec["attack"] == "advglue"
               and r.spec["train_size"] == state.get("train_size")] if runs.is_dir() else []
    if not records:
        return ""
    by_model: dict[str, list] = {}
    for r in records:
        by_model.setdefault(r.spec["model"], []).append(r)
    lines = [f"## 3. Claims: AdvGLUE-sst2 at {state.get('train_size')} SST-2 sentences, {state.get('jobs')} jobs at "
             "once", "", "| model | seeds | SST-2 dev acc | AdvGLUE-sst2 acc |", "|---|---|---|---|"]
    for model, recs in by_model.items():
        dev = [100 * r.metrics["dev_accuracy"] for r in recs]
        adv = [100 * r.metrics["robust_accuracy"] for r in recs]
        lines.append(f"| {model} | {len(recs)} | {_mean_std(dev)} | {_mean_std(adv)} |")
    if "bert" in by_model and len(by_model) > 1:
        found = compare(group_settings(records), runs, "bert")
        lines += ["", "| model - bert | seeds | points [95%] | detectable | Holm p | verdict | claim verdict |",
                  "|---|---|---|---|---|---|---|"]
        claim = _claim_verdict(found)
        lines += [_comparison_row(c, claim.get(id(c), "")) for c in found]
        lines.append(f"\nCPU reference ({_cpu_claim()}).")
    return "\n".join(lines) + "\n"


def _comparison_row(c, claim: str) -> str:
    """One `robench compare` row (robench.report.compare.Comparison) and the claim's verdict, if any."""
    d = c.difference
    interval = f"{100 * d.value:+.1f}" + ("" if d.low != d.low else f" [{100 * d.low:+.1f}, {100 * d.high:+.1f}]")
    return (f"| {c.setting.spec['model']} | {len(c.seeds)} | {interval} | {_number(100 * c.detectable, '.1f')} | "
            f"{_number(c.adjusted_p, '.3g')} | {c.verdict} | {claim} |")


def _number(value: float, spec: str) -> str:
    return "–" if value != value else format(value, spec)


def _mean_std(values: list[float]) -> str:
    return f"{values[0]:.1f}" if len(values) == 1 else f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f}"


def _claim_verdict(found: list) -> dict[int, str]:
    """IM-BERT's claim (+8.3 points) judged as studies/claims.py judges the CPU records: refuted when the paired
    test of +8.3 points has p < 0.05 (one claim: Holm changes nothing). The lend of 2026-12-04 passed 8.3 itself
    as that p-value, so its summary said "not distinguishable" where the test refuted the claim."""
    import importlib.util

    loader = importlib.util.spec_from_file_location("reference_claims", CLAIMS_SCRIPT)
    claims = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(claims)
    return {id(c): f"{IMBERT_CLAIM[0]}: {claims.verdict(c, claims.against_claim(c, IMBERT_CLAIM[1]))}"
            for c in found if c.setting.spec["model"] == "imbert"}


def _cpu_claim() -> str:
    rows = json.loads(CPU_CLAIMS.read_text(encoding="utf-8"))
    row = next(r for r in rows if r["claim"].startswith(IMBERT_CLAIM[0]))
    value, low, high = (100 * x for x in row["difference"])
    return f"{row['claim']}: {len(row['seeds'])} seeds, {value:+.1f} [{low:+.1f}, {high:+.1f}], {row['verdict']}"


def publish(protocol: Protocol, paths: Paths, state: dict[str, Any]) -> None:
    """Print the summary of every step so far, write it, refresh the bundle."""
    from robench.core.files import atomic_write

    text = summary(protocol, paths, state)
    print(text, flush=True)
    atomic_write(paths.out / "summary.md", text)
    if paths.bundle is None:
        return
    paths.bundle.mkdir(parents=True, exist_ok=True)
    partial = paths.bundle / "evidence-gpu.tar.gz.partial"
    with tarfile.open(partial, "w:gz") as tar:
        tar.add(paths.out, arcname=paths.out.name, filter=lambda info: None if info.name.endswith(".lock") else info)
    os.replace(partial, paths.bundle / "evidence-gpu.tar.gz")
    shutil.copyfile(paths.out / "summary.md", paths.bundle / "summary.md")


# ---------------------------------------------------------------- the driver

def read_state(paths: Paths, protocol: Protocol) -> dict[str, Any]:
    state = _read_json(paths.state) or {"protocol": protocol.name}
    if state["protocol"] != protocol.name:
        raise LendError(f"{paths.out} holds the {state['protocol']!r} protocol's results, not {protocol.name!r}: "
                        "give another --out")
    return state


def save_state(paths: Paths, state: dict[str, Any]) -> None:
    from robench.core.files import atomic_write

    atomic_write(paths.state, json.dumps(state, indent=1) + "\n")


def drive(protocol: Protocol, paths: Paths, args: argparse.Namespace) -> int:
    start = time.monotonic()
    deadline = start + args.limit - FINAL_RESERVE_S
    paths.out.mkdir(parents=True, exist_ok=True)
    unpack_committed(paths)
    state = read_state(paths, protocol)
    state["runs"] = state.get("runs", 0) + 1
    save_state(paths, state)
    failed = False
    for step in args.steps:
        left = deadline - time.monotonic()
        print(f"== {step} ({left:.0f} s left)", flush=True)
        if left <= 0:
            break
        try:
            failed |= not run_step(step, protocol, paths, args, state, deadline)
        except LendError as exc:
            print(f"gpu_lend: {step}: {exc}", flush=True)
            failed = True
        except Exception:  # one step's fault must not cost the lend the steps after it
            traceback.print_exc()
            failed = True
        save_state(paths, state)
        try:
            publish(protocol, paths, state)
        except Exception:  # the records are written; the next step publishes again
            traceback.print_exc()
    print(f"== done in {time.monotonic() - start:.0f} s; results in {paths.out}", flush=True)
    return 1 if failed else 0


def unpack_committed(paths: Paths) -> None:
    """A lend's records are committed packed (`robench pack`, as every published results directory): unpacked
    here, so that this lend skips what an earlier one finished."""
    from robench.core.packed import RECORDS, unpack_results_dir

    if (paths.out / RECORDS).is_file():
        print(f"unpacked {unpack_results_dir(paths.out, paths.cache)} committed run(s) in {paths.out}", flush=True)


def run_step(step: str, protocol: Protocol, paths: Paths, args: argparse.Namespace, state: dict[str, Any],
             deadline: float) -> bool:
    """One step; False when it failed or was stopped (what it finished is kept)."""
    if step in ("attack", "textattack"):
        return state.get(step) == "done" or attack_child(step, paths, args, state, deadline)
    if step == "probe":
        if "saturation" not in state:
            probe_step(protocol, paths, args, deadline)
            state["saturation"] = "saturation.json"
        return True
    if step == "claims":
        choose_size(protocol, paths, args, state, deadline)
    elif "train_size" not in state:
        raise LendError("the extra models train at the claims' size: run the claims step first")
    models = protocol.models if step == "claims" else protocol.extra_models
    counts = run_models(protocol, models, paths, args, state["train_size"], state["jobs"], deadline)
    print(f"{step}: " + ", ".join(f"{v} {k}" for k, v in counts.items()), flush=True)
    return counts["failed"] == 0 and counts["stopped at the limit"] == 0


def attack_child(step: str, paths: Paths, args: argparse.Namespace, state: dict[str, Any], deadline: float
                 ) -> bool:
    """The attack or textattack step in a child process, stopped at the deadline; its output's tail is printed
    here. A step cut off is run again by the next lend, without the parts it finished (their tables are kept)."""
    child = Job(step, [sys.executable, __file__, *protocol_flags(args), "--child-step", step])
    (job,) = run_jobs([child], 1, deadline, paths.cache / "logs")
    print((paths.cache / "logs" / f"{step}.log").read_text(encoding="utf-8")[-6000:], flush=True)
    if job.returncode == 0:
        state[step] = "done"
    return job.returncode == 0


def choose_size(protocol: Protocol, paths: Paths, args: argparse.Namespace, state: dict[str, Any],
                deadline: float) -> None:
    """The job count (--jobs, else the probe's) and the largest training size that fits the time left, once: a
    later lend keeps both (the run ids depend on the size)."""
    costs = load_costs(paths.out)
    state.setdefault("jobs", args.jobs or jobs_and_speedup(costs, None)[0])
    if "train_size" in state:
        return
    size = largest_size(protocol, costs, deadline - time.monotonic(), state["jobs"])
    if size is None:
        print(f"the claims do not fit the time left at {protocol.min_train_size} sentences; running them there "
              "anyway (a later lend resumes them)", flush=True)
    state["train_size"] = size or protocol.min_train_size
    save_state(paths, state)


def protocol_flags(args: argparse.Namespace) -> list[str]:
    """The flags a child process needs to see the same protocol and places."""
    flags = ["--protocol", args.protocol, "--out", str(args.out), "--cache-dir", str(args.cache_dir),
             "--device", args.device, "--limit", str(args.limit)]
    for name in ("data_dir", "backbone"):
        if getattr(args, name):
            flags += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return flags


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpu_lend", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", action="store_true", help="print each step's expected seconds; exit 1 over --limit")
    p.add_argument("--limit", type=float, default=600.0, help="seconds for the whole script (default 600)")
    p.add_argument("--protocol", choices=sorted(PROTOCOLS), default="h200")
    p.add_argument("--backbone", help="override the protocol's backbone (a local path: the CPU test's tiny BERT)")
    p.add_argument("--steps", type=lambda s: tuple(s.split(",")), default=PACK_STEPS,
                   help=f"comma-separated subset of {','.join(STEPS)}, run in that order (default: those the "
                        f"pack serves, {','.join(PACK_STEPS)})")
    p.add_argument("--jobs", type=int, help="concurrent jobs for the claims and extras (default: the probe's)")
    p.add_argument("--out", type=Path, default=REPO / "results" / "evidence-gpu",
                   help="records, tables, state (default results/evidence-gpu)")
    p.add_argument("--bundle", type=Path, help="also refresh DIR/evidence-gpu.tar.gz and DIR/summary.md after "
                                               "each step (on the lent machine: $OUT)")
    p.add_argument("--cache-dir", type=Path, default=Path(os.environ.get("ROBENCH_CACHE_DIR", "/tmp/gpu-lend-cache")),
                   help="checkpoints, built resources, job logs (default $ROBENCH_CACHE_DIR or /tmp/gpu-lend-cache)")
    p.add_argument("--data-dir", type=Path, help="default $ROBENCH_DATA_DIR")
    p.add_argument("--device", default="cuda")
    p.add_argument("--child-step", choices=("attack", "textattack"), help=argparse.SUPPRESS)
    p.add_argument("--probe-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--probe-dir", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--probe-index", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if unknown := sorted(set(args.steps) - set(STEPS)):
        p.error(f"unknown step(s) {unknown} (known: {', '.join(STEPS)})")
    args.steps = tuple(step for step in STEPS if step in args.steps)
    if args.limit <= 0 or (args.jobs is not None and args.jobs <= 0):
        p.error("--limit and --jobs must be positive")
    args.out, args.cache_dir = args.out.resolve(), args.cache_dir.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    from robench.core.errors import RobenchError

    args = parse_args(argv)
    protocol = PROTOCOLS[args.protocol]
    if args.backbone:
        protocol = replace(protocol, backbone=args.backbone)
    data = args.data_dir or (Path(os.environ["ROBENCH_DATA_DIR"]) if os.environ.get("ROBENCH_DATA_DIR") else None)
    paths = Paths(args.out, args.cache_dir, data.resolve() if data else None,
                  args.bundle.resolve() if args.bundle else None)
    try:
        if args.child_step == "attack":
            attack_step(protocol, paths, args.device)
        elif args.child_step == "textattack":
            with standing_in(NOT_CARRIED):
                textattack_step(protocol, paths, args.device)
        elif args.probe_worker:
            probe_worker(protocol, paths, args.device, args.probe_index, args.probe_dir)
        elif args.plan:
            lines, size = make_plan(protocol, paths, args.limit, _read_json(paths.state) or {}, args.steps)
            if not print_plan(lines, args.limit, size):
                raise LendError(f"the plan needs {sum(x.seconds for x in lines):.0f} s, over the limit of "
                                f"{args.limit:.0f} s")
        else:
            return drive(protocol, paths, args)
    except (LendError, RobenchError) as exc:
        print(f"gpu_lend: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
