"""Advisory file locks, so two processes never do the same work twice at once.

`robench.training.loop` holds `<checkpoint>.lock` while it verifies or trains a checkpoint, and
`robench.runs.runner` holds `<run_id>.lock` while it runs; a second identical process waits, then
finds the finished checkpoint or record and reuses it. `fcntl.flock` locks are released by the
kernel when their process dies, so a killed run never leaves a stale lock behind. (They are
per host: on a shared file system, use a grid, whose driver schedules each checkpoint once.)
"""
from __future__ import annotations

import contextlib
import fcntl
import logging
from pathlib import Path
from typing import Iterator

log = logging.getLogger(__name__)


@contextlib.contextmanager
def file_lock(path: Path, waiting: str) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if needed); log `waiting` if another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.warning("%s", waiting)
            fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)
