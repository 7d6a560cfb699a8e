"""The grid driver: RunSpecs -> train jobs, then attack jobs, on an executor; the result per cell.

Cells with a finished run record are skipped. Specs that differ only in the
attack share one fine-tuned checkpoint: the grid schedules ONE train job per
distinct `robench.training.loop.checkpoint_key`, and the attack jobs that need it once
it is done (they then reuse the cached checkpoint). A failed job is retried up to
`max_retries` times, then recorded in `<results_dir>/grid/<grid_id>/failures.json`
(outside `runs/`, so the leaderboard never reads it); the grid goes on. Records
land in `<results_dir>/runs/` exactly as with `robench run`.
"""
from __future__ import annotations

import json
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping

from robench.core.errors import RobenchError
from robench.core.hashing import content_hash
from robench.core.paths import Settings
from robench.grid.board import Board
from robench.grid.cells import GridCell, State, TrainJob
from robench.grid.config import GridConfig, expand, load_config
from robench.grid.executors import Failure, Hook, Job, LocalExecutor, RayExecutor
from robench.runs.spec import RunSpec

if TYPE_CHECKING:
    from robench.runs.runner import Attacked


@dataclass
class GridResult:
    grid_id: str
    cells: list[GridCell]
    trains: list[TrainJob]
    failures_path: Path
    seconds: float

    def count(self, state: State) -> int:
        return sum(cell.state == state for cell in self.cells)


def grid(config: str | Path | Mapping[str, Any] | GridConfig, settings: Settings, executor: str = "ray",
         device: str = "auto", address: str | None = None, max_retries: int = 2, console: Any = None,
         before: Hook | None = None, planned: GridPlan | None = None) -> GridResult:
    """Run every cell of `config` that has no finished record; see the module docstring.

    `executor` is "ray" or "local"; `before` (tests only) runs in the worker before each job.
    `console`: a rich Console for the live table, or None for silence. `planned`: `plan_cells` of the config's
    specs, when the caller has made it (each spec is resolved once).
    """
    cfg = config if isinstance(config, GridConfig) else load_config(config)
    if max_retries < 0:
        raise RobenchError(f"--max-retries must be >= 0, got {max_retries}")
    if executor not in ("ray", "local"):
        raise RobenchError(f"unknown executor {executor!r} (use ray or local)")
    start = time.perf_counter()
    cells, trains = planned or plan_cells(expand(cfg), settings)
    grid_id = f"{cfg.name}-{content_hash(sorted(c.spec.run_id for c in cells), 8)}"
    failures_path = settings.results_dir / "grid" / grid_id / "failures.json"
    driver = _Driver(trains, failures_path, max_retries)
    board = Board(cells, trains, f"grid {grid_id}")
    run_jobs = LocalExecutor if executor == "local" else RayExecutor
    kwargs = {} if executor == "local" else {"resources": cfg.resources, "address": address}
    with board.live(console):
        if trains:
            pool = run_jobs(device, before=before, started=driver.started, **kwargs)
            try:
                driver.run(pool, settings, board.refresh)
            finally:
                pool.close()
        driver.write_failures()
    if console is not None and not console.is_terminal:
        console.line()  # rich's Live leaves the last line open when not on a terminal
    return GridResult(grid_id, cells, trains, failures_path, time.perf_counter() - start)


GridPlan = tuple[list[GridCell], list[TrainJob]]


def plan_cells(specs: list[RunSpec], settings: Settings) -> GridPlan:
    """Resolve every spec once (fail fast, before any job), skip finished ones, group the rest by checkpoint."""
    from robench.runs.resolve import resolve_run
    from robench.runs.store import RunStore
    from robench.training.loop import checkpoint_key

    cells, trains = [], {}
    for spec in specs:
        resolved = resolve_run(spec, settings)
        key = checkpoint_key(resolved)
        cell = GridCell(resolved, key)
        cells.append(cell)
        if RunStore(settings.runs_dir, cell.spec.run_id).finished(resolved.hyperparameters(),
                                                                     resolved.resource_identity()) is not None:
            cell.state = "skipped"
            continue
        trains.setdefault(key, TrainJob(resolved, key, [])).cells.append(cell)
    return cells, list(trains.values())


class _Driver:
    """Submits train jobs, then each one's attack jobs; retries failures; records the ones that stay failed."""

    def __init__(self, trains: list[TrainJob], failures_path: Path, max_retries: int) -> None:
        self.trains = {t.key: t for t in trains}
        self.cells = {c.spec.run_id: c for t in trains for c in t.cells}
        self.failures_path, self.max_retries = failures_path, max_retries
        self.failures: list[dict[str, Any]] = []

    def started(self, job: Job) -> None:
        if job.kind == "train":
            self.trains[job.key].state = "training"
            for cell in self.trains[job.key].cells:
                cell.state = "training"
        else:
            self.cells[job.key].state = "attacking"

    def run(self, pool: LocalExecutor | RayExecutor, settings: Settings, refresh: Callable[[], None]) -> None:
        """Keep at most `pool.slots` jobs in flight; a finished checkpoint's attacks go before the next training,
        so records land while the grid runs (trains in config order: list the slowest model first)."""
        trains = deque(Job("train", t.resolved, t.key) for t in self.trains.values())
        attacks: deque[Job] = deque()

        def fill() -> None:
            while pool.pending < pool.slots and (attacks or trains):
                pool.submit(attacks.popleft() if attacks else trains.popleft())

        fill()
        refresh()
        while pool.pending:
            job, output, failure = pool.next_done()
            target = self.trains[job.key] if job.kind == "train" else self.cells[job.key]
            target.attempts += 1
            if failure is not None:
                target.error = failure.error
                if target.attempts <= self.max_retries:
                    (attacks if job.kind == "attack" else trains).appendleft(job)
                else:
                    self._fail(job, target, failure)
            elif job.kind == "train":
                target.state = "done"
                for cell in target.cells:
                    cell.state = "pending"
                    attacks.append(Job("attack", cell.resolved, cell.spec.run_id))
            else:
                _keep_record(settings, output)
                target.state, target.error = "done", ""
            fill()
            refresh()

    def _fail(self, job: Job, target: TrainJob | GridCell, failure: Failure) -> None:
        cells = target.cells if isinstance(target, TrainJob) else [target]
        target.state = "failed"
        for cell in cells:
            cell.state = "failed"
            cell.error = failure.error if cell is target else f"training failed: {failure.error}"
        self.failures.append({"job": job.kind, "key": job.key, "run_ids": [c.spec.run_id for c in cells],
                              "spec": job.spec.to_dict(), "attempts": target.attempts, "error": failure.error,
                              "traceback": failure.detail})
        self.write_failures()

    def write_failures(self) -> None:
        from robench.core.files import atomic_write

        atomic_write(self.failures_path, json.dumps({"failures": self.failures}, indent=2, default=str))


def _keep_record(settings: Settings, attacked: Attacked) -> None:
    """Write the worker's record here when it ran on a node without this results dir (no shared disk): each disk
    gets it once."""
    from robench.runs.runner import write
    from robench.runs.store import RunStore

    store = RunStore(settings.runs_dir, attacked.record.run_id)
    if not store.record_path.is_file():
        write(store, attacked)


def grid_estimate(trains: list[TrainJob], settings: Settings, device: str, persist: bool):
    """The cost of every train job and attack cell still to run, added up."""
    from robench.classifier.device import pick_device
    from robench.runs.estimate import estimate, total_estimate
    from robench.training.loop import is_cached

    torch_device, memo, parts = pick_device(device), {}, []
    for job in trains:
        cached = is_cached(settings.checkpoints_dir / job.key)
        for i, cell in enumerate(job.cells):  # the first cell of a job trains its checkpoint, the others reuse it
            parts.append(estimate(cell.resolved, torch_device, cached or i > 0, persist, memo))
    return total_estimate(parts, torch_device)
