"""`robench bench train`: robench's fine-tuning loop vs a plain Hugging Face `Trainer`.

Same backbone, data subset, seed, batch size, epochs, learning-rate schedule,
weight decay, gradient clipping and dynamic padding; both run in this one
process, one after the other, and only the optimisation steps are timed (no
evaluation or saving inside the timed region). Prints throughput in examples/s
for each, their ratio, and each model's dev accuracy.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from robench.bench.options import TrainBenchOptions
from robench.core.paths import resolve_settings
from robench.runs.spec import RunSpec, TrainConfig


def _hf_trainer(spec: RunSpec, settings, device) -> tuple[float, float]:
    """Train with `transformers.Trainer`; return (seconds, dev accuracy)."""
    from transformers import (
        AutoModelForSequenceClassification,
        DataCollatorWithPadding,
        Trainer,
        TrainingArguments,
        set_seed,
    )

    from robench.classifier.backbone import load_tokenizer, resolve_backbone
    from robench.classifier.victim import Victim, accuracy
    from robench.data import TASKS
    from robench.data.loading import column, load_split, subset, texts_of

    task, backbone, cfg = TASKS.get(spec.task), resolve_backbone(spec.backbone), spec.train
    tokenizer = load_tokenizer(backbone.location)
    train = subset(load_split(task, "train", settings.data_dir, spec.data_source), spec.train_size, spec.seed)
    dev = load_split(task, "eval", settings.data_dir, spec.data_source)
    train = train.map(lambda b: tokenizer(*[b[f] for f in task.text_fields], truncation=True,
                                          max_length=cfg.max_length), batched=True)
    set_seed(spec.seed)
    model = AutoModelForSequenceClassification.from_pretrained(backbone.location, num_labels=task.num_labels)
    with tempfile.TemporaryDirectory() as out:
        args = TrainingArguments(
            output_dir=out, per_device_train_batch_size=cfg.batch_size, num_train_epochs=cfg.epochs,
            learning_rate=cfg.lr, weight_decay=cfg.weight_decay, warmup_ratio=cfg.warmup_ratio,
            max_grad_norm=cfg.max_grad_norm, lr_scheduler_type="linear", seed=spec.seed, report_to=[],
            save_strategy="no", eval_strategy="no", logging_strategy="no", disable_tqdm=True,
            use_cpu=device.type == "cpu", bf16=device.type == "cuda", dataloader_num_workers=0,
        )
        trainer = Trainer(model=model, args=args, train_dataset=train.remove_columns(list(task.text_fields)),
                          data_collator=DataCollatorWithPadding(tokenizer))
        start = time.perf_counter()
        trainer.train()
        seconds = time.perf_counter() - start
    victim = Victim(trainer.model, tokenizer, device, max_length=cfg.max_length)
    return seconds, accuracy(victim, texts_of(dev, task), column(dev, "label"))


def compare_trainers(options: TrainBenchOptions) -> tuple[float, float]:
    """Fine-tune with robench, then with the HF Trainer, in a fresh cache; print the table; return their seconds."""
    from robench.classifier.device import pick_device
    from robench.runs.options import RunOptions, build_specs
    from robench.runs.resolve import resolve_run
    from robench.training.loop import fine_tune

    device = pick_device(options.device)
    (spec,) = build_specs(RunOptions(task=options.task, backbone=options.backbone, seeds=(options.seed,),
                                     train_size=options.train_size, eval_size="full", epochs=options.epochs,
                                     lr=TrainConfig().lr, batch_size=options.batch_size))
    console = Console()
    with tempfile.TemporaryDirectory() as cache:  # a fresh cache: robench must really train
        settings = resolve_settings(options.data_dir, cache, Path(cache) / "results")
        ours = fine_tune(resolve_run(spec, settings, attack=False), device, None)
        hf_seconds, hf_acc = _hf_trainer(spec, settings, device)
    examples = ours.record["train_examples"] * options.epochs
    table = Table(title=f"fine-tuning {options.backbone} on {options.task}: {ours.record['train_examples']} examples "
                        f"× {options.epochs} epoch(s), batch {options.batch_size}, seed {options.seed}, {device}")
    for col in ("trainer", "seconds", "examples/s", "dev accuracy"):
        table.add_column(col, justify="right" if col != "trainer" else "left")
    table.add_row("robench", f"{ours.record['train_seconds']:.1f}", f"{examples / ours.record['train_seconds']:.1f}",
                  f"{ours.record['dev_accuracy']:.4f}")
    table.add_row("HF Trainer", f"{hf_seconds:.1f}", f"{examples / hf_seconds:.1f}", f"{hf_acc:.4f}")
    console.print(table)
    console.print(f"throughput ratio robench / HF Trainer: {hf_seconds / ours.record['train_seconds']:.2f}x")
    return ours.record["train_seconds"], hf_seconds
