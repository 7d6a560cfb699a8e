"""The dev pass of a model robench did not train: its accuracy on the task's whole eval split, which its run records
report as `dev_accuracy` and test against the majority class (`robench.runs.chance`: a checkpoint not above chance
is flagged as untrained and left out of comparisons).

It depends on the weights and the data only, not on the attack, so it is measured once per checkpoint and data and
cached (`<cache_dir>/dev-accuracy/<key>.json`, checksummed): the four attacks of `--protocol reference`, or a
second attack of the same checkpoint, reuse it. The key: the weights' identity and label map
(`robench.runs.spec.identity_view`), the label order, the task, its data's content fingerprint, the data source and
the input length. A model identified by a name alone (a plain function) is measured every time.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING

from robench.core.hashing import content_hash
from robench.core.manifest import content_digest, digest_problem

if TYPE_CHECKING:
    from robench.runs.resolve import ResolvedRun

DEV_FORMAT = 1
WHY = "once per checkpoint and data: its run records report it, and it tells a trained model from one at chance"


def cache_path(resolved: ResolvedRun) -> Path | None:
    """Where the dev accuracy of `resolved`'s model is cached; None for a model without a weights identity."""
    from robench.runs.spec import identity_view

    spec = resolved.spec
    identity = identity_view(spec.to_dict()).get("checkpoint") or {}
    if spec.trains or not identity.get("weights_sha256"):
        return None
    key = content_hash({"format": DEV_FORMAT, "model": identity, "label_order": resolved.label_order,
                        "task": spec.task, "data": resolved.train_data, "source": spec.data_source,
                        "max_length": spec.train.max_length})
    return resolved.settings.cache_dir / "dev-accuracy" / f"{key}.json"


def cached(resolved: ResolvedRun) -> float | None:
    """The cached dev accuracy of `resolved`'s model, or None (not measured yet, or a damaged or edited file)."""
    path = cache_path(resolved)
    try:
        saved = json.loads(path.read_text(encoding="utf-8")) if path is not None else None
        value = saved["dev_accuracy"] if saved is not None else None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    ok = isinstance(value, float) and math.isfinite(value) and 0.0 <= value <= 1.0
    return value if ok and digest_problem({"dev_accuracy": value}, saved.get("sha256")) is None else None


def store(resolved: ResolvedRun, value: float) -> None:
    """Cache the dev accuracy just measured (a cache that cannot be written only costs measuring it again)."""
    from robench.core.files import atomic_write

    path = cache_path(resolved)
    if path is None:
        return
    try:
        atomic_write(path, json.dumps({"dev_accuracy": value, "sha256": content_digest({"dev_accuracy": value}),
                                       "examples": len(resolved.split("eval"))}))
    except OSError:
        pass
