"""Grid configs: a TOML file (or mapping) -> `GridConfig` -> RunSpecs (the cartesian product).

See docs/guide/grid.md for the keys; every mistake in a config is a RobenchError naming the file and key.
"""
from __future__ import annotations

import tomllib
from dataclasses import asdict, dataclass, field
from itertools import product
from pathlib import Path
from typing import Any, Literal, Mapping

from robench.core.errors import RobenchError
from robench.core.params import make_params
from robench.core.registry import NAME
from robench.core.text import excerpt
from robench.grid.executors import JobResources
from robench.runs.options import RunOptions, build_specs
from robench.runs.presets import PRESETS, Preset, get_preset
from robench.runs.spec import MAX_SEED, RunSpec, TrainConfig

GRID_PRESET = "paper"  # a grid is an explicit protocol: what it does not say is the full setting

Size = int | None  # None: the whole split ("full" in the config)
Sizes = dict[str, tuple[Size, ...]]  # by task (train_size) or attack (eval_size); "default" for the rest

KNOWN_KEYS = ("name", "preset", "tasks", "models", "attacks", "backbones", "seeds", "train_size", "eval_size",
              "data_source", "train", "model_params", "attack_params", "model_cells", "resources")


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
    train_by_size: dict[Size, TrainConfig] = field(default_factory=dict)  # [train] values given per training size
    model_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    attack_params: dict[str, dict[str, Any]] = field(default_factory=dict)
    model_cells: dict[str, dict[str, tuple]] = field(default_factory=dict)  # a model's subset of attacks / seeds
    resources: JobResources = field(default_factory=JobResources)
    task_sources: dict[str, dict[str, Any]] = field(default_factory=dict)  # a task file entry -> its definition


def load_config(source: str | Path | Mapping[str, Any]) -> GridConfig:
    """Parse a grid config from a TOML file or an already-parsed mapping; bad input -> RobenchError."""
    if isinstance(source, Mapping):
        raw, where, default_name, base = dict(source), "grid config", "grid", Path.cwd()
    else:
        path = Path(source)
        if not path.is_file():
            raise RobenchError(f"grid config {path} not found")
        try:
            raw = tomllib.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError as exc:
            raise RobenchError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
        except tomllib.TOMLDecodeError as exc:
            raise RobenchError(f"{path}: invalid TOML: {exc}") from exc
        where, default_name, base = str(path), path.stem, path.resolve().parent
    unknown = sorted(set(raw) - set(KNOWN_KEYS))
    if unknown:
        raise RobenchError(f"{where}: unknown key(s) {unknown} (known: {', '.join(KNOWN_KEYS)})")
    for key in ("tasks", "models", "attacks"):
        if key not in raw:
            raise RobenchError(f"{where}: missing {key!r} (a list of names)")
    tasks, models, attacks = (_names(raw[k], k, where) for k in ("tasks", "models", "attacks"))
    seeds = _seeds(raw.get("seeds", [0]), where)
    source_kind = raw.get("data_source", "local")
    if source_kind not in ("local", "hub"):
        raise RobenchError(f"{where}: data_source must be 'local' or 'hub', got {source_kind!r}")
    resources = make_params(JobResources, _table(raw, "resources", where), f"{where} [resources]")
    preset = _preset(raw.get("preset", GRID_PRESET), where)
    train_sizes = _sizes(raw.get("train_size", _size_key(preset.train_size)), "train_size", tasks, where)
    train, train_by_size = _train(preset.train_values(), _table(raw, "train", where), train_sizes, where)
    return GridConfig(
        name=_name(raw.get("name", default_name), where), tasks=tasks, models=models, attacks=attacks,
        backbones=_names(raw.get("backbones", ["minilm"]), "backbones", where),
        seeds=seeds,
        train_size=train_sizes,
        eval_size=_sizes(raw["eval_size"] if "eval_size" in raw else _preset_eval_sizes(preset, attacks), "eval_size",
                         attacks, where),
        data_source=source_kind,
        train=train, train_by_size=train_by_size,
        model_params=_overrides(raw, "model_params", models, where),
        attack_params=_overrides(raw, "attack_params", attacks, where),
        model_cells=_model_cells(raw, models, attacks, seeds, where),
        resources=resources, task_sources=_task_sources(tasks, base, where),
    )


def expand(config: GridConfig) -> list[RunSpec]:
    """The cartesian product tasks x models x backbones x seeds x train sizes x attacks x eval sizes, each
    model restricted to its `[model_cells]` attacks and seeds where it has some."""
    specs = []
    for task, model, backbone, seed in product(config.tasks, config.models, config.backbones, config.seeds):
        cells = config.model_cells.get(model, {})
        if seed not in cells.get("seeds", config.seeds):
            continue
        for train_size, attack in product(_sizes_for(config.train_size, task), cells.get("attacks", config.attacks)):
            for eval_size in _sizes_for(config.eval_size, attack):
                source = config.task_sources.get(task)
                read = {"task": task, "data_source": config.data_source} if source is None else \
                    {"task": source["name"], "task_source": source, "data_source": "local"}
                train = asdict(config.train_by_size.get(train_size, config.train))
                options = RunOptions(model=model, attack=attack, backbone=backbone, seeds=(seed,),
                                     train_size=_size_key(train_size), eval_size=_size_key(eval_size),
                                     model_params=config.model_params.get(model, {}),
                                     attack_params=config.attack_params.get(attack, {}), **train)
                specs.extend(build_specs(options, read))
    return specs


# ---------------------------------------------------------------- parsing helpers

def _task_sources(tasks: tuple[str, ...], base: Path, where: str) -> dict[str, dict[str, Any]]:
    """The definition of each task file in `tasks` (`my_task.toml`, relative to the config's folder), read and
    hashed now, as `robench run --task my_task.toml` reads it. The one-line form `csv:FILE` needs --labels and
    the column flags, which a grid config has no place for: write a task file instead."""
    from robench.data.file_tasks import ONE_LINE, file_task_definition

    out = {}
    for task in tasks:
        if ONE_LINE.match(task):
            raise RobenchError(f"{where}: task {task!r}: a grid takes a task file (my_task.toml: the data files, "
                               "text_columns, label_column and labels) rather than the one-line csv:FILE form, "
                               "whose --labels and column flags a grid config has no place for")
        if task.endswith(".toml"):
            path = Path(task).expanduser()
            try:
                out[task] = file_task_definition(str(path if path.is_absolute() else base / path))
            except RobenchError as exc:
                raise RobenchError(f"{where}: task {task!r}: {exc}") from None
    return out


def _preset(value: Any, where: str) -> Preset:
    if not isinstance(value, str):
        raise RobenchError(f"{where}: preset must be one of {', '.join(PRESETS)}, got {excerpt(value, 60)}")
    try:
        return get_preset(value)
    except RobenchError as exc:
        raise RobenchError(f"{where}: {exc}") from None


def _size_key(size: Size) -> int | str:
    return "full" if size is None else size


def _preset_eval_sizes(preset: Preset, attacks: tuple[str, ...]) -> dict[str, int | str]:
    """The preset's eval size of each attack (search attacks and replays differ), for a grid without eval_size."""
    return {a: _size_key(preset.eval_size(a)) for a in attacks}


def _name(value: Any, where: str) -> str:
    """The grid's name: it names files (the grid's board and state), so it is a plain file name, checked before
    any work (a NUL or a newline would fail only after every cell had run)."""
    if not isinstance(value, str) or NAME.fullmatch(value.strip()) is None:
        raise RobenchError(f"{where}: name must be a plain name (a letter or digit, then letters, digits, "
                           f"'_', '-', '.', ':' or '+'), got {excerpt(value, 60)}")
    return value.strip()


def _names(value: Any, key: str, where: str) -> tuple[str, ...]:
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values or not all(isinstance(v, str) and v.strip() for v in values):
        raise RobenchError(f"{where}: {key} must be a non-empty list of names, got {value!r}")
    names = tuple(v.strip() for v in values)  # " bert" is bert: duplicates are found after stripping
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise RobenchError(f"{where}: {key} lists a name twice: {twice} (in {values})")
    return names


def _seeds(value: Any, where: str) -> tuple[int, ...]:
    values = [value] if isinstance(value, int) else value
    if not isinstance(values, list) or not values or not all(type(v) is int for v in values):
        raise RobenchError(f"{where}: seeds must be a non-empty list of integers, got {value!r}")
    if out_of_range := [v for v in values if not 0 <= v <= MAX_SEED]:
        raise RobenchError(f"{where}: seeds must be integers from 0 to {MAX_SEED}, got {out_of_range[0]}")
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


def _train(preset: dict[str, Any], table: dict[str, Any], train_sizes: Sizes, where: str
           ) -> tuple[TrainConfig, dict[Size, TrainConfig]]:
    """[train]: each value is one for every cell, or a table by training size (`epochs = { 100 = 10, 300 = 6,
    default = 3 }`: small training sets train longer); the default config and one per size named."""
    flat = {k: v.get("default", preset.get(k)) if isinstance(v, dict) else v for k, v in table.items()}
    flat = {k: v for k, v in flat.items() if v is not None}
    default = make_params(TrainConfig, {**preset, **flat}, f"{where} [train]")
    grid_sizes = {size for sizes in train_sizes.values() for size in sizes}
    by_size: dict[Size, dict[str, Any]] = {}
    for key, value in table.items():
        if not isinstance(value, dict):
            continue
        for size_key, size_value in value.items():
            if size_key == "default":
                continue
            size = None if size_key == "full" else int(size_key) if size_key.isdigit() else size_key
            if size not in grid_sizes:
                known = ", ".join(str(_size_key(s)) for s in sorted(grid_sizes, key=lambda s: (s is None, s or 0)))
                raise RobenchError(f"{where}: [train] {key} names training size {size_key!r}, which is not a "
                                   f"train_size of the grid ({known}) and not 'default'")
            by_size.setdefault(size, {})[key] = size_value
    return default, {size: make_params(TrainConfig, {**preset, **flat, **values}, f"{where} [train] at {size!r}")
                     for size, values in by_size.items()}


def _table(raw: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, dict):
        raise RobenchError(f"{where}: [{key}] must be a table of key = value pairs, got {value!r}")
    return value


def _model_cells(raw: dict[str, Any], models: tuple[str, ...], attacks: tuple[str, ...], seeds: tuple[int, ...],
                 where: str) -> dict[str, dict[str, tuple]]:
    """[model_cells.MODEL]: `attacks` and/or `seeds`, subsets of the grid's, for a model that runs fewer cells
    (a protocol's cuts: an expensive defence on fewer seeds, or on the replay only)."""
    out = {}
    for model, cells in _overrides(raw, "model_cells", models, where).items():
        stray = sorted(set(cells) - {"attacks", "seeds"})
        if stray:
            raise RobenchError(f"{where}: [model_cells.{model}] knows 'attacks' and 'seeds', not {stray}")
        key = f"[model_cells.{model}]"
        chosen: dict[str, tuple] = {}
        if "attacks" in cells:
            chosen["attacks"] = _names(cells["attacks"], f"{key} attacks", where)
        if "seeds" in cells:
            chosen["seeds"] = _seeds(cells["seeds"], f"{where} {key}")
        for name, grid in (("attacks", attacks), ("seeds", seeds)):
            outside = [v for v in chosen.get(name, ()) if v not in grid]
            if outside:
                raise RobenchError(f"{where}: {key} {name} {outside} are not {name} of the grid {list(grid)}")
        out[model] = chosen
    return out


def _overrides(raw: dict[str, Any], key: str, names: tuple[str, ...], where: str) -> dict[str, dict[str, Any]]:
    table = _table(raw, key, where)
    for name, params in table.items():
        if name not in names:
            raise RobenchError(f"{where}: [{key}.{name}] but {name!r} is not in the grid ({', '.join(names)})")
        if not isinstance(params, dict):
            raise RobenchError(f"{where}: [{key}.{name}] must be a table of hyperparameters")
    return table
