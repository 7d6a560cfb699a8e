"""What a user asks for -> run specs: the one path shared by the CLI, `robench.run(**options)`, `robench.evaluate`,
grids and benches (`build_specs` makes every spec).

Precedence, as in lm-evaluation-harness: an explicitly given value > the preset's value > the default. A field
left at None was not given. A `RunSpec` built by hand is already explicit and is used as it is.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Mapping, Sequence

from robench.core.errors import RobenchError
from robench.core.params import BadValue
from robench.core.paths import Settings
from robench.runs.presets import DEFAULT_PRESET, Preset, get_preset
from robench.runs.spec import RunSpec, TrainConfig

TRAIN_OPTIONS = ("epochs", "lr", "batch_size", "warmup_ratio", "weight_decay", "max_grad_norm")  # None: the preset's


@dataclass(frozen=True)
class RunOptions:
    """The options of `robench run` / `train` (and `robench.run(**options)`); None: not given."""

    task: str = "sst2"
    model: str | None = None  # None: bert (a checkpoint run has no model)
    attack: str = "advglue"
    backbone: str = "minilm"
    seeds: tuple[int, ...] = (0,)
    preset: str = DEFAULT_PRESET
    train_size: int | str | None = None  # a size, or "full" (the whole split, as in grid configs); None: the preset's
    eval_size: int | str | None = None
    epochs: int | None = None
    lr: float | None = None
    batch_size: int | None = None
    eval_seed: int = 0
    max_length: int = 128
    warmup_ratio: float | None = None  # None: TrainConfig's default (as the other two; no flag sets them, a grid may)
    weight_decay: float | None = None
    max_grad_norm: float | None = None
    model_params: Mapping[str, Any] = field(default_factory=dict)
    attack_params: Mapping[str, Any] = field(default_factory=dict)
    checkpoint: str | None = None  # attack this saved classifier instead of fine-tuning one
    label_map: str | Mapping[int, str] | None = None
    text_column: Sequence[str] | None = None  # with a task read from a file (csv:FILE, *.toml)
    label_column: str | None = None
    labels: Sequence[str] | None = None
    data_source: str | None = None  # None: local when a data directory is set, else the hub

    @classmethod
    def of(cls, values: Mapping[str, Any]) -> RunOptions:
        """From keyword arguments (`seed=` is accepted for one seed); an unknown key is a clear error."""
        values = dict(values)
        if "seed" in values:
            values["seeds"] = (values.pop("seed"),)
        known = {f.name for f in fields(cls)}
        if unknown := sorted(set(values) - known):
            raise RobenchError(f"unknown run option(s) {unknown} (known: {', '.join(sorted(known | {'seed'}))})")
        return cls(**values)


def specs(options: RunOptions, settings: Settings, given: Mapping[str, Any] | None = None) -> list[RunSpec]:
    """One `RunSpec` per seed (`build_specs`), with what the options name read now: the data source (local when a
    data directory is set, else the hub), a task file's definition, a checkpoint's identity. `given`: the RunSpec
    fields (`checkpoint`, `model`, `backbone`) of an in-memory model or function to attack
    (`robench.runs.evaluate`), which, like `--checkpoint`, trains nothing."""
    read = {"data_source": data_source(options.data_source, settings)}
    read.update(task_fields(options, settings))
    if options.checkpoint:
        if options.model is not None:
            raise RobenchError("--checkpoint attacks a trained model as it is; drop --model")
        from robench.runs.given import checkpoint_fields

        given = checkpoint_fields(options.checkpoint, options.label_map, settings.cache_dir)
    elif given is not None:
        given = {**given, "checkpoint": {**given["checkpoint"], "label_map": _label_map(options.label_map)}}
    elif options.label_map is not None:
        raise RobenchError("--label-map names a checkpoint's outputs: use it with --checkpoint")
    return build_specs(options, read, given)


def build_specs(options: RunOptions, read: Mapping[str, Any] | None = None,
                given: Mapping[str, Any] | None = None) -> list[RunSpec]:
    """The one place run specs are made (the CLI, `robench.run`, `robench.evaluate`, grids and benches): one per
    seed, each value the one given, else the preset's, else the default. `read`: RunSpec fields read from elsewhere
    (the data source, a task file's definition); `given`: those of a model robench does not train (only the input
    length of the training settings applies)."""
    preset = get_preset(options.preset)
    train_size = preset.train_size if options.train_size is None else _size(options.train_size)
    eval_size = preset.eval_size(options.attack) if options.eval_size is None else _size(options.eval_size)
    common: dict[str, Any] = dict(task=options.task, model=options.model or "bert", backbone=options.backbone,
                                  train=_train_config(options, preset), data_source=data_source(options.data_source))
    common.update(read or {})
    if given is not None:
        common.update(given, train=TrainConfig(max_length=options.max_length))
        train_size = None
    return [RunSpec(attack=options.attack, seed=seed, train_size=train_size, eval_size=eval_size,
                    eval_seed=options.eval_seed, model_params=dict(options.model_params),
                    attack_params=dict(options.attack_params), **common)
            for seed in options.seeds]


def data_source(given: str | None, settings: Settings | None = None) -> str:
    """The data a run reads: `given`, else "local" when a data directory is set (or no settings are known), else
    "hub". The one place this default lives."""
    return given or ("local" if settings is None or settings.data_dir is not None else "hub")


def comma_list(text: str | None) -> list[str] | None:
    """`a, b,c` -> ["a", "b", "c"] (None for no text): the comma-separated flags (--labels, --text-column, ...)."""
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def _label_map(label_map: str | Mapping[int, str] | None) -> dict[str, str] | None:
    """A label map as a spec records it: `{"0": "negative", ...}` (None: the model's own label names)."""
    from robench.runs.given import parse_label_map

    parsed = parse_label_map(label_map)
    return {str(k): v for k, v in parsed.items()} if parsed is not None else None


def _size(value: int | str) -> int | str | None:
    """A subset size as given: "full" is the whole split (None); anything else is checked with the spec
    (`robench.runs.resolve.check_spec`)."""
    return None if value == "full" else value


def _train_config(options: RunOptions, preset: Preset) -> TrainConfig:
    """The options' training values, the preset's where not given (the last three: TrainConfig's defaults)."""
    values = {**preset.train_values(), "max_length": options.max_length}
    values.update({f: getattr(options, f) for f in TRAIN_OPTIONS if getattr(options, f) is not None})
    try:
        return TrainConfig(**values)
    except BadValue as exc:
        raise RobenchError(f"--{exc.name.replace('_', '-')} must be {exc.requirement}, got {exc.value!r}") from exc


def task_fields(options: RunOptions, settings: Settings) -> dict[str, Any]:
    """`task_source` (and the task's name) for a task read from files; nothing for a registered task."""
    from robench.data.file_tasks import is_file_task

    if not is_file_task(options.task):
        if options.text_column or options.label_column or options.labels:
            raise RobenchError("--text-column, --label-column and --labels describe a task read from a file: "
                               "use them with --task csv:FILE (or tsv:, jsonl:, parquet:)")
        return {}
    return task_spec(options.task, settings, options.text_column, options.label_column, options.labels)


def task_spec(task: str, settings: Settings, text_column: str | Sequence[str] | None = None,
              label_column: str | None = None, labels: Sequence[str] | None = None) -> dict[str, Any]:
    """The RunSpec fields of `--task` in any of its forms: `{"task": NAME}` for a registered task; for a task file
    (`my_task.toml`) or `csv:FILE` (`tsv:`, `jsonl:`, `parquet:`, with the columns and labels) its name, its
    definition (`task_source`, files hashed) and the local data source. Every command that takes `--task` builds
    its specs through this (run, train, analyze, the benchmarks, grids)."""
    from robench.data.file_tasks import file_task_definition, is_file_task

    if not is_file_task(task):
        return {"task": task}
    columns = [text_column] if isinstance(text_column, str) else text_column
    definition = file_task_definition(task, list(columns) if columns else None, label_column,
                                      list(labels) if labels else None, settings.cache_dir)
    return {"task": definition["name"], "task_source": definition, "data_source": "local"}
