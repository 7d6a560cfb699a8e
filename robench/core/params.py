"""Hyperparameter dataclasses: build them from overrides, check every value, parse `key=value` and
`MODEL:key=value` pairs.

Every dataclass built through `make_params` (defense, attack, grid resources) and `TrainConfig`
gets the same checks (`check_fields`): a value matches its field's type (`int`, `float`,
`bool`, `str`, optionally `| None`), every number is finite (NaN and inf are rejected; a check
written as `x < 0` lets NaN through), and a field declared with `bounded(...)` lies in its range.
"""
from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from robench.core.errors import RobenchError


class BadValue(ValueError):
    """A hyperparameter outside its type or range; `name` is the field."""

    def __init__(self, name: str, requirement: str, value: Any) -> None:
        super().__init__(f"{name} must be {requirement}, got {value!r}")
        self.name, self.requirement, self.value = name, requirement, value


@dataclass(frozen=True)
class Range:
    """Allowed interval of a numeric field (None: unbounded on that side)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False  # True: low itself is not allowed
    high_open: bool = False

    def contains(self, x: float) -> bool:
        if self.low is not None and (x <= self.low if self.low_open else x < self.low):
            return False
        return self.high is None or (x < self.high if self.high_open else x <= self.high)

    def describe(self, integer: bool) -> str:
        """"positive", "non-negative", "between 0 and 1", ">= 8", "positive and at most 100", ..."""
        positive = self.low == 0 and self.low_open or integer and self.low == 1 and not self.low_open
        if positive or self.low == 0 and not self.low_open:
            base = "positive" if positive else "non-negative"
            if self.high is None:
                return base
            if positive or self.high_open:
                return f"{base} and {'below' if self.high_open else 'at most'} {self.high:g}"
        if self.low is not None and self.high is not None and not (self.low_open or self.high_open):
            return f"between {self.low:g} and {self.high:g}"
        parts = []
        if self.low is not None:
            parts.append(f"{'>' if self.low_open else '>='} {self.low:g}")
        if self.high is not None:
            parts.append(f"{'<' if self.high_open else '<='} {self.high:g}")
        return " and ".join(parts)


def bounded(default: Any, low: float | None = None, high: float | None = None, *, low_open: bool = False,
            high_open: bool = False, cost: bool = True) -> Any:
    """A dataclass field whose value `check_fields` keeps inside [low, high] (open ends on request). `cost=False`:
    its value does not change how long a training step or a prediction takes (a step size, a weight that is never
    0), so the estimate's speed measurement (`robench.runs.estimate`) is shared across its values."""
    return dataclasses.field(default=default, metadata={"range": Range(low, high, low_open, high_open),
                                                        "cost": cost})


def check_fields(obj: Any) -> None:
    """Raise BadValue for the first field of dataclass `obj` that is ill-typed, non-finite or out of range."""
    check_values(type(obj), {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)})


def check_values(cls: type, values: dict[str, Any]) -> None:
    """`check_fields` for some of the fields of dataclass `cls` (e.g. overrides, before construction)."""
    hints = _type_hints(cls)
    for f in dataclasses.fields(cls):
        if f.name not in values:
            continue
        value = values[f.name]
        kind = _expected(hints.get(f.name))
        if kind is not None:
            _check_type(f.name, value, *kind)
        if not _finite(value):
            raise BadValue(f.name, "finite (not NaN or infinite)", value)
        limits = f.metadata.get("range")
        if limits is not None and value is not None and not limits.contains(value):
            raise BadValue(f.name, limits.describe(isinstance(value, int)), value)


def make_params(cls: type, overrides: dict[str, Any], owner: str) -> Any:
    """`cls(**overrides)`, with unknown keys, ill-typed, non-finite or out-of-range values as a RobenchError."""
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        names = ", ".join(sorted(known)) or "none"
        raise RobenchError(f"unknown hyperparameter(s) {unknown} for {owner} (known: {names})")
    try:
        check_values(cls, overrides)  # first, so NaN never reaches a check written as `x < 0`
        return cls(**as_declared(cls, overrides))
    except (TypeError, ValueError) as exc:
        raise RobenchError(f"bad hyperparameters for {owner}: {exc}") from exc


def as_declared(cls: type, values: dict[str, Any]) -> dict[str, Any]:
    """`values` with each integer given to a `float` field as a float, so that `fluency_max_drop=0` from the command
    line and `0.0` from a grid or Python resolve to one setting (a record's hyperparameters, and so its setting id,
    hash the resolved values)."""
    hints = _type_hints(cls)
    out = dict(values)
    for name, value in values.items():
        kind = _expected(hints.get(name))
        if kind is not None and kind[0] is float and isinstance(value, int) and not isinstance(value, bool):
            out[name] = float(value)
    return out


def parse_assignments(pairs: Iterable[str]) -> dict[str, Any]:
    """["k=v", ...] -> {k: v}; values are JSON when they parse (numbers, lists, true), else numbers Python
    reads (`inf`, `nan`: rejected later as non-finite), else strings."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise RobenchError(f"expected KEY=VALUE, got {pair!r}")
        out[key.strip().replace("-", "_")] = _parse_value(raw)
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


def _parse_value(raw: str) -> Any:
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        pass
    try:
        return float(raw)
    except ValueError:
        return raw


def _type_hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except Exception:  # a plugin's unresolvable annotation: check finiteness and ranges only
        return {}


def _expected(hint: Any) -> tuple[type, bool] | None:
    """(int | float | bool | str, None allowed) for simple annotations, else None (not checked)."""
    optional = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        optional = len(args) < len(typing.get_args(hint))
        if len(args) != 1:
            return None
        hint = args[0]
    return (hint, optional) if hint in (int, float, bool, str) else None


def _check_type(name: str, value: Any, kind: type, optional: bool) -> None:
    if value is None:
        if not optional:
            raise BadValue(name, f"{'an integer' if kind is int else 'a ' + kind.__name__}", value)
        return
    if kind is int and (isinstance(value, bool) or not isinstance(value, int)):
        raise BadValue(name, "an integer", value)
    if kind is float and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise BadValue(name, "a number", value)
    if kind in (bool, str) and not isinstance(value, kind):
        raise BadValue(name, f"a {kind.__name__}", value)


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True
