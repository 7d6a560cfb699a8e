"""A setting: everything that determines a run's numbers except its training seed.

(Not `robench.core.paths`, which holds locations.) The runs of one setting differ only in their training
seed: the leaderboard aggregates them into one row, and they are attacked on the same examples, so two
models at the same setting can be compared example by example.

A setting is the run spec without `seed`, with the model's and the attack's hyperparameters as resolved
(defaults filled in), plus the data fingerprint when the record names one. With the whole eval split
(`eval_size` None) the eval seed chooses nothing and is left out. It has two parts: the *model setting*
(what determines the fine-tuned checkpoint: task, model and its parameters, backbone, train size, training
config, data source) and the *attack setting* (attack and its parameters, eval size and seed).
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any

from robench.core.errors import RobenchError
from robench.core.hashing import content_hash
from robench.core.params import make_params
from robench.core.records import RunRecord
from robench.core.registry import ATTACKS
from robench.runs.spec import TrainConfig
from robench.training.defense import resolve_model

ATTACK_KEYS = ("attack", "attack_params", "eval_size", "eval_seed")


def setting_of(record: RunRecord) -> dict[str, Any]:
    spec = {k: v for k, v in record.spec.items() if k not in ("seed", "model_params", "attack_params")}
    if spec.get("eval_size") is None:
        spec.pop("eval_seed", None)
    hyper = record.hyperparameters or {}
    data = record.resources.get("data") or {}
    return _plain({"spec": spec, "model_params": hyper.get("model"), "attack_params": hyper.get("attack"),
                   "data_fingerprint": data.get("fingerprint")})


def setting_id(record: RunRecord) -> str:
    return content_hash(setting_of(record))


def peer_id(record: RunRecord) -> str:
    """The setting without the model: runs with equal peer ids differ only in model (and seed)."""
    setting = setting_of(record)
    setting["spec"].pop("model")
    setting.pop("model_params")
    return content_hash(setting)


def model_setting_id(spec: dict[str, Any], model_params: dict[str, Any] | None = None) -> str:
    """The model setting of a run or analysis spec; `model_params` resolved (resolved here when None)."""
    if model_params is None:
        model_params = resolved_model_params(spec)
    part = {k: v for k, v in spec.items() if k not in ("seed", "model_params", *ATTACK_KEYS)}
    return content_hash(_plain({"spec": part, "model_params": model_params}))


def resolved_model_params(spec: dict[str, Any]) -> dict[str, Any]:
    try:
        return resolve_model(spec["model"]).resolve_params(spec.get("model_params") or {})
    except RobenchError:  # a plugin that is not installed here: as given
        return dict(spec.get("model_params") or {})


def setting_label(record: RunRecord) -> str:
    """What differs from the defaults, e.g. `imbert[im_layers=0,1,2] lr=1e-4 eval=200`; `default` if nothing."""
    return " ".join(p for p in (model_label(record), attack_label(record)) if p) or "default"


def model_label(record: RunRecord) -> str:
    """The model setting's part of the label: model parameters, training config, data source ('' if default)."""
    spec = record.spec
    parts = _params_part(spec["model"], (record.hyperparameters or {}).get("model"), _model_defaults(spec["model"]))
    parts += _changed(spec.get("train") or {}, dataclasses.asdict(TrainConfig()))
    if spec.get("data_source", "local") != "local":
        parts.append(f"data={spec['data_source']}")
    return " ".join(parts)


def attack_label(record: RunRecord) -> str:
    """The attack setting's part of the label: attack parameters, eval size and seed ('' if default)."""
    spec = record.spec
    parts = _params_part(spec["attack"], (record.hyperparameters or {}).get("attack"),
                         _attack_defaults(spec["attack"]))
    if spec.get("eval_size") is not None:
        parts.append(f"eval={spec['eval_size']}")
        if spec.get("eval_seed", 0) != 0:
            parts.append(f"eval_seed={spec['eval_seed']}")
    return " ".join(parts)


def _params_part(name: str, params: dict[str, Any] | None, defaults: dict[str, Any] | None) -> list[str]:
    changed = _changed(params or {}, defaults)
    return [f"{name}[{','.join(changed)}]"] if changed else []


def _changed(values: dict[str, Any], defaults: dict[str, Any] | None) -> list[str]:
    values, defaults = _plain(values), _plain(defaults) if defaults is not None else None
    return [f"{k}={_text(v)}" for k, v in sorted(values.items()) if defaults is None or defaults.get(k) != v]


def _model_defaults(name: str) -> dict[str, Any] | None:
    try:
        return resolve_model(name).resolve_params({})
    except RobenchError:  # a plugin that is not installed here: every parameter is shown
        return None


def _attack_defaults(name: str) -> dict[str, Any] | None:
    try:
        return dataclasses.asdict(make_params(ATTACKS.get(name).params, {}, f"attack {name!r}"))
    except RobenchError:
        return None


def _plain(obj: Any) -> Any:
    """JSON's view of `obj` (tuples become lists), so recorded and resolved values compare equal."""
    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def _text(value: Any) -> str:
    if isinstance(value, list):
        return ",".join(_text(v) for v in value)
    if isinstance(value, float) and value != 0 and abs(value) < 1e-3:
        mantissa, exponent = f"{value:e}".split("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return f"{value:g}" if isinstance(value, float) else str(value)
