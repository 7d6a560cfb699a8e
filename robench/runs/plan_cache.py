"""The answer of a `--dry-run`, cached, so that asking again takes a fraction of a second.

A dry run resolves the spec (importing the defence, the attack and their libraries, reading the data) and
estimates its cost from a calibration (`robench.runs.estimate`, itself cached). Both are deterministic in what
they read, so the printed plan is kept in `<cache_dir>/plans/<key>.json` and printed again, without importing
torch, transformers or datasets, while nothing it depends on has changed:

* the key: the command (run / train), every option as given, the device asked for, the settings' directories, the
  environment variables that change resolution or threads, the host, and the code: the size and modification
  time of every robench source file (the defences and attacks included), the versions of torch, transformers,
  datasets and textattack, and the installed plugins' entry points and versions;
* checked on every use: every data file the plan read (task and attack data, a task file's files, a local
  backbone) still has the size and modification time it had; the calibration file the estimate came from is
  still there, unchanged (its checksum) and not stale (`CALIBRATION_MAX_AGE`); and the checkpoint and record are
  still in the state the plan printed (cached / to train, finished / to run; the checkpoint's files are
  verified against its manifest, as `run` does).

Anything else is a miss, and the dry run resolves and estimates as usual, then stores its new answer. A damaged
entry is a miss too. `--no-estimate` plans are cached separately (they print no estimate line).
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import time
from importlib.metadata import PackageNotFoundError, entry_points, version
from pathlib import Path
from typing import Any

from robench.core.hashing import content_hash

PLAN_FORMAT = 1
LIBRARIES = ("torch", "transformers", "datasets", "textattack", "tokenizers", "numpy")
ENV = ("ROBENCH_DATA_DIR", "ROBENCH_CACHE_DIR", "ROBENCH_RESULTS_DIR", "HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE",
       "HF_HOME", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "PYTHONPATH")
SOURCE_SUFFIXES = (".py", ".j2", ".json", ".toml")


def plan_key(command: str, options: dict[str, Any], device: str, dirs: dict[str, str | None],
             no_estimate: bool) -> str:
    return content_hash({"format": PLAN_FORMAT, "command": command, "options": options, "device": device,
                         "dirs": dirs, "no_estimate": no_estimate, "env": {k: os.environ.get(k) for k in ENV},
                         "host": socket.gethostname(), "code": code_stamp()})


def code_stamp() -> str:
    """Size and modification time of every robench source file, and the versions robench runs with."""
    import importlib.util

    roots = {Path(__file__).resolve().parents[1]}  # the robench package
    for sub in ("robench.models", "robench.attacks"):
        spec = importlib.util.find_spec(sub)
        roots.update(Path(p).resolve() for p in (spec.submodule_search_locations or []) if spec is not None)
    stamps = []
    for root in sorted(roots):
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                if name.endswith(SOURCE_SUFFIXES):
                    st = os.stat(os.path.join(dirpath, name))
                    stamps.append((os.path.join(dirpath, name), st.st_size, st.st_mtime_ns))
    versions = {}
    for lib in LIBRARIES:
        try:
            versions[lib] = version(lib)
        except PackageNotFoundError:
            versions[lib] = None
    plugins = sorted((ep.group, ep.name, ep.value, ep.dist.version if ep.dist else None)
                     for group in ("robench.models", "robench.attacks", "robench.tasks")
                     for ep in entry_points(group=group))
    return content_hash({"files": stamps, "versions": versions, "plugins": plugins, "robench": version("robench")})


def stamp(path: Path) -> list | None:
    try:
        st = Path(path).stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def file_stamps(paths: list[Path]) -> dict[str, list | None]:
    """Size and modification time of each file (every file below a directory)."""
    out: dict[str, list | None] = {}
    for path in paths:
        path = Path(path)
        if path.is_dir():
            for sub in sorted(p for p in path.rglob("*") if p.is_file()):
                out[str(sub)] = stamp(sub)
        else:
            out[str(path)] = stamp(path)
    return out


def _path(cache_dir: Path, key: str) -> Path:
    return Path(cache_dir) / "plans" / f"{key}.json"


def load(cache_dir: Path, key: str) -> list[str] | None:
    """The printed lines of the cached plan `key`, or None when there is none or it no longer holds."""
    try:
        entry = json.loads(_path(cache_dir, key).read_text(encoding="utf-8"))
        if entry.get("format") != PLAN_FORMAT or content_hash(entry["plans"]) != entry["sha256"]:
            return None
        lines = []
        for plan in entry["plans"]:
            if not _holds(plan):
                return None
            lines += plan["lines"]
        return lines
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return None


def _holds(plan: dict[str, Any]) -> bool:
    if any(stamp(Path(p)) != s for p, s in plan["files"].items()):
        return False
    if plan.get("checkpoint") is not None and checkpoint_ready(Path(plan["checkpoint"])) != plan["checkpoint_cached"]:
        return False
    if plan.get("record") is not None and _finished(plan) != plan["record_finished"]:
        return False
    cal = plan.get("calibration")
    if cal is not None:  # the calibration the estimate came from: there, unchanged, not stale
        try:
            text = Path(cal["path"]).read_text(encoding="utf-8")
            measured = json.loads(text)["measured"]
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
            return False
        if hashlib.sha256(text.encode()).hexdigest() != cal["sha256"] or \
                not 0 <= time.time() - measured <= cal["max_age"]:
            return False
    return True


def calibration_entry(path: Path, max_age: float) -> dict[str, Any] | None:
    """What `_holds` checks of the calibration file at `path` (None when there is none)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    return {"path": str(path), "sha256": hashlib.sha256(text.encode()).hexdigest(), "max_age": max_age}


def _finished(plan: dict[str, Any]) -> bool:
    """Whether the record file is there: a record is written (atomically) only when its run finished; one that is
    there but does not verify was printed "to run", so the plan no longer holds and is made again."""
    return Path(plan["record"]).is_file()


def checkpoint_ready(path: Path) -> bool:
    """Whether a checkpoint that verifies against its manifest is at `path` (`robench.training.loop.is_cached`'s
    rule, without importing torch)."""
    from robench.core.manifest import folder_problem

    record = path / "training.json"
    if not record.is_file() or not (path / "model.safetensors").is_file():
        return False
    try:
        manifest = json.loads(record.read_text(encoding="utf-8"))["files"]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError):
        return False
    return folder_problem(path, manifest, exclude=("training.json",)) is None


def save(cache_dir: Path, key: str, plans: list[dict[str, Any]]) -> None:
    from robench.core.files import atomic_write

    try:
        atomic_write(_path(cache_dir, key), json.dumps({"format": PLAN_FORMAT, "saved": time.time(), "plans": plans,
                                                        "sha256": content_hash(plans)}, indent=1))
    except OSError:  # an unwritable cache only costs resolving again next time
        pass
