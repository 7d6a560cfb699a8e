"""Where robench reads data and writes caches and results.

Resolution order for each path: explicit argument (CLI flag) > environment
variable > default. Nothing here is mutable global state: callers build a
`Settings` and pass it down.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from robench.core.errors import RobenchError

DATA_DIR_ENV = "ROBENCH_DATA_DIR"
CACHE_DIR_ENV = "ROBENCH_CACHE_DIR"
RESULTS_DIR_ENV = "ROBENCH_RESULTS_DIR"


@dataclass(frozen=True)
class Settings:
    data_dir: Path | None  # None: load datasets from the Hugging Face hub
    cache_dir: Path  # fine-tuned checkpoints, built resources
    results_dir: Path  # run records, per-example CSVs, leaderboards

    @property
    def runs_dir(self) -> Path:
        return self.results_dir / "runs"

    @property
    def checkpoints_dir(self) -> Path:
        return self.cache_dir / "checkpoints"

    def require_data_dir(self) -> Path:
        if self.data_dir is None:
            raise RobenchError(
                f"no data directory set: pass --data-dir or set {DATA_DIR_ENV} "
                "(laid out like shared/data), or use --data-source hub when online"
            )
        return self.data_dir


def resolve_settings(
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    results_dir: str | Path | None = None,
    read_only: bool = False,
) -> Settings:
    """Build `Settings` from explicit values, then env vars, then defaults. The cache and results directories must
    be (or be creatable as) writable directories, unless `read_only` (a command that only reads them)."""
    data = data_dir or os.environ.get(DATA_DIR_ENV) or None
    if data is not None:
        data = Path(data).expanduser().resolve()
        if not data.is_dir():
            what = "is not a folder" if data.exists() else "does not exist"
            raise RobenchError(f"data directory {data} {what}: point --data-dir or {DATA_DIR_ENV} at a folder laid "
                               "out like shared/data")
    cache = Path(cache_dir or default_cache_dir())
    results = Path(results_dir or os.environ.get(RESULTS_DIR_ENV) or "results")
    cache, results = cache.expanduser().resolve(), results.expanduser().resolve()
    if not read_only:
        _check_writable_dir(cache, f"cache directory (--cache-dir or {CACHE_DIR_ENV})")
        _check_writable_dir(results, f"results directory (--results-dir or {RESULTS_DIR_ENV})")
    return Settings(data, cache, results)


def default_cache_dir() -> Path:
    """The cache directory without a --cache-dir: $ROBENCH_CACHE_DIR, else ~/.cache/robench."""
    return Path(os.environ.get(CACHE_DIR_ENV) or Path.home() / ".cache" / "robench").expanduser().resolve()


def _check_writable_dir(path: Path, what: str) -> None:
    """`path` is, or can be created as, a writable directory; checked before any work is done."""
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        where = "" if existing == path else f" (its parent {existing} is a file)"
        raise RobenchError(f"{what} {path} is not a directory{where}; point it at a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RobenchError(f"{what} {path} is not writable ({existing} does not allow writing)")
