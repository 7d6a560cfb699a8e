"""Content hashes of files (checkpoint weights, task data files, resources), cached by path, size, mtime, ctime
and inode.

Hashing a 400 MB checkpoint takes about a second; the cache (`<cache_dir>/sha256.json`) makes a
re-run free. An entry is reused only while the file's size, modification and change times and inode are unchanged,
so a file rewritten in place is hashed again. A file modified in the last `SETTLE_SECONDS` is hashed every time
and never cached (git's "racy" rule): an edit in the same clock tick as the hashing, of the same size, would
otherwise keep its stamp, and the old digest would be served for new bytes.
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import time
from pathlib import Path
from typing import Any

from robench.core.files import atomic_write

CACHE_FILE = "sha256.json"
log = logging.getLogger(__name__)
CHUNK = 1 << 20
SETTLE_SECONDS = 2  # a file modified more recently than this is hashed without any cache


def file_sha256(path: Path, cache_dir: Path | None = None) -> str:
    """The SHA-256 of `path`'s bytes (hex): computed once per process and file version (path, size, modification
    and change times, inode), and with `cache_dir` also kept across processes in `<cache_dir>/sha256.json`; a file
    changed in the last `SETTLE_SECONDS` is hashed every time. This is robench's one file-hash cache (data
    fingerprints, checkpoint and resource manifests, given checkpoints)."""
    path = Path(path).resolve()
    stat = path.stat()
    # the inode's change time too: a copy that restores an old modification time (`cp -p`) still changes it
    key, stamp = str(path), [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]
    if max(stat.st_mtime_ns, stat.st_ctime_ns) > time.time_ns() - SETTLE_SECONDS * 1_000_000_000:
        return _sha256.__wrapped__(key, *stamp)  # racy: an edit in this clock tick may not change its stamp
    if cache_dir is None:
        return _sha256(key, *stamp)
    hit = _load(cache_dir).get(key)
    if isinstance(hit, dict) and hit.get("stamp") == stamp and isinstance(hit.get("sha256"), str):
        return hit["sha256"]
    digest = _sha256(key, *stamp)
    cache = _load(cache_dir)  # re-read: another process may have added entries meanwhile
    cache[key] = {"stamp": stamp, "sha256": digest}
    try:
        atomic_write(cache_dir / CACHE_FILE, json.dumps(cache, indent=1, sort_keys=True))
    except OSError as exc:  # a read-only or full cache dir only costs hashing again next time
        log.warning("could not write the hash cache %s (%s)", cache_dir / CACHE_FILE, exc)
    return digest


@functools.lru_cache(maxsize=1024)
def _sha256(path: str, size: int, mtime_ns: int, ctime_ns: int, inode: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def files_sha256(paths: list[Path], cache_dir: Path | None = None) -> str:
    """One hash over several files (their names and contents), independent of their order."""
    parts = sorted(f"{Path(p).name}:{file_sha256(p, cache_dir)}" for p in paths)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _load(cache_dir: Path | None) -> dict:
    if cache_dir is None or not (cache_dir / CACHE_FILE).is_file():
        return {}
    try:
        cache = json.loads((cache_dir / CACHE_FILE).read_text(encoding="utf-8"))
    except (json.JSONDecodeError, OSError, UnicodeDecodeError) as exc:  # a damaged cache only costs re-hashing
        log.warning("ignoring the damaged hash cache %s (%s); it will be rewritten", cache_dir / CACHE_FILE, exc)
        return {}
    return cache if isinstance(cache, dict) else {}


def content_hash(obj: Any, length: int = 12) -> str:
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]
