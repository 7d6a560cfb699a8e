"""Building a masked LM from the packaged MiniLM on the local corpora (`robench resources build-mlm`)."""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from robench.core.errors import RobenchError
from robench.core.manifest import write_manifest
from robench.core.paths import Settings
from robench.engine.resources.files import FORMAT, data_file, staged_dir
from robench.engine.resources.mlm import FROZEN, masked_lm, mlm_dir

MLM_CORPUS = (("sst2/train.tsv", "sst2-train"), ("mr/rt-polarity.pos", "mr"), ("mr/rt-polarity.neg", "mr"),
              ("ag_news/test.csv", "ag-news-test"), ("ag_news/train_subset_alps.tsv", "ag-news-train-subset"))


def mlm_corpus(settings: Settings) -> tuple[list[str], dict[str, int]]:
    """Deduplicated texts from the local corpora (SST-2 train, MR, AG News test + train subset) and counts."""
    import csv

    data_file(settings, "sst2/train.tsv", "SST-2 train split (MLM corpus)")
    texts: dict[str, None] = {}
    counts: dict[str, int] = {}
    for rel, name in MLM_CORPUS:
        path = settings.require_data_dir() / rel
        if not path.is_file():
            counts[name] = counts.get(name, 0)
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        if rel.endswith("sst2/train.tsv"):
            rows = [r[0] for r in list(csv.reader(raw.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE))[1:]]
        elif rel.endswith(".csv"):
            rows = [f"{r[1]} {r[2]}" for r in csv.reader(raw.splitlines()) if len(r) >= 3]
        elif rel.endswith(".tsv"):
            rows = [r[0] for r in csv.reader(raw.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE) if r]
        else:
            rows = raw.splitlines()
        rows = [" ".join(r.split()) for r in rows]
        counts[name] = counts.get(name, 0) + len(rows)
        texts.update(dict.fromkeys(r for r in rows if r))
    return list(texts), counts


def mask_tokens(input_ids, special, generator, mask_id: int, vocab_size: int, prob: float = 0.15,
                replace: bool = True):
    """BERT masking: choose `prob` of the non-special positions; of those 80% -> [MASK], 10% -> random token,
    10% unchanged (`replace=False`: all -> [MASK], for evaluation). Returns (inputs, chosen mask, labels)."""
    import torch

    chosen = (torch.rand(input_ids.shape, generator=generator) < prob) & ~special
    inputs = input_ids.clone()
    labels = input_ids[chosen]
    if not replace:
        inputs[chosen] = mask_id
        return inputs, chosen, labels
    r = torch.rand(input_ids.shape, generator=generator)
    inputs[chosen & (r < 0.8)] = mask_id
    swap = chosen & (r >= 0.8) & (r < 0.9)
    inputs[swap] = torch.randint(vocab_size, (int(swap.sum()),), generator=generator)
    return inputs, chosen, labels


def masked_logits(model, input_ids, attention_mask, chosen):
    """MLM logits at the chosen positions only, shape [M, V]: the encoder runs on every token, but the
    vocabulary projection (the expensive part of BERT's head) only on the M masked positions."""
    hidden = model.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return model.cls(hidden[chosen])


@dataclass(frozen=True)
class MlmBuildConfig:
    steps: int = 400
    batch_size: int = 32
    lr: float = 2e-4
    max_length: int = 64
    mask_prob: float = 0.15
    warmup: float = 0.06  # fraction of steps with linear warmup, then linear decay to 0
    heldout: int = 1000  # held-out texts for the masked-token accuracy
    seed: int = 0
    max_minutes: float | None = None  # stop early (recorded) when the build runs longer than this
    save_dtype: str = "float32"  # or bfloat16: halves the saved shards


def _batches(encoded: list[list[int]], rows: np.ndarray, size: int, pad_id: int):
    import torch

    for start in range(0, len(rows), size):
        chunk = [encoded[i] for i in rows[start:start + size]]
        width = max(len(c) for c in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        for r, c in enumerate(chunk):
            ids[r, :len(c)] = torch.tensor(c)
        yield ids


def heldout_accuracy(model, tokenizer, encoded: list[list[int]], device, config: MlmBuildConfig) -> float:
    """Top-1 accuracy at masked positions (15%, all replaced by [MASK], fixed seed) on held-out texts."""
    import torch

    from robench.classifier.device import autocast

    model.eval()
    generator = torch.Generator().manual_seed(config.seed + 1)
    special_ids = torch.tensor(tokenizer.all_special_ids)
    correct = total = 0
    with torch.inference_mode():
        for ids in _batches(encoded, np.arange(len(encoded)), 128, tokenizer.pad_token_id):
            special = torch.isin(ids, special_ids)
            inputs, chosen, labels = mask_tokens(ids, special, generator, tokenizer.mask_token_id,
                                                 len(tokenizer), config.mask_prob, replace=False)
            with autocast(device):
                logits = masked_logits(model, inputs.to(device), (~(ids == tokenizer.pad_token_id)).long().to(device),
                                       chosen.to(device))
            correct += int((logits.argmax(-1).cpu() == labels).sum())
            total += len(labels)
    model.train()
    return correct / max(total, 1)


def build_mlm(settings: Settings, device=None, config: MlmBuildConfig = MlmBuildConfig(), backbone: str = "minilm",
              console=None) -> dict:
    """Train a masked LM from `backbone` (encoder weights loaded, MLM head new and tied to the frozen word
    embeddings) on the local corpora; report held-out masked-token accuracy before/after; save atomically."""
    import torch
    from transformers import BertForMaskedLM

    from robench.classifier.backbone import load_tokenizer, resolve_backbone

    device = torch.device("cpu") if device is None else device
    resolved = resolve_backbone(backbone)
    tokenizer = load_tokenizer(resolved.location)
    texts, counts = mlm_corpus(settings)
    if len(texts) < 20:
        raise RobenchError(f"MLM corpus too small ({len(texts)} texts) in {settings.data_dir}")
    order = np.random.default_rng(config.seed).permutation(len(texts))
    n_held = min(config.heldout, len(texts) // 10)
    encoded = tokenizer([texts[i] for i in order], truncation=True, max_length=config.max_length)["input_ids"]
    held, train = encoded[:n_held], encoded[n_held:]
    torch.manual_seed(config.seed)
    model = BertForMaskedLM.from_pretrained(resolved.location).to(device)
    model.tie_weights()
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    before = heldout_accuracy(model, tokenizer, held, device, config)
    started = time.perf_counter()
    losses = _train_mlm(model, tokenizer, train, device, config, console)
    seconds = time.perf_counter() - started
    after = heldout_accuracy(model, tokenizer, held, device, config)
    record = {"format": FORMAT, "backbone": asdict(resolved), "config": asdict(config), "device": str(device),
              "steps_done": len(losses), "train_seconds": round(seconds, 1),
              "seconds_per_step": round(seconds / max(len(losses), 1), 4),
              "corpus": {"texts": len(texts), "train_texts": len(train), "heldout_texts": n_held, "sources": counts},
              "heldout_accuracy_before": before, "heldout_accuracy_after": after,
              "final_loss": float(np.mean(losses[-20:])) if losses else None,
              "frozen": list(FROZEN), "decoding": "masked positions only"}
    _save_mlm(model, tokenizer, record, mlm_dir(settings, backbone), config.save_dtype)
    masked_lm.cache_clear()  # a later masked_lm() must load this build, not an earlier one
    return record


def _train_mlm(model, tokenizer, train: list[list[int]], device, config: MlmBuildConfig, console) -> list[float]:
    """AdamW with linear warmup/decay on masked-only decoding; returns the loss of every step taken.

    Each batch is a random run of `batch_size` consecutive texts in length order, so batches need
    almost no padding (the corpus mixes 2-token SST-2 phrases with 64-token AG News articles)."""
    import torch

    from robench.classifier.device import autocast
    from robench.core.progress import progress_bar

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.01, fused=device.type == "cuda")
    warm = max(1, int(config.warmup * config.steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warm, max(0.0, (config.steps - s) / max(1, config.steps - warm))))
    generator = torch.Generator().manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    special_ids = torch.tensor(tokenizer.all_special_ids)
    by_length = np.argsort([len(x) for x in train], kind="stable")  # batches of similar length: little padding
    size = min(config.batch_size, len(train))
    losses: list[float] = []
    started = time.perf_counter()
    model.train()
    with progress_bar(console) as bar:
        task = bar.add_task("building MLM", total=config.steps)
        while len(losses) < config.steps:
            if config.max_minutes is not None and time.perf_counter() - started > 60 * config.max_minutes:
                break
            start = int(rng.integers(0, len(train) - size + 1))
            ids = next(_batches(train, by_length[start:start + size], size, tokenizer.pad_token_id))
            inputs, chosen, labels = mask_tokens(ids, torch.isin(ids, special_ids), generator,
                                                 tokenizer.mask_token_id, len(tokenizer), config.mask_prob)
            if not len(labels):
                continue
            with autocast(device):
                logits = masked_logits(model, inputs.to(device), (ids != tokenizer.pad_token_id).long().to(device),
                                       chosen.to(device))
            loss = torch.nn.functional.cross_entropy(logits.float(), labels.to(device))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            bar.update(task, advance=1, description=f"building MLM (loss {np.mean(losses[-20:]):.2f})")
    return losses


def _save_mlm(model, tokenizer, record: dict, target: Path, dtype: str) -> None:
    """Save everything except the frozen (backbone) word embeddings, in safetensors shards of at most 15 MB."""
    import torch

    if dtype not in ("float32", "bfloat16"):
        raise RobenchError(f"--save-dtype must be float32 or bfloat16, got {dtype!r}")
    state = {k: v.detach().to(getattr(torch, dtype)).cpu().contiguous() for k, v in model.state_dict().items()
             if k not in FROZEN}
    with staged_dir(target) as tmp:
        model.save_pretrained(tmp, state_dict=state, safe_serialization=True, max_shard_size="15MB")
        tokenizer.save_pretrained(tmp)
        (tmp / "build.json").write_text(json.dumps(record, indent=2, sort_keys=True, default=str))
        write_manifest(tmp)

