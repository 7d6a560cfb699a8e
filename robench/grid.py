"""Benchmark grids: a TOML config -> RunSpecs (cartesian product) -> train jobs, then attack jobs.

    robench grid examples/grid-tiny.toml                 # local Ray instance sized to this machine
    robench grid CONFIG --address HEAD:6379              # an existing Ray cluster
    robench grid CONFIG --executor local                 # sequentially in this process (the test oracle)

Cells with a finished run record are skipped. Specs that differ only in the
attack share one fine-tuned checkpoint: the grid schedules ONE train job per
distinct `robench.training.checkpoint_key`, and the attack jobs that need it once
it is done (they then reuse the cached checkpoint). A failed job is retried up to
`max_retries` times, then recorded in `<results_dir>/grid/<grid_id>/failures.json`
(outside `runs/`, so the leaderboard never reads it); the grid goes on. Records
land in `<results_dir>/runs/` exactly as with `robench run`.
"""
from __future__ import annotations

import json
import time
import tomllib
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Callable, Literal, Mapping

from robench.errors import RobenchError
from robench.executors import Failure, Hook, Job, JobResources, LocalExecutor, RayExecutor
from robench.params import make_params
from robench.settings import Settings
from robench.spec import RunSpec, TrainConfig, content_hash

State = Literal["pending", "training", "attacking", "done", "failed", "skipped"]
Size = int | None  # None: the whole split ("full" in the config)
Sizes = dict[str, tuple[Size, ...]]  # by task (train_size) or attack (eval_size); "default" for the rest

KNOWN_KEYS = ("name", "tasks", "models", "attacks", "backbones", "seeds", "train_size", "eval_size",
              "data_source", "train", "model_params", "attack_params", "resources")


@dataclass(frozen=True)
class GridConfig:
    """A parsed grid config; `expand` turns it into RunSpecs."""

    name: str
    tasks: tuple[str, ...]
    models: tuple[str, ...]
    attacks: tuple[str, ...]
    backbones: tuple[str, ...] = ("minilm",)
    seeds: tuple[int, ...] = (0,)
    train_size: Sizes = field(default_factory=lambda: {"default": (None,)})
    eval_size: Sizes = field(default_factory=lambda: {"default": (None,)})
    data_source: Literal["local", "hub"] = "local"
    train: TrainConfig = field(default_factory=TrainConfig)
    model_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    attack_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    resources: JobResources = field(default_factory=JobResources)


def load_config(source: str | Path | Mapping[str, Any]) -> GridConfig:
    """Parse a grid config from a TOML file or an already-parsed mapping; bad input -> RobenchError."""
    if isinstance(source, Mapping):
        raw, where, default_name = dict(source), "grid config", "grid"
    else:
        path = Path(source)
        if not path.is_file():
            raise RobenchError(f"grid config {path} not found")
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise RobenchError(f"{path}: invalid TOML: {exc}") from exc
        where, default_name = str(path), path.stem
    unknown = sorted(set(raw) - set(KNOWN_KEYS))
    if unknown:
        raise RobenchError(f"{where}: unknown key(s) {unknown} (known: {', '.join(KNOWN_KEYS)})")
    for key in ("tasks", "models", "attacks"):
        if key not in raw:
            raise RobenchError(f"{where}: missing {key!r} (a list of names)")
    tasks, models, attacks = (_names(raw[k], k, where) for k in ("tasks", "models", "attacks"))
    source_kind = raw.get("data_source", "local")
    if source_kind not in ("local", "hub"):
        raise RobenchError(f"{where}: data_source must be 'local' or 'hub', got {source_kind!r}")
    resources = make_params(JobResources, _table(raw, "resources", where), f"{where} [resources]")
    return GridConfig(
        name=_name(raw.get("name", default_name), where), tasks=tasks, models=models, attacks=attacks,
        backbones=_names(raw.get("backbones", ["minilm"]), "backbones", where),
        seeds=_seeds(raw.get("seeds", [0]), where),
        train_size=_sizes(raw.get("train_size", "full"), "train_size", tasks, where),
        eval_size=_sizes(raw.get("eval_size", "full"), "eval_size", attacks, where),
        data_source=source_kind,
        train=make_params(TrainConfig, _table(raw, "train", where), f"{where} [train]"),
        model_params=_overrides(raw, "model_params", models, where),
        attack_params=_overrides(raw, "attack_params", attacks, where),
        resources=resources,
    )


def expand(config: GridConfig) -> list[RunSpec]:
    """The cartesian product tasks x models x backbones x seeds x train sizes x attacks x eval sizes."""
    specs = []
    for task, model, backbone, seed in product(config.tasks, config.models, config.backbones, config.seeds):
        for train_size, attack in product(_sizes_for(config.train_size, task), config.attacks):
            for eval_size in _sizes_for(config.eval_size, attack):
                specs.append(RunSpec(
                    task=task, model=model, attack=attack, backbone=backbone, seed=seed, train_size=train_size,
                    eval_size=eval_size, data_source=config.data_source, train=config.train,
                    model_params=dict(config.model_params.get(model, {})),
                    attack_params=dict(config.attack_params.get(attack, {}))))
    return specs


# ---------------------------------------------------------------- config parsing helpers

def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value.strip() or "/" in value:
        raise RobenchError(f"{where}: name must be a non-empty string without '/', got {value!r}")
    return value.strip()


def _names(value: Any, key: str, where: str) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip() for v in values):
        raise RobenchError(f"{where}: {key} must be a non-empty list of names, got {value!r}")
    if len(set(values)) != len(values):
        raise RobenchError(f"{where}: {key} lists a name twice: {values}")
    return tuple(v.strip() for v in values)


def _seeds(value: Any, where: str) -> tuple[int, ...]:
    values = [value] if isinstance(value, int) else value
    if not isinstance(values, list) or not values or not all(type(v) is int for v in values):
        raise RobenchError(f"{where}: seeds must be a non-empty list of integers, got {value!r}")
    if len(set(values)) != len(values):
        raise RobenchError(f"{where}: seeds lists a seed twice: {values}")
    return tuple(values)


def _size_list(value: Any, key: str, where: str) -> tuple[Size, ...]:
    values = value if isinstance(value, list) else [value]
    out = []
    for v in values:
        if v == "full":
            out.append(None)
        elif type(v) is int and v > 0:
            out.append(v)
        else:
            raise RobenchError(f"{where}: {key} values must be positive integers or \"full\", got {v!r}")
    if not out or len(set(out)) != len(out):
        raise RobenchError(f"{where}: {key} must list distinct sizes, got {value!r}")
    return tuple(out)


def _sizes(value: Any, key: str, names: tuple[str, ...], where: str) -> Sizes:
    """An int, "full", a list of them, or a table of those by name (with an optional "default")."""
    if not isinstance(value, dict):
        return {"default": _size_list(value, key, where)}
    stray = sorted(set(value) - set(names) - {"default"})
    if stray:
        raise RobenchError(f"{where}: {key} names {stray}, which are not in the grid ({', '.join(names)}) "
                           "and not 'default'")
    return {k: _size_list(v, f"{key}.{k}", where) for k, v in value.items()}


def _sizes_for(sizes: Sizes, name: str) -> tuple[Size, ...]:
    return sizes.get(name, sizes.get("default", (None,)))


def _table(raw: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise RobenchError(f"{where}: [{key}] must be a table of key = value pairs, got {value!r}")
    return value


def _overrides(raw: dict[str, Any], key: str, names: tuple[str, ...], where: str) -> dict[str, dict[str, Any]]:
    table = _table(raw, key, where)
    for name, params in table.items():
        if name not in names:
            raise RobenchError(f"{where}: [{key}.{name}] but {name!r} is not in the grid ({', '.join(names)})")
        if not isinstance(params, dict):
            raise RobenchError(f"{where}: [{key}.{name}] must be a table of hyperparameters")
    return table


# ---------------------------------------------------------------- the grid's state

@dataclass
class Cell:
    """One run of the grid and where it stands."""

    spec: RunSpec
    checkpoint: str  # the checkpoint key it shares with the other attacks on the same model
    state: State = "pending"
    attempts: int = 0
    error: str = ""


@dataclass
class TrainJob:
    """One fine-tuning job, shared by every cell whose spec differs only in the attack."""

    spec: RunSpec
    key: str
    cells: list[Cell]
    state: State = "pending"
    attempts: int = 0
    error: str = ""


@dataclass
class GridResult:
    grid_id: str
    cells: list[Cell]
    trains: list[TrainJob]
    failures_path: Path
    seconds: float

    def count(self, state: State) -> int:
        return sum(cell.state == state for cell in self.cells)


def grid(config: str | Path | Mapping[str, Any] | GridConfig, settings: Settings, executor: str = "ray",
         device: str = "auto", address: str | None = None, max_retries: int = 2, console: Any = None,
         before: Hook | None = None) -> GridResult:
    """Run every cell of `config` that has no finished record; see the module docstring.

    `executor` is "ray" or "local"; `before` (tests only) runs in the worker before each job.
    `console`: a rich Console for the live table, or None for silence.
    """
    cfg = config if isinstance(config, GridConfig) else load_config(config)
    if max_retries < 0:
        raise RobenchError(f"--max-retries must be >= 0, got {max_retries}")
    if executor not in ("ray", "local"):
        raise RobenchError(f"unknown executor {executor!r} (use ray or local)")
    start = time.perf_counter()
    cells, trains = plan(expand(cfg), settings)
    grid_id = f"{cfg.name}-{content_hash(sorted(c.spec.run_id for c in cells), 8)}"
    failures_path = settings.results_dir / "grid" / grid_id / "failures.json"
    driver = _Driver(trains, failures_path, max_retries)
    board = _Board(cells, trains, f"grid {grid_id}")
    run_jobs = LocalExecutor if executor == "local" else RayExecutor
    kwargs = {} if executor == "local" else {"resources": cfg.resources, "address": address}
    with board.live(console):
        if trains:
            pool = run_jobs(settings, device, before=before, started=driver.started, **kwargs)
            try:
                driver.run(pool, settings, board.refresh)
            finally:
                pool.close()
        driver.write_failures()
    if console is not None and not console.is_terminal:
        console.line()  # rich's Live leaves the last line open when not on a terminal
    return GridResult(grid_id, cells, trains, failures_path, time.perf_counter() - start)


def plan(specs: list[RunSpec], settings: Settings) -> tuple[list[Cell], list[TrainJob]]:
    """Validate every spec (fail fast, before any job), skip finished ones, group the rest by checkpoint."""
    from robench.resolve import resolve_run
    from robench.results import RunStore
    from robench.training import checkpoint_key

    cells, trains = [], {}
    for spec in specs:
        key = checkpoint_key(resolve_run(spec, settings))
        cell = Cell(spec, key)
        cells.append(cell)
        if RunStore(settings.runs_dir, spec.run_id).finished() is not None:
            cell.state = "skipped"
            continue
        trains.setdefault(key, TrainJob(spec, key, [])).cells.append(cell)
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
        for train in self.trains.values():
            pool.submit(Job("train", train.spec, train.key))
        refresh()
        while pool.pending:
            job, output, failure = pool.next_done()
            target = self.trains[job.key] if job.kind == "train" else self.cells[job.key]
            target.attempts += 1
            if failure is not None:
                target.error = failure.error
                if target.attempts <= self.max_retries:
                    pool.submit(job)
                else:
                    self._fail(job, target, failure)
            elif job.kind == "train":
                target.state = "done"
                for cell in target.cells:
                    cell.state = "pending"
                    pool.submit(Job("attack", cell.spec, cell.spec.run_id))
            else:
                _keep_record(settings, output)
                target.state, target.error = "done", ""
            refresh()

    def _fail(self, job: Job, target: TrainJob | Cell, failure: Failure) -> None:
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
        from robench.results import atomic_write

        atomic_write(self.failures_path, json.dumps({"failures": self.failures}, indent=2, default=str))


def _keep_record(settings: Settings, output: dict[str, Any]) -> None:
    """Write the worker's record here too when it ran on a node without this results dir (no shared disk)."""
    from robench.results import RunStore, atomic_write

    store = RunStore(settings.runs_dir, output["run_id"])
    if not store.record_path.is_file():
        atomic_write(store.csv_path, output["csv"])
        atomic_write(store.record_path, output["record"])


# ---------------------------------------------------------------- the live table

STYLE = {"pending": "dim", "training": "yellow", "attacking": "cyan", "done": "green", "failed": "bold red",
         "skipped": "blue"}


class _Board:
    """A rich table: one row per checkpoint (task, model, seed, ...), then its train job and one column per attack
    (per attack and eval size, where an attack has several)."""

    def __init__(self, cells: list[Cell], trains: list[TrainJob], title: str) -> None:
        self.cells, self.title = cells, title
        self.train_state = {t.key: t for t in trains}
        sizes: dict[str, set] = {}
        for cell in cells:
            sizes.setdefault(cell.spec.attack, set()).add(cell.spec.eval_size)
        self.attack_columns = {(c.spec.attack, c.spec.eval_size): c.spec.attack if len(sizes[c.spec.attack]) == 1
                               else f"{c.spec.attack} n={_text(c.spec.eval_size)}" for c in cells}
        varying = [k for k in ("backbone", "train_size") if len({getattr(c.spec, k) for c in cells}) > 1]
        self.columns = ["task", "model", "seed", *varying]
        self.rows: dict[str, list[Cell]] = {}
        for cell in cells:
            self.rows.setdefault(cell.checkpoint, []).append(cell)
        self._live = None

    def table(self):
        from rich.table import Table

        counts = {s: sum(c.state == s for c in self.cells) for s in STYLE}
        caption = "  ".join(f"[{STYLE[s]}]{s} {n}[/]" for s, n in counts.items() if n)
        table = Table(title=self.title, caption=caption)
        for name in [*self.columns, "train", *self.attack_columns.values()]:
            table.add_column(name)
        for key, row in self.rows.items():
            train = self.train_state.get(key)
            states = {(c.spec.attack, c.spec.eval_size): _label(c.state, c.attempts) for c in row}
            table.add_row(*[_text(getattr(row[0].spec, k)) for k in self.columns],
                          "skipped" if train is None else _label(train.state, train.attempts),
                          *[states.get(column, "") for column in self.attack_columns])
        return table

    def live(self, console: Any):
        import contextlib

        if console is None:
            return contextlib.nullcontext()
        from rich.live import Live

        self._live = Live(self.table(), console=console, refresh_per_second=2, vertical_overflow="visible")
        return self._live

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.table())


def _text(value: Any) -> str:
    return "full" if value is None else str(value)


def _label(state: State, attempts: int) -> str:
    tries = f" ({attempts} tries)" if attempts > 1 or (state == "failed" and attempts) else ""
    return f"[{STYLE[state]}]{state}{tries}[/]"
