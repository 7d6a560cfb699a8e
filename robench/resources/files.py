"""Where resources are read from (`<data_dir>`) and built into (`<cache_dir>/resources`, one folder per build,
replaced whole)."""
from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Iterator

from robench.errors import RobenchError
from robench.settings import Settings

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


@contextlib.contextmanager
def staged_dir(target: Path) -> Iterator[Path]:
    """Yield an empty sibling folder to write into; on success it replaces `target` (half a build never shows)."""
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    yield tmp
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)
