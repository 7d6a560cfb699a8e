"""A masked-language-model head on the **frozen** pre-trained encoder, for the BLiMP analysis.

The packaged MiniLM ships without an MLM head. This builds BERT's LM prediction head (dense →
GELU → LayerNorm → decoder) on top of the frozen pre-trained encoder: the decoder's weight is tied
to the pre-trained input word embeddings (kept fixed, so the encoder really is untouched) and the
transform and the decoder bias are trained. Because the encoder is frozen, its last-layer states
at the masked positions are computed once and cached in memory; training then only runs the head.

The head is then put, unchanged, on top of every fine-tuned encoder of the same backbone
(`robench analyze --syntax`), so the BLiMP scores measure how far fine-tuning moves the encoder
away from what the pre-trained language-model head expects (arXiv 2108.13602, Sec. "MLM").

Deviations from BERT's MLM pre-training: every chosen position is replaced by [MASK] (no 80/10/10
split: one masking per text is cached and the head is only ever evaluated on [MASK]); the corpus
is robench's local MLM corpus (SST-2 train, MR, AG News), not Wikipedia and books.

Cached under `<cache_dir>/resources/mlm-head-<backbone>/` (`head.safetensors`, `build.json`);
build it with `robench resources build-mlm-head`.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from robench.core.errors import RobenchError
from robench.core.manifest import write_manifest
from robench.core.paths import Settings
from robench.engine.resources.files import verified_build

HEAD_FORMAT = 1  # bump when a change would change what a build produces
WEIGHTS = "head.safetensors"


@dataclass(frozen=True)
class MlmHeadConfig:
    texts: int = 40000  # corpus texts encoded once (random subset, by seed) for training
    heldout: int = 500  # further texts for the held-out masked-token accuracy
    max_length: int = 64
    mask_prob: float = 0.15
    steps: int = 4000
    batch_size: int = 128  # masked positions per step
    lr: float = 3e-3
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("texts", "heldout", "max_length", "steps", "batch_size"):
            if getattr(self, name) <= 0:
                raise RobenchError(f"MLM head {name} must be positive, got {getattr(self, name)}")
        if not 0 < self.mask_prob < 1:
            raise RobenchError(f"MLM head mask_prob must lie in (0, 1), got {self.mask_prob}")


class MlmHead(nn.Module):
    """BERT's LM prediction head with the decoder weight fixed to the given word embeddings."""

    def __init__(self, embeddings: torch.Tensor, eps: float = 1e-12) -> None:
        super().__init__()
        vocab, dim = embeddings.shape
        self.dense = nn.Linear(dim, dim)
        self.norm = nn.LayerNorm(dim, eps=eps)
        self.bias = nn.Parameter(torch.zeros(vocab))
        self.register_buffer("embeddings", embeddings.detach().clone(), persistent=False)
        nn.init.normal_(self.dense.weight, std=0.02)
        nn.init.zeros_(self.dense.bias)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """Vocabulary logits [..., V] for last-layer encoder states [..., d]."""
        x = self.norm(nn.functional.gelu(self.dense(hidden)))
        return nn.functional.linear(x, self.embeddings, self.bias)


@dataclass
class LoadedHead:
    head: MlmHead  # eval mode, on the requested device
    tokenizer: Any
    info: dict[str, Any]  # what the analysis record says about the head


def mlm_head_dir(settings: Settings, backbone: str = "minilm") -> Path:
    from robench.engine.resources.files import resources_dir

    return resources_dir(settings) / f"mlm-head-{Path(backbone).name}"


def require_mlm_head(settings: Settings, backbone: str = "minilm") -> Path:
    """The built head's folder, or an error saying how to build it."""
    target = mlm_head_dir(settings, backbone)
    if not (target / "build.json").is_file() or not (target / WEIGHTS).is_file():
        raise RobenchError(f"no MLM head built in {target}: run `robench resources build-mlm-head --backbone "
                           f"{backbone}` first (head-only build on the frozen encoder, a few minutes on CPU)")
    return verified_build(target, f"`robench resources build-mlm-head --backbone {backbone} --force`")


def _backbone_parts(backbone: str):
    """(resolved backbone, tokenizer, pre-trained encoder) of `backbone`."""
    from transformers import AutoModel

    from robench.classifier.backbone import load_tokenizer, resolve_backbone

    resolved = resolve_backbone(backbone)
    try:
        encoder = AutoModel.from_pretrained(resolved.location)
    except (OSError, ValueError) as exc:
        raise RobenchError(f"could not load the backbone {backbone!r} for the MLM head: {exc}") from exc
    return resolved, load_tokenizer(resolved.location), encoder.eval()


def load_mlm_head(settings: Settings, backbone: str = "minilm", device: torch.device | None = None) -> LoadedHead:
    """The head built by `build_mlm_head`, its decoder tied to the backbone's word embeddings."""
    from safetensors.torch import load_file

    target = require_mlm_head(settings, backbone)
    build = json.loads((target / "build.json").read_text())
    resolved, tokenizer, encoder = _backbone_parts(backbone)
    if resolved.fingerprint != build["backbone"]["fingerprint"]:
        raise RobenchError(f"the MLM head in {target} was built on {build['backbone']['fingerprint']} but the "
                           f"backbone is {resolved.fingerprint}: rebuild with "
                           "`robench resources build-mlm-head --force`")
    head = MlmHead(encoder.get_input_embeddings().weight, encoder.config.layer_norm_eps)
    head.load_state_dict(load_file(target / WEIGHTS))
    info = {"name": f"robench-mlm-head-{Path(backbone).name}", "path": str(target),
            "build_id": build["build_id"], "backbone": build["backbone"], "config": build["config"],
            "trained": "transform + decoder bias; decoder weight = frozen pre-trained word embeddings; encoder frozen",
            "heldout_masked_accuracy": build["heldout_accuracy_after"],
            "heldout_masked_accuracy_before": build["heldout_accuracy_before"],
            "heldout_positions": build["heldout_positions"], "train_seconds": build["train_seconds"]}
    return LoadedHead(head.to(device or torch.device("cpu")).eval(), tokenizer, info)


def build_mlm_head(settings: Settings, device: torch.device | None = None, config: MlmHeadConfig = MlmHeadConfig(),
                   backbone: str = "minilm", console=None) -> dict[str, Any]:
    """Train the head on cached states of the frozen encoder; report held-out masked-token accuracy
    before and after; save atomically. Returns the build record (also `build.json`)."""
    from robench.core.progress import progress_bar
    from robench.engine.resources.mlm_build import mlm_corpus

    device = device or torch.device("cpu")
    texts, counts = mlm_corpus(settings)
    if len(texts) < 20:
        raise RobenchError(f"MLM corpus too small ({len(texts)} texts) in {settings.data_dir}")
    resolved, tokenizer, encoder = _backbone_parts(backbone)
    encoder.to(device)
    order = np.random.default_rng(config.seed).permutation(len(texts))
    n_held = min(config.heldout, len(texts) // 10)
    held = [texts[i] for i in order[:n_held]]
    train = [texts[i] for i in order[n_held:n_held + config.texts]]
    generator = torch.Generator().manual_seed(config.seed)
    torch.manual_seed(config.seed)
    head = MlmHead(encoder.get_input_embeddings().weight, encoder.config.layer_norm_eps).to(device)
    started = time.perf_counter()
    with progress_bar(console) as progress:
        bar = progress.add_task("MLM head: encoding (frozen encoder)", total=len(train) + len(held))
        advance = lambda n: progress.update(bar, advance=n)  # noqa: E731
        train_states, train_labels = masked_states(encoder, tokenizer, train, config, generator, device, advance)
        held_states, held_labels = masked_states(encoder, tokenizer, held, config, generator, device, advance)
        encoded = time.perf_counter()
        before = head_accuracy(head, held_states, held_labels)
        bar = progress.add_task("MLM head: training", total=config.steps)
        losses = _train_head(head, train_states, train_labels, config,
                             lambda loss: progress.update(bar, advance=1, description=f"MLM head (loss {loss:.2f})"))
    after = head_accuracy(head, held_states, held_labels)
    done = time.perf_counter()
    record = {"format": HEAD_FORMAT, "backbone": asdict(resolved), "config": asdict(config), "device": str(device),
              "corpus": {"texts": len(texts), "train_texts": len(train), "heldout_texts": len(held), "sources": counts},
              "train_positions": len(train_labels), "heldout_positions": len(held_labels),
              "heldout_accuracy_before": before, "heldout_accuracy_after": after,
              "final_loss": float(np.mean(losses[-20:])), "encode_seconds": round(encoded - started, 1),
              "train_seconds": round(done - encoded, 1), "steps_done": len(losses),
              "trained": "transform (dense + LayerNorm) and decoder bias; encoder and word embeddings frozen"}
    record["build_id"] = hashlib.sha256(json.dumps(record, sort_keys=True, default=str).encode()).hexdigest()[:12]
    _save(head, record, mlm_head_dir(settings, backbone))
    return record


@torch.inference_mode()
def masked_states(encoder, tokenizer, texts: list[str], config: MlmHeadConfig, generator: torch.Generator,
                  device: torch.device, advance=lambda n: None,
                  batch_size: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Last-layer states [M, d] (CPU, float32) of the frozen encoder at masked positions (each chosen
    with `mask_prob` among non-special tokens, replaced by [MASK]), and the original token ids [M]."""
    from robench.engine.resources.mlm_build import mask_tokens

    special_ids = torch.tensor(tokenizer.all_special_ids)
    by_length = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    states, labels = [], []
    for start in range(0, len(texts), batch_size):
        chunk = [texts[i] for i in by_length[start:start + batch_size]]
        enc = tokenizer(chunk, truncation=True, max_length=config.max_length, padding=True, return_tensors="pt")
        ids = enc["input_ids"]
        inputs, chosen, target = mask_tokens(ids, torch.isin(ids, special_ids), generator, tokenizer.mask_token_id,
                                             len(tokenizer), config.mask_prob, replace=False)
        hidden = encoder(input_ids=inputs.to(device), attention_mask=enc["attention_mask"].to(device)).last_hidden_state
        states.append(hidden[chosen.to(device)].float().cpu())
        labels.append(target)
        advance(len(chunk))
    return torch.cat(states), torch.cat(labels)


@torch.inference_mode()
def head_accuracy(head: MlmHead, states: torch.Tensor, labels: torch.Tensor, batch_size: int = 1024) -> float:
    """Top-1 accuracy of the head's predictions at the masked positions."""
    device = head.bias.device
    correct = sum(int((head(states[i:i + batch_size].to(device)).argmax(-1).cpu() == labels[i:i + batch_size]).sum())
                  for i in range(0, len(labels), batch_size))
    return correct / max(len(labels), 1)


def _train_head(head: MlmHead, states: torch.Tensor, labels: torch.Tensor, config: MlmHeadConfig,
                step_done) -> list[float]:
    """AdamW, linear warmup (6%) and decay, random minibatches of masked positions (seeded)."""
    if not len(labels):
        raise RobenchError("no masked positions to train the MLM head on")
    device = head.bias.device
    params = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.01)
    warm = max(1, int(0.06 * config.steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warm, max(0.0, (config.steps - s) / max(1, config.steps - warm))))
    generator = torch.Generator().manual_seed(config.seed)
    head.train()
    losses: list[float] = []
    for _ in range(config.steps):
        rows = torch.randint(len(labels), (min(config.batch_size, len(labels)),), generator=generator)
        loss = nn.functional.cross_entropy(head(states[rows].to(device)), labels[rows].to(device))
        loss.backward()
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(loss.item())
        step_done(float(np.mean(losses[-20:])))
    head.eval()
    return losses


def _save(head: MlmHead, record: dict, target: Path) -> None:
    """`head.safetensors` (transform and bias; not the frozen embeddings) and `build.json`, atomically."""
    from safetensors.torch import save_file

    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        save_file({k: v.detach().float().cpu().contiguous() for k, v in head.state_dict().items()},
                  str(tmp / WEIGHTS))
        (tmp / "build.json").write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
        write_manifest(tmp)
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    finally:  # a failed save (a full disk) leaves nothing half-written behind
        shutil.rmtree(tmp, ignore_errors=True)
