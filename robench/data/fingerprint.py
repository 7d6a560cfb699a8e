"""Content fingerprints of the data a run reads, so caches and run ids change when the data does.

A local task declares the data-dir files it reads (`Task.data_files`; an attack recipe its own,
`AttackRecipe.data_files`); their fingerprint is the hash of each file's SHA-256. Digests are
computed once per file version by robench's one file-hash cache (`robench.core.hashing.file_sha256`:
in memory, and in `<cache_dir>/sha256.json` by absolute path, size and modification time; a damaged
cache file is ignored and rewritten). A task that declares no files (a plugin, the hub) is fingerprinted
by the content of its loaded rows instead.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from robench.core.errors import RobenchError
from robench.core.hashing import content_hash, file_sha256

if TYPE_CHECKING:
    from robench.core.paths import Settings
    from robench.core.types import Source, Task

log = logging.getLogger(__name__)


def files_fingerprint(root: Path, relative: Iterable[str], cache_dir: Path) -> str:
    """Hash of the contents of `root/<rel>` for each `rel`; a missing file is a RobenchError."""
    digests = {}
    for rel in relative:
        path = (root / rel).resolve()
        if not path.is_file():
            raise RobenchError(f"missing data file {root / rel}: is the data directory laid out like shared/data?")
        digests[rel] = file_sha256(path, cache_dir)
    return content_hash(digests, length=16)


def rows_fingerprint(task: Task, data_dir: Path | None, source: Source,
                     read: Callable[[str], Any] | None = None) -> str:
    """Hash of the loaded train and eval rows (tasks that declare no files, or the hub); `read(split)`, when given,
    reads a split (a run reads each once)."""
    from robench.data.loading import column, load_split, texts_of

    rows = {}
    for split in ("train", "eval"):
        ds = read(split) if read is not None else load_split(task, split, data_dir, source)
        blob = json.dumps([texts_of(ds, task), column(ds, "label")]).encode()
        rows[split] = hashlib.sha256(blob).hexdigest()
    return content_hash(rows, length=16)


def task_fingerprint(task: Task, settings: Settings, source: Source, read: Callable[[str], Any] | None = None) -> str:
    """Fingerprint of the train and eval data of `task` as this run would read it (`read`: see rows_fingerprint)."""
    if source == "local" and task.data_files:
        return files_fingerprint(settings.require_data_dir(), task.data_files, settings.cache_dir)
    return rows_fingerprint(task, settings.data_dir, source, read)
