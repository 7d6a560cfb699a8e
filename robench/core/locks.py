"""Advisory file locks, so two processes never do the same work twice at once.

`robench.training.loop` holds `<checkpoint>.lock` while it verifies or trains a checkpoint, and
`robench.runs.runner` holds `<run_id>.lock` while it runs; a second identical process waits, then
finds the finished checkpoint or record and reuses it. `fcntl.flock` locks are released by the
kernel when their process dies, so a killed run never blocks another. The holder removes the lock
file when it leaves, after success or error, so no `.lock` is left behind (only a process killed
outright leaves its empty file, which the next run reuses). A waiter that wakes on a removed file
locks the new one instead. (They are per host: on a shared file system, use a grid, whose driver
schedules each checkpoint once.)
"""
from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from pathlib import Path
from typing import IO, Iterator

log = logging.getLogger(__name__)


@contextlib.contextmanager
def file_lock(path: Path, waiting: str) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if needed, removed when released); log `waiting` if another
    process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = _acquire(path, waiting)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # while still held: a process waiting on this file then retries on a new one
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def _acquire(path: Path, waiting: str) -> IO[str]:
    warned = False
    while True:
        fh = open(path, "a")
        try:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not warned:
                    log.warning("%s", waiting)
                    warned = True
                fcntl.flock(fh, fcntl.LOCK_EX)
            if _is_current(fh, path):
                return fh
        except BaseException:
            fh.close()
            raise
        fh.close()  # the holder we waited for removed this file: lock the one at `path` now


def _is_current(fh: IO[str], path: Path) -> bool:
    """True when the open file `fh` is still the file at `path`."""
    try:
        here = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fh.fileno())
    return (mine.st_dev, mine.st_ino) == (here.st_dev, here.st_ino)
