"""Hyperparameter dataclasses: build them from overrides, parse `key=value` and `MODEL:key=value` pairs."""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterable, Sequence

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


def params_by_model(models: Sequence[str], assignments: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Hyperparameters of several models from one list of `--param` values (the benchmarks' flag).

    `MODEL:KEY=VALUE` sets KEY of MODEL only (MODEL must be one of `models`); `KEY=VALUE` sets KEY of every
    model. Values parse as in `parse_assignments`. `{"imbert": {"im_gamma": 0.02}, "bert": {}}` for
    `["imbert:im_gamma=0.02"]` and models bert and imbert.
    """
    out: dict[str, dict[str, Any]] = {m: {} for m in models}
    for item in assignments:
        model, sep, assignment = item.partition(":")
        if not sep or "=" in model:  # KEY=VALUE (a value may contain ":")
            for params in out.values():
                params.update(parse_assignments([item]))
        elif model in out:
            out[model].update(parse_assignments([assignment]))
        else:
            raise RobenchError(f"--param {item!r}: expected MODEL:KEY=VALUE with MODEL one of {', '.join(models)}, "
                               "or KEY=VALUE for every model")
    return out
