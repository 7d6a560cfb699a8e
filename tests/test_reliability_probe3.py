"""The third fault and bad-input probe (issue 47): 18 defects, each guarded by a test named after it, and a
fault-injection test over every kind of cached artefact (one byte of its input edited: the cache is not served).

Silent wrong results (answers cached for other inputs, records aggregated unverified, tasks told apart by name),
crashes (long names, type-wrong records), formula injection in CSVs, and messages that name the wrong fault or
flag. Tiny random BERT or a constant function, seconds per case; records forged with robench's own hashing.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import tiny_spec
from test_reliability_probe import _classifier, _cli, _one_error

import robench
from robench.core.errors import RobenchError
from robench.core.records import RunRecord, with_manifest
from robench.runs.spec import RunSpec


def _constant(logits):
    return lambda texts: np.tile(np.asarray(logits, dtype=float), (len(texts), 1))


def _task_file(folder: Path, name: str, texts: list[str], train: bool = False) -> Path:
    """A task file named `name` whose eval (and replay, and with `train` train) file holds `texts`."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = "".join(f'"{t}",{"pos" if i % 2 else "neg"}\n' for i, t in enumerate(texts))
    (folder / "eval.csv").write_text("text,label\n" + rows, encoding="utf-8")
    extra = 'train = "eval.csv"\n' if train else ""
    (folder / "task.toml").write_text(f'name = "{name}"\neval = "eval.csv"\nreplay = "eval.csv"\n{extra}'
                                      'text_columns = "text"\nlabel_column = "label"\nlabels = ["neg", "pos"]\n',
                                      encoding="utf-8")
    return folder / "task.toml"


def _evaluated(settings, tmp_path, name: str = "fn", logits=(0.0, 1.0)) -> RunRecord:
    task = _task_file(tmp_path / f"task-{name}", "probe", ["a fine film", "a dull film", "a fine day", "a bad day"])
    return robench.evaluate(_constant(list(logits)), task=str(task), attack="advglue", name=name,
                            settings=settings, device="cpu")


def _forge(runs_dir: Path, run_id: str, spec: dict | None = None, metrics: dict | None = None,
           csv_text: str | None = None, manifest: bool = True, run_id_as: str | None = None) -> str:
    """A copy of run `run_id` with `spec` and `metrics` changed, under the run id its spec hashes to (or
    `run_id_as`), its CSV replaced by `csv_text`, resealed with a manifest unless `manifest` is False."""
    saved = json.loads((runs_dir / f"{run_id}.json").read_text())
    saved["spec"].update(spec or {})
    saved["metrics"].update(metrics or {})
    saved.pop("manifest", None)
    new_id = run_id_as or RunSpec.from_dict(saved["spec"]).run_id
    saved["run_id"] = new_id
    (runs_dir / f"{new_id}.csv").write_text(csv_text if csv_text is not None else
                                            (runs_dir / f"{run_id}.csv").read_text())
    record = RunRecord(**saved)
    if manifest:
        record = with_manifest(record, runs_dir)
    (runs_dir / f"{new_id}.json").write_text(json.dumps(dataclasses.asdict(record)))
    return new_id


def _dry_run_id(out: str) -> str:
    return json.loads(out[:out.index("\ncheckpoint:")])["run_id"]


# --- silent 1-3: a dry run answers for the files as they are now -------------------------------------------

def test_a_dry_run_reads_a_relative_task_path_in_the_folder_it_runs_in(capsys, where, tiny_backbone, tmp_path,
                                                                       monkeypatch):
    clf = _classifier(tiny_backbone, tmp_path / "clf")
    answers = []
    for folder, texts in (("one", ["a fine film", "a dull film"]), ("two", ["a bad day", "a good day"])):
        (tmp_path / folder / "data").mkdir(parents=True)
        rows = "".join(f"{t},{label}\n" for t, label in zip(texts, ("negative", "positive")))
        (tmp_path / folder / "data" / "x.csv").write_text("text,label\n" + rows)
        monkeypatch.chdir(tmp_path / folder)
        code, out, lines = _cli(capsys, "run", "--checkpoint", clf, "--task", "csv:data/x.csv", "--labels",
                                "negative,positive", "--attack", "textfooler", "--dry-run", "--no-estimate", *where)
        assert code == 0, lines
        answers.append(out)
    assert _dry_run_id(answers[0]) != _dry_run_id(answers[1])
    assert str(tmp_path / "two" / "data" / "x.csv") in answers[1] and str(tmp_path / "one") not in answers[1]


def test_a_dry_run_hashes_the_checkpoint_as_it_is_now(capsys, where, tiny_backbone, tmp_path):
    from safetensors.torch import load_file, save_file

    clf = _classifier(tiny_backbone, tmp_path / "clf")
    given = ["run", "--checkpoint", clf, "--attack", "advglue", "--dry-run", "--no-estimate", *where]
    code, first, lines = _cli(capsys, *given)
    assert code == 0, lines
    weights = load_file(clf / "model.safetensors")
    weights["classifier.weight"] = -weights["classifier.weight"]
    save_file(weights, clf / "model.safetensors", metadata={"format": "pt"})
    code, second, lines = _cli(capsys, *given)
    assert code == 0, lines
    assert _dry_run_id(first) != _dry_run_id(second)
    assert json.loads(first[:first.index("\ncheckpoint:")])["spec"]["checkpoint"] != \
        json.loads(second[:second.index("\ncheckpoint:")])["spec"]["checkpoint"]


def test_a_dry_run_does_not_call_a_record_with_an_edited_csv_finished(capsys, where, tiny_backbone, tmp_path):
    clf = _classifier(tiny_backbone, tmp_path / "clf")
    given = ["run", "--checkpoint", clf, "--attack", "advglue", "--eval-size", 8, *where]
    code, out, lines = _cli(capsys, *given)
    assert code == 0, lines
    record = Path(out.split("record: ")[1].split()[0])
    code, out, lines = _cli(capsys, *given, "--dry-run", "--no-estimate")
    assert "(finished)" in out
    record.with_suffix(".csv").write_text(record.with_suffix(".csv").read_text().replace("failed", "successful"))
    code, out, lines = _cli(capsys, *given, "--dry-run", "--no-estimate")
    assert code == 0 and "(to run)" in out and "(finished)" not in out, out


# --- silent 4: the speed measurement is keyed by the data, not the task's name ------------------------------------

def test_two_task_files_of_one_name_never_share_a_speed_measurement(settings, tiny_backbone, tmp_path):
    from robench.data.file_tasks import file_task_definition
    from robench.runs.resolve import resolve_run
    from robench.runs.speed import _cache_path

    paths = []
    for folder, words in (("short", 6), ("long", 400)):
        texts = [" ".join(["word"] * words) + f" {i}" for i in range(4)]
        definition = file_task_definition(str(_task_file(tmp_path / folder, "calib", texts, train=True)))
        spec = tiny_spec(tiny_backbone, task="calib", task_source=definition)
        paths.append(_cache_path(resolve_run(spec, settings), torch.device("cpu")))
    assert paths[0] != paths[1]


# --- silent 5: two task files of one name are two tasks ----------------------------------------------------

def test_two_task_files_of_one_name_are_ranked_as_two_tasks(settings, tmp_path):
    from robench.report.leaderboard import write_leaderboard

    for folder, texts in (("a", ["a fine film", "a dull film"]), ("b", ["a bad day", "a good day", "so so"])):
        robench.evaluate(_constant([0.0, 1.0]), task=str(_task_file(tmp_path / folder, "same", texts)),
                         attack="advglue", name="fn", settings=settings, device="cpu")
    table, _, _ = write_leaderboard(settings.results_dir)
    assert len(table) == 2 and table["task"].nunique() == 2
    assert all(t.startswith("same@") for t in table["task"]) and list(table["rank"]) == [1, 1]


# --- silent 6: records verified before they are aggregated -------------------------------------------------

def _board(settings, caplog) -> tuple[list[str], str]:
    from robench.report.leaderboard import load_records

    with caplog.at_level(logging.WARNING, "robench"):
        records = load_records(settings.runs_dir)
    return [r.run_id for r in records.current], caplog.text


@pytest.mark.parametrize("forgery,why", [
    (dict(metrics={"robust_accuracy": 0.99}, manifest=False), "per-example CSV gives"),
    (dict(metrics={"robust_accuracy": 1.7}), "not a number in [0, 1]"),
    (dict(csv="all successful"), "per-example CSV gives"),
    (dict(csv="header only"), "per-example CSV has no rows"),
    (dict(spec={"eval_seed": 3}, keep_id=True), "its spec hashes to run id"),
])
def test_leaderboard_skips_a_record_whose_metrics_or_id_do_not_verify(settings, tmp_path, caplog, forgery, why):
    good = _evaluated(settings, tmp_path, "good")
    bad = _evaluated(settings, tmp_path, "bad", logits=(1.0, 0.0))
    csv_path = settings.runs_dir / f"{bad.run_id}.csv"
    csv_text = {"all successful": csv_path.read_text().replace(",failed,", ",successful,"),
                "header only": csv_path.read_text().splitlines(keepends=True)[0]}.get(forgery.get("csv"))
    for suffix in (".json", ".csv"):
        os.rename(settings.runs_dir / f"{bad.run_id}{suffix}", tmp_path / f"original{suffix}")
    shutil.copy(tmp_path / "original.json", settings.runs_dir / f"{bad.run_id}.json")
    shutil.copy(tmp_path / "original.csv", settings.runs_dir / f"{bad.run_id}.csv")
    forged = _forge(settings.runs_dir, bad.run_id, spec=forgery.get("spec"), metrics=forgery.get("metrics"),
                    csv_text=csv_text, manifest=forgery.get("manifest", True),
                    run_id_as=bad.run_id if forgery.get("keep_id") else None)
    if forged != bad.run_id:
        for suffix in (".json", ".csv"):
            (settings.runs_dir / f"{bad.run_id}{suffix}").unlink()
    shown, warnings = _board(settings, caplog)
    assert shown == [good.run_id]
    assert f"skipping run record {forged}" in warnings and why in warnings


def test_show_refuses_a_record_that_does_not_verify(capsys, settings, tmp_path):
    record = _evaluated(settings, tmp_path)
    forged = _forge(settings.runs_dir, record.run_id, metrics={"robust_accuracy": 0.99}, manifest=False,
                    run_id_as=record.run_id)
    line = _one_error(capsys, "show", forged, "--results-dir", settings.results_dir)
    assert "does not verify" in line and "robust_accuracy" in line


# --- silent 7: a seed without a number is not counted --------------------------------------------------------

@pytest.mark.parametrize("value", [float("nan"), None])
def test_a_seed_without_robust_accuracy_is_skipped_and_not_counted(settings, tmp_path, caplog, value):
    from robench.report.leaderboard import leaderboard_tables, load_records

    record = _evaluated(settings, tmp_path)
    seed1 = _forge(settings.runs_dir, record.run_id, spec={"seed": 1})
    saved = json.loads((settings.runs_dir / f"{seed1}.json").read_text())
    saved["metrics"]["robust_accuracy"] = value
    saved.pop("manifest")  # a record without a manifest: only the recomputation can catch it
    (settings.runs_dir / f"{seed1}.json").write_text(json.dumps(saved))
    with caplog.at_level(logging.WARNING, "robench"):
        tables = leaderboard_tables(load_records(settings.runs_dir))
    assert f"skipping run record {seed1}" in caplog.text
    assert tables.settings["seeds"].tolist() == [1] and tables.checkpoints["seeds"].tolist() == [1]


# --- silent 8: grid names are compared after stripping ---------------------------------------------------

def test_a_grid_model_listed_twice_with_a_space_is_refused():
    from robench.grid.config import load_config

    with pytest.raises(RobenchError, match=r"models lists a name twice: \['bert'\]"):
        load_config({"tasks": ["sst2"], "models": ["bert", " bert"], "attacks": ["advglue"]})


# --- crashes -------------------------------------------------------------------------------------------------

def test_a_240_character_task_name_runs_with_a_bounded_run_id(settings, tmp_path):
    name = "t" * 240
    task = _task_file(tmp_path / "long", name, ["a fine film", "a dull film"])
    record = robench.evaluate(_constant([0.0, 1.0]), task=str(task), attack="advglue", name="fn",
                              settings=settings, device="cpu")
    assert record.spec["task"] == name and len(record.run_id) <= 120
    assert (settings.runs_dir / f"{record.run_id}.json").is_file()
    assert RunSpec(task="u" * 240).run_id != RunSpec(task="u" * 239 + "v").run_id  # the hash tells them apart


@pytest.mark.parametrize("value", ["0.4", True, [0.4]])
def test_a_type_wrong_record_is_skipped_not_a_crash(capsys, settings, tmp_path, value):
    _evaluated(settings, tmp_path, "good")
    bad = _evaluated(settings, tmp_path, "bad")
    _forge(settings.runs_dir, bad.run_id, metrics={"robust_accuracy": value}, run_id_as=bad.run_id)
    code, out, lines = _cli(capsys, "leaderboard", "--results-dir", settings.results_dir)
    assert code == 0, lines
    assert any(f"skipping run record {bad.run_id}" in line for line in lines)
    assert "callable:good" in out and "callable:bad" not in out


# --- security: formula injection in the CSVs -------------------------------------------------------------

def test_leaderboard_csvs_escape_cells_a_spreadsheet_would_run(settings, tmp_path):
    import csv

    from robench.report.leaderboard import write_leaderboard

    record = _evaluated(settings, tmp_path)
    formulas = ['=HYPERLINK("http://x","y")', "+cmd|' /C calc'!A0", "@SUM(1)", "-2+3"]
    for i, formula in enumerate(formulas):
        _forge(settings.runs_dir, record.run_id, spec={"model": formula, "seed": i + 1})
    write_leaderboard(settings.results_dir)
    for name in ("leaderboard.csv", "settings.csv"):
        with open(settings.results_dir / name, newline="") as fh:
            cells = [cell for row in csv.reader(fh) for cell in row]
        assert not [cell for cell in cells if len(cell) > 1 and cell.startswith(("=", "+", "@", "-"))
                    and not _number(cell)], name
        assert all(f"'{formula}" in cells for formula in formulas)


def _number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


# --- the seven messages ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("model", ["pgd", "a2t", "imbert+freelb"])
def test_an_unknown_model_parameter_lists_the_known_keys(capsys, base, model):
    line = _one_error(capsys, "run", *base, "--model", model, "--param", "foo=1", "--dry-run")
    assert "unknown hyperparameter(s) ['foo']" in line and "(known: none)" not in line
    assert "(known: " in line and len(line.split("(known: ")[1].split(",")) >= 3


def test_a_grid_model_parameter_lists_the_known_keys():
    from robench.grid.config import expand, load_config
    from robench.training.defense import resolve_model

    config = load_config({"tasks": ["sst2"], "models": ["pgd"], "attacks": ["advglue"],
                          "model_params": {"pgd": {"foo": 1}}})
    with pytest.raises(RobenchError, match=r"unknown hyperparameter\(s\) \['foo'\].*known: [a-z_]+, "):
        resolve_model("pgd").resolve_params(expand(config)[0].model_params)


def test_a_csv_with_a_byte_order_mark_loads(tmp_path):
    from robench.data.file_tasks import file_task_definition, task_from_definition
    from robench.data.loading import load_split

    data = tmp_path / "bom.csv"
    data.write_text("\ufefftext,label\na fine film,positive\na dull film,negative\n", encoding="utf-8")
    task = task_from_definition(file_task_definition(f"csv:{data}", labels=["negative", "positive"]))
    rows = load_split(task, "eval", None, "local")
    assert rows["text"] == ["a fine film", "a dull film"] and rows["label"] == [1, 0]


def test_a_broken_json_line_is_named_by_its_line_number(tmp_path):
    from robench.data.file_tasks import file_task_definition, task_from_definition
    from robench.data.loading import load_split

    data = tmp_path / "x.jsonl"
    lines = [json.dumps({"text": f"film {i}", "label": "pos"}) for i in range(3)] + ['{"text": "film 3", "lab']
    data.write_text("\n".join(lines + [json.dumps({"text": "film 4", "label": "neg"})]) + "\n")
    task = task_from_definition(file_task_definition(f"jsonl:{data}", labels=["neg", "pos"]))
    with pytest.raises(RobenchError, match=r"x.jsonl: line 4 is not a JSON object"):
        load_split(task, "eval", None, "local")


def test_labels_with_commas_have_a_label_map_that_works(tiny_backbone):
    from robench.data import TASKS
    from robench.runs.given import label_order, parse_label_map

    assert parse_label_map("0=good, really,1=bad") == {0: "good, really", 1: "bad"}
    task = dataclasses.replace(TASKS.get("sst2"), label_names=("bad, sadly", "good, really"))
    with pytest.raises(RobenchError) as caught:
        label_order(["LABEL_0", "LABEL_1"], task, None, "checkpoint x")
    suggested = str(caught.value).split("pass --label-map ")[1].split(" (label_map=")[0]
    import shlex

    (flag_value,) = shlex.split(suggested)  # quoted for the shell: one argument
    assert label_order(["LABEL_0", "LABEL_1"], task, parse_label_map(flag_value), "checkpoint x") == (0, 1)


def test_a_grid_seed_out_of_range_names_the_grid_key():
    from robench.grid.config import load_config

    with pytest.raises(RobenchError) as caught:
        load_config({"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "seeds": [2**40]})
    assert "seeds must be integers from 0 to" in str(caught.value) and "--seed" not in str(caught.value)


def test_compare_reads_a_read_only_results_dir(capsys, settings, tmp_path, monkeypatch):
    import robench.core.paths

    _evaluated(settings, tmp_path, "bert")
    real_access = os.access
    monkeypatch.setattr(robench.core.paths.os, "access",
                        lambda path, mode: False if mode & os.W_OK else real_access(path, mode))
    code, out, lines = _cli(capsys, "compare", "--baseline", "callable:bert", "--results-dir",
                            settings.results_dir)
    assert code == 0, lines


def test_compare_says_when_models_share_no_examples(capsys, settings, tmp_path, monkeypatch):
    # four examples cannot show the tiny model above chance (test_chance.py); the pairing is what is tested here
    monkeypatch.setattr("robench.report.untrained.untrained_runs", lambda *args, **kwargs: {})
    base = _evaluated(settings, tmp_path, "base")
    header, *rows = (settings.runs_dir / f"{base.run_id}.csv").read_text().splitlines()
    shifted = [str(int(row.split(",", 1)[0]) + 100) + "," + row.split(",", 1)[1] for row in rows]
    # another model at the baseline's setting, attacked on other example indices
    _forge(settings.runs_dir, base.run_id, spec={"model": "callable:other"},
           csv_text="\n".join([header, *shifted]) + "\n")
    code, out, lines = _cli(capsys, "compare", "--baseline", "callable:base", "--results-dir", settings.results_dir)
    assert code == 0, lines
    assert "no shared examples" in out
