"""Loading, validating and subsetting task data (local data directory or the Hugging Face hub).

Every loader returns a `datasets.Dataset` with the task's text fields plus an
integer `label` column. Offline data comes from a data directory laid out like
`shared/data` (see its README for the quoting rules honoured here).
"""
from __future__ import annotations

import codecs
import csv
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from robench.core.errors import RobenchError
from robench.core.hashing import file_sha256
from robench.core.text import excerpt, excerpts
from robench.core.types import Source, Split, Task
from robench.data import TASKS


def require_data_file(path: Path, text: bool = True) -> None:
    """`path` is a readable, non-empty regular file (and, when `text`, UTF-8): else a RobenchError that says
    which, naming the file and never quoting its content."""
    if path.is_dir():
        raise RobenchError(f"data file {path} is a directory, not a file")
    if not path.exists():
        raise RobenchError(f"missing data file {path}: is the data directory laid out like shared/data?")
    if not path.is_file():
        raise RobenchError(f"data file {path} is not a regular file")
    if path.stat().st_size == 0:
        raise RobenchError(f"data file {path} is empty (0 bytes)")
    if text:
        _require_utf8(path)


def _require_utf8(path: Path) -> None:
    decoder, offset = codecs.getincrementaldecoder("utf-8")(), 0
    try:
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                decoder.decode(block)
                offset += len(block)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        line = _line_of(path, offset + max(exc.start, 0))
        raise RobenchError(f"data file {path} is not UTF-8 text (an invalid byte on line {line}); save it as "
                           "UTF-8") from None
    except OSError as exc:
        raise RobenchError(f"cannot read data file {path} ({exc.strerror or type(exc).__name__})") from None


def _line_of(path: Path, offset: int) -> int:
    with open(path, "rb") as fh:
        return fh.read(offset).count(b"\n") + 1


def _cause(exc: BaseException) -> str:
    """What a parser said went wrong, from the innermost exception (datasets wraps it in a generic one), kept
    short; a parser's message names positions, not content."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {excerpt(text, 120, quote=False)}" if text else type(exc).__name__


def _read(path: Path, builder: str, **kwargs):
    import datasets

    require_data_file(path, text=builder in ("csv", "json", "text"))
    datasets.disable_progress_bars()
    datasets.utils.logging.set_verbosity_error()  # its "Failed to read file" line would be a second error line
    # datasets keeps what it parsed under a key of the file's path and modification time; a folder per content
    # hash keeps it from serving old rows for a file edited in place (same size and time)
    by_content = Path(datasets.config.HF_DATASETS_CACHE) / "robench-by-content" / file_sha256(path)[:32]
    try:
        return datasets.load_dataset(builder, data_files=str(path), split="train", keep_in_memory=True,
                                     cache_dir=str(by_content), **kwargs)
    except Exception as exc:  # pandas / arrow errors on malformed files
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if "corresponds to no data" in reason:  # datasets' words for a file with a header and no rows
            raise RobenchError(f"data file {path} has no rows") from exc
        raise RobenchError(f"malformed data file {path}: {_cause(exc)}") from exc


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


def _map_label_names(ds, names: tuple[str, ...], path: Path, label: str = "label"):
    lookup = {n: i for i, n in enumerate(names)}
    bad = sorted({v for v in column(ds, label) if v not in lookup})
    if bad:
        raise RobenchError(f"malformed data file {path}: unexpected labels {bad[:5]} (expected {list(names)})")
    ds = ds.map(lambda batch: {"_label": [lookup[v] for v in batch[label]]}, batched=True, remove_columns=[label])
    return ds.rename_column("_label", "label")


# --- AdvGLUE -----------------------------------------------------------------------

ADVGLUE_FILE = "advglue/dev.json"  # relative to the data dir

def load_advglue(task: Task, data_dir: Path | None, source: Source):
    """The AdvGLUE dev split matching `task` (or the task's own replay file), with its text fields and labels."""
    if task.adversarial is not None:
        return validate(task.adversarial(), task, f"{task.name} replay")
    if task.advglue is None:
        tasks = ", ".join(n for n in TASKS.names() if TASKS.get(n).advglue)
        raise RobenchError(f"task {task.name!r} has no AdvGLUE split (AdvGLUE covers: {tasks}), and the AdvGLUE "
                           "replay is the default attack: choose a word-level attack with --attack textfooler (or "
                           "bert-attack, gradient-swap; `robench list attacks`)")
    if source == "hub":
        config = "adv_" + task.advglue.replace("-", "_")
        ds = _hub("adv_glue", config, "validation")
    else:
        path = _require(data_dir) / ADVGLUE_FILE
        ds = _read(path, "json", field=task.advglue)
    return validate(ds, task, f"AdvGLUE {task.advglue}")


# --- public API -------------------------------------------------------------------

def _require(data_dir: Path | None) -> Path:
    if data_dir is None:
        raise RobenchError("no data directory set: pass --data-dir or set ROBENCH_DATA_DIR, or use --data-source hub")
    return data_dir


def load_split(task: Task, split: Split, data_dir: Path | None, source: Source):
    """Load and validate one split of `task`, memoised by the content of the files it reads (their SHA-256, as in
    the run id), so a long-lived process never serves old rows after a file changed (datasets are never modified
    in place). A task from files is a new `Task` for each definition, and its definition holds its files' hashes."""
    return _load_split(task, split, data_dir, source, _content_key(task, data_dir, source))


def _content_key(task: Task, data_dir: Path | None, source: Source) -> tuple[str | None, ...]:
    """The SHA-256 of each data-dir file `task` reads (`Task.data_files`); None for a file that is not there (the
    loader reports it)."""
    if source != "local" or not task.uses_data_dir or data_dir is None:
        return ()
    return tuple(file_sha256(data_dir / name) if (data_dir / name).is_file() else None for name in task.data_files)


@functools.lru_cache(maxsize=32)
def _load_split(task: Task, split: Split, data_dir: Path | None, source: Source, content: tuple[str | None, ...]):
    if not task.uses_data_dir:
        ds = task.local(None, split)
    else:
        ds = task.hub(split) if source == "hub" else task.local(_require(data_dir), split)
    return validate(ds, task, f"{task.name} {split}")


def validate(ds, task: Task, what: str):
    """Keep the task's columns; reject empty data, missing fields and unknown labels."""
    missing = [c for c in (*task.text_fields, "label") if c not in ds.column_names]
    if missing:
        raise RobenchError(f"{what}: missing columns {missing} (has {column_list(ds.column_names)})")
    if len(ds) == 0:
        raise RobenchError(f"{what}: the data is empty")
    ds = ds.select_columns([*task.text_fields, "label"])
    labels = set(ds.unique("label"))
    allowed = set(range(task.num_labels))
    if not labels <= allowed:
        raise RobenchError(
            f"{what}: labels {sorted(labels - allowed, key=str)[:5]} are outside the task's label set "
            f"{dict(enumerate(task.label_names))}"
        )
    for field in task.text_fields:
        values = column(ds, field)
        if not_text := [i for i, t in enumerate(values) if t is not None and not isinstance(t, str)]:
            raise RobenchError(f"{what}: {field!r} holds {type(values[not_text[0]]).__name__} values, not text, in "
                               f"rows {not_text[:5]}")
        empty = [i for i, t in enumerate(values) if t is None or not t.strip()]
        if empty:
            raise RobenchError(f"{what}: empty or missing {field!r} text in rows {empty[:5]}")
    return ds


def column_list(names) -> str:
    """A file's column names for an error message: short escaped excerpts of at most six (a header is content)."""
    return excerpts(names)


def subset(ds, size: int | None, seed: int):
    """A deterministic random subset of `size` rows chosen by `seed` (all rows if size is None)."""
    rows = subset_indices(len(ds), size, seed)
    return ds if len(rows) == len(ds) else ds.select(rows)


def subset_indices(n: int, size: int | None, seed: int) -> list[int]:
    """The sorted rows `subset` keeps out of `n`: `size` of them drawn by `seed`, or all."""
    if size is None or size >= n:
        return list(range(n))
    if size <= 0:
        raise RobenchError(f"subset size must be positive, got {size}")
    return sorted(int(i) for i in np.random.default_rng(seed).permutation(n)[:size])


def column(ds, name: str) -> list:
    """The values of one column as a list, in Arrow: iterating `ds[name]` (a lazy `datasets` Column since datasets
    4) formats every row, seconds for SST-2's 67k."""
    return ds[name][:]


def texts_of(ds, task: Task) -> list[tuple[str, ...]]:
    """Rows as tuples of the task's text fields (one element for single-sentence tasks)."""
    return list(zip(*(column(ds, f) for f in task.text_fields)))


def split_rows(split: Sequence[str], subset: Sequence[str]) -> list[int | None]:
    """Eval-split row of each subset text, walking the split in order (None: not found after the previous).

    Identical texts are interchangeable: each takes the first unused row after the previous match.
    """
    rows: list[int | None] = []
    pos = 0
    for text in subset:
        row = next((j for j in range(pos, len(split)) if split[j] == text), None)
        rows.append(row)
        pos = pos if row is None else row + 1
    return rows


@dataclass(frozen=True)
class RunTexts:
    """What a run reads of its data, as texts (tuples of the task's text fields) and labels."""

    train: list[tuple[str, ...]]  # the training subset, in its order (empty: the run trains nothing)
    train_labels: list[int]
    dev: list[tuple[str, ...]]  # the whole eval split (the dev accuracy's)
    attacked: list[tuple[str, ...]] | None  # the attacked subset (None: training only)


def run_texts(task: Task, read: Callable[[Split], Any], attacked: Callable[[], Any] | None, trains: bool,
              train_size: int | None, seed: int, eval_size: int | None, eval_seed: int) -> RunTexts:
    """The texts of a run: `read(split)` gives the task's splits, `attacked()` the split its attack draws from
    (None: no attack); the training subset (`train_size` rows chosen by `seed`; none unless `trains`) and the
    attacked subset (`eval_size` chosen by `eval_seed`) as `subset` chooses them."""
    train = subset(read("train"), train_size, seed) if trains else None
    return RunTexts(texts_of(train, task) if train is not None else [],
                    [int(y) for y in column(train, "label")] if train is not None else [],
                    texts_of(read("eval"), task),
                    None if attacked is None else texts_of(subset(attacked(), eval_size, eval_seed), task))
