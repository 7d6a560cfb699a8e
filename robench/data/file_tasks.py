"""Tasks read from the user's own files, no plugin needed.

Two forms of `--task`:

* a task file, `my_task.toml` (paths relative to it):

      name = "reviews"                    # default: the file's stem
      train = "train.csv"                 # optional: without it the task is eval-only
      eval = "test.csv"
      text_columns = ["review"]           # one column, or two for sentence pairs (the last is attacked)
      label_column = "stars"
      labels = ["neg", "pos"]             # label names, in the order of their indices
      replay = "adversarial.csv"          # optional: fixed adversarial examples for `--attack advglue`

* one line for the common eval-only case: `csv:reviews.csv` (also `tsv:`, `jsonl:`, `parquet:`) with
  `--text-column`, `--label-column` and `--labels`.

Files are CSV, TSV, JSON Lines or Parquet (each by its extension, or all by `format = "..."` or the prefix of
the one-line form), read through `datasets` and validated like built-in tasks (columns present, no empty text,
labels inside the set).
Labels in a file are label names, or indices 0..n-1. The definition a RunSpec stores includes the SHA-256
of every file, so editing the data changes the run id.
"""
from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Sequence

from robench.core.errors import RobenchError
from robench.core.hashing import file_sha256
from robench.core.types import Split, Task
from robench.data.loading import _read

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}
ONE_LINE = re.compile(r"^(csv|tsv|jsonl|parquet):(.+)$")
KEYS = {"name", "train", "eval", "text_columns", "label_column", "labels", "replay", "format"}
SPLITS = ("train", "eval", "replay")


def is_file_task(task: str) -> bool:
    return task.endswith(".toml") or ONE_LINE.match(task) is not None


def file_task_definition(task: str, text_columns: Sequence[str] | None = None, label_column: str | None = None,
                         labels: Sequence[str] | None = None, cache_dir: Path | None = None) -> dict[str, Any]:
    """The definition of a file task (what a RunSpec's `task_source` holds), files hashed.

    `task` is a task file (`*.toml`) or the one-line form `FORMAT:PATH`; the other arguments
    complete the one-line form and must not be given with a task file.
    """
    if (match := ONE_LINE.match(task)) is not None:
        if labels is None:
            raise RobenchError(f"--task {task}: name the label set with --labels (e.g. --labels negative,positive)")
        path = Path(match.group(2)).expanduser()
        raw = {"name": path.stem, "eval": str(path), "format": match.group(1),
               "text_columns": list(text_columns or ["text"]), "label_column": label_column or "label",
               "labels": list(labels)}
        base = Path.cwd()
    else:
        if text_columns or label_column or labels:
            raise RobenchError(f"--task {task}: --text-column, --label-column and --labels go in the task file")
        raw, base = _read_toml(Path(task).expanduser()), Path(task).expanduser().resolve().parent
    return _definition(raw, base, task, cache_dir)


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise RobenchError(f"task file {path} does not exist")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RobenchError(f"task file {path} is not valid TOML: {exc}") from exc
    raw.setdefault("name", path.stem)
    return raw


def _definition(raw: dict[str, Any], base: Path, what: str, cache_dir: Path | None) -> dict[str, Any]:
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise RobenchError(f"task {what}: unknown keys {unknown} (known: {sorted(KEYS)})")
    for key in ("eval", "text_columns", "label_column", "labels"):
        if not raw.get(key):
            raise RobenchError(f"task {what}: missing {key!r}")
    columns = [raw["text_columns"]] if isinstance(raw["text_columns"], str) else list(raw["text_columns"])
    if not 1 <= len(columns) <= 2 or not all(isinstance(c, str) and c for c in columns):
        raise RobenchError(f"task {what}: text_columns must name one column, or two for sentence pairs")
    labels = [str(label) for label in raw["labels"]]
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise RobenchError(f"task {what}: labels must list at least two distinct names, got {labels}")
    files = {split: _path(base, raw[split], what) if raw.get(split) else None for split in SPLITS}
    fmt = raw.get("format")
    for path in filter(None, files.values()):
        if (fmt or FORMATS.get(path.suffix.lower())) not in FORMATS.values():
            raise RobenchError(f"task {what}: cannot tell the format of {path.name}; use .csv, .tsv, .jsonl or "
                               f".parquet files or set format = \"csv\" (one of {sorted(set(FORMATS.values()))})")
    return {"name": str(raw["name"]), "format": fmt, "text_columns": columns, "label_column": raw["label_column"],
            "labels": labels, "files": {k: str(v) if v else None for k, v in files.items()},
            "sha256": {k: file_sha256(v, cache_dir) if v else None for k, v in files.items()}}


def _path(base: Path, name: str, what: str) -> Path:
    path = (base / Path(name).expanduser()).resolve()
    if not path.is_file():
        raise RobenchError(f"task {what}: data file {path} does not exist")
    return path


def task_from_definition(definition: dict[str, Any]) -> Task:
    """A `Task` whose splits are read from the definition's files."""
    d = definition
    labels = tuple(d["labels"])

    def load(split: str):
        path = d["files"][split]
        if path is None:
            raise RobenchError(f"task {d['name']!r} has no {split} file")
        return _load(Path(path), d["format"] or FORMATS[Path(path).suffix.lower()], d["label_column"], labels)

    def local(root: Path | None, split: Split):
        return load(split)

    def hub(split: Split):
        raise RobenchError(f"task {d['name']!r} is read from files; --data-source hub does not apply")

    return Task(d["name"], tuple(d["text_columns"]), labels, local, hub, uses_data_dir=False,
                adversarial=(lambda: load("replay")) if d["files"].get("replay") else None,
                note=f"read from {d['files']['eval']}")


def has_train_file(definition: dict[str, Any]) -> bool:
    return definition["files"].get("train") is not None


def _load(path: Path, fmt: str, label_column: str, labels: tuple[str, ...]):
    """The file's rows with an integer `label` column; `robench.data.loading.validate` checks the rest."""
    if fmt == "tsv":
        ds = _read(path, "csv", delimiter="\t")
    else:
        ds = _read(path, "json" if fmt == "jsonl" else fmt)
    if label_column not in ds.column_names:
        raise RobenchError(f"{path}: missing label column {label_column!r} (has {ds.column_names})")
    values = set(ds[label_column])
    lookup = {name: i for i, name in enumerate(labels)}
    if all(v is not None and str(v) in lookup for v in values):  # label names (or digits that are names)
        ds = ds.map(lambda r: {"_label": lookup[str(r[label_column])]})
    elif all(isinstance(v, int) for v in values):  # indices; validate() checks the range
        ds = ds.map(lambda r: {"_label": r[label_column]})
    else:
        bad = sorted({str(v) for v in values if v is None or str(v) not in lookup})
        raise RobenchError(f"{path}: labels {bad[:5]} in column {label_column!r} are outside the task's label set "
                           f"{list(labels)} (give label names or indices 0..{len(labels) - 1})")
    return ds.remove_columns([c for c in ("label",) if c in ds.column_names]).rename_column("_label", "label")
