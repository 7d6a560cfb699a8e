"""The second fault and bad-input probe (issue 26): 22 defects, each guarded by a test named after it.

Silent wrong results (non-finite logits, a failing model, a checkpoint without a head, unverified caches,
impossible thresholds, train sizes past the split), crashes and late failures (a full disk, unbounded
hyperparameters, grid names, a directory for `show --html`, a bad masked LM, a 100,000-character text),
security (terminal escapes, Markdown injection, `show` outside the results dir, echoed file contents) and
messages (data files, task TOML types, callables, read-only results dirs). Tiny random BERT, seconds per case.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import tiny_spec

import robench
from robench.cli import main
from robench.core.errors import RobenchError
from robench.core.hashing import _sha256
from robench.runs.resolve import resolve_run
from robench.runs.store import RunStore
from robench.training.loop import checkpoint_key


def _cli(capsys, *argv) -> tuple[int, str, list[str]]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err.strip().splitlines()


def _one_error(capsys, *argv) -> str:
    """Run the CLI; assert exit 2 and exactly one `robench: error:` line (no traceback); return it."""
    code, _, lines = _cli(capsys, *argv)
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("robench: error: "), lines
    return lines[0]


def _nothing_trained(settings) -> bool:
    return not list(settings.checkpoints_dir.glob("*/model.safetensors")) if settings.checkpoints_dir.exists() \
        else True


def _constant(logits):
    return lambda texts: np.tile(np.asarray(logits, dtype=float), (len(texts), 1))


def _task_with_replay(folder: Path, texts: list[str], name: str = "probe") -> Path:
    """An eval-only task file whose replay file holds `texts` (labels alternate), for `advglue`."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = "".join(f'"{t}",{"pos" if i % 2 else "neg"}\n' for i, t in enumerate(texts))
    (folder / "eval.csv").write_text("text,label\n" + rows, encoding="utf-8")
    (folder / "task.toml").write_text(f'name = "{name}"\neval = "eval.csv"\nreplay = "eval.csv"\n'
                                      'text_columns = "text"\nlabel_column = "label"\nlabels = ["neg", "pos"]\n',
                                      encoding="utf-8")
    return folder / "task.toml"


# --- 1. non-finite logits -----------------------------------------------------------------

@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_non_finite_logits_from_a_function_are_an_error_not_a_score(settings, value):
    with pytest.raises(RobenchError, match=r"non-finite logits \(NaN or inf\)"):
        robench.evaluate(_constant([0.0, value]), task="sst2", attack="advglue", name="nan", settings=settings,
                         device="cpu")
    assert not list(settings.runs_dir.glob("*.json"))


def test_non_finite_logits_of_a_hugging_face_model_are_an_error(tiny_backbone):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from robench.classifier.victim import ModelFailure, Victim

    model = AutoModelForSequenceClassification.from_pretrained(tiny_backbone, num_labels=2)
    model.classifier.register_forward_hook(lambda module, args, out: out * float("nan"))
    victim = Victim(model, AutoTokenizer.from_pretrained(tiny_backbone), torch.device("cpu"))
    with pytest.raises(ModelFailure, match="non-finite logits"):
        victim.predict([("a fine film",)])


# --- 2. a failing model is not a finished record ---------------------------------------------

def test_a_model_that_fails_mid_run_writes_no_record_and_a_healthy_rerun_is_scored(settings):
    calls = []

    def flaky(texts):
        calls.append(len(texts))
        if len(calls) > 1:  # the dev split passes, the attack's queries fail
            raise RuntimeError("backend went away")
        return np.zeros((len(texts), 2))

    with pytest.raises(RobenchError, match="the model raised RuntimeError: backend went away; the run stopped"):
        robench.evaluate(flaky, task="sst2", attack="advglue", name="flaky", settings=settings, device="cpu")
    assert not list(settings.runs_dir.glob("*.json"))  # nothing enters the leaderboard
    healthy = robench.evaluate(_constant([0.0, 1.0]), task="sst2", attack="advglue", name="flaky",
                               settings=settings, device="cpu")
    assert healthy.metrics["errors"] == 0 and healthy.metrics["examples"] == 24
    labels = [row["label"] for row in json.loads((settings.data_dir / "advglue" / "dev.json").read_text())["sst2"]]
    assert healthy.metrics["robust_accuracy"] == pytest.approx(sum(y == 1 for y in labels) / 24)  # always "positive"


def test_a_model_failure_stops_the_attack_engine_instead_of_becoming_error_rows(settings):
    from robench.classifier.victim import CallableVictim, ModelFailure
    from robench.data import TASKS
    from robench.data.loading import load_split
    from robench.engine.attack import AttackContext
    from robench.engine.scheduler import EngineConfig, Outcome, Request, attack_examples

    calls = []

    def breaks(texts):
        calls.append(1)
        if len(calls) > 1:
            raise ValueError("out of memory")
        return np.tile([0.0, 1.0], (len(texts), 1))

    task, recorded = TASKS.get("sst2"), []
    data = load_split(task, "eval", settings.data_dir, "local").select(range(6))
    data = data.remove_columns("label").add_column("label", [1] * 6)  # the clean predictions are right: attacked
    ctx = AttackContext(tiny_spec("unused", eval_size=6), task, CallableVictim(breaks, 2), settings, data, 0.0, {},
                        recorded.append)

    def search(text, label, clean):
        probs = yield Request("predict", [(text[0] + " indeed",)])  # not cached: the model is called again
        return Outcome(text, probs[0], 0)

    with pytest.raises(ModelFailure, match="out of memory"):
        attack_examples(ctx, search, {}, EngineConfig(concurrency=6))
    assert not [r for r in recorded if r.status == "error"]  # no example was recorded as an error


def test_a_run_whose_every_example_errs_writes_no_record_and_errors_are_retried(settings, tiny_backbone,
                                                                               monkeypatch):
    from robench.core.types import ExampleResult
    from robench.engine.attack import ATTACKS, AttackOutput

    recipe, attacked = ATTACKS.get("advglue"), []

    def all_errors(ctx, params):
        out = [ExampleResult(i, 0, "", "x", -1, -1, "error", 0, 1, 0, "KeyError: broken resource")
               for i in range(len(ctx.eval_data)) if i not in ctx.done]
        attacked.append(len(out))
        for result in out:
            ctx.record(result)
        return AttackOutput(out, {})

    monkeypatch.setattr(recipe, "attack", all_errors)
    spec = tiny_spec(tiny_backbone)
    with pytest.raises(RobenchError, match="every one of the 24 attacked examples ended in an error"):
        robench.run(spec, settings, device="cpu")
    store = RunStore(settings.runs_dir, resolve_run(spec, settings).spec.run_id)
    assert not store.record_path.exists() and not store.partial_path.exists()  # no error row is kept
    with pytest.raises(RobenchError):
        robench.run(spec, settings, device="cpu")
    assert attacked == [24, 24]  # the second attempt attacks every example again


# --- 3. a checkpoint without a classification head -------------------------------------------

def test_a_checkpoint_without_a_classification_head_is_refused(capsys, where, tiny_backbone, settings):
    line = _one_error(capsys, "run", "--checkpoint", tiny_backbone, "--label-map", "0=negative,1=positive",
                      "--attack", "advglue", *where)
    assert "has no trained weights for classifier" in line and "initialised at random" in line
    assert not list(settings.runs_dir.glob("*.json"))


# --- 5. built resources carry a manifest --------------------------------------------------------

def _small_table(target: Path) -> None:
    from robench.engine.resources.synonyms import _save_table

    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, 4)).astype(np.float32)
    nn = np.array([[(i + j) % 6 for j in (1, 2)] for i in range(6)], dtype=np.int32)
    _save_table(target, ["a", "b", "c", "d", "e", "f"], vectors, nn, np.full((6, 2), 0.9, np.float32),
                {"name": "counterfitted-glove", "key": "k"})


def _roll_rows(target: Path) -> None:  # same size and (restored) modification time: only the checksum tells
    stat = (target / "nn.npy").stat()
    np.save(target / "nn.npy", np.roll(np.load(target / "nn.npy"), 1, axis=0))
    os.utime(target / "nn.npy", ns=(stat.st_atime_ns, stat.st_mtime_ns))


def _truncate_vectors(target: Path) -> None:
    data = (target / "vectors.npy").read_bytes()
    (target / "vectors.npy").write_bytes(data[: len(data) // 2])


def _garbage_info(target: Path) -> None:
    (target / "info.json").write_bytes(b"\xff\x00 not json")


@pytest.mark.parametrize("damage", [_roll_rows, _truncate_vectors, _garbage_info])
def test_a_cached_resource_that_does_not_match_its_manifest_is_not_loaded(tmp_path, caplog, damage):
    from robench.engine.resources.files import cached_build
    from robench.engine.resources.synonyms import _load_table

    target = tmp_path / "counterfitted-glove-k"
    _small_table(target)
    assert (target / "manifest.json").is_file()
    assert cached_build(target, _load_table).words == ["a", "b", "c", "d", "e", "f"]
    damage(target)
    _sha256.cache_clear()  # as a new process finds it: hashes are kept per process and file version
    with caplog.at_level(logging.WARNING, "robench"):
        assert cached_build(target, _load_table) is None  # no traceback: the caller builds it again
    assert "is damaged" in caplog.text and not target.exists()


def test_a_synonym_table_with_rolled_rows_is_rebuilt_to_the_same_table(settings, caplog, monkeypatch):
    from robench.engine.resources import build_synonyms, synonyms

    words = ["good", "bad", "movie", "film", "cheap", "expensive", "terrible", "horrible", "fine", "dull"] * 3
    words = [w + ("" if i < 10 else "x" * (i // 10)) for i, w in enumerate(words)]
    vectors = np.random.default_rng(0).normal(size=(len(words), 8)).astype(np.float32)
    monkeypatch.setattr(synonyms, "_glove_vocabulary",  # a 30-word GloVe: the build takes no time
                        lambda size: (words, vectors.copy(), "fake-glove"))
    first = build_synonyms(settings, vocab_size=30, k=5)
    _roll_rows(Path(first.info["path"]))
    _sha256.cache_clear()  # as a new process finds it
    with caplog.at_level(logging.WARNING, "robench"):
        again = build_synonyms(settings, vocab_size=30, k=5)
    assert "is damaged" in caplog.text and "nn.npy does not match its checksum" in caplog.text
    np.testing.assert_array_equal(again.nn, first.nn)


def test_a_built_mlm_that_does_not_verify_is_refused_then_rebuilt(capsys, settings, tiny_backbone):
    from robench.engine import resources
    from robench.engine.resources import MlmBuildConfig, build_mlm

    build_mlm(settings, torch.device("cpu"), MlmBuildConfig(steps=1, batch_size=4, max_length=16, heldout=20),
              backbone=str(tiny_backbone))
    target = resources.mlm_dir(settings, str(tiny_backbone))
    shard = sorted(target.glob("*.safetensors"))[0]
    data = bytearray(shard.read_bytes())
    data[-10] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(RobenchError, match="does not verify .*rebuild it with `robench resources build-mlm"):
        resources.masked_lm(settings, backbone=str(tiny_backbone))
    code, out, _ = _cli(capsys, "resources", "build-mlm", "--backbone", tiny_backbone, "--steps", 1, "--batch-size",
                        4, "--max-length", 16, "--heldout", 20, "--data-dir", settings.data_dir, "--cache-dir",
                        settings.cache_dir, "--quiet")
    assert code == 0 and "does not verify" in out and "built it again" in out
    assert resources.masked_lm(settings, backbone=str(tiny_backbone)).info["path"] == str(target)


# --- 6. a record must name its run and match its manifest -------------------------------------

def _classifier(backbone: Path, path: Path) -> Path:
    """The tiny random BERT as a saved sequence classifier (no training needed to attack it)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(
        backbone, num_labels=2, id2label={0: "negative", 1: "positive"}, label2id={"negative": 0, "positive": 1})
    model.save_pretrained(path, safe_serialization=True)
    AutoTokenizer.from_pretrained(backbone).save_pretrained(path)
    return path


def test_a_record_copied_under_another_runs_name_is_not_returned(capsys, where, settings, tiny_backbone, tmp_path,
                                                                caplog):
    given = ["run", "--checkpoint", _classifier(tiny_backbone, tmp_path / "clf"), "--attack", "advglue",
             "--eval-size", 8, *where]
    code, out, lines = _cli(capsys, *given, "--eval-seed", 0)
    assert code == 0, lines
    first = Path(out.split("record: ")[1].split()[0])
    code, out, lines = _cli(capsys, *given, "--eval-seed", 1, "--dry-run")
    other = Path(out.split("record: ")[1].split()[0])
    shutil.copy(first, other)
    shutil.copy(first.with_suffix(".csv"), other.with_suffix(".csv"))
    with caplog.at_level(logging.WARNING, "robench"):
        code, out, lines = _cli(capsys, *given, "--eval-seed", 1)
    assert code == 0 and any("does not verify" in line and "not " + other.stem in line for line in lines), lines
    printed = Path(out.split("record: ")[1].split()[0])
    assert printed == other and printed.is_file() and json.loads(printed.read_text())["run_id"] == other.stem
    assert json.loads(printed.read_text())["spec"]["eval_seed"] == 1


@pytest.mark.parametrize("edit", ["metrics", "csv", "spec"])
def test_an_edited_record_is_run_again(settings, caplog, edit):
    calls = []

    def model(texts):
        calls.append(len(texts))
        return np.tile([0.0, 1.0], (len(texts), 1))

    def evaluate():
        return robench.evaluate(model, task="sst2", attack="advglue", name="fn", settings=settings, device="cpu")

    record = evaluate()
    store, queried = RunStore(settings.runs_dir, record.run_id), len(calls)
    saved = json.loads(store.record_path.read_text())
    if edit == "metrics":
        saved["metrics"]["robust_accuracy"] = 1.0
        store.record_path.write_text(json.dumps(saved))
    elif edit == "spec":  # another run's spec under this name, its checksum recomputed to match
        from robench.core.manifest import content_digest

        saved["spec"]["eval_seed"] = 7
        saved["manifest"]["record_sha256"] = content_digest({k: v for k, v in saved.items() if k != "manifest"})
        store.record_path.write_text(json.dumps(saved))
    else:
        store.csv_path.write_text(store.csv_path.read_text().replace("successful", "failed"))
    with caplog.at_level(logging.WARNING, "robench"):
        again = evaluate()
    assert "does not verify" in caplog.text and len(calls) > queried  # the model was asked again
    assert again.metrics == record.metrics and again.spec == record.spec  # its own numbers, not the edited ones
    queried = len(calls)
    assert evaluate().created == again.created and len(calls) == queried  # and now it verifies: reused


# --- 7. impossible thresholds ------------------------------------------------------------------

@pytest.mark.parametrize("attack,param,message", [
    ("textfooler", "min_cos=2", "min_cos must be between -1 and 1"),
    ("textfooler", "encoder_threshold=5", "encoder_threshold must be between -1 and 1"),
    ("textfooler", "similarity_threshold=-0.5", "between 0 and 1 for angular similarity"),
    ("bert-attack", "similarity_threshold=1.5", "similarity_threshold must be between -1 and 1"),
    ("bert-attack", "encoder_threshold=-3", "encoder_threshold must be between -1 and 1"),
    ("textattack:textfooler", "min_cos=2", "min_cos must be between -1 and 1"),
])
def test_impossible_similarity_thresholds_are_refused(capsys, base, settings, attack, param, message):
    assert message in _one_error(capsys, "run", *base, "--attack", attack, "--attack-param", param)
    assert _nothing_trained(settings)


# --- 8. a train size beyond the split -----------------------------------------------------------

def test_a_train_size_beyond_the_split_is_the_whole_split(settings, tiny_backbone):
    whole = resolve_run(tiny_spec(tiny_backbone), settings)
    for size in (96, 10**20):
        beyond = resolve_run(tiny_spec(tiny_backbone, train_size=size), settings)
        assert beyond.spec.train_size is None and beyond.spec.run_id == whole.spec.run_id
        assert checkpoint_key(beyond) == checkpoint_key(whole)
    assert resolve_run(tiny_spec(tiny_backbone, train_size=95), settings).spec.train_size == 95
    record = robench.run(tiny_spec(tiny_backbone, train_size=10**20), settings, device="cpu")
    assert record.spec["train_size"] is None and record.resources["data"]["train_examples"] == 96
