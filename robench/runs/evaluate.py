"""`robench.evaluate(model, ...)`: benchmark a model you already have, in the spirit of RobustBench's `benchmark()`.

`model` is one of:

* a path or hub id of a saved sequence classifier (the same as `robench run --checkpoint`);
* an in-memory Hugging Face `PreTrainedModel` with its `tokenizer`;
* any function `list[str] | list[tuple[str, str]] -> logits` (inputs x labels, columns in the task's
  label order unless `label_map` says otherwise). robench cannot hash a function, so you name it
  (`name=`) and the record says the identity is user-declared: a changed function needs a new name.

A classifier's identity is its weights, label names and tokenizer content (`robench.classifier.weights`): the same
weights by path, hub id or in memory give one run id and one leaderboard row. All three return the same
`RunRecord` as `robench.run` and write to the same results directory.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from rich.console import Console
from torch import nn

from robench.classifier.victim import BaseVictim, CallableVictim, Victim, defended
from robench.classifier.weights import weights_sha256
from robench.core.errors import RobenchError
from robench.core.paths import Settings, resolve_settings
from robench.core.progress import phase
from robench.core.records import RunRecord
from robench.runs import runner
from robench.runs.given import display_name, label_order, parse_label_map
from robench.runs.options import RunOptions, specs
from robench.runs.resolve import ResolvedRun, resolve_run
from robench.runs.runner import PreparedModel, dev_accuracy

ModelFunction = Callable[[list], Any]  # list[str] | list[tuple[str, str]] -> logits
# the run options that apply to a model robench does not train (robench.runs.options.RunOptions)
OPTIONS = ("task", "attack", "eval_size", "eval_seed", "seed", "preset", "max_length", "attack_params", "label_map",
           "text_column", "label_column", "labels", "data_source")


def evaluate(model: str | Path | nn.Module | ModelFunction, tokenizer: Any = None, *, name: str | None = None,
             batch_size: int = 64, settings: Settings | None = None, device: str = "auto",
             console: Console | None = None, force: bool = False, **options: Any) -> RunRecord:
    """Attack `model` and write and return its run record; a finished run with the same identity is returned as
    it is (`force=True` redoes it).

    `model`: a checkpoint path or hub id (`tokenizer` must then be None: the checkpoint's own is used), a
    Hugging Face `PreTrainedModel` with its `tokenizer`, or a function `list[str] -> logits` (`name=` required).
    `name`: the name the row shows (default: the folder's, or the model config's `_name_or_path`); for a function
    it is its identity. `batch_size`: inputs per forward pass.

    `options` are `robench run`'s, as in `robench.run(**options)` (`robench.runs.options.RunOptions`):
    `task` ("sst2"; a registered task, a task file `*.toml`, or `csv:FILE` with `text_column`, `label_column`,
    `labels`), `attack` ("textfooler"), `eval_size` (None: the preset's, as `robench run --checkpoint`; quick:
    30 for search attacks, all for replays), `eval_seed` (0: chooses the examples, the same for every model),
    `seed` (0), `preset`, `max_length` (128), `attack_params`, `label_map` ("0=negative,1=positive" or a dict:
    which output is which label), `data_source`. Training options do not apply and are refused.
    """
    settings = settings or resolve_settings()
    if unknown := sorted(set(options) - set(OPTIONS)):
        raise RobenchError(f"robench.evaluate attacks a trained model: option(s) {unknown} do not apply (options: "
                           f"{', '.join(OPTIONS)})")
    values = {"attack": "textfooler", **options}
    check_name(name)
    if isinstance(model, (str, Path)):
        if tokenizer is not None:
            raise RobenchError("a checkpoint path brings its own tokenizer: drop the tokenizer argument (or pass "
                               "the loaded model with its tokenizer)")
        (spec,) = specs(RunOptions.of({**values, "checkpoint": str(model)}), settings)
        if name:
            spec = dataclasses.replace(spec, model=display_name(name, spec.checkpoint["weights_sha256"]))
        return runner.run(spec, settings, device=device, console=console, force=force, batch_size=batch_size)
    (spec,) = specs(RunOptions.of(values), settings, given=_identity(model, tokenizer, name))
    if not isinstance(model, nn.Module) and spec.attack.startswith("textattack:"):
        raise RobenchError(f"{spec.attack} runs TextAttack's own model wrapper, which needs a Hugging Face model; "
                           "a plain function works with robench's recipes (textfooler, bert-attack, advglue)")
    with phase("reading the task data and resolving the run"):
        resolved = resolve_run(spec, settings)

    def prepare(resolved: ResolvedRun, torch_device) -> PreparedModel:
        victim = _victim(model, tokenizer, resolved, torch_device, resolved.spec.train.max_length, batch_size)
        order = tuple(victim.label_order) if victim.label_order else None
        return PreparedModel(victim, dev_accuracy(resolved, victim), f"in-memory {resolved.spec.checkpoint['kind']}",
                             label_order=order)

    return runner.run_resolved(resolved, device, console, force, prepare=prepare)


def check_name(name: object) -> None:
    """`name=` is a plain one-line name: it becomes a row of CSV and Markdown tables and a run's label, where a
    control character (a carriage return splits a CSV row) has no place."""
    from robench.core.text import excerpt, terminal_safe

    if name is not None and (not isinstance(name, str) or terminal_safe(name) != name or len(name) > 200):
        raise RobenchError(f"name={excerpt(name, 60)}: a name is one line of at most 200 characters without control "
                           "characters (it labels table rows); pass a plain name")


def _identity(model: Any, tokenizer: Any, name: str | None) -> dict[str, Any]:
    """The RunSpec fields (`checkpoint`, `model`, `backbone`) that identify an in-memory model or a function."""
    if isinstance(model, nn.Module):
        if getattr(model, "config", None) is None or tokenizer is None:
            raise RobenchError("an nn.Module is evaluated as a Hugging Face sequence classifier: pass a "
                               "PreTrainedModel and its tokenizer, or wrap any other model as a function "
                               "list[str] -> logits")
        sha = weights_sha256(model, tokenizer)
        name = name or Path(str(getattr(model.config, "_name_or_path", "") or "")).name or type(model).__name__
        checkpoint = {"kind": "module", "class": f"{type(model).__module__}.{type(model).__qualname__}",
                      "weights_sha256": sha}
        return {"checkpoint": checkpoint, "model": display_name(name, sha), "backbone": model.config.model_type}
    if not callable(model):
        raise RobenchError(f"cannot evaluate a {type(model).__name__}: pass a checkpoint path or hub id, a "
                           "PreTrainedModel with its tokenizer, or a function list[str] -> logits")
    if not name:
        raise RobenchError("name the function you evaluate (name=...): robench cannot hash a function, so the name "
                           "is its identity in the run id and the leaderboard")
    checkpoint = {"kind": "callable", "name": name,
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
