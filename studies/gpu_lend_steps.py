"""studies/gpu_lend.py's steps: jobs run under the deadline, the attack bench (1), the probe of how many jobs
saturate the device (2), the claims and the extras (3 and 4)."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from gpu_lend_plan import (
    SATURATED,
    SCRIPT,
    LendError,
    Paths,
    Protocol,
    dev_words,
    load_costs,
    model_params,
    probe_model,
    probe_seconds,
    read_json,
    slowest_first,
    train_values,
)

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
    measured = read_json(paths.out / "calibration.json") or {}
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
    from robench.data import TASKS
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
    """`robench.runs.speed.model_speed` of each claim model at the claims' training values, on this device."""
    from robench.classifier.device import pick_device
    from robench.runs.resolve import resolve_run
    from robench.runs.speed import model_speed

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
    """One probe process: build the slowest claim model and its objective as `robench.runs.speed.measure_speed` does,
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
    command = [sys.executable, str(SCRIPT), *protocol_flags(args), "--probe-worker", "--probe-dir", str(folder)]
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

    records = [read_json(paths.out / "runs" / f"{job.name}.json") for job in jobs]
    gaps = [job.seconds - r["timings"]["total_seconds"] for job, r in zip(jobs, records) if r]
    measured = read_json(paths.out / "calibration.json")
    if gaps and measured:
        measured["process_start"] = statistics.median(gaps)
        atomic_write(paths.out / "calibration.json", json.dumps(measured, indent=1) + "\n")


def protocol_flags(args: argparse.Namespace) -> list[str]:
    """The flags a child process needs to see the same protocol and places."""
    flags = ["--protocol", args.protocol, "--out", str(args.out), "--cache-dir", str(args.cache_dir),
             "--device", args.device, "--limit", str(args.limit)]
    for name in ("data_dir", "backbone"):
        if getattr(args, name):
            flags += [f"--{name.replace('_', '-')}", str(getattr(args, name))]
    return flags
