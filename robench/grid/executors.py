"""Where grid jobs run: in this process, one after another (`LocalExecutor`), or on Ray (`RayExecutor`).

A job is "train" (fine-tune one checkpoint, `robench.runs.runner.train_checkpoint`) or "attack"
(`robench.runs.runner.run_stages`, which reuses that checkpoint). Both executors run the same
`execute` function; they only differ in where and when. Ray workers are separate
processes (possibly on other machines): everything a job needs travels with it
(the resolved run with its settings and data, the device), plus the environment variables in `FORWARDED_ENV`.
"""
from __future__ import annotations

import logging
import os
import traceback
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Literal

from robench.core.errors import RobenchError
from robench.runs.spec import RunSpec

if TYPE_CHECKING:
    from robench.runs.resolve import ResolvedRun

FORWARDED_ENV = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_HOME", "NLTK_DATA",
                 "TOKENIZERS_PARALLELISM", "ROBENCH_DATA_DIR", "ROBENCH_CACHE_DIR", "ROBENCH_RESULTS_DIR")


@dataclass(frozen=True)
class Job:
    kind: Literal["train", "attack"]
    resolved: ResolvedRun  # resolved once, by the driver (`robench.grid.driver.plan_cells`)
    key: str  # the checkpoint key (train) or the run id (attack)

    @property
    def spec(self) -> RunSpec:
        return self.resolved.spec


@dataclass(frozen=True)
class Failure:
    error: str  # one line: exception type and message
    detail: str  # the full traceback


@dataclass(frozen=True)
class JobResources:
    """What each job asks Ray for. `gpus` applies only when the grid runs on CUDA (may be fractional)."""

    cpus: float = 1.0
    gpus: float = 1.0

    def __post_init__(self) -> None:
        if self.cpus <= 0 or self.gpus <= 0:
            raise ValueError(f"cpus and gpus per job must be positive, got {self.cpus} and {self.gpus}")


Hook = Callable[[Job], None]  # runs in the worker before each job (tests inject failures with it)


def execute(job: Job, device: str, before: Hook | None = None) -> Any:
    """Run one job through the runner's stages: a train job's checkpoint path; an attack job's `Attacked` (its
    record, written once here, and its results, for a driver that does not share this disk)."""
    from robench.classifier.device import pick_device
    from robench.core.records import read_examples
    from robench.runs import runner

    if before is not None:
        before(job)
    if job.kind == "train":
        return {"checkpoint": str(runner.train_checkpoint(job.resolved, pick_device(device)).checkpoint)}
    attacked = runner.run_stages(job.resolved, device)
    if attacked.results is None:  # finished before, on this node's disk: its results travel with it
        attacked.results = read_examples(job.resolved.settings.runs_dir, attacked.record.run_id)
    return attacked


class LocalExecutor:
    """Runs jobs sequentially in this process, in submission order: the test oracle for `RayExecutor`."""

    def __init__(self, device: str = "auto", before: Hook | None = None, started: Hook | None = None) -> None:
        self.device, self.before, self.started = device, before, started
        self._queue: deque[Job] = deque()
        self.slots = 1  # jobs the driver keeps in flight

    @property
    def pending(self) -> int:
        return len(self._queue)

    def submit(self, job: Job) -> None:
        self._queue.append(job)

    def next_done(self) -> tuple[Job, Any, Failure | None]:
        job = self._queue.popleft()
        if self.started is not None:
            self.started(job)
        try:
            return job, execute(job, self.device, self.before), None
        except Exception as exc:  # noqa: BLE001 - any job failure is recorded, and the grid goes on
            return job, None, Failure(f"{type(exc).__name__}: {exc}", traceback.format_exc())

    def close(self) -> None:
        self._queue.clear()


class RayExecutor:
    """Runs jobs as Ray tasks, each declaring its CPUs (and GPUs on CUDA).

    Joins the cluster at `address` (or `$RAY_ADDRESS`); otherwise starts a local
    Ray instance sized to this machine and shuts it down on `close`. If Ray is
    already initialised in this process (a notebook, the tests), it is used as is.
    Ray's own retries are off: the grid driver retries, identically for both executors.
    """

    def __init__(self, device: str = "auto", resources: JobResources = JobResources(),
                 address: str | None = None, before: Hook | None = None, started: Hook | None = None) -> None:
        import ray

        self._owned = not ray.is_initialized()
        if self._owned:
            quiet = dict(include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False)
            if address or os.environ.get("RAY_ADDRESS"):
                ray.init(address=address, **quiet)
            else:
                ray.init(num_cpus=os.cpu_count(), **quiet)
        cluster = ray.cluster_resources()
        if resources.cpus > cluster.get("CPU", 0.0):
            raise RobenchError(f"each job asks for {resources.cpus} CPUs but the Ray cluster has "
                               f"{cluster.get('CPU', 0.0):g}; lower [resources] cpus in the grid config")
        gpus = _gpus_per_job(device, resources.gpus, cluster.get("GPU", 0.0))
        env = {name: os.environ[name] for name in FORWARDED_ENV if name in os.environ}
        env.setdefault("TOKENIZERS_PARALLELISM", "false")
        self._task = ray.remote(execute).options(num_cpus=resources.cpus, num_gpus=gpus, max_retries=0,
                                                 runtime_env={"env_vars": env})
        self.before, self.started = before, started
        self.device = "cuda" if gpus else "cpu"  # Ray sets CUDA_VISIBLE_DEVICES to the job's GPU
        self.slots = _slots(cluster, resources.cpus, gpus)  # jobs the driver keeps in flight
        self._jobs: dict[Any, Job] = {}

    @property
    def pending(self) -> int:
        return len(self._jobs)

    def submit(self, job: Job) -> None:
        ref = self._task.remote(job, self.device, self.before)
        self._jobs[ref] = job
        if self.started is not None:  # the driver submits only what fits, so Ray starts it now
            self.started(job)

    def next_done(self) -> tuple[Job, Any, Failure | None]:
        import ray

        ready, _ = ray.wait(list(self._jobs), num_returns=1)
        job = self._jobs.pop(ready[0])
        try:
            return job, ray.get(ready[0]), None
        except ray.exceptions.RayError as exc:
            cause = getattr(exc, "cause", None) or exc
            return job, None, Failure(f"{type(cause).__name__}: {cause}".splitlines()[0], str(exc))

    def close(self) -> None:
        import ray

        for ref in self._jobs:
            ray.cancel(ref, force=True)
        self._jobs.clear()
        if self._owned:
            ray.shutdown()


def _slots(cluster: dict[str, float], cpus: float, gpus: float) -> int:
    """How many jobs fit on the cluster at once (at least one)."""
    fit = cluster.get("CPU", 0.0) // cpus
    if gpus:
        fit = min(fit, cluster.get("GPU", 0.0) // gpus)
    return max(1, int(fit))


def _gpus_per_job(device: str, gpus: float, cluster_gpus: float) -> float:
    """GPUs each job asks for: `gpus` on CUDA (auto: when the cluster has GPUs), else none."""
    if device == "cpu":
        return 0.0
    if device.startswith("cuda"):
        if cluster_gpus == 0:
            raise RobenchError(f"device {device!r} requested but the Ray cluster has no GPUs; use --device cpu")
        if device != "cuda":
            raise RobenchError("on Ray, use --device cuda (Ray assigns each job its GPU), not a numbered device")
        return gpus
    if device != "auto":
        raise RobenchError(f"unknown device {device!r} (use auto, cpu or cuda)")
    return gpus if cluster_gpus > 0 else 0.0
