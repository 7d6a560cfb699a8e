"""Content fingerprints of the data a run reads, so caches and run ids change when the data does.

A local task declares the data-dir files it reads (`Task.data_files`; an attack recipe its own,
`AttackRecipe.data_files`); their fingerprint is the hash of each file's SHA-256. Digests are
computed once per file version: they are kept in `<cache_dir>/fingerprints.json` by absolute
path, size and modification time (a damaged cache file is ignored and rewritten), and in memory
for the life of the process. A task that declares no files (a plugin, the hub) is fingerprinted
by the content of its loaded rows instead.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from robench.core.errors import RobenchError
from robench.core.files import atomic_write
from robench.core.hashing import content_hash

if TYPE_CHECKING:
    from robench.core.paths import Settings
    from robench.core.types import Source, Task

log = logging.getLogger(__name__)
CACHE_FILE = "fingerprints.json"


@functools.lru_cache(maxsize=256)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256(path: Path) -> str:
    """SHA-256 of `path`, computed once per process and file version (size, mtime)."""
    st = path.stat()
    return _sha256(str(path), st.st_size, st.st_mtime_ns)


def files_fingerprint(root: Path, relative: Iterable[str], cache_dir: Path) -> str:
    """Hash of the contents of `root/<rel>` for each `rel`; a missing file is a RobenchError."""
    cache_path = cache_dir / CACHE_FILE
    cache = _read_cache(cache_path)
    digests, changed = {}, False
    for rel in relative:
        path = (root / rel).resolve()
        if not path.is_file():
            raise RobenchError(f"missing data file {root / rel}: is the data directory laid out like shared/data?")
        st = path.stat()
        key = str(path)
        entry = cache.get(key)
        if not (isinstance(entry, dict) and entry.get("size") == st.st_size and entry.get("mtime_ns") == st.st_mtime_ns
                and isinstance(entry.get("sha256"), str)):
            entry = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": file_sha256(path)}
            cache[key], changed = entry, True
        digests[rel] = entry["sha256"]
    if changed:
        _write_cache(cache_path, cache)
    return content_hash(digests, length=16)


def rows_fingerprint(task: Task, data_dir: Path | None, source: Source) -> str:
    """Hash of the loaded train and eval rows (tasks that declare no files, or the hub)."""
    from robench.data.loading import load_split, texts_of

    rows = {}
    for split in ("train", "eval"):
        ds = load_split(task, split, data_dir, source)
        blob = json.dumps([texts_of(ds, task), list(ds["label"])]).encode()
        rows[split] = hashlib.sha256(blob).hexdigest()
    return content_hash(rows, length=16)


def task_fingerprint(task: Task, settings: Settings, source: Source) -> str:
    """Fingerprint of the train and eval data of `task` as this run would read it."""
    if source == "local" and task.data_files:
        return files_fingerprint(settings.require_data_dir(), task.data_files, settings.cache_dir)
    return rows_fingerprint(task, settings.data_dir, source)


def _read_cache(path: Path) -> dict:
    try:
        cache = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        log.warning("ignoring the damaged fingerprint cache %s (%s); it will be rewritten", path, exc)
        return {}
    return cache if isinstance(cache, dict) else {}


def _write_cache(path: Path, cache: dict) -> None:
    try:
        atomic_write(path, json.dumps(cache, indent=1, sort_keys=True))
    except OSError as exc:  # a read-only cache dir only costs re-hashing next time
        log.warning("could not write the fingerprint cache %s (%s)", path, exc)
