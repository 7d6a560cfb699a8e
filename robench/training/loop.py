"""Fine-tuning with dynamic padding, AdamW + linear warmup, per-epoch eval, and a
content-addressed checkpoint cache (safetensors).

A checkpoint is keyed by everything that determines its weights, the data fingerprint included.
It is written into `<key>.tmp-<host>-<pid>` and renamed into place; `training.json` records the
size and SHA-256 of every file (weights, config, tokenizer), verified on reuse (once per process and file
version). A damaged checkpoint is removed, with a warning, and retrained; the temp directories of dead processes are
removed. A per-checkpoint lock makes a second identical process wait, then reuse. A loss or
gradient norm that turns NaN or infinite stops training with an error, and nothing is saved."""
from __future__ import annotations

import json
import logging
import math
import os
import shutil
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from rich.console import Console

from robench.classifier.backbone import Backbone, load_tokenizer
from robench.classifier.device import autocast
from robench.classifier.victim import Victim, accuracy, defended
from robench.core.errors import RobenchError
from robench.core.hashing import content_hash
from robench.core.locks import file_lock
from robench.core.manifest import folder_manifest, folder_problem
from robench.core.paths import Settings
from robench.core.progress import progress_bar
from robench.core.types import Source, Task
from robench.data.loading import column, subset, texts_of
from robench.training.config import TrainConfig
from robench.training.defense import ComposedDefense
from robench.training.objective import Objective, TrainingContext

TRAINING_FORMAT = 2  # bump when a change to training would change the weights it produces
RECORD = "training.json"
WEIGHTS = "model.safetensors"
REQUIRED = ("config.json", WEIGHTS, "tokenizer_config.json")  # files a reusable checkpoint must have
log = logging.getLogger(__name__)


class TrainingSpec(Protocol):
    """What training reads of a run's spec (a `robench.runs.spec.RunSpec` is one)."""

    @property
    def task(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def train_size(self) -> int | None: ...
    @property
    def data_source(self) -> Source: ...
    @property
    def train(self) -> TrainConfig: ...
    @property
    def task_source(self) -> dict[str, Any] | None: ...


class TrainingRun(Protocol):
    """What training reads of a resolved run (a `robench.runs.resolve.ResolvedRun` is one): the run layer hands
    it down, and training never imports the run layer."""

    @property
    def spec(self) -> TrainingSpec: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def task(self) -> Task: ...
    @property
    def defense(self) -> ComposedDefense | None: ...
    @property
    def model_params(self) -> dict[str, Any]: ...
    @property
    def backbone(self) -> Backbone | None: ...
    @property
    def train_data(self) -> str: ...


@dataclass
class TrainedModel:
    checkpoint: Path
    cached: bool  # True when an identical earlier run's checkpoint was reused
    record: dict[str, Any]  # hyperparameters, per-epoch history, throughput


def checkpoint_key(run: TrainingRun) -> str:
    """Hash of everything that determines the fine-tuned weights (not the attack)."""
    spec = run.spec
    key = {
        "format": TRAINING_FORMAT, "task": spec.task, "model": spec.model, "backbone": run.backbone.fingerprint,
        "seed": spec.seed, "train_size": spec.train_size, "data_source": spec.data_source,
        "train": asdict(spec.train), "model_params": run.model_params, "data": run.train_data,
    }
    if spec.task_source is not None:  # a task from files: its definition and the files' hashes
        key["task_source"] = spec.task_source
    if (resources := run.defense.training_fingerprint(run.model_params, run.settings)) is not None:
        key["training_resources"] = resources  # e.g. a2t's synonym table: a rebuilt table trains other weights
    return content_hash(key, length=16)


def fine_tune(run: TrainingRun, device: torch.device, console: Console | None = None) -> TrainedModel:
    """Fine-tune `run`'s model on its task, or reuse the verified cached checkpoint of an identical run."""
    checkpoints = run.settings.checkpoints_dir
    target = checkpoints / checkpoint_key(run)
    _remove_orphans(checkpoints)
    with file_lock(target.with_name(f"{target.name}.lock"), f"waiting for another process training {target.name}"):
        cached = _verified(target)
        if cached is not None:
            return TrainedModel(target, True, cached)
        return _train(run, target, device, console)


def _train(run: TrainingRun, target: Path, device: torch.device, console: Console | None) -> TrainedModel:
    spec, settings, task, defense, params, backbone = (run.spec, run.settings, run.task, run.defense,
                                                       run.model_params, run.backbone)
    train, dev = subset(run.split("train"), spec.train_size, spec.seed), run.split("eval")
    tokenizer = load_tokenizer(backbone.location)
    from transformers import set_seed

    set_seed(spec.seed)
    model = defense.build(backbone.location, task.num_labels, params).to(device)
    model.config.id2label = dict(enumerate(task.label_names))  # so `--checkpoint` maps the outputs by name
    model.config.label2id = {name: i for i, name in enumerate(task.label_names)}
    history, seconds = _train_loop(model, tokenizer, task, train, dev, spec, defense.objective(model, params),
                                   device, console, settings)
    record = {
        "model": spec.model, "task": spec.task, "backbone": asdict(backbone), "seed": spec.seed,
        "train_examples": len(train), "dev_examples": len(dev), "train": asdict(spec.train),
        "model_params": params, "history": history, "train_seconds": seconds,
        "train_examples_per_second": len(train) * spec.train.epochs / seconds if seconds else None,
        "dev_accuracy": history[-1]["dev_accuracy"], "device": str(device),
    }
    return TrainedModel(target, False, _save_atomically(model, tokenizer, record, target))


def is_cached(checkpoint: Path) -> bool:
    """Whether a finished checkpoint that verifies (files, weights size and checksum) exists at `checkpoint`."""
    return checkpoint.exists() and _problem(checkpoint) is None


def encode(tokenizer, task: Task, ds, max_length: int) -> list[dict[str, Any]]:
    fields = [column(ds, f) for f in task.text_fields]
    enc = tokenizer(*fields, truncation=True, max_length=max_length)
    return [{**{k: enc[k][i] for k in enc}, "labels": label} for i, label in enumerate(column(ds, "label"))]


def train_step(objective: Objective, optimizer: torch.optim.Optimizer, scheduler: Any, batch: dict[str, torch.Tensor],
               device: torch.device, max_grad_norm: float) -> torch.Tensor:
    """One optimisation step on `batch` (already on `device`): the objective's loss and gradients under autocast,
    gradient clipping, the optimizer and learning-rate `scheduler` steps (None: no schedule), the objective's
    post-step hook. Returns the detached loss."""
    with autocast(device):
        loss = objective.step(batch)
    grad_norm = torch.nn.utils.clip_grad_norm_(objective.model.parameters(), max_grad_norm)
    _require_finite(float(loss), float(grad_norm), optimizer.param_groups[0]["lr"])
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    objective.after_optimizer_step()
    return loss


def make_optimizer(model: torch.nn.Module, cfg: TrainConfig, total_steps: int) -> tuple[torch.optim.Optimizer, Any]:
    """AdamW without weight decay on biases and LayerNorm weights, with linear warmup and decay."""
    from transformers import get_linear_schedule_with_warmup

    no_decay = ("bias", "LayerNorm.weight", "layer_norm.weight")
    groups = [
        {"params": [p for n, p in model.named_parameters() if not n.endswith(no_decay)],
         "weight_decay": cfg.weight_decay},
        {"params": [p for n, p in model.named_parameters() if n.endswith(no_decay)], "weight_decay": 0.0},
    ]
    optimizer = torch.optim.AdamW(groups, lr=cfg.lr, fused=True)  # one kernel per step, CPU and CUDA
    return optimizer, get_linear_schedule_with_warmup(optimizer, int(cfg.warmup_ratio * total_steps), total_steps)


def training_context(model, tokenizer, task: Task, train, settings, device, seed: int, cfg: TrainConfig,
                     console: Console | None = None) -> TrainingContext:
    """The `TrainingContext` an objective's `prepare` gets for training `model` on the dataset `train`."""
    return texts_context(model, tokenizer, task, texts_of(train, task), [int(y) for y in column(train, "label")],
                         settings, device, seed, cfg, console)


def texts_context(model, tokenizer, task: Task, texts: list[tuple[str, ...]], labels: list[int], settings, device,
                  seed: int, cfg: TrainConfig, console: Console | None = None) -> TrainingContext:
    """`training_context` of training examples given as texts (tuples of the task's fields) and labels."""
    def encode_texts(texts, labels) -> list[dict[str, Any]]:
        if not len(texts):
            return []
        fields = [list(values) for values in zip(*texts)]
        enc = tokenizer(*fields, truncation=True, max_length=cfg.max_length)
        return [{**{k: enc[k][i] for k in enc}, "labels": int(label)} for i, label in enumerate(labels)]

    return TrainingContext(model, tokenizer, task, list(texts), list(labels), encode_texts, settings, device, seed,
                           cfg.epochs, cfg.batch_size, cfg.max_length, console)


@dataclass(frozen=True)
class StepTiming:
    """What `time_steps` measured."""

    seconds_per_step: float  # the mean of the timed optimisation steps
    steps: int  # how many were timed (after the warm-up step)


def time_steps(run: TrainingRun, objective: Objective, tokenizer, device: torch.device, texts: list[tuple[str, ...]],
               labels: list[int], steps: int, budget: float, warmup_examples: int = 2) -> StepTiming:
    """Time `run`'s training setup as `fine_tune` runs it: `objective` (the defence's, on its freshly built model)
    prepared on the examples (`texts`, `labels`: one batch of the run's training data), one warm-up step on
    `warmup_examples` of them, then up to `steps` optimisation steps on all of them; past the first, none starts
    that would end after `budget` seconds of steps at the pace so far."""
    from transformers import DataCollatorWithPadding

    spec, cfg, model = run.spec, run.spec.train, objective.model
    context = texts_context(model, tokenizer, run.task, texts, labels, run.settings, device, spec.seed, cfg)
    objective.prepare(context)
    optimizer, scheduler = make_optimizer(model, cfg, total_steps=steps + 1)
    collate = DataCollatorWithPadding(tokenizer)
    model.train()

    def step(n: int) -> float:
        batch = collate(context.encode(texts[:n], labels[:n]))
        begin = time.perf_counter()
        train_step(objective, optimizer, scheduler, {k: v.to(device) for k, v in batch.items()}, device,
                   cfg.max_grad_norm)
        return time.perf_counter() - begin

    step(min(len(texts), warmup_examples))
    times = [step(len(texts))]
    while len(times) < steps and sum(times) * (1 + 1 / len(times)) <= budget:
        times.append(step(len(texts)))
    return StepTiming(sum(times) / len(times), len(times))


def _train_loop(model, tokenizer, task: Task, train, dev, spec: TrainingSpec, objective, device, console,
                settings=None):
    from transformers import DataCollatorWithPadding

    cfg = spec.train
    features = encode(tokenizer, task, train, cfg.max_length)
    objective.prepare(training_context(model, tokenizer, task, train, settings, device, spec.seed, cfg, console))
    generator = torch.Generator().manual_seed(spec.seed)
    collate = DataCollatorWithPadding(tokenizer)
    # the schedule's length: an objective may train on more examples in some epochs (a2t's adversarial ones)
    total = sum(math.ceil(type(objective).planned_examples(objective.params, e + 1, len(features)) / cfg.batch_size)
                for e in range(cfg.epochs))
    optimizer, scheduler = make_optimizer(model, cfg, total)
    dev_texts, dev_labels = texts_of(dev, task), column(dev, "label")
    history, train_seconds = [], 0.0
    with progress_bar(console) as progress:
        bar = progress.add_task(f"train {spec.model} on {spec.task}", total=total)
        for epoch in range(cfg.epochs):
            start = time.perf_counter()
            epoch_features = objective.epoch_features(epoch + 1, features)  # may attack the model (a2t): timed
            epoch_features = features if epoch_features is None else epoch_features
            loader = torch.utils.data.DataLoader(epoch_features, batch_size=cfg.batch_size, shuffle=True,
                                                 generator=generator, collate_fn=collate)
            model.train()
            loss_sum = 0.0
            for batch in loader:
                loss = train_step(objective, optimizer, scheduler, {k: v.to(device) for k, v in batch.items()},
                                  device, cfg.max_grad_norm)
                loss_sum += float(loss)
                progress.update(bar, advance=1, description=f"train {spec.model} epoch {epoch + 1}/{cfg.epochs} "
                                                              f"loss {float(loss):.3f}")
            train_seconds += time.perf_counter() - start
            entry = {"epoch": epoch + 1, "train_loss": loss_sum / len(loader), "examples": len(epoch_features),
                     **objective.epoch_report()}
            if epoch + 1 == cfg.epochs:  # the dev split once, at the end: for IM-BERT it costs minutes on a CPU
                victim = defended(Victim(model, tokenizer, device, max_length=cfg.max_length), settings)
                entry["dev_accuracy"] = accuracy(victim, dev_texts, dev_labels)
            history.append(entry)
            if console is not None:
                dev = f", dev accuracy {entry['dev_accuracy']:.4f}" if "dev_accuracy" in entry else ""
                console.log(f"epoch {epoch + 1}: train loss {entry['train_loss']:.4f}{dev}")
    return history, train_seconds


def _require_finite(loss: float, grad_norm: float, lr: float) -> None:
    """Stop before a NaN or infinite loss or gradient reaches the weights (nothing is saved)."""
    if math.isfinite(loss) and math.isfinite(grad_norm):
        return
    what = f"loss {loss}" if not math.isfinite(loss) else f"gradient norm {grad_norm}"
    raise RobenchError(f"training diverged: {what} (learning rate at this step {lr:g}); no checkpoint was saved; "
                       "lower --lr or check the model's hyperparameters")


def _save_atomically(model, tokenizer, record: dict[str, Any], target: Path) -> dict[str, Any]:
    """Write into a temp directory beside `target`, record the weights' checksum, rename into place.
    The caller holds the checkpoint's lock and has removed any damaged `target`."""
    tmp = target.with_name(f"{target.name}{_tmp_suffix(socket.gethostname(), os.getpid())}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        model.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        record = {**record, "files": _manifest(tmp)}
        (tmp / RECORD).write_text(json.dumps(record, indent=2, default=str))
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return record


def _verified(target: Path) -> dict[str, Any] | None:
    """The training record of the checkpoint at `target` if its files verify; a damaged one is removed."""
    if not target.exists():
        return None
    problem = _problem(target)
    if problem is None:
        return json.loads((target / RECORD).read_text(encoding="utf-8"))
    log.warning("cached checkpoint %s is damaged (%s); removing it and training again", target, problem)
    shutil.rmtree(target, ignore_errors=True)
    if target.exists():
        target.unlink()  # a file where the directory should be
    return None


def _manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """Size and SHA-256 of every file of a checkpoint (weights, config, tokenizer), its training record aside."""
    return folder_manifest(folder, exclude=(RECORD,))


def _problem(target: Path) -> str | None:
    """Why the checkpoint at `target` cannot be reused, or None: every file it holds (weights, config, tokenizer)
    must be listed in its training record's manifest with the same size and SHA-256, and none may be missing."""
    if not target.is_dir():
        return "not a directory"
    missing = [f for f in (RECORD, *REQUIRED) if not (target / f).is_file()]
    if missing:
        return f"missing {', '.join(missing)}"
    try:
        manifest = json.loads((target / RECORD).read_text(encoding="utf-8"))["files"]
        expected = {str(name): {"bytes": int(entry["bytes"]), "sha256": str(entry["sha256"])}
                    for name, entry in manifest.items()}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"{RECORD} is unreadable or has no file manifest ({type(exc).__name__})"
    return folder_problem(target, expected, exclude=(RECORD,))


def _tmp_suffix(host: str, pid: int) -> str:
    return f".tmp-{host}-{pid}"


def _remove_orphans(checkpoints: Path) -> None:
    """Remove `*.tmp-<host>-<pid>` (and older `*.tmp-<pid>`) directories of dead processes on this host."""
    here = socket.gethostname()
    for tmp in checkpoints.glob("*.tmp-*"):
        host, _, pid = tmp.name.rpartition(".tmp-")[2].rpartition("-")
        if host in ("", here) and pid.isdigit() and not _alive(int(pid)):
            log.info("removing %s, left by a process that no longer runs", tmp)
            shutil.rmtree(tmp, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, under another user
        return True
    return True
