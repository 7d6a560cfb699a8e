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

import csv
import json
import re
import tomllib
from pathlib import Path
from typing import Any, Sequence

from robench.core.errors import RobenchError
from robench.core.files import not_a_file
from robench.core.hashing import file_sha256
from robench.core.registry import NAME
from robench.core.text import excerpt, excerpts
from robench.core.types import Split, Task
from robench.data.loading import _read, column, column_list, require_data_file

FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}
ONE_LINE = re.compile(r"(csv|tsv|jsonl|parquet):(.+)\Z", re.S)  # a file name may hold any character, a newline too
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
        raw = {"name": default_name(path), "eval": str(path), "format": match.group(1),
               "text_columns": list(text_columns or ["text"]), "label_column": label_column or "label",
               "labels": list(labels)}
        base = Path.cwd()
    else:
        if text_columns or label_column or labels:
            raise RobenchError(f"--task {task}: --text-column, --label-column and --labels go in the task file")
        raw, base = _read_toml(Path(task).expanduser()), Path(task).expanduser().resolve().parent
    return _definition(raw, base, task, cache_dir)


def default_name(path: Path) -> str:
    """A task's name when its definition gives none: the file's stem, made a plain name."""
    return re.sub(r"[^A-Za-z0-9_:+.-]", "_", path.stem).lstrip("_.-:+") or "task"


def _read_toml(path: Path) -> dict[str, Any]:
    if (why := not_a_file(path)) is not None:
        raise RobenchError(f"task file {path} {why}: pass a task definition (.toml)")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise RobenchError(f"task file {path} is not valid TOML: {exc}") from exc
    raw.setdefault("name", default_name(path))
    return raw


def _definition(raw: dict[str, Any], base: Path, what: str, cache_dir: Path | None) -> dict[str, Any]:
    unknown = sorted(set(raw) - KEYS)
    if unknown:
        raise RobenchError(f"task {what}: unknown keys {excerpts(unknown)} (known: {sorted(KEYS)})")
    for key in ("eval", "text_columns", "label_column", "labels"):
        if key not in raw or raw[key] in ("", [], None):
            raise RobenchError(f"task {what}: missing {key!r}")
    _check_types(raw, what)
    columns = [raw["text_columns"]] if isinstance(raw["text_columns"], str) else list(raw["text_columns"])
    if not 1 <= len(columns) <= 2:
        raise RobenchError(f"task {what}: text_columns must name one column, or two for sentence pairs")
    labels = [str(label) for label in raw["labels"]]
    if len(labels) < 2 or len(set(labels)) != len(labels):
        raise RobenchError(f"task {what}: labels must list at least two distinct names, got "
                           f"{excerpts(labels)}")
    files = {split: _path(base, raw[split], what) if raw.get(split) else None for split in SPLITS}
    fmt = raw.get("format")
    for path in filter(None, files.values()):
        if (fmt or FORMATS.get(path.suffix.lower())) not in FORMATS.values():
            raise RobenchError(f"task {what}: cannot tell the format of {path.name}; use .csv, .tsv, .jsonl or "
                               f".parquet files or set format = \"csv\" (one of {sorted(set(FORMATS.values()))})")
    return {"name": str(raw["name"]), "format": fmt, "text_columns": columns, "label_column": raw["label_column"],
            "labels": labels, "files": {k: str(v) if v else None for k, v in files.items()},
            "sha256": {k: file_sha256(v, cache_dir) if v else None for k, v in files.items()}}


def _check_types(raw: dict[str, Any], what: str) -> None:
    """Every key of a task definition has its type: a wrong one is named, never reinterpreted (a string of labels
    is not split into characters; a list is not a column name)."""
    def fail(key: str, wanted: str) -> None:
        raise RobenchError(f"task {what}: {key} must be {wanted}, got a {type(raw[key]).__name__} "
                           f"{excerpt(raw[key], 40)}")

    if not isinstance(raw.get("name"), str) or NAME.fullmatch(raw["name"]) is None:
        fail("name", "a plain name (a letter or digit, then letters, digits, '_', '-', '.', ':' or '+')")
    for key in ("train", "eval", "replay", "label_column", "format"):
        if key in raw and not (isinstance(raw[key], str) and raw[key].strip()):
            fail(key, "a non-empty string")
    columns = raw["text_columns"]
    if not (isinstance(columns, str) and columns or isinstance(columns, list)
            and all(isinstance(c, str) and c for c in columns)):
        fail("text_columns", 'a column name or a list of one or two column names, e.g. ["review"]')
    if not isinstance(raw["labels"], list) or not all(isinstance(v, str) or type(v) is int for v in raw["labels"]):
        fail("labels", 'a list of label names in index order, e.g. ["negative", "positive"]')
    if "format" in raw and raw["format"] not in FORMATS.values():
        fail("format", f"one of {sorted(set(FORMATS.values()))}")


def _path(base: Path, name: str, what: str) -> Path:
    path = (base / Path(name).expanduser()).resolve()
    if (why := not_a_file(path)) is not None:
        raise RobenchError(f"task {what}: data file {path} {why}; name a data file (.csv, .tsv, .jsonl, .parquet)")
    return path


def task_from_definition(definition: dict[str, Any]) -> Task:
    """A `Task` whose splits are read from the definition's files."""
    d = definition
    labels = tuple(d["labels"])

    def load(split: str):
        path = d["files"][split]
        if path is None:
            raise RobenchError(f"task {d['name']!r} has no {split} file")
        return _load(Path(path), d["format"] or FORMATS[Path(path).suffix.lower()], d["label_column"], labels,
                     d["text_columns"])

    def local(root: Path | None, split: Split):
        return load(split)

    def hub(split: Split):
        raise RobenchError(f"task {d['name']!r} is read from files; --data-source hub does not apply")

    return Task(d["name"], tuple(d["text_columns"]), labels, local, hub, uses_data_dir=False,
                adversarial=(lambda: load("replay")) if d["files"].get("replay") else None,
                note=f"read from {d['files']['eval']}")


def has_train_file(definition: dict[str, Any]) -> bool:
    return definition["files"].get("train") is not None


def _load(path: Path, fmt: str, label_column: str, labels: tuple[str, ...], text_columns: Sequence[str] = ()):
    """The file's rows with an integer `label` column; `robench.data.loading.validate` checks the rest.

    CSV and TSV are read as text, every field as written (`12345` and `007` stay those strings); JSON Lines and
    Parquet numbers in a text column become their text."""
    if fmt == "jsonl":
        _check_json_lines(path)
    ds = _read_delimited(path, "\t" if fmt == "tsv" else ",") if fmt in ("csv", "tsv") else \
        _read(path, "json" if fmt == "jsonl" else fmt)
    if label_column not in ds.column_names:
        raise RobenchError(f"{path}: missing label column {label_column!r} (has {column_list(ds.column_names)})")
    ds = _as_text(ds, [c for c in text_columns if c in ds.column_names])
    values = set(column(ds, label_column))
    lookup = {name: i for i, name in enumerate(labels)}
    if all(v is not None and str(v) in lookup for v in values):  # label names (or digits that are names)
        ds = ds.map(lambda r: {"_label": lookup[str(r[label_column])]})
    elif all(type(v) is int or isinstance(v, str) and v.isdigit() for v in values):  # indices; validate() checks
        ds = ds.map(lambda r: {"_label": int(r[label_column])})
    else:
        bad = sorted({str(v) for v in values if v is None or str(v) not in lookup})
        raise RobenchError(f"{path}: labels {excerpts(bad, 5)} in column {label_column!r} are outside "
                           f"the task's label set {list(labels)} (give label names or indices 0..{len(labels) - 1})")
    return ds.remove_columns([c for c in ("label",) if c in ds.column_names]).rename_column("_label", "label")


def _read_delimited(path: Path, delimiter: str):
    """A CSV or TSV file as text columns, every row checked to have as many fields as the header."""
    import datasets

    require_data_file(path)
    datasets.disable_progress_bars()
    with open(path, newline="", encoding="utf-8-sig") as fh:  # a byte-order mark is not part of the header
        try:
            rows = [row for row in csv.reader(fh, delimiter=delimiter) if row]
        except csv.Error as exc:
            raise RobenchError(f"malformed data file {path}: {exc}") from exc
    if not rows:
        raise RobenchError(f"data file {path} has no rows")
    header, body = rows[0], rows[1:]
    if len(set(header)) != len(header):
        raise RobenchError(f"{path}: the header names a column twice ({column_list(header)})")
    for number, row in enumerate(body, 2):
        if len(row) != len(header):
            raise RobenchError(f"{path}: data row {number - 1} has {len(row)} fields but the header has "
                               f"{len(header)} ({column_list(header)}); quote fields that contain "
                               f"{'a tab' if delimiter == chr(9) else 'a comma'}")
    if not body:
        raise RobenchError(f"data file {path} has no rows")
    return datasets.Dataset.from_dict({name: [row[i] for row in body] for i, name in enumerate(header)})


def _check_json_lines(path: Path) -> None:
    """A JSON Lines file whose first line is a JSON object has one on every non-empty line: the first that is not
    is named by its line number (datasets would report a type change in some later row). A file of one JSON
    document (an array over several lines) is left to the JSON reader."""
    require_data_file(path)
    with open(path, encoding="utf-8-sig") as fh:
        lines = [(number, line) for number, line in enumerate(fh, 1) if line.strip()]
    if not lines or not _is_object(lines[0][1]):
        return
    for number, line in lines:
        if not _is_object(line):
            raise RobenchError(f"{path}: line {number} is not a JSON object (invalid JSON Lines); every line must "
                               'be one object, e.g. {"text": "...", "label": "pos"}')


def _is_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _as_text(ds, columns: list[str]):
    """Numbers in `columns` as their text: a JSON `12345` in a text column is the text "12345" (None stays
    missing; anything else that is not text is left for `validate` to name)."""
    for name in columns:
        values = column(ds, name)
        if not any(type(v) in (int, float) for v in values):
            continue
        values = [str(v) if type(v) in (int, float) else v for v in values]
        if all(v is None or isinstance(v, str) for v in values):
            ds = ds.remove_columns(name).add_column(name, values)
    return ds
