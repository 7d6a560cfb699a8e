"""Classification tasks: where their data lives, their fields, labels and AdvGLUE split.

Every loader returns a `datasets.Dataset` with the task's text fields plus an
integer `label` column. Offline data comes from a data directory laid out like
`shared/data` (see its README for the quoting rules honoured here); online
users can pass `--data-source hub` to use the Hugging Face hub instead.
"""
from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

import numpy as np

from robench.errors import RobenchError
from robench.registries import TASKS

Split = Literal["train", "eval"]
Source = Literal["local", "hub"]


@dataclass(frozen=True)
class Task:
    """A text-classification task and how to load it from each source."""

    name: str
    text_fields: tuple[str, ...]
    label_names: tuple[str, ...]
    local: Callable[[Path, Split], "object"]  # (data_dir, split) -> Dataset
    hub: Callable[[Split], "object"]  # split -> Dataset
    advglue: str | None = None  # key of the AdvGLUE dev split for this task
    note: str = ""  # how the offline data differs from the canonical task, if it does

    @property
    def num_labels(self) -> int:
        return len(self.label_names)


def _read(path: Path, builder: str, **kwargs):
    import datasets

    if not path.is_file():
        raise RobenchError(f"missing data file {path}: is the data directory laid out like shared/data?")
    datasets.disable_progress_bars()
    try:
        return datasets.load_dataset(builder, data_files=str(path), split="train", keep_in_memory=True, **kwargs)
    except Exception as exc:  # pandas / arrow errors on malformed files
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise RobenchError(f"malformed data file {path}: {reason}") from exc


def _tsv(path: Path, raw_quotes: bool):
    return _read(path, "csv", delimiter="\t", quoting=csv.QUOTE_NONE if raw_quotes else csv.QUOTE_MINIMAL)


def _every_kth(ds, k: int, held_out: bool):
    """Deterministic split: every k-th row is held out (stable across runs and machines)."""
    idx = [i for i in range(len(ds)) if (i % k == 0) == held_out]
    return ds.select(idx)


def _hub(path: str, name: str | None, split: str, rename: dict[str, str] | None = None):
    import datasets

    try:
        ds = datasets.load_dataset(path, name, split=split)
    except Exception as exc:
        raise RobenchError(
            f"could not load {path}/{name or ''} [{split}] from the Hugging Face hub ({type(exc).__name__}); "
            "offline? point --data-dir or ROBENCH_DATA_DIR at a local data directory"
        ) from exc
    return ds.rename_columns(rename) if rename else ds


def _glue_hub(config: str, eval_split: str = "validation") -> Callable[[Split], object]:
    return lambda split: _hub("glue", config, "train" if split == "train" else eval_split)


# --- local loaders ---------------------------------------------------------------

def _sst2_local(root: Path, split: Split):
    ds = _tsv(root / "sst2" / ("train.tsv" if split == "train" else "dev.tsv"), raw_quotes=True)
    if "sentence" not in ds.column_names:
        return ds  # validate() reports the missing column
    return ds.map(lambda r: {"sentence": (r["sentence"] or "").strip()})  # GLUE keeps a trailing space


def _rte_local(root: Path, split: Split):
    return _tsv(root / "rte" / ("train.tsv" if split == "train" else "dev.tsv"), raw_quotes=False)


def _qnli_local(root: Path, split: Split):
    ds = _tsv(root / "qnli" / "dev.tsv", raw_quotes=True)
    ds = _map_label_names(ds, ("entailment", "not_entailment"), root / "qnli" / "dev.tsv")
    return _every_kth(ds, 5, held_out=split == "eval")


def _mr_local(root: Path, split: Split):
    import datasets

    parts = []
    for label, name in ((0, "rt-polarity.neg"), (1, "rt-polarity.pos")):
        ds = _read(root / "mr" / name, "text", encoding="utf-8")
        parts.append(ds.map(lambda r: {"text": r["text"].strip(), "label": label}))
    ds = datasets.concatenate_datasets(parts)
    return _every_kth(ds, 10, held_out=split == "eval")


AG_LABELS = ("World", "Sports", "Business", "Sci/Tech")


def _agnews_local(root: Path, split: Split):
    if split == "train":
        ds = _read(root / "ag_news" / "train_subset_alps.tsv", "csv", delimiter="\t", header=None,
                   column_names=["text", "label_name"])
        return _map_label_names(ds, AG_LABELS, root / "ag_news" / "train_subset_alps.tsv", column="label_name")
    ds = _read(root / "ag_news" / "test.csv", "csv", header=None, column_names=["label", "title", "text"])
    return ds.map(lambda r: {"label": int(r["label"]) - 1, "text": str(r["text"]).replace("\\", " ").strip()},
                  remove_columns=["title"])


def _map_label_names(ds, names: tuple[str, ...], path: Path, column: str = "label"):
    lookup = {n: i for i, n in enumerate(names)}
    bad = sorted({v for v in ds[column] if v not in lookup})
    if bad:
        raise RobenchError(f"malformed data file {path}: unexpected labels {bad[:5]} (expected {list(names)})")
    ds = ds.map(lambda r: {"_label": lookup[r[column]]}, remove_columns=[column])
    return ds.rename_column("_label", "label")


# --- AdvGLUE -----------------------------------------------------------------------

def load_advglue(task: Task, data_dir: Path | None, source: Source):
    """The AdvGLUE dev split matching `task`, with the task's text fields and labels."""
    if task.advglue is None:
        tasks = ", ".join(n for n in TASKS.names() if TASKS.get(n).advglue)
        raise RobenchError(f"task {task.name!r} has no AdvGLUE split (AdvGLUE covers: {tasks})")
    if source == "hub":
        config = "adv_" + task.advglue.replace("-", "_")
        ds = _hub("adv_glue", config, "validation")
    else:
        path = _require(data_dir) / "advglue" / "dev.json"
        ds = _read(path, "json", field=task.advglue)
    return validate(ds, task, f"AdvGLUE {task.advglue}")


# --- public API -------------------------------------------------------------------

def _require(data_dir: Path | None) -> Path:
    if data_dir is None:
        raise RobenchError("no data directory set: pass --data-dir or set ROBENCH_DATA_DIR, or use --data-source hub")
    return data_dir


@functools.lru_cache(maxsize=32)
def load_split(task: Task, split: Split, data_dir: Path | None, source: Source):
    """Load and validate one split of `task` (memoised: datasets are never modified in place)."""
    ds = task.hub(split) if source == "hub" else task.local(_require(data_dir), split)
    return validate(ds, task, f"{task.name} {split}")


def validate(ds, task: Task, what: str):
    """Keep the task's columns; reject empty data, missing fields and unknown labels."""
    missing = [c for c in (*task.text_fields, "label") if c not in ds.column_names]
    if missing:
        raise RobenchError(f"{what}: missing columns {missing} (has {ds.column_names})")
    if len(ds) == 0:
        raise RobenchError(f"{what}: the data is empty")
    ds = ds.select_columns([*task.text_fields, "label"])
    labels = set(ds["label"])
    allowed = set(range(task.num_labels))
    if not labels <= allowed:
        raise RobenchError(
            f"{what}: labels {sorted(labels - allowed, key=str)[:5]} are outside the task's label set "
            f"{dict(enumerate(task.label_names))}"
        )
    for field in task.text_fields:
        empty = [i for i, t in enumerate(ds[field]) if not isinstance(t, str) or not t.strip()]
        if empty:
            raise RobenchError(f"{what}: empty or missing {field!r} text in rows {empty[:5]}")
    return ds


def subset(ds, size: int | None, seed: int):
    """A deterministic random subset of `size` rows chosen by `seed` (all rows if size is None)."""
    if size is None or size >= len(ds):
        return ds
    if size <= 0:
        raise RobenchError(f"subset size must be positive, got {size}")
    rows = np.random.default_rng(seed).permutation(len(ds))[:size]
    return ds.select(sorted(int(i) for i in rows))


def texts_of(ds, task: Task) -> list[tuple[str, ...]]:
    """Rows as tuples of the task's text fields (one element for single-sentence tasks)."""
    columns = [list(ds[f]) for f in task.text_fields]
    return list(zip(*columns))


def _register(task: Task) -> None:
    TASKS.register(task.name)(task)


_register(Task("sst2", ("sentence",), ("negative", "positive"), _sst2_local, _glue_hub("sst2"), advglue="sst2"))
_register(Task("rte", ("sentence1", "sentence2"), ("entailment", "not_entailment"), _rte_local,
               _glue_hub("rte"), advglue="rte"))
_register(Task("qnli", ("question", "sentence"), ("entailment", "not_entailment"), _qnli_local,
               _glue_hub("qnli"), advglue="qnli",
               note="offline: only GLUE dev ships; rows with index % 5 != 0 train, the rest evaluate"))
_register(Task("mr", ("text",), ("negative", "positive"), _mr_local,
               lambda split: _hub("rotten_tomatoes", None, "train" if split == "train" else "test"),
               note="offline: every 10th sentence of each polarity file is held out for evaluation"))
_register(Task("agnews", ("text",), AG_LABELS, _agnews_local,
               lambda split: _hub("ag_news", None, "train" if split == "train" else "test"),
               note="offline: train is the 10,001-row ALPS subset of AG train (descriptions only); "
                    "eval is the AG test set's descriptions"))


def _hub_only(name: str) -> Callable[[Path, Split], object]:
    def local(root: Path, split: Split):
        raise RobenchError(f"task {name!r} has no offline data in shared/data; use --data-source hub when online")

    return local


_register(Task("mnli", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"), _hub_only("mnli"),
               _glue_hub("mnli", "validation_matched"), advglue="mnli"))
_register(Task("mnli-mm", ("premise", "hypothesis"), ("entailment", "neutral", "contradiction"),
               _hub_only("mnli-mm"), _glue_hub("mnli", "validation_mismatched"), advglue="mnli-mm"))
_register(Task("qqp", ("question1", "question2"), ("not_duplicate", "duplicate"), _hub_only("qqp"),
               _glue_hub("qqp"), advglue="qqp"))
