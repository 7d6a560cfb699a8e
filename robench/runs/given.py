"""Saved sequence classifiers as victims: any Hugging Face checkpoint (robench's own, IM-BERT included).

A checkpoint is identified by the SHA-256 of its weight (and config and tokenizer) files, so two
different models saved at the same path never share a run id. Its output labels are matched to the
task's label names by name (`id2label`, case-insensitive); generic names (`LABEL_0`, ...) need an
explicit label map. `check_checkpoint` refuses, in one line that names the fix, a checkpoint that cannot
load (no tokenizer, no config, not a sequence classifier, unreadable weights) before any work starts.
"""
from __future__ import annotations

import json
import re
import shlex
import zipfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from robench.classifier.victim import BaseVictim, Victim, defended
from robench.classifier.weights import folder_weights_sha256
from robench.core.errors import RobenchError
from robench.core.hashing import files_sha256
from robench.core.text import excerpt
from robench.core.types import Task

WEIGHTS = ("*.safetensors", "pytorch_model*.bin")  # the first pattern that matches names the weight files
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "*.model")
HUB_FILES = ["*.json", "*.txt", "*.model", "*.safetensors"]  # config, tokenizer, weights (.bin only without)


def checkpoint_dir(location: str) -> Path:
    """A local directory with the checkpoint: `location` itself, or the hub snapshot of a hub id."""
    path = Path(location).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise RobenchError(f"checkpoint directory {path} has no config.json: save the model with "
                               f"model.save_pretrained('{path}')")
        return path.resolve()
    if location.startswith((".", "/", "~")) or path.exists():
        raise RobenchError(f"checkpoint {location} is not a directory")
    from huggingface_hub import snapshot_download

    try:
        folder = Path(snapshot_download(location, allow_patterns=HUB_FILES))
        if not any(folder.glob("*.safetensors")):  # an older checkpoint with PyTorch weights only
            folder = Path(snapshot_download(location, allow_patterns=[*HUB_FILES, "pytorch_model*.bin"]))
        return folder
    except Exception as exc:
        raise RobenchError(f"checkpoint {location!r} is not a local directory and could not be fetched from the "
                           f"Hugging Face hub ({type(exc).__name__}; offline?)") from exc


def describe_checkpoint(location: str, cache_dir: Path | None = None) -> dict[str, Any]:
    """What a RunSpec records about a checkpoint: where it is and its identity, the hash of its weights, label
    names and tokenizer content (`robench.classifier.weights`; the same weights in memory get the same), cached
    by the hash of its weight, config and tokenizer files (a robench checkpoint's training.json left out)."""
    folder = checkpoint_dir(location)
    weights = _weight_files(location, folder)
    others = [p for pattern in ("*.json", "*.txt", "*.model") for p in folder.glob(pattern)
              if p.name != "training.json"]
    local = Path(location).expanduser()
    try:
        sha = folder_weights_sha256(folder, files_sha256(weights + others, cache_dir), cache_dir)
    except Exception as exc:  # it loads the model and tokenizer: any failure to read the user's files is one line
        raise unloadable(location, exc) from exc
    return {"kind": "checkpoint", "location": str(local.resolve()) if local.is_dir() else location,
            "weights_sha256": sha}


def _weight_files(location: str, folder: Path) -> list[Path]:
    if weights := next((files for pattern in WEIGHTS if (files := sorted(folder.glob(pattern)))), []):
        return weights
    raise RobenchError(f"checkpoint {location} has no weight files ({' or '.join(WEIGHTS)}): save the model with "
                       f"model.save_pretrained('{location}')")


def check_checkpoint(location: str) -> None:
    """Before any work: the checkpoint at `location` loads as a sequence classifier with its tokenizer, as far as
    cheap checks can tell (config, architecture, weight file headers, tokenizer); else a RobenchError that names
    the fix."""
    from transformers import MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING

    folder = checkpoint_dir(location)
    config = load_config(location)
    heads = config.architectures or []
    classifier = MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING.get(type(config), None)
    if classifier is None or heads and classifier.__name__ not in heads and \
            not any(h.endswith("ForSequenceClassification") for h in heads):
        held = heads[0] if heads else f"{config.model_type} model"
        raise RobenchError(f"checkpoint {location} holds a {held}, not a sequence classifier: it has no trained "
                           "weights for classifier, which would be initialised at random, so every run would score "
                           "another model; save one made with AutoModelForSequenceClassification "
                           f"(model.save_pretrained), or fine-tune this one first (robench run --backbone {location})")
    for path in _weight_files(location, folder):
        if (problem := _weights_problem(path)) is not None:
            raise RobenchError(f"checkpoint {location}: unreadable weights {path.name} ({problem}); save the model "
                               f"again with model.save_pretrained('{location}')")
    _check_tokenizer(location, folder)


def _weights_problem(path: Path) -> str | None:
    """What is wrong with a weight file, from its header only (None: nothing seen)."""
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        try:
            with safe_open(str(path), "pt") as weights:
                weights.keys()
        except Exception as exc:  # the library raises its own SafetensorError
            return _first_line(exc)
        return None
    with open(path, "rb") as fh:
        head = fh.read(4)
    return None if zipfile.is_zipfile(path) or head[:1] == b"\x80" else "neither a PyTorch archive nor a pickle"


def _check_tokenizer(location: str, folder: Path) -> None:
    fix = f"tokenizer.save_pretrained('{location}')"
    if not any(any(folder.glob(pattern)) for pattern in TOKENIZER_FILES):
        raise RobenchError(f"checkpoint {location} has no tokenizer: save the one the model was trained with "
                           f"beside it, {fix}")
    from transformers import AutoTokenizer

    try:
        AutoTokenizer.from_pretrained(folder)
    except Exception as exc:  # transformers raises OSError, ValueError, TypeError ... for a partial tokenizer
        raise RobenchError(f"checkpoint {location}: its tokenizer does not load ({_first_line(exc)}); save it "
                           f"again, {fix}") from exc


def unloadable(location: str, exc: Exception) -> RobenchError:
    """The one-line error of a checkpoint whose model or tokenizer does not load, naming the fix."""
    return RobenchError(f"could not load checkpoint {location} as a sequence classifier with its tokenizer "
                        f"({_first_line(exc)}): save both again with model.save_pretrained('{location}') and "
                        f"tokenizer.save_pretrained('{location}')")


def _first_line(exc: Exception) -> str:
    """The first sentence of an exception's first line, with its type: library messages run to paragraphs."""
    sentence = re.split(r"(?<=[.!?])\s", (str(exc).strip().splitlines() or [""])[0])[0]
    return excerpt(f"{type(exc).__name__}: {sentence}", 240, quote=False)


def display_name(name: str, sha256: str) -> str:
    """`checkpoint:<name>@<first 8 hex of the weights' identity>`: the name a leaderboard row shows (the run id
    and the row's identity leave the name out: `robench.runs.spec.identity_view`)."""
    from robench.core.text import terminal_safe

    return f"checkpoint:{terminal_safe(Path(name).name or name)}@{sha256[:8]}"  # a folder's name may hold controls


def register_architectures() -> None:
    """Import every registered defence (built-in and plugins), so that architectures such as IM-BERT register
    their config and model with transformers' Auto classes before a checkpoint is loaded."""
    from robench.training.defense import MODELS

    for entry in MODELS.entries():
        entry.load()


def load_config(location: str):
    from transformers import AutoConfig

    register_architectures()

    try:
        return AutoConfig.from_pretrained(checkpoint_dir(location))
    except (OSError, ValueError, KeyError) as exc:
        raise RobenchError(f"checkpoint {location}: unreadable config.json ({_first_line(exc)}); save the model "
                           f"again with model.save_pretrained('{location}'), with the transformers that can load "
                           "it") from exc


def parse_label_map(text: str | Mapping[int, str] | None) -> dict[int, str] | None:
    """`0=negative,1=positive` (or a mapping) -> {0: "negative", 1: "positive"}. A comma starts a new pair only
    before `OUTPUT=`, so label names may hold commas (`0=good, really,1=bad`)."""
    if text is None or isinstance(text, Mapping):
        return None if text is None else {int(k): str(v) for k, v in text.items()}
    out: dict[int, str] = {}
    for part in filter(None, (p.strip() for p in re.split(r",(?=\s*\d+\s*=)", text))):
        index, sep, name = part.partition("=")
        if not sep or not index.strip().isdigit() or not name.strip():
            raise RobenchError(f"label map {text!r}: expected OUTPUT=LABEL pairs such as 0=negative,1=positive")
        out[int(index)] = name.strip()
    return out


def _norm(name: str) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


def label_order(outputs: Sequence[str], task: Task, label_map: Mapping[int, str] | None, what: str
                ) -> tuple[int, ...]:
    """For each task label (in the task's order), the model output that predicts it.

    `outputs` are the model's label names by output index (its `id2label`); `label_map`
    overrides them. Raises a RobenchError that says how to fix a mismatch.
    """
    expected = ", ".join(task.label_names)
    example = shlex.quote(",".join(f"{i}={name}" for i, name in enumerate(task.label_names)))
    hint = f"pass --label-map {example} (label_map= in Python) with the model's outputs in its order"
    if len(outputs) != task.num_labels:
        raise RobenchError(f"{what} has {len(outputs)} output labels ({', '.join(map(str, outputs))}) but task "
                           f"{task.name!r} has {task.num_labels} ({expected})")
    if label_map is not None:
        if sorted(label_map) != list(range(len(outputs))):
            raise RobenchError(f"label map {label_map}: name every output 0..{len(outputs) - 1} once; {hint}")
        outputs = [label_map[i] for i in range(len(outputs))]
    names = [_norm(n) for n in outputs]
    if label_map is None and all(re.fullmatch(r"label_?\d+", n) for n in names):
        raise RobenchError(f"{what} names its labels generically ({', '.join(map(str, outputs))}); "
                           f"say which is which: {hint}")
    wanted = [_norm(n) for n in task.label_names]
    if sorted(names) != sorted(wanted) or len(set(names)) != len(names):
        source = "label map" if label_map is not None else f"{what}'s id2label"
        raise RobenchError(f"{source} ({', '.join(map(str, outputs))}) does not match task {task.name!r}'s labels "
                           f"({expected}) one to one; {hint}")
    return tuple(names.index(w) for w in wanted)


def checkpoint_label_order(location: str, task: Task, label_map: Mapping[int, str] | None) -> tuple[int, ...]:
    """The checkpoint's outputs in the task's label order: by its `id2label` names whenever it names its labels
    (whatever the task or file is called); only a robench checkpoint of a built-in task with generic names
    (written before robench named them) is taken in its training task's order."""
    config = load_config(location)
    outputs = [config.id2label[i] for i in range(config.num_labels)]
    generic = all(re.fullmatch(r"label_?\d+", _norm(n)) for n in outputs)
    if label_map is None and generic and task.uses_data_dir and config.num_labels == task.num_labels and \
            _trained_on(location, task):
        return tuple(range(task.num_labels))
    return label_order(outputs, task, label_map, f"checkpoint {location}")


def _trained_on(location: str, task: Task) -> bool:
    """True when robench fine-tuned the checkpoint on `task` (its training.json says so)."""
    record = checkpoint_dir(location) / "training.json"
    try:
        return json.loads(record.read_text()).get("task") == task.name
    except (OSError, ValueError, AttributeError):
        return False


def load_victim(location: str | Path, device: torch.device, label_order: Sequence[int] | None = None,
                settings: Any = None, **kwargs) -> BaseVictim:
    """The checkpoint at `location` (a directory or hub id) with its tokenizer, ready to query.

    `label_order` reorders the model's outputs into the task's label order; `kwargs` go to `Victim`. A model
    whose defence changes how it predicts (SAFER's vote, `robench.classifier.victim.defended`) comes back as that
    defended victim; it needs `settings` (its resources), and refuses to load without them.
    """
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    register_architectures()

    folder = checkpoint_dir(str(location))
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(folder, output_loading_info=True)
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except Exception as exc:  # any failure to read the user's files is one line (check_checkpoint ran before)
        raise unloadable(location, exc) from exc
    if missing := sorted(info.get("missing_keys") or []):
        raise RobenchError(f"checkpoint {location} has no trained weights for {', '.join(missing[:4])}"
                           f"{' ...' if len(missing) > 4 else ''} (a base encoder without a classification head?): "
                           "they would be initialised at random, so every run would score another model; attack a "
                           "fine-tuned sequence classifier, or fine-tune this one first (robench run --backbone "
                           f"{location})")
    return defended(Victim(model, tokenizer, device, label_order=label_order, **kwargs), settings)


def checkpoint_fields(location: str, label_map: str | Mapping[int, str] | None = None,
                      cache_dir: Path | None = None, name: str | None = None) -> dict[str, Any]:
    """The RunSpec fields (`checkpoint`, `model`, `backbone`) of a run that attacks the checkpoint at `location`
    (checked first: `check_checkpoint`); `name` (default: the folder's) is the name its row shows."""
    check_checkpoint(location)
    described = describe_checkpoint(location, cache_dir)
    parsed = parse_label_map(label_map)
    described["label_map"] = {str(k): v for k, v in parsed.items()} if parsed is not None else None
    return {"checkpoint": described, "model": display_name(name or described["location"], described["weights_sha256"]),
            "backbone": load_config(location).model_type}
