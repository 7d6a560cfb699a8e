"""The one rule for every cached artefact: a manifest of hashes is written with it, and checked before reuse.

A folder artefact (a checkpoint, a built resource) lists the size and SHA-256 of each of its files; a
one-file artefact (a run record, an estimate) carries the SHA-256 of its own content. Before anything
cached is reused, robench checks it against its manifest (`folder_problem`, `digest_problem`): a missing,
added, resized or edited file, or an edited value, is a mismatch, and the artefact is rebuilt (or refused
with a clear message when rebuilding is not robench's to do). A file's checksum is computed once per
process and file version (path, size, modification time).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from robench.core.files import atomic_write
from robench.core.hashing import file_sha256

MANIFEST = "manifest.json"  # a folder artefact's manifest, unless the artefact keeps it elsewhere
Manifest = dict[str, dict[str, Any]]  # relative path -> {"bytes": size, "sha256": hex digest}


def _files(folder: Path, exclude: tuple[str, ...]) -> dict[str, Path]:
    return {p.relative_to(folder).as_posix(): p for p in sorted(folder.rglob("*"))
            if p.is_file() and p.relative_to(folder).as_posix() not in exclude}


def folder_manifest(folder: Path, exclude: tuple[str, ...] = (MANIFEST,)) -> Manifest:
    """Size and SHA-256 of every file below `folder` (by relative path), the names in `exclude` aside."""
    return {name: {"bytes": p.stat().st_size, "sha256": file_sha256(p)} for name, p in _files(folder, exclude).items()}


def write_manifest(folder: Path) -> Manifest:
    """Write `folder/manifest.json` listing every other file of `folder`; call it last, when the folder is done."""
    manifest = folder_manifest(folder)
    atomic_write(folder / MANIFEST, json.dumps({"files": manifest}, indent=1, sort_keys=True))
    return manifest


def read_manifest(folder: Path) -> Manifest | str:
    """The manifest in `folder/manifest.json`, or why it cannot be read."""
    try:
        files = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))["files"]
        return {str(k): {"bytes": int(v["bytes"]), "sha256": str(v["sha256"])} for k, v in files.items()}
    except FileNotFoundError:
        return f"no {MANIFEST}"
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        return f"{MANIFEST} is unreadable ({type(exc).__name__})"


def folder_problem(folder: Path, manifest: Manifest | str | None = None,
                   exclude: tuple[str, ...] = (MANIFEST,)) -> str | None:
    """Why `folder` does not match `manifest` (default: its own manifest.json), or None when every file listed is
    there with its size and checksum and no other file is."""
    if not folder.is_dir():
        return "not a directory"
    manifest = read_manifest(folder) if manifest is None else manifest
    if isinstance(manifest, str):
        return manifest
    present = _files(folder, exclude)
    if set(present) != set(manifest):
        return f"files differ from the manifest: {sorted(set(present) ^ set(manifest))[:5]}"
    return files_problem(folder, manifest)


def files_problem(folder: Path, manifest: Any) -> str | None:
    """Why the files `manifest` lists (relative to `folder`) do not match it, or None; other files are ignored."""
    if not isinstance(manifest, dict):
        return "no file manifest"
    for name, entry in manifest.items():
        path = folder / str(name)
        try:
            size, digest = int(entry["bytes"]), str(entry["sha256"])
        except (KeyError, TypeError, ValueError):
            return f"the manifest entry of {name} is malformed"
        if not path.is_file():
            return f"{name} is missing"
        if path.stat().st_size != size:
            return f"{name} has {path.stat().st_size} bytes, the manifest says {size}"
        if file_sha256(path) != digest:
            return f"{name} does not match its checksum"
    return None


def content_digest(obj: Any) -> str:
    """SHA-256 of `obj` as canonical JSON (sorted keys, non-JSON values as strings): what a one-file artefact
    records of its own content, and recomputes from what it reads back."""
    text = json.dumps(json.loads(json.dumps(obj, default=str)), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def digest_problem(obj: Any, digest: Any) -> str | None:
    """Why `obj` does not match the `digest` recorded with it, or None."""
    if not isinstance(digest, str):
        return "no content checksum"
    return None if content_digest(obj) == digest else "its content does not match its checksum"


@dataclass(frozen=True)
class BuildOutcome:
    record: dict[str, Any]  # the build's `build.json`: what was built and how good it is
    kept: bool  # an existing build that verifies was kept
    problem: str | None = None  # why an existing build did not verify (it was built again)


def build_once(target: Path, force: bool, build: Callable[[], dict[str, Any]]) -> BuildOutcome:
    """Keep the build in `target` (its `build.json` says what it is) if it verifies against its manifest and
    not `force`; else call `build`, which writes `target` with its manifest and returns its record."""
    existing = target / "build.json"
    problem = folder_problem(target) if existing.is_file() and not force else None
    if existing.is_file() and not force and problem is None:
        return BuildOutcome(json.loads(existing.read_text(encoding="utf-8")), kept=True)
    return BuildOutcome(build(), kept=False, problem=problem)
