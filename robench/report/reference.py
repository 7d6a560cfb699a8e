"""The reference protocols robench ships: the packed records of `results/reference`, `reference-lowres` and
`reference-qnli` (docs/reference.md), installed with the package as `robench.results`, so a wheel has them
offline. `reference_runs_dir` gives a protocol's runs directory, unpacked into the cache
(`robench.core.packed`), for any reader of run records."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from robench.core.errors import RobenchError
from robench.core.packed import is_packed, unpack

SHIPPED = ("reference", "reference-lowres", "reference-qnli")


def results_root() -> Path:
    """Where the shipped results are: the installed `robench.results` package, else (an editable install made
    before it existed) the source checkout's `results/`."""
    spec = importlib.util.find_spec("robench.results")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parents[2] / "results"


def reference_results_dir(name: str) -> Path:
    """The packed results directory of shipped protocol `name` (its records and its leaderboard tables)."""
    if name not in SHIPPED:
        raise RobenchError(f"no shipped reference protocol {name!r}; choose one of {', '.join(SHIPPED)}")
    path = results_root() / name
    if not is_packed(path):
        raise RobenchError(f"the packed records of the {name} protocol are missing from {path}; reinstall robench")
    return path


def reference_runs_dir(name: str, cache_dir: Path | None = None) -> Path:
    """The runs directory of shipped protocol `name`: one `.json` record and one `.csv` per run, exactly as the
    grid wrote them, unpacked under `<cache_dir>/unpacked/` (default: the cache directory)."""
    return unpack(reference_results_dir(name), cache_dir)
