"""The syntactic findings of arXiv 2108.13602 in `robench analyze --syntax`: BLiMP minimal pairs
through a frozen MLM head (`robench.analysis.blimp`, head from `robench.analysis.mlm_head`) and a structural
dependency probe per layer (`robench.analysis.structural_probe`), for the fine-tuned encoder and
the pre-trained one. The pre-trained encoder's results are the same for every model of a backbone,
so they are cached under `<cache_dir>/syntax/` (keyed by backbone, head build, data and settings).
"""
from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from robench.analysis import blimp
from robench.analysis.conllu import Sentence, fingerprint, read_conllu
from robench.analysis.structural_probe import LayerResult, fits, probe_layer, word_states
from robench.analysis.syntax_config import SyntaxConfig
from robench.core.errors import RobenchError
from robench.core.files import atomic_write
from robench.core.hashing import content_hash
from robench.core.paths import Settings

SYNTAX_FORMAT = 1  # bump when a change would change the numbers
EWT_TRAIN, EWT_TEST = "ud_english_ewt/en_ewt-ud-dev.conllu", "ud_english_ewt/en_ewt-ud-test.conllu"


@dataclass
class SyntaxData:
    sets: list[blimp.BlimpSet]
    train: list[Sentence]  # EWT dev: the probe's training sentences
    test: list[Sentence]  # EWT test: its evaluation sentences
    resources: dict[str, Any]  # data files, fingerprints, the head


@dataclass
class SyntaxMeasurement:
    metrics: dict[str, float]  # flat, for the record's metrics and the leaderboard
    details: dict[str, Any]  # per set / field / layer, fine-tuned and pre-trained
    resources: dict[str, Any]


def require_inputs(settings: Settings, backbone: str) -> dict[str, Path]:
    """Check the BLiMP files, the EWT files and the MLM head exist (before any expensive work)."""
    from robench.analysis.mlm_head import require_mlm_head

    root = settings.require_data_dir()
    paths = {"blimp": root / "blimp", "ewt_train": root / EWT_TRAIN, "ewt_test": root / EWT_TEST}
    blimp.blimp_files(paths["blimp"])
    for key in ("ewt_train", "ewt_test"):
        if not paths[key].is_file():
            raise RobenchError(f"UD English-EWT file not found: {paths[key]}; point --data-dir at a directory laid "
                               "out like shared/data (ud_english_ewt/)")
    paths["head"] = require_mlm_head(settings, backbone)
    return paths


def load_data(paths: dict[str, Path], config: SyntaxConfig, tokenizer, head_info: dict) -> SyntaxData:
    """The BLiMP pairs and EWT sentences the settings ask for (too-long sentences left out, counted)."""
    files = blimp.blimp_files(paths["blimp"])
    sets = [blimp.load_set(path, config.blimp) for path in files]
    probe = config.probe
    splits = {}
    for key, limit in (("ewt_train", probe.train_sentences), ("ewt_test", probe.test_sentences)):
        sentences = read_conllu(paths[key])[:limit]
        keep = fits(tokenizer, sentences, probe.max_length)
        splits[key] = ([s for s, ok in zip(sentences, keep) if ok], len(sentences) - sum(keep))
    resources = {
        "blimp": {"path": str(paths["blimp"]), "sets": len(files), "fingerprint": blimp.fingerprint(files),
                  "pairs_scored": sum(len(s.pairs) for s in sets), "license": "CC BY 4.0"},
        "ud_english_ewt": {key: {"path": str(paths[key]), "fingerprint": fingerprint(paths[key]),
                                 "sentences": len(splits[key][0]), "left_out_too_long": splits[key][1]}
                           for key in ("ewt_train", "ewt_test")} | {"license": "CC BY-SA 4.0"},
        "mlm_head": head_info,
    }
    return SyntaxData(sets, splits["ewt_train"][0], splits["ewt_test"][0], resources)


def hidden_states_of(model):
    """(input_ids, attention_mask) -> all hidden states, for AutoModel and fine-tuned classifiers alike."""
    def run(ids: torch.Tensor, mask: torch.Tensor):
        states = model(input_ids=ids, attention_mask=mask, output_hidden_states=True).hidden_states
        if states is None:
            raise RobenchError("the encoder returns no hidden states (output_hidden_states=True is required)")
        return states
    return run


def measure_encoder(model, tokenizer, head, data: SyntaxData, config: SyntaxConfig, device: torch.device,
                    progress, label: str) -> dict[str, Any]:
    """BLiMP and the structural probe for one encoder (fine-tuned or pre-trained)."""
    states = hidden_states_of(model)
    started = time.perf_counter()
    bar = progress.add_task(f"BLiMP ({label})", total=sum(blimp.rows_per_set(tokenizer, s) for s in data.sets))
    log_probs = blimp.head_log_probs(lambda ids, mask: states(ids, mask)[-1], head, device)
    result = blimp.evaluate(log_probs, tokenizer, data.sets, config.blimp.batch_size,
                            lambda n: progress.update(bar, advance=n))
    scored = time.perf_counter()
    layers = config.probe.layers or tuple(range(model.config.num_hidden_layers + 1))
    bar = progress.add_task(f"structural probe: word states ({label})", total=len(data.train) + len(data.test))
    kwargs = dict(layers=layers, device=device, max_length=config.probe.max_length,
                  advance=lambda n: progress.update(bar, advance=n))
    train_states, test_states = word_states(states, tokenizer, data.train, **kwargs), \
        word_states(states, tokenizer, data.test, **kwargs)
    bar = progress.add_task(f"structural probe: training per layer ({label})", total=len(layers))
    per_layer: list[LayerResult] = []
    for layer in layers:
        per_layer.append(probe_layer(train_states[layer], data.train, test_states[layer], data.test, layer,
                                     config.probe))
        progress.update(bar, advance=1)
    best = max(per_layer, key=lambda r: r.uuas)
    return {"blimp": dataclasses.asdict(result), "blimp_metrics": result.metrics(),
            "probe": [dataclasses.asdict(r) for r in per_layer], "probe_best_layer": best.layer,
            "probe_uuas_best": best.uuas, "probe_spearman_best": max(r.spearman for r in per_layer),
            "seconds": {"blimp": round(scored - started, 1), "probe": round(time.perf_counter() - scored, 1)}}


def backbone_cached(settings: Settings, key: dict[str, Any], compute) -> dict[str, Any]:
    """The pre-trained encoder's results from `<cache_dir>/syntax/<hash>.json`, else `compute()` (saved).
    A cached file that does not parse, or whose key differs, is recomputed and replaced."""
    path = settings.cache_dir / "syntax" / f"{content_hash(key)}.json"
    if path.is_file():
        try:
            cached = json.loads(path.read_text())
        except json.JSONDecodeError:
            cached = {}
        if cached.get("key") == json.loads(json.dumps(key, default=str)) and "result" in cached:
            return cached
    result = compute()
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"key": key, "result": result}, indent=2, default=str)
    atomic_write(path, text)
    return json.loads(text)  # as a later run reads it back


def measure_syntax(paths: dict[str, Path], tuned, pretrained, tokenizer_of_tuned, backbone, settings: Settings,
                   config: SyntaxConfig, device: torch.device, progress) -> SyntaxMeasurement:
    """Both encoders under the frozen head and probe; the pre-trained side from the cache when it can."""
    from robench.analysis.mlm_head import load_mlm_head

    loaded = load_mlm_head(settings, backbone.name, device)
    if tokenizer_of_tuned.get_vocab() != loaded.tokenizer.get_vocab():
        raise RobenchError("the fine-tuned model's tokenizer differs from the backbone's: the MLM head cannot be used")
    data = load_data(paths, config, loaded.tokenizer, loaded.info)
    key = {"format": SYNTAX_FORMAT, "backbone": backbone.fingerprint, "head": loaded.info["build_id"],
           "config": dataclasses.asdict(config), "data": data.resources}
    base = backbone_cached(settings, key, lambda: measure_encoder(pretrained, loaded.tokenizer, loaded.head, data,
                                                                  config, device, progress, "pre-trained"))
    tuned_result = measure_encoder(tuned, loaded.tokenizer, loaded.head, data, config, device, progress, "fine-tuned")
    return SyntaxMeasurement(flat_metrics(tuned_result, base["result"]),
                             {"fine_tuned": tuned_result, "pre_trained": base["result"]}, data.resources)


def flat_metrics(tuned: dict[str, Any], base: dict[str, Any]) -> dict[str, float]:
    """Record metrics: each side's BLiMP overall / fields / anaphor sets and best-layer probe scores;
    the pre-trained encoder's under `backbone_...`."""
    out: dict[str, float] = {}
    for prefix, side in (("", tuned), ("backbone_", base)):
        out.update({prefix + k: v for k, v in side["blimp_metrics"].items()})
        for k in ("probe_uuas_best", "probe_spearman_best", "probe_best_layer"):
            out[prefix + k] = side[k]
    return out

