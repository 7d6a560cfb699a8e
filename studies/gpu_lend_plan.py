"""studies/gpu_lend.py's protocols, places and plan: the expected seconds of each step, from the committed H200
timings or from a lend's own measurements (`<out>/calibration.json`, the probe's saturation), and the largest
training size whose claims fit the time left."""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "studies" / "gpu_lend.py"  # the driver: its child processes run it again


H200_RESULTS = REPO / "results" / "evidence-h200"  # the committed H200 timings (one partial lend), packed


H200_MLM = REPO / "results" / "evidence-h200" / "mlm-build.json"  # MiniLM training steps at batch 256 there


GPU_GRID = REPO / "results" / "grid-gpu.toml"  # the GPU protocol: training values and model parameters


CPU_CLAIMS = REPO / "results" / "reference" / "claims.json"


CLAIMS_SCRIPT = REPO / "studies" / "claims.py"


STEPS = ("attack", "textattack", "probe", "claims", "extra")


PACK_STEPS = ("attack", "textattack", "probe", "claims")  # what studies/gpu_prepare.py's pack serves (its STEPS)


IMBERT_CLAIM = ("IM-BERT, AdvGLUE-sst2, +8.3 points", 8.3)  # its paper (arXiv 2505.06889; studies/claims.py)


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
    measured = read_json(out / "calibration.json")
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
    saturation = read_json(out / "saturation.json")
    if saturation:
        one = saturation["rounds"][0]["examples_per_second"]
        speedup = {r["jobs"]: r["examples_per_second"] / one for r in saturation["rounds"]}
        costs = replace(costs, speedup=speedup, basis={**costs.basis, "speedup": "probe (saturation.json)"})
    return costs


def read_json(path: Path) -> dict[str, Any] | None:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


@dataclass(frozen=True)
class Dev:
    """The words per dev text (what the attack's query count follows)."""

    words: list[int]

    def queries(self, n: int | None, per_word: float) -> float:
        return sum(1 + per_word * w for w in self.words[:n])


def dev_words(protocol: Protocol, data: Path | None) -> Dev:
    from robench.core.paths import resolve_settings
    from robench.data import TASKS
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
