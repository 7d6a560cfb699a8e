"""What a run is (RunSpec), and the content hashes that key its caches."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, NoReturn

from robench.core.hashing import content_hash
from robench.training.config import TrainConfig


class FrozenDict(dict):
    """A dict that refuses changes (equal to, and JSON-dumped like, a plain dict)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a RunSpec is immutable: build a new one (dataclasses.replace) instead of changing it")

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse  # type: ignore

    def __reduce__(self) -> tuple:
        return FrozenDict, (dict(self),)


class FrozenList(list):
    """A list that refuses changes (equal to, and JSON-dumped like, a plain list)."""

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("a RunSpec is immutable: build a new one (dataclasses.replace) instead of changing it")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = FrozenDict._refuse  # type: ignore
    append = extend = insert = pop = remove = clear = sort = reverse = FrozenDict._refuse  # type: ignore

    def __reduce__(self) -> tuple:
        return FrozenList, (list(self),)


def freeze(value: Any) -> Any:
    """`value` with every dict and list in it made immutable (a copy; the caller's objects stay as they are)."""
    if isinstance(value, dict):
        return FrozenDict((k, freeze(v)) for k, v in value.items())
    if isinstance(value, list):
        return FrozenList(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, mutable copy of a frozen value."""
    if isinstance(value, dict):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, list):
        return [thaw(v) for v in value]
    return value


@dataclass(frozen=True)
class RunSpec:
    """Everything that determines a run's numbers. Its hash is the run id. Immutable all through: the dicts it
    holds are frozen copies, so no one can change a spec (and its run id) after it was made."""

    task: str = "sst2"
    model: str = "bert"
    attack: str = "advglue"
    backbone: str = "minilm"
    seed: int = 0
    train_size: int | None = None  # None: the whole train split
    eval_size: int | None = None  # None: the whole eval split (or AdvGLUE split)
    eval_seed: int = 0  # chooses the eval subset (with eval_size), the same for every model and training seed
    data_source: Literal["local", "hub"] = "local"
    train: TrainConfig = field(default_factory=TrainConfig)
    model_params: dict[str, Any] = field(default_factory=dict)
    attack_params: dict[str, Any] = field(default_factory=dict)
    # content hash of the data the run reads; `robench.runs.resolve.resolve_run` fills it in, so the run id
    # changes when the data does (None: not resolved yet)
    data_fingerprint: str | None = None
    # A model that robench does not train: a saved checkpoint, an in-memory model or a function, identified
    # by the hash of its weights (or a user-declared name); see robench.runs.given and robench.runs.evaluate.
    checkpoint: dict[str, Any] | None = None
    # A task read from the user's files (robench.data.file_tasks): its definition and the files' SHA-256.
    task_source: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for name in ("model_params", "attack_params", "checkpoint", "task_source"):
            object.__setattr__(self, name, freeze(getattr(self, name)))

    def to_dict(self) -> dict[str, Any]:
        """A plain, mutable dict (the spec's own dicts stay frozen)."""
        return thaw(asdict(self))

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RunSpec":
        d = dict(d)
        d["train"] = TrainConfig(**d.get("train", {}))
        return cls(**d)

    @property
    def run_id(self) -> str:
        identity = identity_view({k: v for k, v in self.to_dict().items() if v is not None or k not in OPTIONAL})
        name = slug(f"{self.task}-{identity['model']}-{self.attack}-s{self.seed}")[:RUN_NAME_MAX]
        return f"{name}-{content_hash(identity)}"

    @property
    def trains(self) -> bool:
        """True when the run fine-tunes its model (False: it attacks a given checkpoint or model)."""
        return self.checkpoint is None


MAX_SEED = 2**32 - 1  # numpy's (and so transformers.set_seed's) limit
# the readable part of a run id: its file names (`.partial.jsonl`, `.lock`) stay far below the 255-byte limit;
# the hash after it keeps ids of long names apart
RUN_NAME_MAX = 96
OPTIONAL = ("checkpoint", "task_source")  # left out of the run id when unset, so older run ids stay valid


def identity_view(spec: dict[str, Any]) -> dict[str, Any]:
    """What identifies a run of `spec` (a spec dict): a given model identified by its weights
    (`robench.classifier.weights`) is those weights and its label map, whatever its name, path or route
    (`--checkpoint DIR`, `robench.evaluate(model, tokenizer)`); its model is `weights@<8 hex>`. Other specs
    (robench-trained models, older records, functions) are their own identity."""
    given = spec.get("checkpoint") or {}
    if not given.get("weights_sha256"):
        return spec
    sha = given["weights_sha256"]
    return {**spec, "model": f"weights@{sha[:8]}",
            "checkpoint": {"weights_sha256": sha, "label_map": given.get("label_map")}}


def used_settings(spec: dict[str, Any]) -> dict[str, Any]:
    """A spec dict as far as robench used its settings: a given checkpoint's (`checkpoint` set) keeps, of the training
    settings, only the input length (robench trained nothing: no train size, batch size, epochs, learning rate or
    model parameters of its own apply)."""
    if not spec.get("checkpoint"):
        return spec
    shown = {k: v for k, v in spec.items() if k not in ("train_size", "model_params", "train")}
    return {**shown, "input": {"max_length": (spec.get("train") or {}).get("max_length")}}


def slug(text: str) -> str:
    """`text` made safe as a file name: letters, digits, `-`, `_`, `.`; never starting with a dot."""
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text).lstrip(".") or "_"

