"""The fourth probe's cases (issue 60), each re-run as described: packs, annotate, names, labels, --with-reference
and the messages. (The pack's fault injection: tests/test_pack_faults.py; the run id's resources: issue 61b.)"""
from __future__ import annotations

import csv
import errno
import io
import json
import os
from pathlib import Path

import pytest
from test_annotate import fake_run as annotated_run
from test_annotate import fill, honest
from test_compare import fake_run
from test_with_reference import protocol  # noqa: F401  (a fixture)

from robench.cli import main
from robench.core.errors import RobenchError
from robench.core.packed import EXAMPLES, READINGS_DIR, RECORDS, pack_results_dir, runs_to_read, unpack
from robench.core.records import find_record
from robench.core.text import from_spreadsheet_cell, markdown_cell, spreadsheet_cell
from robench.report.annotate import export_study, import_sheet
from robench.report.annotate_sheet import read_sheet


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, " ".join(out.err.split())


# ------------------------------------------------------------------ 7: a run missing from a pack or its copy

def test_a_run_missing_from_the_pack_or_its_cache_copy_is_named(tmp_path, caplog):
    records = [fake_run(tmp_path / "runs", ["failed", "successful"], seed=seed) for seed in range(3)]
    pack_results_dir(tmp_path, tmp_path / "cache")
    copy = unpack(tmp_path, tmp_path / "cache")
    gone = records[1].run_id
    (copy / f"{gone}.json").unlink()  # the cache copy lost a run: named, and written again
    assert unpack(tmp_path, tmp_path / "cache") == copy and (copy / f"{gone}.json").is_file()
    assert f"lacks run file(s) of {gone}" in caplog.text
    caplog.clear()
    lines = (tmp_path / RECORDS).read_text().splitlines()  # the pack lost a record: its orphan rows are named
    (tmp_path / RECORDS).write_text("\n".join(line for line in lines if gone not in line) + "\n")
    unpack(tmp_path, tmp_path / "cache")
    assert f"2 row(s) of run {gone}, which {RECORDS} lacks" in caplog.text
    caplog.clear()
    unpack(tmp_path, tmp_path / "cache")  # every read, not only the first
    assert gone in caplog.text


def test_a_half_there_pack_is_named_not_no_run_records(tmp_path, capsys):
    fake_run(tmp_path / "runs", ["failed", "successful"])
    pack_results_dir(tmp_path, tmp_path / "cache")
    (tmp_path / RECORDS).unlink()
    code, _, err = _cli(capsys, "leaderboard", "--results-dir", tmp_path)
    assert code == 2 and f"holds {EXAMPLES} but not {RECORDS}" in err and "restore" in err
    (tmp_path / EXAMPLES).unlink()
    fake_run(tmp_path / "runs", ["failed", "successful"])
    record = next((tmp_path / "runs").glob("*.json"))
    record.with_suffix(".csv").unlink()  # present but unusable
    code, _, err = _cli(capsys, "leaderboard", "--results-dir", tmp_path)
    assert code == 2 and "none of the 1 record file(s)" in err and "run `robench run` first" not in err


# ------------------------------------------------------------------ 2, 11, 12: annotate trusts no file

@pytest.fixture
def study(tmp_path):
    root = tmp_path / "results"
    annotated_run(root / "runs", "bert", "textfooler")
    done = export_study([root], tmp_path / "study", 4, 0)
    return root, done.sheet, done.key


def _key_with(key: Path, change) -> Path:
    data = json.loads(key.read_text())
    change(data)
    edited = key.with_name("edited.json")
    edited.write_text(json.dumps(data))
    return edited


@pytest.mark.parametrize("study_name", ["../RUN_ID", "/tmp/evil", "", "a/b", ".hidden", "x" * 65])
def test_a_keys_study_is_an_identifier_never_a_path(study, study_name):
    root, sheet, key = study
    filled = fill(sheet, key, honest)
    bad = _key_with(key, lambda d: d.update(study=study_name))
    before = sorted(p for p in root.rglob("*"))
    with pytest.raises(RobenchError, match="'study' must be an identifier"):
        import_sheet(filled, bad)
    assert sorted(p for p in root.rglob("*")) == before


@pytest.mark.parametrize("field, value, message", [
    ("labels", 5, "'labels' must be a list"), ("labels", "ab", "'labels' must be a list"),
    ("index", "278", "'index' must be a non-negative integer"), ("index", True, "'index'"),
    ("index", -1, "'index'"), ("run_id", "../x", "'run_id' must be a run id"), ("gold", "maybe", "'gold'"),
    ("original_text", None, "'original_text' must be a string"), ("runs_dir", "relative/runs", "'runs_dir'")])
def test_every_key_field_is_type_and_range_checked(study, field, value, message):
    _, sheet, key = study
    bad = _key_with(key, lambda d: d["examples"][0].update({field: value}))
    with pytest.raises(RobenchError, match=f"is not a key of `robench annotate export`.*{message}"):
        import_sheet(fill(sheet, key, honest), bad)


def test_item_fields_are_checked(study):
    _, sheet, key = study
    first = lambda d: next(iter(d["items"].values()))  # noqa: E731
    for change in (lambda d: first(d).update(example="0"), lambda d: first(d).update(role="judge"),
                   lambda d: d.update(seed="0")):
        with pytest.raises(RobenchError, match="is not a key"):
            import_sheet(fill(sheet, key, honest), _key_with(key, change))


def test_dev_zero_a_folder_and_a_huge_file_are_refused_before_reading(study, tmp_path, capsys):
    _, sheet, key = study
    for path, words in ((Path("/dev/zero"), "device or pipe"), (tmp_path, "is a folder")):
        code, _, err = _cli(capsys, "annotate", "import", path, "--key", key)
        assert code == 2 and words in err
        code, _, err = _cli(capsys, "annotate", "import", sheet, "--key", path)
        assert code == 2 and words in err
    big = tmp_path / "big.csv"
    with open(big, "wb") as fh:
        fh.truncate(65_000_000)
    code, _, err = _cli(capsys, "annotate", "import", big, "--key", key)
    assert code == 2 and "larger than 64 MB" in err


# ------------------------------------------------------------------ 4: formulas in the sheet, both ways

FORMULAS = ["=1+1", "+cmd", "-2 stars", "@SUM(A1)", "\tx", "'=already", "''+x", "-", "'plain", "plain"]


@pytest.mark.parametrize("text", FORMULAS)
def test_sheet_cells_round_trip_through_the_formula_escape(text):
    cell = spreadsheet_cell(text)
    assert from_spreadsheet_cell(cell) == text
    assert not (len(cell.lstrip("'")) > 1 and cell[0] in "=+-@\t\r")


def test_export_escapes_formula_texts_and_import_gives_them_back(tmp_path):
    root = tmp_path / "results"
    annotated_run(root / "runs", "bert", "textfooler", texts="x")
    for path in (root / "runs").glob("*.csv"):  # texts that start with =, +, - and @
        text = path.read_text().replace("the x ", "=the x ").replace("is good", "+is good")
        path.write_text(text)
        record = json.loads(path.with_suffix(".json").read_text())
        from robench.core.records import RunRecord, with_manifest

        fixed = with_manifest(RunRecord(**record), path.parent)
        path.with_suffix(".json").write_text(json.dumps(fixed.__dict__, indent=2))
    done = export_study([root], tmp_path / "study", 6, 0)
    raw = done.sheet.read_text()
    assert "\n=" not in raw and ",=" not in raw and ",+" not in raw and ",'=the x" in raw
    rows = read_sheet(done.sheet)
    assert any(r["text"].startswith("=the x") for r in rows)  # unescaped on the way in
    imported = import_sheet(fill(done.sheet, done.key, honest), done.key)
    assert imported.written


def test_a_semicolon_separated_sheet_imports(study):
    _, sheet, key = study
    filled = fill(sheet, key, honest)
    rows = list(csv.reader(io.StringIO(filled.read_text(), newline="")))
    buffer = io.StringIO()
    csv.writer(buffer, delimiter=";").writerows(rows)
    filled.write_text(buffer.getvalue())
    assert import_sheet(filled, key).written


# ------------------------------------------------------------------ 9, 13: readings where they are read

def test_readings_imported_into_a_packed_dir_reach_show_and_export_reads_packs(study, tmp_path, capsys, monkeypatch):
    root, sheet, key = study
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    pack_results_dir(root, tmp_path / "cache")
    written = import_sheet(fill(sheet, key, honest), key).written
    assert written == [root / READINGS_DIR / f"{json.loads(key.read_text())['study']}.json"]
    run_id = json.loads(key.read_text())["examples"][0]["run_id"]
    code, out, err = _cli(capsys, "show", run_id, "--results-dir", root)
    assert code == 0, err
    assert "blind reading (robench annotate)" in out
    done = export_study([root], tmp_path / "again", 2, 1)  # the documented `annotate export results/reference`
    assert done.per_group


def test_a_damaged_packed_readings_file_is_named_where_it_is_packed(tmp_path, caplog):
    from robench.report.readings import load_readings

    fake_run(tmp_path / "runs", ["failed", "successful"])
    (tmp_path / "runs" / READINGS_DIR).mkdir()
    (tmp_path / "runs" / READINGS_DIR / "s1.json").write_text("{not json")
    pack_results_dir(tmp_path, tmp_path / "cache")
    load_readings(runs_to_read(tmp_path, tmp_path / "cache"))
    assert str(tmp_path / READINGS_DIR / "s1.json") in caplog.text and "unpacked" not in caplog.text


@pytest.mark.parametrize("error", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_import_into_a_read_only_dir_names_the_fix_import_has(study, capsys, monkeypatch, error):
    """A read-only (or full) results directory: the fix named is one import has (no --results-dir)."""
    import robench.core.files as files

    root, sheet, key = study
    filled = fill(sheet, key, honest)

    def refuse(path, text):
        raise OSError(error, os.strerror(error), str(path))

    monkeypatch.setattr(files, "_atomic_write", refuse)
    code, _, err = _cli(capsys, "annotate", "import", filled, "--key", key)
    assert code == 2 and "make" in err and "writable" in err and "--results-dir" not in err


# ------------------------------------------------------------------ 6, 14: names in CSV and Markdown

def test_a_name_with_a_control_character_is_refused_at_the_api(settings):
    import robench

    for name in ("a\rb", "x\n=cmd", "bell\x07"):
        with pytest.raises(RobenchError, match="without control characters"):
            robench.evaluate(lambda texts: [[0.0, 1.0]] * len(texts), name=name, settings=settings)


HOSTILE = "x\r=HYPERLINK(\"http://e\")[click](javascript:alert(1))![i](http://e/p.png)"


def _hostile_record(runs: Path, seed: int) -> None:
    """A given checkpoint's finished run whose name (not part of its run id) is hostile, as a record written
    before names were checked holds it."""
    import dataclasses

    from test_compare import _result

    from robench.core.hashing import content_hash
    from robench.core.records import RunRecord
    from robench.runs.spec import RunSpec
    from robench.runs.store import RunStore

    spec = RunSpec(task="sst2", model=f"checkpoint:{HOSTILE}@abababab", attack="textfooler", seed=seed,
                   eval_size=200, checkpoint={"kind": "checkpoint", "location": "/x", "weights_sha256": "ab" * 32,
                                              "label_map": None})
    results = [_result(i, s) for i, s in enumerate(["failed", "successful"] * 3)]
    bert = fake_run(runs, ["failed", "successful"] * 3, seed=seed)
    record = RunRecord(run_id=spec.run_id, spec=spec.to_dict(), hyperparameters=bert.hyperparameters,
                       resources={"data": {"source": "local", "eval_examples": 6,
                                           "eval_indices_hash": content_hash(list(range(6)))}},
                       metrics=bert.metrics, timings={}, checkpoint="/x", created="2026-01-02T00:00:00")
    RunStore(runs, spec.run_id).finish(dataclasses.replace(record), results)


def test_names_in_records_cannot_split_csv_rows_or_inject_markdown(tmp_path):
    from robench.report.leaderboard import write_leaderboard

    for seed in range(2):
        _hostile_record(tmp_path / "runs", seed)
    _, csv_path, md_path = write_leaderboard(tmp_path, baseline="bert")
    for name in ("leaderboard.csv", "settings.csv"):
        text = (tmp_path / name).read_text()
        assert "HYPERLINK" in text and "\r" not in text
        assert not any(line.startswith(("=", "+", "-", "@")) for line in text.splitlines())
    markdown = md_path.read_text()
    assert "HYPERLINK" in markdown and "\r" not in markdown
    assert "](javascript" not in markdown and "![i](" not in markdown and "]\\(javascript" in markdown


def test_markdown_cell_breaks_link_and_image_markup_only():
    assert markdown_cell("[a](b) ![c](d) [e][f] [g]: h") == "[a]\\(b) !\\[c]\\(d) [e]\\[f] [g]\\: h"
    assert markdown_cell("a2t[a2t_attack=textfooler] 37.8 [31.6, 44.5]") == \
        "a2t[a2t_attack=textfooler] 37.8 [31.6, 44.5]"


# ------------------------------------------------------------------ 5: labels by the checkpoint's id2label

@pytest.mark.parametrize("file_name", ["sst2.csv", "reviews.csv"])
@pytest.mark.parametrize("labels", [("negative", "positive"), ("positive", "negative")])
def test_a_checkpoints_id2label_orders_its_labels_whatever_the_file_and_labels(tiny_backbone, tmp_path, file_name,
                                                                               labels):
    """One robench-trained checkpoint (its training.json says sst2) on one file, under both file names and both
    --labels orders: output i always predicts the label id2label names."""
    from test_own_model import save_classifier

    from robench.data.file_tasks import file_task_definition, task_from_definition
    from robench.runs.given import checkpoint_label_order

    checkpoint = save_classifier(tiny_backbone, tmp_path / "ckpt", {0: "negative", 1: "positive"})
    (checkpoint / "training.json").write_text(json.dumps({"task": "sst2"}))
    data = tmp_path / file_name
    data.write_text("text,label\ngood,positive\nbad,negative\n")
    task = task_from_definition(file_task_definition(f"csv:{data}", labels=list(labels)))
    order = checkpoint_label_order(str(checkpoint), task, None)
    assert [{0: "negative", 1: "positive"}[i] for i in order] == list(task.label_names)


# ------------------------------------------------------------------ 12, 13: show, paths, file names

def test_show_takes_the_records_file_name_and_refuses_an_overlong_id(tmp_path, capsys):
    record = fake_run(tmp_path / "runs", ["failed", "successful"])
    assert find_record(tmp_path / "runs", f"{record.run_id}.json").stem == record.run_id
    code, _, err = _cli(capsys, "show", "a" * 5000, "--results-dir", tmp_path)
    assert code == 2 and "is not a run id" in err and "Traceback" not in err


def test_an_existing_file_or_device_is_not_reported_as_missing(tmp_path, capsys):
    from robench.data.file_tasks import file_task_definition

    a_file = tmp_path / "data"
    a_file.write_text("")
    code, _, err = _cli(capsys, "run", "--model", "bert", "--data-dir", a_file, "--dry-run")
    assert code == 2 and "is not a folder" in err and "does not exist" not in err
    for path, words in (("/dev/null", "is a device or pipe"), (tmp_path, "is a directory")):
        with pytest.raises(RobenchError, match=words):
            file_task_definition(f"csv:{path}", labels=["a", "b"])
    (tmp_path / "task.toml").mkdir()
    with pytest.raises(RobenchError, match="task file .* is a directory"):
        file_task_definition(str(tmp_path / "task.toml"))


def test_a_newline_in_a_data_files_name_is_a_file_name(tmp_path):
    from robench.data.file_tasks import file_task_definition, task_from_definition

    data = tmp_path / "two\nlines.csv"
    data.write_text("text,label\ngood,positive\nbad,negative\n")
    task = task_from_definition(file_task_definition(f"csv:{data}", labels=["negative", "positive"]))
    assert task.label_names == ("negative", "positive") and "\n" not in task.name


# ------------------------------------------------------------------ 8, 10, 61: --with-reference

def test_with_reference_never_writes_into_your_runs_and_compares_every_seed(capsys, settings, where,
                                                                           protocol):  # noqa: F811
    """--output the results dir, or a folder with run records of its own: refused, nothing written; a checkpoint
    run at two seeds is compared seed against seeds (two rows, none dropped); your readings reach the board."""
    from test_with_reference import _csv

    from robench.report.readings import Reading, write_readings

    code, _, err = _cli(capsys, "run", "--checkpoint", protocol, "--protocol", "toy", "--seed", "0", "1", *where)
    assert code == 0, err
    mine = sorted(p.name for p in settings.runs_dir.iterdir())
    code, _, err = _cli(capsys, "leaderboard", "--with-reference", "toy", "--results-dir", settings.results_dir,
                        "--output", settings.results_dir)
    assert code == 2 and "is the results directory" in err
    other = settings.results_dir.parent / "other"
    fake_run(other / "runs", ["failed", "successful"])
    code, _, err = _cli(capsys, "leaderboard", "--with-reference", "toy", "--results-dir", settings.results_dir,
                        "--output", other)
    assert code == 2 and "holds run records of its own" in err
    assert sorted(p.name for p in settings.runs_dir.iterdir()) == mine and len(list((other / "runs").iterdir())) == 2

    code, out, err = _cli(capsys, "compare", "--with-reference", "toy", "--results-dir", settings.results_dir)
    assert code == 0, err
    text = " ".join(out.split())
    assert "1 vs 0 1 2 3 4" in text and "seed 1 vs 0 1 2 3 4" in text

    from robench.core.records import read_examples

    run, example = next((r, e) for r in map(json.loads, (p.read_text() for p in settings.runs_dir.glob("*.json")))
                        for e in read_examples(settings.runs_dir, r["run_id"]) if e.status == "successful")
    write_readings(settings.runs_dir, "s1", [Reading("s1", run["run_id"], example.index, example.original_text,
                                                     example.perturbed_text, "positive", "positive", "positive", 4,
                                                     True)], "2026-01-01T00:00:00")
    code, _, err = _cli(capsys, "leaderboard", "--with-reference", "toy", "--results-dir", settings.results_dir,
                        "--html", settings.results_dir / "board.html")
    assert code == 0, err
    assert (settings.results_dir / "with-toy" / "runs" / READINGS_DIR / "s1.json").is_symlink()
    assert "a blind reader accepted" in (settings.results_dir / "board.html").read_text()
    assert sorted(p.name for p in settings.runs_dir.iterdir()) == sorted([*mine, READINGS_DIR])
    rows = {r["model"]: r for r in _csv(settings.results_dir / "with-toy" / "leaderboard.csv")}
    assert len(rows) == 2  # one row for the checkpoint: both seeds' comparisons, the weakest shown and said so
    mine = next(v for k, v in rows.items() if k != "bert")
    assert "the weakest of 2 comparisons; each: robench compare" in mine["advglue.robust_accuracy_diff_verdict"]


def test_compare_names_each_row_it_cannot_compare_and_why(tmp_path, capsys):
    for seed in range(2):
        fake_run(tmp_path / "runs", ["failed", "successful"] * 3, seed=seed)
        fake_run(tmp_path / "runs", ["failed", "successful"] * 3, model="imbert", seed=seed)
        fake_run(tmp_path / "runs", ["failed", "successful"] * 3, model="imbert", seed=seed, attack="bert-attack")
    code, out, err = _cli(capsys, "compare", "--results-dir", tmp_path)
    assert code == 0, err
    assert "not compared: imbert bert-attack" in out and "bert has no runs at its setting" in out
