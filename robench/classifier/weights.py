"""One identity per set of weights: the hash of what a classifier computes with, not of how it was handed over.

The same fine-tuned classifier reaches robench as a directory (`robench run --checkpoint DIR`,
`robench.evaluate("DIR")`), a hub id, or in memory (`robench.evaluate(model, tokenizer)`). Its identity is one
SHA-256 over the classifier class, its output label names (`id2label`), every tensor of its state dict (name,
dtype, shape, values) and its tokenizer's content (the fast tokenizer's full definition: normaliser,
pre-tokeniser, vocabulary, merges, special tokens; its call-time truncation and padding left out). File names,
file formats (safetensors or .bin), the saved config's bookkeeping (`_name_or_path`, `transformers_version`) and
the path do not enter it, so every route gives one run id and one leaderboard row.

A directory's identity costs a model load; it is cached under `<cache_dir>/weights/` by the hash of its files
(`robench.core.hashing.files_sha256`, itself cached by size and mtime), so a second run reads it back.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from robench.core.files import atomic_write

FORMAT = 1  # of the identity; a change makes new run ids for given checkpoints


def weights_sha256(model: Any, tokenizer: Any) -> str:
    """The identity of a sequence classifier and its tokenizer (hex SHA-256)."""
    digest = hashlib.sha256()
    labels = {str(k): str(v) for k, v in (getattr(model.config, "id2label", None) or {}).items()}
    head = {"format": FORMAT, "class": type(model).__name__, "id2label": labels,
            "tokenizer": tokenizer_content(tokenizer)}
    digest.update(json.dumps(head, sort_keys=True).encode())
    for name, tensor in sorted(model.state_dict().items()):
        tensor = tensor.detach().cpu().contiguous()
        digest.update(f"|{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def tokenizer_content(tokenizer: Any) -> Any:
    """What a tokenizer does, as plain JSON: a fast tokenizer's definition without its call-time truncation and
    padding state; a slow one's class, vocabulary and special tokens."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        definition = json.loads(backend.to_str())
        definition.pop("truncation", None)
        definition.pop("padding", None)
        return definition
    return {"class": type(tokenizer).__name__, "vocab": sorted(tokenizer.get_vocab().items()),
            "special": tokenizer.special_tokens_map,
            "lowercase": getattr(tokenizer, "do_lower_case", None)}


def folder_weights_sha256(folder: Path, files_sha: str, cache_dir: Path | None) -> str:
    """`weights_sha256` of the classifier saved in `folder` (whose files hash to `files_sha`), cached."""
    cached = cache_dir / "weights" / f"{files_sha}-v{FORMAT}.json" if cache_dir is not None else None
    if cached is not None and cached.is_file():
        try:
            return str(json.loads(cached.read_text())["weights_sha256"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged entry: computed again
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(folder)
    sha = weights_sha256(model, AutoTokenizer.from_pretrained(folder))
    if cached is not None:
        try:
            atomic_write(cached, json.dumps({"weights_sha256": sha, "folder": str(folder)}))
        except OSError:  # a read-only cache only costs computing it again
            pass
    return sha
