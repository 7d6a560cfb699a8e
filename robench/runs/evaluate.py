"""`robench.evaluate(model, ...)`: benchmark a model you already have, in the spirit of RobustBench's `benchmark()`.

`model` is one of:

* a path or hub id of a saved sequence classifier (the same as `robench run --checkpoint`);
* an in-memory Hugging Face `PreTrainedModel` with its `tokenizer`; its identity in the run id is the
  SHA-256 of its state dict;
* any function `list[str] | list[tuple[str, str]] -> logits` (inputs x labels, columns in the task's
  label order unless `label_map` says otherwise). robench cannot hash a function, so you name it
  (`name=`) and the record says the identity is user-declared: a changed function needs a new name.

All three return the same `RunRecord` as `robench.run` and write to the same results directory.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from rich.console import Console
from torch import nn

from robench.core.device import pick_device
from robench.core.errors import RobenchError
from robench.core.paths import Settings, resolve_settings
from robench.core.records import RunRecord
from robench.core.registry import ATTACKS
from robench.data.file_tasks import file_task_definition, is_file_task
from robench.engine.victim import BaseVictim, CallableVictim, Victim, defended
from robench.runs import runner
from robench.runs.presets import DEFAULT_PRESET, get_preset
from robench.runs.resolve import ResolvedRun, resolve_run
from robench.runs.runner import PreparedModel, dev_accuracy
from robench.runs.spec import RunSpec, TrainConfig
from robench.runs.store import RunStore
from robench.training.given import checkpoint_fields, label_order, module_sha256, parse_label_map

ModelFunction = Callable[[list], Any]  # list[str] | list[tuple[str, str]] -> logits


def evaluate(model: str | Path | nn.Module | ModelFunction, tokenizer: Any = None, *, task: str = "sst2",
             attack: str = "textfooler", eval_size: int | None = None, eval_seed: int = 0, seed: int = 0,
             name: str | None = None,
             label_map: str | Mapping[int, str] | None = None, attack_params: dict[str, Any] | None = None,
             max_length: int = 128, batch_size: int = 64, preset: str = DEFAULT_PRESET,
             text_column: str | Sequence[str] | None = None,
             label_column: str | None = None, labels: Sequence[str] | None = None, data_source: str | None = None,
             settings: Settings | None = None, device: str = "auto", console: Console | None = None,
             force: bool = False) -> RunRecord:
    """Attack `model` with `attack` on `eval_size` examples of `task` (chosen by `eval_seed`, the same for every
    model; None: the preset's, as `robench run --checkpoint` (quick: 30 for search attacks; paper and replays:
    all)); write and return the record.

    `task` is a registered task, a task file (`*.toml`) or `csv:FILE` with `text_column`, `label_column`
    and `labels` (see `robench.data.file_tasks`). A finished run with the same identity is returned as it is
    (`force=True` redoes it).
    """
    settings = settings or resolve_settings()
    if eval_size is None:
        eval_size = get_preset(preset).eval_size(ATTACKS.get(attack).queries_per_word > 0)
    fields: dict[str, Any] = dict(task=task, attack=attack, seed=seed, eval_size=eval_size, eval_seed=eval_seed,
                                  train=TrainConfig(max_length=max_length), attack_params=dict(attack_params or {}),
                                  data_source=data_source or ("local" if settings.data_dir is not None else "hub"))
    if is_file_task(task):
        columns = [text_column] if isinstance(text_column, str) else text_column
        definition = file_task_definition(task, columns, label_column, labels, settings.cache_dir)
        fields.update(task=definition["name"], task_source=definition, data_source="local")
    if isinstance(model, (str, Path)):
        spec = RunSpec(**fields, **checkpoint_fields(str(model), label_map, settings.cache_dir))
        return runner.run(spec, settings, device=device, console=console, force=force)
    fields.update(_identity(model, tokenizer, name, label_map))
    if not isinstance(model, nn.Module) and attack.startswith("textattack:"):
        raise RobenchError(f"{attack} runs TextAttack's own model wrapper, which needs a Hugging Face model; "
                           "a plain function works with robench's recipes (textfooler, bert-attack, advglue)")
    spec = RunSpec(**fields)
    resolved = resolve_run(spec, settings)
    spec = resolved.spec  # with its data fingerprint: the run id `robench.run` would use
    store = RunStore(settings.runs_dir, spec.run_id)
    if not force and (finished := store.finished(resolved.hyperparameters())) is not None:
        return finished
    torch_device = pick_device(device)
    victim = _victim(model, tokenizer, resolved, torch_device, max_length, batch_size)
    resolved = dataclasses.replace(resolved, label_order=tuple(victim.label_order) if victim.label_order else None)
    prepared = PreparedModel(victim, dev_accuracy(resolved, victim), f"in-memory {spec.checkpoint['kind']}")
    return runner.attack(resolved, prepared, store, str(torch_device), console, force)


def _identity(model: Any, tokenizer: Any, name: str | None, label_map: Any) -> dict[str, Any]:
    """The RunSpec fields that identify an in-memory model or a function."""
    parsed = parse_label_map(label_map)
    mapped = {str(k): v for k, v in parsed.items()} if parsed is not None else None
    if isinstance(model, nn.Module):
        if getattr(model, "config", None) is None or tokenizer is None:
            raise RobenchError("an nn.Module is evaluated as a Hugging Face sequence classifier: pass a "
                               "PreTrainedModel and its tokenizer, or wrap any other model as a function "
                               "list[str] -> logits")
        sha = module_sha256(model)
        name = name or Path(str(getattr(model.config, "_name_or_path", "") or "")).name or type(model).__name__
        checkpoint = {"kind": "module", "class": f"{type(model).__module__}.{type(model).__qualname__}",
                      "sha256": sha, "label_map": mapped}
        return {"checkpoint": checkpoint, "model": f"module:{name}@{sha[:8]}", "backbone": model.config.model_type}
    if not callable(model):
        raise RobenchError(f"cannot evaluate a {type(model).__name__}: pass a checkpoint path or hub id, a "
                           "PreTrainedModel with its tokenizer, or a function list[str] -> logits")
    if not name:
        raise RobenchError("name the function you evaluate (name=...): robench cannot hash a function, so the name "
                           "is its identity in the run id and the leaderboard")
    checkpoint = {"kind": "callable", "name": name, "label_map": mapped,
                  "identity": "user-declared: the name stands for the function; rename it when the model changes"}
    return {"checkpoint": checkpoint, "model": f"callable:{name}", "backbone": "-"}


def _victim(model: Any, tokenizer: Any, resolved: ResolvedRun, device, max_length: int,
            batch_size: int) -> BaseVictim:
    task, mapped = resolved.task, parse_label_map(resolved.spec.checkpoint.get("label_map"))
    if isinstance(model, nn.Module):
        outputs = [model.config.id2label[i] for i in range(model.config.num_labels)]
        order = label_order(outputs, task, mapped, f"model {resolved.spec.model}")
        victim = Victim(model, tokenizer, device, batch_size=batch_size, max_length=max_length, label_order=order)
        return defended(victim, resolved.settings)  # a defence's own prediction (SAFER's vote), as for a checkpoint
    order = None
    if mapped is not None:
        order = label_order([mapped[i] for i in sorted(mapped)], task, mapped, f"function {resolved.spec.model}")
    return CallableVictim(model, task.num_labels, batch_size=batch_size, label_order=order, device=device)
