"""Hyperparameter dataclasses: build them from overrides, parse CLI `key=value` pairs."""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterable

from robench.errors import RobenchError


def make_params(cls: type, overrides: dict[str, Any], owner: str) -> Any:
    """`cls(**overrides)`, with unknown or ill-typed keys reported as a RobenchError."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        names = ", ".join(sorted(known)) or "none"
        raise RobenchError(f"unknown hyperparameter(s) {unknown} for {owner} (known: {names})")
    try:
        return cls(**overrides)
    except (TypeError, ValueError) as exc:
        raise RobenchError(f"bad hyperparameters for {owner}: {exc}") from exc


def parse_assignments(pairs: Iterable[str]) -> dict[str, Any]:
    """["k=v", ...] -> {k: v}; values are JSON when they parse (numbers, lists, true), else strings."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise RobenchError(f"expected KEY=VALUE, got {pair!r}")
        try:
            out[key.strip().replace("-", "_")] = json.loads(raw)
        except json.JSONDecodeError:
            out[key.strip().replace("-", "_")] = raw
    return out
