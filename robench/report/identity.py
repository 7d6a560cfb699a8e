"""A setting: everything that determines a run's numbers except its training seed.

(Not `robench.core.paths`, which holds locations.) The runs of one setting differ only in their training
seed: the leaderboard aggregates them into one row, and they are attacked on the same examples, so two
models at the same setting can be compared example by example.

A setting is the run spec without `seed`, with the model's and the attack's hyperparameters as resolved
(defaults filled in), plus the data fingerprint when the record names one. With the whole eval split
(`eval_size` None) the eval seed chooses nothing and is left out. It has two parts:

* the *model setting*, the checkpoint's identity: task, model and its resolved parameters, backbone, train
  size, training config, data source (or the given checkpoint) and the fingerprint of the data it was
  trained on, never the eval or replay files (`ModelSettings`). So the AdvGLUE replay and the word-level
  attacks of one checkpoint share it, and so does an analysis of that checkpoint;
* the *attack setting*: attack and its parameters, eval size and seed.

`one_per_seed` is the one rule for duplicates: one record per (setting, training seed), the newest.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Iterable

from robench.core.errors import RobenchError
from robench.core.hashing import content_hash
from robench.core.params import make_params
from robench.core.records import RunRecord, without_earlier_knobs
from robench.engine.attack import ATTACKS
from robench.runs.spec import TrainConfig, identity_view
from robench.training.defense import resolve_model

ATTACK_KEYS = ("attack", "attack_params", "eval_size", "eval_seed")
NOT_MODEL = ("seed", "model_params", "data_fingerprint", *ATTACK_KEYS)  # spec keys outside the model setting


def setting_of(record: RunRecord) -> dict[str, Any]:
    spec = {k: v for k, v in identity_view(record.spec).items() if k not in ("seed", "model_params", "attack_params")}
    if spec.get("eval_size") is None:
        spec.pop("eval_seed", None)
    hyper = without_earlier_knobs(record.hyperparameters or {})
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


def attack_setting_id(record: RunRecord) -> str:
    """The attack setting alone: task, data, attack and its resolved parameters, eval size and seed. Runs with
    equal ids were attacked alike on the same examples, whatever the model and however it was trained (a
    checkpoint of your own against the reference's baseline: `robench.report.compare.single`)."""
    setting = setting_of(record)
    keys = ("task", "task_source", "data_source", *ATTACK_KEYS)
    return content_hash({"spec": {k: setting["spec"].get(k) for k in keys if k != "attack_params"},
                         "attack_params": setting["attack_params"]})


def model_setting_id(spec: dict[str, Any], model_params: dict[str, Any] | None = None,
                     train_data: str | None = None) -> str:
    """The model setting of a run or analysis spec: the spec's checkpoint-determining keys, `model_params`
    resolved (resolved here when None) and `train_data`, the fingerprint of the data it was trained on."""
    if model_params is None:
        model_params = resolved_model_params(spec)
    part = {k: v for k, v in identity_view(spec).items() if k not in NOT_MODEL}
    return content_hash(_plain({"spec": part, "model_params": model_params, "train_data": train_data}))


class ModelSettings:
    """Model setting ids of run and analysis records.

    The training data is `resources.data.train_fingerprint` where the record names it (records since
    2026-12), else the run's data fingerprint when the attack reads no files of its own (it is then the
    training data's). AdvGLUE records written earlier fingerprint the AdvGLUE file with the training data: they
    take the training data of a run record of the same robench-trained checkpoint (the checkpoint cache
    directory's name is the hash of everything that determines the weights), here `records`. A record with
    neither keeps its own data fingerprint, and so a model setting of its own.
    """

    def __init__(self, records: Iterable[RunRecord] = ()) -> None:
        self._by_checkpoint: dict[str, str] = {}
        for rec in records:
            if (data := own_train_data(rec)) is not None and (key := _checkpoint_name(rec.spec, rec.checkpoint)):
                self._by_checkpoint.setdefault(key, data)

    def train_data(self, spec: dict[str, Any], own: str | None, checkpoint: str | None) -> str | None:
        if own is not None:
            return own
        return self._by_checkpoint.get(_checkpoint_name(spec, checkpoint) or "")

    def of_run(self, record: RunRecord) -> str:
        data = self.train_data(record.spec, own_train_data(record), record.checkpoint)
        return model_setting_id(record.spec, (record.hyperparameters or {}).get("model"),
                                data if data is not None else record.spec.get("data_fingerprint"))

    def of_analysis(self, spec: dict[str, Any], resources: dict[str, Any], checkpoint: str | None) -> str:
        """An analysis record's: its spec is resolved without an attack, so its data fingerprint is the
        training data's (records before 2026-12 have none: they take a run record's of the same checkpoint)."""
        own = ((resources or {}).get("data") or {}).get("train_fingerprint") or spec.get("data_fingerprint")
        params = (resources or {}).get("model_params")
        return model_setting_id(spec, params if params is not None else None, self.train_data(spec, own, checkpoint))


def own_train_data(record: RunRecord) -> str | None:
    """The training data's fingerprint as far as `record` itself says (None: it does not say)."""
    data = record.resources.get("data") or {}
    if data.get("train_fingerprint"):
        return data["train_fingerprint"]
    if _reads_files(record.spec.get("attack")):
        return None
    return record.spec.get("data_fingerprint") or data.get("fingerprint")


def _reads_files(attack: str | None) -> bool:
    """Whether `attack` fingerprints files of its own into the run's data fingerprint (AdvGLUE's)."""
    try:
        return bool(attack) and bool(ATTACKS.get(attack).data_files)
    except RobenchError:  # a plugin that is not installed here: taken as reading none
        return False


def _checkpoint_name(spec: dict[str, Any], checkpoint: str | None) -> str | None:
    """The cache directory name of a robench-trained checkpoint (None for a given checkpoint or model)."""
    if spec.get("checkpoint") is not None or not checkpoint:
        return None
    return PurePath(checkpoint.replace("\\", "/")).name or None


@dataclass(frozen=True)
class OnePerSeed:
    kept: list[RunRecord]  # in the order given
    replaced: list[tuple[RunRecord, RunRecord]]  # (a record set aside, the record of its setting and seed kept)


def one_per_seed(records: list[RunRecord]) -> OnePerSeed:
    """One record per (setting, training seed): the newest (by `created`, then run id) wins. Two records of one
    setting and seed come from runs whose specs differ only in what the setting ignores (an eval seed with the
    whole split, or records written before explicit defaults were dropped from run ids)."""
    newest: dict[tuple[str, Any], RunRecord] = {}
    for rec in records:
        key = (setting_id(rec), rec.spec.get("seed"))
        if key not in newest or (rec.created, rec.run_id) > (newest[key].created, newest[key].run_id):
            newest[key] = rec
    winners = {id(r) for r in newest.values()}
    kept = [r for r in records if id(r) in winners]
    replaced = [(r, newest[(setting_id(r), r.spec.get("seed"))]) for r in records if id(r) not in winners]
    return OnePerSeed(kept, replaced)


def resolved_model_params(spec: dict[str, Any]) -> dict[str, Any]:
    try:
        return resolve_model(spec["model"]).resolve_params(spec.get("model_params") or {})
    except RobenchError:  # a plugin that is not installed here: as given
        return dict(spec.get("model_params") or {})


def budget_of(spec: dict[str, Any], hyperparameters: dict[str, Any] | None = None) -> str | None:
    """The attack's budget setting (robench.engine.budgets: `textdefender`, `natural`, ...) as the run resolved it,
    else as the spec asked for it; None for an attack without one (the AdvGLUE replay)."""
    attack = (hyperparameters or {}).get("attack") or {}
    budget = attack.get("budget") if isinstance(attack, dict) else None
    return budget or (spec.get("attack_params") or {}).get("budget")


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
    attack = (record.hyperparameters or {}).get("attack") or {}
    parts = _params_part(spec["attack"], attack, _attack_defaults(spec["attack"], attack.get("budget")))
    if attack.get("budget"):  # the budget setting is always named (robench.engine.budgets)
        parts.insert(0, f"budget={attack['budget']}")
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


def _attack_defaults(name: str, budget: str | None = None) -> dict[str, Any] | None:
    """The attack's resolved defaults; with a budget setting, that setting's (so a label names only the setting
    and what differs from it: `budget=morris2020`, not every knob the setting fixes)."""
    try:
        overrides = {"budget": budget} if budget else {}
        return dataclasses.asdict(make_params(ATTACKS.get(name).params, overrides, f"attack {name!r}"))
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
