"""Fault injection: bad input, damaged caches and partial files, interruptions, concurrent runs.

Each case of docs/studies/reliability.md: bad input exits 2 with one `robench: error:` line before any work;
a damaged cache or partial file gives a warning and a correct final result; an interrupted run ends
with the same metrics and rows as an uninterrupted one. Tiny random BERT, seconds per case.
"""
from __future__ import annotations

import csv
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import tiny_spec

import robench
from robench.cli import main
from robench.core.errors import RobenchError
from robench.core.hashing import CACHE_FILE
from robench.core.registry import Registry
from robench.core.types import ExampleResult
from robench.data.fingerprint import files_fingerprint
from robench.runs.resolve import resolve_run
from robench.runs.spec import RunSpec, TrainConfig
from robench.runs.store import RunStore, hyperparameters_hash
from robench.training.loop import RECORD, WEIGHTS, checkpoint_key


def _cli(capsys, *argv) -> tuple[int, list[str]]:
    code = main([str(a) for a in argv])
    return code, capsys.readouterr().err.strip().splitlines()


def _one_error(capsys, *argv) -> str:
    """Run the CLI; assert exit 2 and exactly one `robench: error:` line; return it."""
    code, lines = _cli(capsys, *argv)
    assert code == 2, lines
    assert len(lines) == 1 and lines[0].startswith("robench: error: "), lines
    return lines[0]


def base_args(settings, tiny_backbone) -> list[str]:
    """`robench run` flags for a tiny, one-epoch run in `settings`' folders (the `base` fixture here and in
    test_reliability_runs.py)."""
    return ["--backbone", str(tiny_backbone), "--data-dir", str(settings.data_dir), "--cache-dir",
            str(settings.cache_dir), "--results-dir", str(settings.results_dir), "--epochs", "1",
            "--batch-size", "16", "--max-length", "32", "--quiet"]


@pytest.fixture
def base(settings, tiny_backbone):
    return base_args(settings, tiny_backbone)


def _copy_data(src: Path, dst: Path) -> Path:
    """A data dir with real copies of the SST-2 and AdvGLUE files (edited by the test) and links to the rest."""
    dst.mkdir()
    for part in src.iterdir():
        if part.name in ("sst2", "advglue"):
            shutil.copytree(part, dst / part.name)
        else:
            (dst / part.name).symlink_to(part.resolve())
    return dst


def _rows(store: RunStore) -> list[dict]:
    return list(csv.DictReader(open(store.csv_path, encoding="utf-8")))


def _nothing_trained(settings) -> bool:
    return not list(settings.checkpoints_dir.glob("*/model.safetensors")) if settings.checkpoints_dir.exists() \
        else True


# --- 1. data fingerprints ---------------------------------------------------------------

def test_modified_data_gets_its_own_checkpoint_run_id_and_fingerprint(settings, tiny_backbone, tmp_path, work):
    spec = tiny_spec(tiny_backbone)
    original = robench.run(spec, settings, device="cpu")
    changed_dir = _copy_data(settings.data_dir, tmp_path / "changed")
    train = changed_dir / "sst2" / "train.tsv"
    lines = train.read_text(encoding="utf-8").splitlines(keepends=True)
    train.write_text("".join(lines[:1] + lines[1:][::-1]), encoding="utf-8")  # same rows, another order
    changed = robench.run(spec, robench.core.paths.resolve_settings(changed_dir, settings.cache_dir,
                                                                  settings.results_dir), device="cpu")
    assert changed.run_id != original.run_id and changed.checkpoint != original.checkpoint
    assert changed.timings["train_cached"] is False
    fingerprints = {r.resources["data"]["fingerprint"] for r in (original, changed)}
    assert len(fingerprints) == 2 and None not in fingerprints
    assert changed.spec["data_fingerprint"] == changed.resources["data"]["fingerprint"]
    assert RunSpec.from_dict(changed.spec).run_id == changed.run_id  # a record's spec names its own run id
    assert work.counts == {"trained": 2, "attacked": 2}
    again = robench.run(spec, settings, device="cpu")  # the original data: its own finished record
    assert work.counts == {"trained": 2, "attacked": 2}  # found, not redone
    assert (again.run_id, again.metrics) == (original.run_id, original.metrics)


def test_an_analysis_is_tied_to_the_data_it_reads(settings, tiny_backbone, tmp_path):
    from robench.analysis import AnalysisConfig, analysis_path

    spec, config = tiny_spec(tiny_backbone), AnalysisConfig(8, 1, 32, None)
    changed_dir = _copy_data(settings.data_dir, tmp_path / "changed")
    dev = changed_dir / "sst2" / "dev.tsv"
    dev.write_text(dev.read_text(encoding="utf-8") + "one more sentence .\t1\n", encoding="utf-8")
    changed = robench.core.paths.resolve_settings(changed_dir, settings.cache_dir, settings.results_dir)
    assert analysis_path(spec, config, changed) != analysis_path(spec, config, settings)
    same_dir = _copy_data(settings.data_dir, tmp_path / "same")  # the same rows in another place
    same = robench.core.paths.resolve_settings(same_dir, settings.cache_dir, settings.results_dir)
    assert analysis_path(spec, config, same) == analysis_path(spec, config, settings)  # keyed by content, not path


def test_advglue_file_is_part_of_the_run_id_but_not_the_checkpoint(settings, tiny_backbone, tmp_path):
    spec = tiny_spec(tiny_backbone)
    before = resolve_run(spec, settings)
    changed_dir = _copy_data(settings.data_dir, tmp_path / "changed")
    adv = json.loads((changed_dir / "advglue" / "dev.json").read_text())
    adv["sst2"] = adv["sst2"][:-1]
    (changed_dir / "advglue" / "dev.json").write_text(json.dumps(adv))
    after = resolve_run(spec, robench.core.paths.resolve_settings(changed_dir, settings.cache_dir,
                                                                settings.results_dir))
    assert after.spec.run_id != before.spec.run_id
    assert checkpoint_key(after) == checkpoint_key(before)


def test_empty_data_dir_fails_instead_of_returning_the_old_record(capsys, base, settings, tiny_backbone, tmp_path):
    assert main(["run", *base]) == 0
    capsys.readouterr()
    empty = tmp_path / "empty"
    empty.mkdir()
    base[base.index("--data-dir") + 1] = str(empty)
    assert "missing data file" in _one_error(capsys, "run", *base)


def test_fingerprint_cache_is_keyed_by_size_and_mtime_and_survives_damage(tmp_path, caplog, monkeypatch):
    import robench.core.hashing

    monkeypatch.setattr(robench.core.hashing, "SETTLE_SECONDS", 0)  # cache this new file (else racy: not cached)
    data, cache = tmp_path / "data", tmp_path / "cache"
    (data / "t").mkdir(parents=True)
    (data / "t" / "a.tsv").write_text("x\n")
    first = files_fingerprint(data, ["t/a.tsv"], cache)
    (cache / CACHE_FILE).write_bytes(b"\xff\x00 not json")
    with caplog.at_level(logging.WARNING, "robench"):
        assert files_fingerprint(data, ["t/a.tsv"], cache) == first
    assert "damaged hash cache" in caplog.text
    assert json.loads((cache / CACHE_FILE).read_text())  # rewritten
    os.utime(data / "t" / "a.tsv", ns=(1, 1))  # touched, same content: same fingerprint
    assert files_fingerprint(data, ["t/a.tsv"], cache) == first
    (data / "t" / "a.tsv").write_text("y\n")
    assert files_fingerprint(data, ["t/a.tsv"], cache) != first
    with pytest.raises(RobenchError, match="missing data file"):
        files_fingerprint(data, ["t/b.tsv"], cache)


# --- 2. non-finite and out-of-range hyperparameters ----------------------------------------

@pytest.mark.parametrize("args,message", [
    (["--lr", "inf"], "--lr must be finite"),
    (["--lr", "nan"], "--lr must be finite"),
    (["--lr", "-1"], "--lr must be positive"),
    (["--lr", "0"], "--lr must be positive"),
    (["--model", "freelb", "--param", "adv_lr=NaN"], "adv_lr must be finite"),
    (["--model", "freelb", "--param", "adv_lr=inf"], "adv_lr must be finite"),
    (["--model", "freelb", "--param", "adv_steps=2.5"], "adv_steps must be an integer"),
    (["--model", "smart", "--param", "smart_lambda=-Infinity"], "smart_lambda must be finite"),
    (["--model", "imbert", "--param", "im_gamma=nan"], "im_gamma must be finite"),
    (["--attack", "textfooler", "--attack-param", "similarity_threshold=nan"], "similarity_threshold must be finite"),
    (["--seed", "-1"], "--seed must be an integer from 0"),
    (["--seed", "99999999999"], "--seed must be an integer from 0"),
    (["--eval-seed", "-2"], "--eval-seed must be an integer from 0"),
    (["--eval-size", "0"], "--eval-size must be a positive integer"),
    (["--train-size", "-3"], "--train-size must be a positive integer"),
    (["--max-length", "4096"], "exceeds the 128 positions"),
    (["--model", "[/x]"], "unknown model '[/x]'"),  # rich markup in user text is printed as is
])
def test_bad_values_fail_before_any_work(capsys, base, settings, args, message):
    assert message in _one_error(capsys, "run", *base, *args)
    assert _nothing_trained(settings)


def test_every_registered_default_passes_the_checks():
    from robench.core.params import check_fields
    from robench.engine.attack import ATTACKS
    from robench.training.defense import MODELS

    for name in MODELS.names():
        check_fields(MODELS.get(name).params())
    for name in ATTACKS.names():
        if not name.startswith("textattack:"):
            check_fields(ATTACKS.get(name).params())
    check_fields(TrainConfig())


def test_train_config_validates_itself():
    with pytest.raises(ValueError, match="batch_size must be positive"):
        TrainConfig(batch_size=-4)
    with pytest.raises(ValueError, match="warmup_ratio must be between 0 and 1"):
        TrainConfig(warmup_ratio=1.5)
    with pytest.raises(ValueError, match="epochs must be an integer"):
        TrainConfig(epochs=1.5)
    for key, absurd in (("epochs", 2**32), ("batch_size", 2**32), ("lr", 1e308)):  # a sane upper end for each
        with pytest.raises(ValueError, match=f"{key} must be"):
            TrainConfig(**{key: absurd})


def test_nan_loss_stops_training_and_saves_nothing(settings, tiny_backbone, monkeypatch):
    from robench.training.objective import Objective

    calls = []

    def diverging(self, batch):
        calls.append(1)
        loss = self.model(**batch).loss * (float("nan") if len(calls) == 2 else 1.0)
        loss.backward()
        return loss.detach()

    monkeypatch.setattr(Objective, "step", diverging)
    with pytest.raises(RobenchError, match="training diverged: loss nan .*no checkpoint was saved"):
        robench.train(tiny_spec(tiny_backbone), settings, device="cpu")
    assert _nothing_trained(settings) and not list(settings.checkpoints_dir.glob("*.tmp-*"))


# --- 3. partial files ------------------------------------------------------------------------

def _interrupted_partial(store: RunStore, rows: list[dict], extra: str = "", made_with: str = "") -> None:
    """The first 10 rows as partial lines made under `made_with` (the run's hyperparameters), then `extra` (a
    JSON object line gets the same `made_with`, so that only its own fault can make it not belong)."""
    from dataclasses import fields

    with open(store.partial_path, "w", encoding="utf-8") as fh:
        for row in rows[:10]:
            fh.write(json.dumps({**{f.name: int(row[f.name]) if f.type == "int" else row[f.name]
                                    for f in fields(ExampleResult)}, "made_with": made_with}) + "\n")
        fh.write(extra.replace("{", f'{{"made_with": "{made_with}", ', 1) if extra.startswith("{") else extra)


@pytest.mark.parametrize("extra", [
    '{"index": 999, "label": 1, "original_text": "", "perturbed_text": "x", "original_prediction": -1, '
    '"perturbed_prediction": 1, "status": "failed"}\n',
    '{"index": 11, "label": 1, "original_text": "", "perturbed_text": "x", "original_prediction": -1, '
    '"perturbed_prediction": 1, "status": "bogus"}\n',
    '{"index": 11, "label": 1, "original_text": "", "perturbed_text": "not the data", "original_prediction": -1, '
    '"perturbed_prediction": 1, "status": "failed"}\n',
    '{"index": 0, "label": 0, "original_text": "", "perturbed_text": "x", "original_prediction": -1, '
    '"perturbed_prediction": 1, "status": "failed"}\n',  # index 0 twice
    "\x00\xff garbage\n",
    "not json\n",
])
def test_a_partial_file_that_does_not_belong_is_discarded(settings, tiny_backbone, caplog, extra):
    spec = tiny_spec(tiny_backbone)
    full = robench.run(spec, settings, device="cpu")
    store = RunStore(settings.runs_dir, full.run_id)
    rows = _rows(store)
    store.record_path.unlink()
    _interrupted_partial(store, rows, extra, hyperparameters_hash(full.hyperparameters))
    with caplog.at_level(logging.WARNING, "robench"):
        resumed = robench.run(spec, settings, device="cpu")
    assert "discarding" in caplog.text and "the attack starts over" in caplog.text
    assert "other hyperparameters" not in caplog.text  # discarded for its own fault
    assert resumed.metrics == full.metrics and _rows(store) == rows
    assert resumed.metrics["examples"] == 24 and resumed.timings["resumed_examples"] == 0


def test_a_binary_partial_file_is_discarded(settings, tiny_backbone, caplog):
    spec = tiny_spec(tiny_backbone)
    full = robench.run(spec, settings, device="cpu")
    store = RunStore(settings.runs_dir, full.run_id)
    rows = _rows(store)
    store.record_path.unlink()
    store.partial_path.write_bytes(bytes(range(256)) * 4)
    with caplog.at_level(logging.WARNING, "robench"):
        resumed = robench.run(spec, settings, device="cpu")
    assert "not UTF-8" in caplog.text and resumed.metrics == full.metrics and _rows(store) == rows


def test_a_partial_attack_made_under_other_hyperparameters_is_not_resumed(tmp_path, caplog):
    """A changed recipe default keeps the run id, so each partial line names the hyperparameters it was made
    with; a resume under others starts over (lines without the name, from before it existed, included)."""
    store = RunStore(tmp_path, "run")
    results = [ExampleResult(i, 1, f"t{i}", f"t{i}", 1, 1, "failed") for i in range(3)]
    for r in results[:2]:
        store.append(r, {"made_with": "aaaa"})
    assert list(store.load_partial(made_with="aaaa")) == [0, 1]
    with caplog.at_level(logging.WARNING, "robench"):
        assert list(store.load_partial(made_with="bbbb")) == []
    assert "attacked with other hyperparameters" in caplog.text and not store.partial_path.exists()
    store.append(results[2])  # no name: made before partial lines carried one
    assert list(store.load_partial(made_with="aaaa")) == []


def test_a_half_written_last_line_is_cut_so_the_next_result_is_kept(tmp_path):
    store = RunStore(tmp_path, "run")
    results = [ExampleResult(i, 1, f"t{i}", f"t{i}", 1, 1, "failed") for i in range(3)]
    store.append(results[0])
    with open(store.partial_path, "a", encoding="utf-8") as fh:
        fh.write('{"index": 1, "lab')  # killed mid-write
    assert list(store.load_partial()) == [0]
    store.append(results[1])
    store.append(results[2])
    assert list(store.load_partial()) == [0, 1, 2]


# --- 4. damaged checkpoints -----------------------------------------------------------------

def _damage_truncate(ckpt: Path) -> None:
    weights = ckpt / WEIGHTS
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


def _damage_flip(ckpt: Path) -> None:  # same size, other bytes: only the checksum can tell
    data = bytearray((ckpt / WEIGHTS).read_bytes())
    data[len(data) // 2] ^= 0xFF
    (ckpt / WEIGHTS).write_bytes(bytes(data))


@pytest.mark.parametrize("damage", [
    _damage_truncate, _damage_flip,
    lambda ckpt: (ckpt / "config.json").unlink(),
    lambda ckpt: (ckpt / RECORD).unlink(),
    lambda ckpt: (ckpt / RECORD).write_text("{"),
], ids=["truncated-weights", "flipped-byte", "no-config", "no-training-json", "bad-training-json"])
def test_a_damaged_checkpoint_is_retrained(settings, tiny_backbone, caplog, damage):
    spec = tiny_spec(tiny_backbone)
    first = robench.train(spec, settings, device="cpu")
    damage(first.checkpoint)
    with caplog.at_level(logging.WARNING, "robench"):
        again = robench.train(spec, settings, device="cpu")
    assert "is damaged" in caplog.text and not again.cached and again.checkpoint == first.checkpoint
    assert again.record["dev_accuracy"] == first.record["dev_accuracy"]  # same seed, same weights
    assert robench.train(spec, settings, device="cpu").cached  # and now it verifies
    assert robench.run(spec, settings, device="cpu").metrics["examples"] == 24


def test_orphan_temp_dirs_of_dead_processes_are_removed(settings, tiny_backbone):
    import socket

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    settings.checkpoints_dir.mkdir(parents=True)
    orphan = settings.checkpoints_dir / f"abc.tmp-{socket.gethostname()}-{dead.pid}"
    legacy = settings.checkpoints_dir / f"def.tmp-{dead.pid}"
    alive = settings.checkpoints_dir / f"ghi.tmp-{socket.gethostname()}-{os.getpid()}"
    other_host = settings.checkpoints_dir / f"jkl.tmp-elsewhere-{dead.pid}"
    for d in (orphan, legacy, alive, other_host):
        d.mkdir()
    robench.train(tiny_spec(tiny_backbone), settings, device="cpu")
    assert not orphan.exists() and not legacy.exists() and alive.exists() and other_host.exists()


def test_checkpoint_records_a_manifest_of_every_file(settings, tiny_backbone):
    from robench.core.hashing import file_sha256

    trained = robench.train(tiny_spec(tiny_backbone), settings, device="cpu")
    files = json.loads((trained.checkpoint / RECORD).read_text())["files"]
    assert {"config.json", WEIGHTS, "tokenizer_config.json"} <= set(files)
    for name, entry in files.items():
        assert entry["sha256"] == file_sha256(trained.checkpoint / name)
        assert entry["bytes"] == (trained.checkpoint / name).stat().st_size


@pytest.mark.parametrize("tamper", ["config", "tokenizer", "extra_file"])
def test_a_cached_checkpoint_with_edited_config_or_tokenizer_files_is_retrained(settings, tiny_backbone, tamper):
    spec = tiny_spec(tiny_backbone)
    first = robench.train(spec, settings, device="cpu")
    folder = first.checkpoint
    if tamper == "config":
        config = json.loads((folder / "config.json").read_text())
        config["hidden_act"] = "relu"
        (folder / "config.json").write_text(json.dumps(config))
    elif tamper == "tokenizer":
        vocab = folder / "vocab.txt"
        lines = vocab.read_text().splitlines()
        lines[1000], lines[1001] = lines[1001], lines[1000]
        vocab.write_text("\n".join(lines) + "\n")
    else:
        (folder / "special_tokens_map.extra.json").write_text("{}")
    again = robench.train(spec, settings, device="cpu")
    assert not again.cached  # not trusted: retrained from scratch
    assert robench.train(spec, settings, device="cpu").cached


# --- 5. names ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["../../x", "a/b", ".hidden", "[b]x", "", "x y"])
def test_unsafe_registry_names_are_refused(name):
    with pytest.raises(RobenchError, match="is not allowed"):
        Registry("models", "robench.models").register(name)


def test_unsafe_plugin_entry_points_are_skipped(monkeypatch, caplog):
    from importlib.metadata import EntryPoint

    import robench.core.registry as registry

    bad = EntryPoint("../../x", "robench_example_defense:EXAMPLE", "robench.models")
    monkeypatch.setattr(registry, "entry_points", lambda group: [bad])
    reg = Registry("models", "robench.models")
    with caplog.at_level(logging.WARNING, "robench"):
        names = reg.names()
    assert "../../x" not in names and "not allowed" in caplog.text


def test_family_arguments_are_safe_names(settings, tiny_backbone):
    with pytest.raises(RobenchError, match="is not allowed"):
        robench.run(tiny_spec(tiny_backbone, attack="transfer:../../x"), settings, device="cpu")


def test_run_ids_are_safe_file_names():
    run_id = RunSpec(task="../../x", model="a/b", attack="[c]").run_id
    assert "/" not in run_id and not run_id.startswith(".") and "[" not in run_id
