"""The second probe (issue 26), defects 9-22: cached estimates, a full disk, bounded hyperparameters, grid
names, `show` and its paths, a bad masked LM, a 100,000-character text, terminal escapes, Markdown injection,
echoed file contents, data file messages, task TOML types, callables returning other than logits (1-8:
test_reliability_probe.py, whose helpers these share)."""
from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import tiny_spec
from test_reliability_probe import _classifier, _cli, _constant, _nothing_trained, _one_error, _task_with_replay

import robench
from robench.core.errors import RobenchError
from robench.runs.resolve import resolve_run

# --- 9. cached estimates ------------------------------------------------------------------------

@pytest.mark.parametrize("damage", [
    lambda saved: saved["speed"].update(seconds_per_step=float("nan")),
    lambda saved: saved["speed"].update(words_per_second=1e-300),
    lambda saved: saved["speed"].update(load_seconds="fast"),
    lambda saved: saved.update(speed={"seconds_per_step": 1.0}),
    lambda saved: saved.update(sha256="0" * 64),
    lambda saved: _resealed(saved, seconds_per_step=float("nan")),
    lambda saved: _resealed(saved, words_per_second=1e309),
    lambda saved: _resealed(saved, load_seconds="fast"),
    lambda saved: _resealed(saved, seconds_per_step=-1.0),
    lambda saved: saved.clear(),
    lambda saved: saved.pop("load"),
], ids=["nan", "edited-value", "string", "missing-fields", "bad-checksum", "nan-resealed", "inf-resealed",
        "string-resealed", "negative-resealed", "empty", "no-load"])
def test_an_invalid_cached_speed_measurement_is_not_used(tmp_path, damage):
    from dataclasses import asdict

    from robench.core.manifest import content_digest
    from robench.runs.speed import ModelSpeed, _cached_speed

    good = ModelSpeed(seconds_per_step=0.5, words_per_second=200.0, load_seconds=1.0)
    path = tmp_path / "speed.json"
    saved = {"speed": asdict(good), "sha256": content_digest(asdict(good)), "measured": time.time(),
             "load": {"average": 1.0, "cpus": 2}}
    path.write_text(json.dumps(saved))
    assert _cached_speed(path).speed == good
    damage(saved)
    path.write_text(json.dumps(saved))
    assert isinstance(_cached_speed(path), str)  # why it is not used: measured again
    path.write_bytes(b"\xff\x00")
    assert isinstance(_cached_speed(path), str)
    assert _cached_speed(tmp_path / "none.json") is None


def test_a_dry_run_with_an_invalid_cached_estimate_measures_again(capsys, base, settings, tiny_backbone, caplog):
    from robench.classifier.device import pick_device
    from robench.runs.spec import TrainConfig
    from robench.runs.speed import _cache_path

    resolved = resolve_run(tiny_spec(tiny_backbone, train=TrainConfig(epochs=1, batch_size=16, max_length=32)),
                           settings, attack=False)
    path = _cache_path(resolved, pick_device("cpu"))
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"speed": {"seconds_per_step": float("nan"), "words_per_second": "fast",
                                                "load_seconds": 1e308}, "sha256": "x"}))
    with caplog.at_level(logging.WARNING, "robench"):
        code, out, lines = _cli(capsys, "train", *base, "--lr", "5e-5", "--dry-run")
    assert code == 0, lines
    assert "measuring again" in caplog.text and str(path) in caplog.text
    estimate = next(line for line in out.splitlines() if line.startswith("estimate on"))
    assert "nan" not in estimate and "inf" not in estimate


def _resealed(saved: dict, **values) -> None:
    """Edit measured values and write a matching checksum: only the value checks can tell."""
    from robench.core.manifest import content_digest

    saved["speed"].update(values)
    saved["sha256"] = content_digest(saved["speed"])


# --- 10. a full disk -------------------------------------------------------------------------

def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if ".tmp" in p.name]


def test_a_full_disk_in_run_is_one_error_line_and_leaves_nothing_trusted(capsys, where, settings, tiny_backbone,
                                                                         tmp_path, monkeypatch):
    given = ["run", "--checkpoint", _classifier(tiny_backbone, tmp_path / "clf"), "--attack", "advglue", *where]
    monkeypatch.setattr(os, "fsync", _no_space)  # every durable write (records, partials, caches) fails
    code, _, lines = _cli(capsys, *given)
    assert code == 2 and lines[-1].startswith("robench: error: ") and "No space left on device" in lines[-1]
    assert not any("Traceback" in line for line in lines)
    assert not list(settings.runs_dir.glob("*.json")) and not _leftovers(settings.results_dir)
    monkeypatch.undo()
    code, _, lines = _cli(capsys, *given)  # space again: the run completes from a clean state
    assert code == 0, lines


def test_a_disk_that_fills_mid_attack_resumes_to_the_same_numbers(settings, tiny_backbone, monkeypatch, tmp_path):
    from robench.core.paths import resolve_settings

    spec = tiny_spec(tiny_backbone)
    full = robench.run(spec, settings, device="cpu")
    other = resolve_settings(settings.data_dir, settings.cache_dir, tmp_path / "other")
    real_fsync, appended = os.fsync, []

    def fills(fd):
        if os.readlink(f"/proc/self/fd/{fd}").endswith(".partial.jsonl"):
            appended.append(fd)
            if len(appended) > 5:
                _no_space()
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fills)
    with pytest.raises(RobenchError, match="No space left on device"):
        robench.run(spec, other, device="cpu")
    monkeypatch.setattr(os, "fsync", real_fsync)
    resumed = robench.run(spec, other, device="cpu")
    assert resumed.metrics == full.metrics and resumed.timings["resumed_examples"] >= 5


def test_a_full_disk_while_saving_a_checkpoint_leaves_no_checkpoint(capsys, base, settings, monkeypatch):
    from transformers import PreTrainedModel

    monkeypatch.setattr(PreTrainedModel, "save_pretrained", _no_space)
    code, _, lines = _cli(capsys, "train", *base)
    assert code == 2 and lines[-1].startswith("robench: error: ") and "No space left" in lines[-1], lines
    assert _nothing_trained(settings) and not list(settings.checkpoints_dir.glob("*.tmp-*"))


def test_a_full_disk_in_leaderboard_and_evaluate_is_a_clear_error(capsys, settings, tiny_backbone, monkeypatch):
    robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    monkeypatch.setattr(os, "fsync", _no_space)
    code, _, lines = _cli(capsys, "leaderboard", "--results-dir", settings.results_dir)
    assert code == 2 and lines[-1].startswith("robench: error: ") and "No space left" in lines[-1], lines
    assert not (settings.results_dir / "leaderboard.csv").exists() and not _leftovers(settings.results_dir)
    with pytest.raises(RobenchError, match="No space left on device"):
        robench.evaluate(_constant([0.0, 1.0]), task="sst2", attack="advglue", name="fn", settings=settings,
                         device="cpu")


# --- 11. bounded hyperparameters --------------------------------------------------------------

@pytest.mark.parametrize("model,param,message", [
    ("freelb", "adv_steps=1000000000", "adv_steps must be positive and at most 100"),
    ("smart", "smart_ascent_steps=100000", "smart_ascent_steps must be between 0 and 100"),
    ("imbert", "im_steps=1e9", "im_steps must be an integer"),
    ("imbert", "im_steps=100000", "im_steps must be between 0 and 100"),
])
def test_unbounded_hyperparameters_are_refused_at_dry_run_in_seconds(capsys, base, model, param, message):
    start = time.perf_counter()
    assert message in _one_error(capsys, "run", *base, "--model", model, "--param", param, "--dry-run")
    assert time.perf_counter() - start < 30


# --- 12. grid names ------------------------------------------------------------------------------

@pytest.mark.parametrize("name", ["a\\u0000b", "a\\nb", "../up", "", " "])
def test_a_grid_name_that_is_not_a_plain_name_fails_at_dry_run(capsys, settings, tiny_backbone, tmp_path, name):
    config = tmp_path / "grid.toml"
    config.write_text(f'name = "{name}"\ntasks = ["sst2"]\nmodels = ["bert"]\nattacks = ["advglue"]\n'
                      f'backbones = [{json.dumps(str(tiny_backbone))}]\n', encoding="utf-8")
    line = _one_error(capsys, "grid", config, "--dry-run", "--data-dir", settings.data_dir, "--cache-dir",
                      settings.cache_dir, "--results-dir", settings.results_dir)
    assert "name must be a plain name" in line and "\x00" not in line


# --- 13, 18, 22. show -----------------------------------------------------------------------------

def _shown_run(settings, tmp_path, texts: list[str]) -> str:
    record = robench.evaluate(_constant([0.0, 1.0]), task=str(_task_with_replay(tmp_path / "task", texts)),
                              attack="advglue", name="fn", settings=settings, device="cpu")
    return record.run_id


def test_show_html_to_a_directory_is_a_clear_error(capsys, settings, tmp_path):
    run_id = _shown_run(settings, tmp_path, ["a fine film", "a dull film"])
    line = _one_error(capsys, "show", run_id, "--results-dir", settings.results_dir, "--html", f"{tmp_path}/")
    assert "is a directory" in line


@pytest.mark.parametrize("how", ["absolute", "dotdot", "glob"])
def test_show_refuses_a_path_or_pattern_as_run_id(capsys, settings, tmp_path, how):
    run_id = _shown_run(settings, tmp_path, ["a fine film", "a dull film"])
    outside = tmp_path / "outside"
    outside.mkdir()
    for suffix in (".json", ".csv"):
        shutil.copy(settings.runs_dir / f"{run_id}{suffix}", outside / f"{run_id}{suffix}")
    given = {"absolute": str(outside / run_id), "dotdot": f"../../outside/{run_id}", "glob": "*"}[how]
    line = _one_error(capsys, "show", given, "--results-dir", settings.results_dir)
    assert "is not a run id" in line


def test_show_reads_a_read_only_results_dir(capsys, settings, tmp_path, monkeypatch):
    import robench.core.paths

    run_id = _shown_run(settings, tmp_path, ["a fine film", "a dull film"])
    real_access = os.access
    monkeypatch.setattr(robench.core.paths.os, "access",  # as a non-root user on a read-only mount sees it
                        lambda path, mode: False if mode & os.W_OK else real_access(path, mode))
    code, out, lines = _cli(capsys, "show", run_id, "--results-dir", settings.results_dir)
    assert code == 0 and "a fine film" in out, lines
    assert "is not writable" in _one_error(capsys, "leaderboard", "--results-dir", settings.results_dir)


# --- 14. a bad masked LM ------------------------------------------------------------------------

@pytest.mark.parametrize("attack,param", [("bert-attack", "masked_lm"), ("textattack:bert-attack", "mlm")])
def test_a_bad_masked_lm_fails_before_training_and_names_its_flag(capsys, base, settings, tmp_path, attack, param):
    line = _one_error(capsys, "run", *base, "--attack", attack, "--attack-param", f"{param}={tmp_path}/no-such-mlm")
    assert f"--attack-param {param}=" in line and "--backbone" not in line
    assert _nothing_trained(settings)


# --- 15. a 100,000-character text --------------------------------------------------------------

def test_a_100000_character_text_is_refused_before_a_word_level_attack(settings, tmp_path):
    rng = np.random.default_rng(0)
    long = " ".join(rng.choice(["fine", "dull", "film", "plot", "warm"], 20_000))[:100_000]
    start = time.perf_counter()
    with pytest.raises(RobenchError, match=r"1 text\(s\) the textfooler attack would search are longer than 2,000 "
                                           r"words \(row 1 \(20,000 words\)\)"):
        robench.evaluate(_constant([0.0, 1.0]), task=str(_task_with_replay(tmp_path / "t", ["a film", long])),
                         attack="textfooler", name="fn", settings=settings, device="cpu",
                         attack_params={"synonym_source": "neighbors"})
    assert time.perf_counter() - start < 30
    record = robench.evaluate(_constant([0.0, 1.0]), task=str(tmp_path / "t" / "task.toml"), attack="advglue",
                              name="fn", settings=settings, device="cpu")  # a replay reads it as the model does
    assert record.metrics["examples"] == 2


# --- 16. terminal escapes ------------------------------------------------------------------------

def test_show_never_writes_terminal_controls_from_texts(capsys, settings, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "300")
    texts = ["red \x1b[31mALERT\x1b[0m film", "link \x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ here",
             "bidi \u202eevil\u202c text", "bell \x07 and \x9b csi"]
    run_id = _shown_run(settings, tmp_path, texts)
    code, out, lines = _cli(capsys, "show", run_id, "--results-dir", settings.results_dir)
    assert code == 0, lines
    assert not any(c in out for c in "\x1b\x07\x9b\u202e\u202c")
    flat = "".join(out.split())
    assert "\\x1b[31mALERT" in flat and "\\u202eevil" in flat and "\\x07" in flat


def test_error_lines_never_carry_terminal_controls(capsys, base):
    line = _one_error(capsys, "run", *base, "--task", "csv:x\x1b[2Jy\u202e.csv")
    assert "\x1b" not in line and "\u202e" not in line and "x\\x1b[2Jy\\u202e" in line


# --- 17. Markdown injection ----------------------------------------------------------------------

def test_leaderboard_markdown_escapes_html_and_pipes_in_names(settings):
    name = '<img src=x onerror=alert(1)>|shift|'
    robench.evaluate(_constant([0.0, 1.0]), task="sst2", attack="advglue", name=name, settings=settings,
                     device="cpu")
    from robench.report.leaderboard import write_leaderboard

    _, _, md_path = write_leaderboard(settings.results_dir)
    text = md_path.read_text(encoding="utf-8")
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;\\|shift\\|" in text

    def cells(line: str) -> int:  # the columns of a Markdown table line; an escaped pipe is not a separator
        return line.replace("\\|", "").count("|")

    header, rows = None, 0
    for line in text.splitlines():
        if line.startswith("| task"):
            header = line
        elif "callable:" in line:
            rows += 1
            assert header is not None and cells(line) == cells(header), (line, header)  # columns in place
    assert rows >= 1


# --- 19. echoed file contents ----------------------------------------------------------------------

def test_data_file_errors_never_echo_more_than_a_short_excerpt(tmp_path):
    secret = "root:$6$SALTSALTSALT$hashhashhashhashhashhash:19000:0:99999:7:::"
    (tmp_path / "shadow").write_text(secret + "\ndaemon:*:19000:0:99999:7:::\n")
    (tmp_path / "task.toml").write_text('eval = "shadow"\nformat = "csv"\ntext_columns = "text"\n'
                                        'label_column = "label"\nlabels = ["neg", "pos"]\n')
    from robench.data.file_tasks import file_task_definition, task_from_definition
    from robench.data.loading import load_split

    with pytest.raises(RobenchError) as info:
        load_split(task_from_definition(file_task_definition(str(tmp_path / "task.toml"))), "eval", None, "local")
    line = str(info.value)
    assert "shadow" in line and "hashhash" not in line and "SALTSALTSALT$" not in line
    assert "root:$6$SALTSALTSALT"[:20] in line  # a short excerpt of the offending field at most


# --- 20. data file messages --------------------------------------------------------------------

@pytest.mark.parametrize("content,message", [
    (b"text,label\n\xff\xfe bad,pos\nfine,neg\n", "is not UTF-8 text (an invalid byte on line 2)"),
    (b"", "is empty (0 bytes)"),
    (None, "is a directory, not a file"),
    (b'text,label\n"good",pos,more\n"bad",neg\n', "data row 1 has 3 fields but the header has 2"),
])
def test_data_file_errors_name_their_cause(tmp_path, content, message):
    from robench.data.file_tasks import file_task_definition, task_from_definition
    from robench.data.loading import load_split

    path = tmp_path / "data.csv"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    with pytest.raises(RobenchError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_split(task_from_definition(file_task_definition(f"csv:{path}", labels=["neg", "pos"])), "eval", None,
                   "local")


def test_numeric_texts_are_texts(tmp_path):
    from robench.data.file_tasks import file_task_definition, task_from_definition
    from robench.data.loading import load_split

    (tmp_path / "data.csv").write_text("text,label\n12345,pos\n007,neg\n")
    (tmp_path / "data.jsonl").write_text('{"text": 12345, "label": "pos"}\n{"text": "abc", "label": "neg"}\n')
    csv_rows = load_split(task_from_definition(file_task_definition(f"csv:{tmp_path / 'data.csv'}",
                                                                    labels=["neg", "pos"])), "eval", None, "local")
    assert list(csv_rows["text"]) == ["12345", "007"] and list(csv_rows["label"]) == [1, 0]
    jsonl = load_split(task_from_definition(file_task_definition(f"jsonl:{tmp_path / 'data.jsonl'}",
                                                                 labels=["neg", "pos"])), "eval", None, "local")
    assert list(jsonl["text"]) == ["12345", "abc"]


def test_a_csv_file_of_another_format_names_the_real_cause(tmp_path):
    from robench.data.file_tasks import file_task_definition, task_from_definition
    from robench.data.loading import load_split

    (tmp_path / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\nuser:x:1000:1000:A, B,,:/home/u:/bin/sh\n")
    with pytest.raises(RobenchError, match="data row 1 has 4 fields but the header has 1"):
        load_split(task_from_definition(file_task_definition(f"csv:{tmp_path / 'passwd'}", labels=["a", "b"])),
                   "eval", None, "local")


# --- 21. task TOML types -------------------------------------------------------------------------

@pytest.mark.parametrize("line,message", [
    ('labels = "neg,pos"', "labels must be a list of label names"),
    ('label_column = ["label"]', "label_column must be a non-empty string, got a list"),
    ("text_columns = 3", "text_columns must be a column name or a list"),
    ("name = 5", "name must be a plain name"),
    ('name = "x\\u001b[31m"', "name must be a plain name"),
    ("eval = 1", "eval must be a non-empty string"),
    ("train = true", "train must be a non-empty string"),
    ('format = "xlsx"', "format must be one of"),
    ("labels = [1.5, 2.5]", "labels must be a list of label names"),
])
def test_every_task_file_key_is_type_checked(tmp_path, line, message):
    from robench.data.file_tasks import file_task_definition

    (tmp_path / "data.csv").write_text("text,label\nx,neg\n")
    keys = {"eval": 'eval = "data.csv"', "text_columns": 'text_columns = ["text"]',
            "label_column": 'label_column = "label"', "labels": 'labels = ["neg", "pos"]'}
    keys[line.split(" = ")[0]] = line
    (tmp_path / "task.toml").write_text("\n".join(keys.values()) + "\n")
    with pytest.raises(RobenchError, match=message):
        file_task_definition(str(tmp_path / "task.toml"))


# --- 22. callables returning strings -------------------------------------------------------------

@pytest.mark.parametrize("output,message", [
    (lambda n: [["neg", "pos"]] * n, "returned list values that are not numbers"),
    (lambda n: np.zeros((n, 3)), r"logits of shape \(.*, 3\)"),
    (lambda n: None, r"logits of shape \(\) for"),
])
def test_a_function_returning_other_than_logits_is_a_clear_error(settings, output, message):
    with pytest.raises(RobenchError, match=message):
        robench.evaluate(lambda texts: output(len(texts)), task="sst2", attack="advglue", name="bad",
                         settings=settings, device="cpu")
