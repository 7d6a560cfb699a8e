"""`measure(spec, ...)`: load the fine-tuned and pre-trained models and compute every diagnostic."""
from __future__ import annotations

import dataclasses
import time
from typing import Any

import numpy as np
import torch

from robench.analysis.measures import effective_rank
from robench.analysis.probes import RepresentationStats, deletion_importances, shuffle_effects, summarize_words
from robench.analysis.spec import CHUNK, AnalysisConfig, AnalysisRecord
from robench.analysis.syntax import measure_syntax, require_inputs
from robench.classifier.backbone import resolve_backbone
from robench.classifier.device import pick_device
from robench.classifier.victim import Victim
from robench.core.errors import RobenchError
from robench.core.paths import Settings
from robench.core.progress import progress_bar
from robench.data.loading import load_split, subset, texts_of
from robench.runs.given import load_victim
from robench.runs.resolve import resolve_run, resolve_task
from robench.runs.runner import train
from robench.runs.spec import RunSpec
from robench.runs.store import git_commit, now, package_versions


def measure(spec: RunSpec, settings: Settings, config: AnalysisConfig, device: str, console) -> AnalysisRecord:
    start = time.perf_counter()
    syntax_inputs = require_inputs(settings, spec.backbone) if config.syntax else None  # fail before training
    trained = train(spec, settings, device, console)
    resolved = resolve_run(spec, settings, attack=False)  # recorded resolved: the leaderboard joins on it
    torch_device = pick_device(device)
    task = resolve_task(spec)  # a registered task or one read from the user's files
    data = subset(load_split(task, "eval", settings.data_dir, spec.data_source), config.examples, spec.seed)
    texts, labels = texts_of(data, task), np.asarray(data["label"], dtype=np.int64)
    victim = load_victim(trained.checkpoint, torch_device, max_length=spec.train.max_length, settings=settings)
    backbone = resolve_backbone(spec.backbone)
    pretrained = _load_pretrained(backbone.location, torch_device)
    loaded = time.perf_counter()
    with progress_bar(console) as progress:
        metrics: dict[str, Any] = {"examples": len(texts), "dev_accuracy": trained.record["dev_accuracy"],
                                   "sample_accuracy": float(np.mean(victim.predict(texts) == labels))}
        metrics.update(_word_probes(victim, texts, labels, config.shuffles, spec.seed, progress))
        probed = time.perf_counter()
        stats = _representations(victim, pretrained, texts, config.batch_size, progress)
        represented = time.perf_counter()
        syntax = None if syntax_inputs is None else measure_syntax(
            syntax_inputs, victim.model, pretrained, victim.tokenizer, backbone, settings, config.syntax,
            torch_device, progress)
    end = time.perf_counter()
    cka = [acc.value() for acc in stats.cka]
    metrics.update(_representation_metrics(stats), cka_mean=float(np.mean(cka[1:] or cka)), cka_last=cka[-1])
    metrics.update(syntax.metrics if syntax else {})
    return AnalysisRecord(
        analysis_id="", run_id=spec.run_id, spec=resolved.spec.to_dict(), config=dataclasses.asdict(config),
        metrics=metrics, cka_per_layer=cka,
        resources={"backbone": dataclasses.asdict(backbone), "model_params": trained.record.get("model_params"),
                   "data": {"source": spec.data_source,
                            "data_dir": str(settings.data_dir) if settings.data_dir else None,
                            "train_fingerprint": resolved.train_data},
                   **({"syntax": syntax.resources} if syntax else {})},
        timings={"train_seconds": trained.record["train_seconds"], "train_cached": trained.cached,
                 "load_seconds": loaded - start, "word_probe_seconds": probed - loaded,
                 "representation_seconds": represented - probed, "syntax_seconds": end - represented,
                 "total_seconds": end - start,
                 "victim_queries": victim.model_evaluations, "device": str(torch_device)},
        checkpoint=str(trained.checkpoint), versions=package_versions(), git_commit=git_commit(), created=now(),
        syntax=syntax.details if syntax else None,
    )


def _load_pretrained(location: str, device: torch.device):
    from transformers import AutoModel

    try:
        model = AutoModel.from_pretrained(location)
    except (OSError, ValueError) as exc:
        raise RobenchError(f"could not load the pre-trained backbone {location!r} for CKA: {exc}") from exc
    return model.to(device).eval()


def _word_probes(victim: Victim, texts, labels: np.ndarray, shuffles: int, seed: int, progress) -> dict[str, float]:
    """Shuffle and deletion probes, CHUNK examples per batched victim call."""
    rng = np.random.default_rng(seed)
    changed, drops, importances = [], [], []
    bar = progress.add_task("word probes (shuffles, deletions)", total=len(texts))
    for start in range(0, len(texts), CHUNK):
        chunk, gold = texts[start:start + CHUNK], labels[start:start + CHUNK]
        flips, drop = shuffle_effects(victim.predict_proba, chunk, gold, shuffles, rng)
        changed.append(flips)
        drops.append(drop)
        importances += deletion_importances(victim.predict_proba, chunk, gold)
        progress.update(bar, advance=len(chunk))
    return summarize_words(np.concatenate(changed), np.concatenate(drops), importances)


@torch.inference_mode()
def _representations(victim: Victim, pretrained, texts, batch_size: int, progress) -> RepresentationStats:
    """Hidden states of the fine-tuned and pre-trained encoders on the same token ids (fp32)."""
    special = torch.tensor(sorted(victim.tokenizer.all_special_ids), device=victim.device)
    bar = progress.add_task("hidden states (fine-tuned vs pre-trained)", total=len(texts))
    stats = None
    for start in range(0, len(texts), batch_size):
        enc = victim.encode(texts[start:start + batch_size])
        tuned = victim.model(**enc, output_hidden_states=True).hidden_states
        base = pretrained(**enc, output_hidden_states=True).hidden_states
        if tuned is None or base is None or len(tuned) != len(base):
            raise RobenchError(
                f"hidden states do not line up: the fine-tuned model returns {len(tuned or ())} layers of states, "
                f"the pre-trained backbone {len(base or ())}; both must support output_hidden_states=True")
        stats = stats or RepresentationStats(len(tuned))
        content = enc["attention_mask"].bool() & ~torch.isin(enc["input_ids"], special)
        stats.update(tuned, base, enc["attention_mask"], content)
        progress.update(bar, advance=len(enc["input_ids"]))
    return stats


def _representation_metrics(stats: RepresentationStats) -> dict[str, float]:
    cls, base_cls = np.concatenate(stats.cls), np.concatenate(stats.backbone_cls)
    return {
        "token_cosine": float(np.nanmean(stats.token_cosine)),
        "backbone_token_cosine": float(np.nanmean(stats.backbone_token_cosine)),
        "cls_effective_rank": effective_rank(cls - cls.mean(0)),
        "backbone_cls_effective_rank": effective_rank(base_cls - base_cls.mean(0)),
    }
