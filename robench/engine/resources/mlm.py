"""Loading the masked LM for BERT-Attack: the one `robench resources build-mlm` built, or a hub id."""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robench.core.errors import RobenchError
from robench.core.paths import Settings
from robench.core.text import excerpt
from robench.engine.resources.files import resources_dir, verified_build

BUILT_MLM = "built"  # masked_lm(name=...) value that selects the locally built MLM
FROZEN = ("bert.embeddings.word_embeddings.weight", "cls.predictions.decoder.weight")  # tied, from the backbone


@dataclass
class MaskedLM:
    model: Any  # transformers BertForMaskedLM (eval mode, on the requested device)
    tokenizer: Any
    info: dict


def mlm_dir(settings: Settings, backbone: str = "minilm") -> Path:
    return resources_dir(settings) / f"mlm-{Path(backbone).name}"


@functools.lru_cache(maxsize=8)  # loaded once per process: a run describes what its attack used
def masked_lm(settings: Settings, device=None, name: str = BUILT_MLM, backbone: str = "minilm") -> MaskedLM:
    """The masked LM for BERT-Attack: the one built by `robench resources build-mlm` (default), or a hub id
    or local path such as `bert-base-uncased` (the paper's MLM) when online."""
    import torch

    device = torch.device("cpu") if device is None else device
    if name != BUILT_MLM:
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        require_masked_lm(settings, name)
        try:
            tokenizer = AutoTokenizer.from_pretrained(name)
            model = AutoModelForMaskedLM.from_pretrained(name)
        except (OSError, ValueError) as exc:
            raise RobenchError(f"could not load masked LM {name!r} (offline?); build one with "
                               "`robench resources build-mlm` and use the default") from exc
        info = {"name": name, "origin": "hub id or local path", "substitute":
                False if name == "bert-base-uncased" else "for bert-base-uncased (Li et al. 2020)"}
        return MaskedLM(model.to(device).eval(), tokenizer, info)
    target = require_built_mlm(settings, backbone)
    build = json.loads((target / "build.json").read_text())
    model, tokenizer = _load_built_mlm(target, build)
    info = {"name": f"robench-built-mlm-{Path(backbone).name}",
            "origin": f"{target}: {build['backbone']['fingerprint']} encoder + tied MLM head trained "
                      f"{build['steps_done']} steps on {build['corpus']['texts']} local texts",
            "substitute": "for bert-base-uncased (Li et al. 2020); far weaker MLM, see heldout accuracy",
            "heldout_masked_accuracy": build["heldout_accuracy_after"],
            "heldout_masked_accuracy_before": build["heldout_accuracy_before"], "path": str(target)}
    return MaskedLM(model.to(device).eval(), tokenizer, info)


def require_masked_lm(settings: Settings, name: str, flag: str = "--attack-param masked_lm") -> None:
    """Before training: `name` is the built MLM (built and verified), or a masked LM whose config loads (a local
    directory, or a hub id in the local cache or reachable online); else a RobenchError naming `flag`."""
    if name == BUILT_MLM:
        require_built_mlm(settings)
        return
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(name)
    except Exception as exc:  # noqa: BLE001 - hub ids, paths and validation all fail differently
        raise RobenchError(f"{flag}={excerpt(name, 80, quote=False)}: not a local masked-LM directory and not "
                           f"available from the Hugging Face hub ({type(exc).__name__}; offline?); use the default "
                           f"{BUILT_MLM!r} (built by `robench resources build-mlm`) or a hub id such as "
                           "bert-base-uncased when online") from exc


def require_built_mlm(settings: Settings, backbone: str = "minilm") -> Path:
    """The folder of the MLM built by `robench resources build-mlm`, or an error saying how to build it."""
    target = mlm_dir(settings, backbone)
    if not (target / "build.json").is_file():
        raise RobenchError(f"no masked LM built in {target}: run `robench resources build-mlm` (see "
                           "docs/guide/resources.md; about 4 minutes on an idle 2-core CPU), or pass a hub id such as "
                           "bert-base-uncased when online")
    return verified_build(target, "`robench resources build-mlm --force`")


def built_mlm_identity(settings: Settings, backbone: str = "minilm") -> dict[str, Any]:
    """Which build is in place, read from its `build.json` and manifest (nothing loaded): the SHA-256 of its
    weights and config, its steps and its held-out masked-token accuracy (robench.engine.resources.identity)."""
    from robench.core.hashing import content_hash
    from robench.core.manifest import read_manifest

    target = require_built_mlm(settings, backbone)
    build = json.loads((target / "build.json").read_text())
    manifest = read_manifest(target)
    if isinstance(manifest, str):
        raise RobenchError(f"the masked LM in {target}: {manifest}; rebuild it with `robench resources build-mlm`")
    weights = {name: entry["sha256"] for name, entry in manifest.items()
               if name.endswith(".safetensors") or name == "config.json"}
    return {"weights": content_hash(weights, length=16), "steps": build["steps_done"],
            "heldout_accuracy": build["heldout_accuracy_after"]}


def _load_built_mlm(target: Path, build: dict):
    """Rebuild BertForMaskedLM: frozen word embeddings from the backbone, everything else from the build."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel

    from robench.classifier.backbone import resolve_backbone

    backbone = resolve_backbone(build["backbone"]["name"])
    if backbone.fingerprint != build["backbone"]["fingerprint"]:
        raise RobenchError(f"the MLM in {target} was built on {build['backbone']['fingerprint']} but "
                           f"{backbone.fingerprint} is installed: rebuild with `robench resources build-mlm`")
    model = BertForMaskedLM(BertConfig.from_pretrained(target))
    base = BertModel.from_pretrained(backbone.location, add_pooling_layer=False)
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight.copy_(base.embeddings.word_embeddings.weight)
    state: dict[str, torch.Tensor] = {}
    for shard in sorted(target.glob("*.safetensors")):
        state.update(load_file(shard))
    result = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    missing = set(result.missing_keys) - set(FROZEN) - {"cls.predictions.decoder.bias"}  # tied to predictions.bias
    if missing or result.unexpected_keys:
        raise RobenchError(f"the MLM in {target} is incomplete ({sorted(missing)[:3]}...): rebuild it")
    model.tie_weights()
    return model.float(), AutoTokenizer.from_pretrained(target)

