"""Content hashes of files (checkpoint weights, task data files), cached by path, size and mtime.

Hashing a 400 MB checkpoint takes about a second; the cache (`<cache_dir>/sha256.json`) makes a
re-run free. An entry is reused only while the file's size and modification time are unchanged,
so a file rewritten in place is hashed again.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from robench.core.files import atomic_write

CACHE_FILE = "sha256.json"
CHUNK = 1 << 20


def file_sha256(path: Path, cache_dir: Path | None = None) -> str:
    """The SHA-256 of `path`'s bytes (hex), from the cache when the file is unchanged."""
    path = Path(path).resolve()
    stat = path.stat()
    key, stamp = str(path), [stat.st_size, stat.st_mtime_ns]
    cache = _load(cache_dir)
    if (hit := cache.get(key)) is not None and hit["stamp"] == stamp:
        return hit["sha256"]
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    if cache_dir is not None:
        cache = _load(cache_dir)  # re-read: another process may have added entries meanwhile
        cache[key] = {"stamp": stamp, "sha256": digest.hexdigest()}
        atomic_write(cache_dir / CACHE_FILE, json.dumps(cache, indent=1, sort_keys=True))
    return digest.hexdigest()


def files_sha256(paths: list[Path], cache_dir: Path | None = None) -> str:
    """One hash over several files (their names and contents), independent of their order."""
    parts = sorted(f"{Path(p).name}:{file_sha256(p, cache_dir)}" for p in paths)
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _load(cache_dir: Path | None) -> dict:
    if cache_dir is None or not (cache_dir / CACHE_FILE).is_file():
        return {}
    try:
        return json.loads((cache_dir / CACHE_FILE).read_text())
    except (json.JSONDecodeError, OSError):
        return {}  # a damaged cache only costs re-hashing


def content_hash(obj: Any, length: int = 12) -> str:
    blob = json.dumps(obj, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]
