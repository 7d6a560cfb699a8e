"""What a given checkpoint's directory says about it, read from its files as they are (no model is loaded): its
architecture from config.json (the backbone a user's row is named by), its labels, its tokenizer and its weights.
A dry run prints it; a run record keeps its architecture (`resources.model.architecture`), which the board shows
where a robench-trained row shows its backbone."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_config(folder: Path) -> dict[str, Any]:
    """config.json as saved (an unreadable one is an empty dict: the checks before the run name that problem)."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def architecture(config: dict[str, Any]) -> str:
    """`bert, 6 layers, hidden 384 (BertForSequenceClassification)`: the backbone as its config names it."""
    shape = [f"{config['num_hidden_layers']} layers" if "num_hidden_layers" in config else None,
             f"hidden {config['hidden_size']}" if "hidden_size" in config else None]
    heads = config.get("architectures") or []
    text = ", ".join([str(config.get("model_type", "unknown model type")), *filter(None, shape)])
    return text + (f" ({', '.join(map(str, heads))})" if heads else "")


def directory_lines(folder: Path, label_order: tuple[int, ...] | None, label_map: Any = None) -> list[str]:
    """What a dry run prints of a given checkpoint: what robench read from its directory."""
    config = read_config(folder)
    labels = config.get("id2label") or {}
    names = ", ".join(f"{k}={v}" for k, v in sorted(labels.items(), key=lambda kv: int(kv[0]))) or "none"
    tokenizer = _tokenizer_class(folder)
    weights = sorted(folder.glob("*.safetensors")) or sorted(folder.glob("pytorch_model*.bin"))
    size = sum(p.stat().st_size for p in weights) / 1e6
    mapped = "--label-map" if label_map else "its id2label"
    lines = [f"read from {folder}:",
             f"  architecture: {architecture(config)} (config.json)",
             f"  labels: {names} (id2label); matched to the task's labels by {mapped}"
             + (f", outputs in task order {list(label_order)}" if label_order is not None else ""),
             f"  tokenizer: {tokenizer}",
             f"  weights: {', '.join(p.name for p in weights) or 'none'} ({size:.1f} MB)",
             "  training: none by robench (its own; no robench training settings apply, only --max-length)"]
    if (folder / "training.json").is_file():
        lines[-1] = "  training: by robench (training.json beside it); attacked as it is"
    return lines


def _tokenizer_class(folder: Path) -> str:
    try:
        saved = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        saved = {}
    name = saved.get("tokenizer_class") if isinstance(saved, dict) else None
    files = [p.name for p in sorted(folder.glob("*")) if p.name.startswith(("tokenizer", "vocab", "spiece"))]
    return f"{name or 'class not named'} ({', '.join(files) or 'no tokenizer files'})"
