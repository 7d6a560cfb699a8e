"""Where resources are read from (`<data_dir>`) and built into (`<cache_dir>/resources`, one folder per build,
replaced whole)."""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
from pathlib import Path
from typing import Callable, Iterator, TypeVar

from robench.core.errors import RobenchError
from robench.core.hashing import content_hash, file_sha256
from robench.core.manifest import folder_problem
from robench.core.paths import Settings

log = logging.getLogger(__name__)
T = TypeVar("T")

FORMAT = 1  # bump when a change would change what a build produces


def resources_dir(settings: Settings) -> Path:
    return settings.cache_dir / "resources"


def data_file(settings: Settings, relative: str, what: str) -> Path:
    """`<data_dir>/<relative>`, or a RobenchError naming the missing file and the fix."""
    root = settings.require_data_dir()
    path = root / relative
    if not path.exists():
        raise RobenchError(f"{what} not found: {path} is missing; point --data-dir or ROBENCH_DATA_DIR at a "
                           f"directory laid out like shared/data (it must contain {relative})")
    return path


def inputs_digest(settings: Settings, paths: list[Path]) -> str:
    """The content of a build's input files (every file below a directory), for its cache key: a build is reused
    only for the same bytes, never for a file of the same size (`robench.core.hashing.file_sha256`, cached)."""
    files = [f for p in paths for f in (sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p])]
    return content_hash({str(f.relative_to(settings.require_data_dir())) if f.is_relative_to(
        settings.require_data_dir()) else str(f): file_sha256(f, settings.cache_dir) for f in files}, 16)


@contextlib.contextmanager
def staged_dir(target: Path) -> Iterator[Path]:
    """Yield an empty sibling folder to write into; on success it replaces `target` (half a build never shows).
    On any failure (a full disk included) the sibling is removed and `target` is left as it was."""
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        tmp.mkdir(parents=True)
        yield tmp
        shutil.rmtree(target, ignore_errors=True)
        os.replace(tmp, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cached_build(target: Path, load: Callable[[Path], T]) -> T | None:
    """A built resource in `target`, loaded only when its files match the manifest written with them; None when
    there is none, or (with a warning) when it does not verify or load: the caller builds it again."""
    if not target.exists():
        return None
    problem = folder_problem(target)
    if problem is None:
        try:
            return load(target)
        except Exception as exc:  # noqa: BLE001 - verified files that still do not load: rebuild them
            problem = f"{type(exc).__name__}: {exc}"
    log.warning("cached resource %s is damaged (%s); building it again", target, problem)
    shutil.rmtree(target, ignore_errors=True)
    return None


def verified_build(target: Path, rebuild: str) -> Path:
    """`target` when its files match the manifest written with them, else a RobenchError saying how to rebuild."""
    problem = folder_problem(target)
    if problem is not None:
        raise RobenchError(f"the resource in {target} does not verify ({problem}): rebuild it with {rebuild}")
    return target
