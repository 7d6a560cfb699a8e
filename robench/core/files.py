"""Atomic file writes: a temp file in the same folder, fsynced, then renamed over the target, so a reader (or a
crash) never sees half a file. A new file gets the permissions the umask gives any new file.

A full disk (or quota, or a read-only file system) is the user's to fix, not a bug: `atomic_write` raises it as
a `DiskFull` error naming the file, after removing its temp file, and `disk_full` tells such a failure apart
wherever else it comes from (safetensors, numpy), so the CLI says it in one line."""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

from robench.core.errors import RobenchError

NO_SPACE = (errno.ENOSPC, errno.EDQUOT, errno.EROFS)
NO_SPACE_WORDS = ("No space left on device", "Disk quota exceeded", "Read-only file system")


class DiskFull(RobenchError, OSError):
    """A write failed for lack of space (or quota, or a read-only file system); nothing half-written is kept.
    A RobenchError (one line in the CLI) and an OSError (code that tolerates a failed cache write still does)."""


def disk_full(exc: BaseException) -> bool:
    """Whether `exc`, or an exception it was raised from, is a full disk, an exceeded quota or a read-only file
    system (an OSError with that errno, or a library's error that says so)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, DiskFull) or isinstance(exc, OSError) and exc.errno in NO_SPACE or \
                any(words in str(exc) for words in NO_SPACE_WORDS):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def disk_full_error(exc: BaseException, path: Path | str) -> DiskFull:
    """The one-line error for a write to `path` that failed with `exc` (a full disk)."""
    reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else "no space left on device"
    error = DiskFull(f"could not write {path}: {reason}; nothing half-written was kept: free some space (or "
                     "point --results-dir / --cache-dir elsewhere) and re-run")
    error.errno = getattr(exc, "errno", None)
    return error


def atomic_write(path: Path, text: str | bytes) -> None:
    try:
        _atomic_write(path, text)
    except OSError as exc:
        if exc.errno in NO_SPACE:
            raise disk_full_error(exc, path) from exc
        raise


def _atomic_write(path: Path, text: str | bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; a record is as readable as any new file
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else
              os.fdopen(fd, "w", encoding="utf-8", newline="")) as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _umask() -> int:
    """The process's umask: from /proc on Linux, else by setting it and putting it back at once."""
    try:
        with open("/proc/self/status", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def read_bounded(path: Path, what: str, limit: int) -> bytes:
    """The bytes of the regular file `path` (a `what`: "sheet", "key"), read only if it is at most `limit` bytes:
    a missing file, a folder, a device (`/dev/zero`), a FIFO or a file too big is a one-line error, never an
    endless read."""
    import stat

    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise RobenchError(f"no {what} {path}") from None
    except OSError as exc:
        raise RobenchError(f"cannot read the {what} {path} ({exc.strerror})") from exc
    if not stat.S_ISREG(mode):
        kind = "folder" if stat.S_ISDIR(mode) else "device or pipe, not a file"
        raise RobenchError(f"the {what} {path} exists but is a {kind}: pass the {what} file itself")
    try:
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise RobenchError(f"cannot read the {what} {path} ({exc.strerror})") from exc
    if len(data) > limit:
        raise RobenchError(f"the {what} {path} is larger than {limit // 1_000_000} MB, more than any {what} robench "
                           "writes: pass the right file")
    return data


def not_a_file(path: Path) -> str | None:
    """Why `path` is not a regular file to read ("does not exist", "is a directory, not a file", "is a device or
    pipe, not a file"), or None: an error that says "does not exist" of something that exists misleads."""
    import stat

    try:
        mode = Path(path).stat().st_mode
    except FileNotFoundError:
        return "does not exist"
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if stat.S_ISREG(mode):
        return None
    return "is a directory, not a file" if stat.S_ISDIR(mode) else "is a device or pipe, not a file"
