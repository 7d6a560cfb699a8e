"""`robench annotate`: a blinded export, a validated import, readings stored beside the records and shown only
for the records they belong to (robench.report.annotate, robench.report.readings)."""
from __future__ import annotations

import csv
import dataclasses
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from robench.cli import main
from robench.core.hashing import content_hash
from robench.core.records import RunRecord
from robench.core.types import ExampleResult
from robench.report.annotate import export_study, import_sheet, sheet_csv
from robench.report.annotate_sheet import COLUMNS, read_sheet
from robench.report.readings import Rate, readings_by_run, readings_path, summarize
from robench.report.stats import wilson_interval
from robench.runs.spec import RunSpec, TrainConfig
from robench.runs.store import RunStore

WORDS = ("good fine great bad dull long short warm cold bright dark sharp soft loud quiet calm wild neat odd "
         "rich").split()


def fake_run(runs_dir: Path, model: str, attack: str, seed: int = 0, n: int = 12, texts: str = "film") -> RunRecord:
    """A finished run: example i reads "the {texts} i is WORD", its adversarial text swaps WORD; even examples
    are successful, odd ones failed."""
    from robench.report.identity import _attack_defaults, _model_defaults

    spec = RunSpec(task="sst2", model=model, attack=attack, seed=seed, eval_size=n, train=TrainConfig())
    results = [ExampleResult(i, i % 2, f"the {texts} {i} is {WORDS[i]} .", f"the {texts} {i} is {WORDS[i + 1]} .",
                             i % 2, (1 - i % 2) if i % 2 == 0 else i % 2, "successful" if i % 2 == 0 else "failed",
                             num_words=5, words_perturbed=1) for i in range(n)]
    hyper = {"train": dataclasses.asdict(spec.train), "model": _model_defaults(model) or {},
             "attack": _attack_defaults(attack) or {}}
    record = RunRecord(run_id=spec.run_id, spec=spec.to_dict(), hyperparameters=hyper,
                       resources={"data": {"source": "local", "eval_examples": n,
                                           "eval_indices_hash": content_hash(list(range(n)))}},
                       metrics={"examples": n, "dev_accuracy": 0.8, "clean_accuracy": 1.0, "robust_accuracy": 0.5,
                                "attack_success_rate": 0.5},
                       timings={"train_seconds": 1.0}, checkpoint="", created=f"2026-01-01T00:0{seed}")
    RunStore(runs_dir, spec.run_id).finish(record, results)
    return record


@pytest.fixture
def results(tmp_path) -> tuple[Path, list[RunRecord]]:
    root = tmp_path / "results"
    runs = [fake_run(root / "runs", "bert", "textfooler"), fake_run(root / "runs", "a2t", "textfooler", texts="plot"),
            fake_run(root / "runs", "bert", "gradient-swap", texts="cast")]
    return root, runs


def fill(sheet: Path, key: Path, answer) -> Path:
    """The sheet filled by `answer(item, row, key)` -> the row's new values."""
    key_data = json.loads(key.read_text())
    rows = read_sheet(sheet)
    for row in rows:
        row.update(answer(row, key_data["items"][row["item"]], key_data["examples"]))
    filled = sheet.parent / "filled.csv"
    filled.write_text(sheet_csv(rows), encoding="utf-8")
    return filled


def honest(row, item, examples):
    """A reader who labels every text with its gold label, rates meaning 4 and fluent yes, except: the adversarial
    text of example 0 is labelled wrong, and pair of example 1 has meaning 2 and is not fluent."""
    e = examples[item["example"]]
    if "role" in item:
        wrong = item["role"] == "adversarial" and item["example"] == 0
        return {"label": [x for x in e["labels"] if x != e["gold"]][0] if wrong else e["gold"]}
    bad = item["example"] == 1
    return {"meaning": "2" if bad else "4", "fluent": "no" if bad else "yes"}


def test_export_import_round_trip(results, tmp_path):
    root, runs = results
    done = export_study([root], tmp_path / "study", n=4, seed=3)
    assert done.per_group == {("sst2", "textfooler", "budget=textdefender eval=12"): 4,
                              ("sst2", "gradient-swap", "budget=textdefender eval=12"): 4}
    rows = read_sheet(done.sheet)
    assert len(rows) == 8 * 3 and [r["part"] for r in rows] == ["1 label"] * 16 + ["2 pair"] * 8
    imported = import_sheet(fill(done.sheet, done.key, honest), done.key)
    pooled = summarize(r for p in imported.written for r in _stored(p))
    assert (pooled.n, pooled.label_kept.count, pooled.meaning_kept.count, pooled.fluent.count,
            pooled.valid.count, pooled.originals_as_gold.count) == (8, 7, 7, 7, 6, 8)
    assert {g[1] for g in imported.summaries} == {"textfooler", "gradient-swap"}
    textfooler = {g[3]: x.n for g, x in imported.summaries.items() if g[1] == "textfooler"}
    assert textfooler.pop("all models") == 4 == sum(textfooler.values()) and len(textfooler) == 2  # bert, a2t
    assert not any(g[1] == "gradient-swap" and g[3] == "all models" for g in imported.summaries)  # one model
    assert imported.written == [readings_path(root / "runs", done.study)]
    shown = readings_by_run(root / "runs", [r.run_id for r in runs])
    assert sum(len(v) for v in shown.values()) == 8
    assert import_sheet(fill(done.sheet, done.key, honest), done.key).written == imported.written  # re-import


def _stored(path: Path):
    from robench.report.readings import _parse

    return _parse(path)[1]


def test_export_samples_each_original_once_and_reports_short_settings(results, tmp_path):
    root, _ = results
    done = export_study([root], tmp_path / "study", n=10, seed=0)
    key = json.loads(done.key.read_text())
    originals = [e["original_text"] for e in key["examples"]]
    assert len(originals) == len(set(originals)) == 10 + 6  # textfooler: 12 (two runs); gradient-swap: 6
    assert done.short == [("sst2", "gradient-swap", "budget=textdefender eval=12")]
    assert done.per_group[("sst2", "textfooler", "budget=textdefender eval=12")] == 10


def test_export_is_reproducible_from_its_seed(results, tmp_path):
    root, _ = results
    a = export_study([root], tmp_path / "a", n=3, seed=7)
    b = export_study([root], tmp_path / "b", n=3, seed=7)
    c = export_study([root], tmp_path / "c", n=3, seed=8)
    assert a.sheet.read_text() == b.sheet.read_text() and a.study == b.study
    assert a.sheet.read_text() != c.sheet.read_text()


def test_the_reader_s_files_carry_no_key_information(results, tmp_path):
    root, runs = results
    done = export_study([root], tmp_path / "study", n=6, seed=1)
    seen = done.sheet.read_text() + done.form.read_text()
    key = json.loads(done.key.read_text())
    for secret in [r.run_id for r in runs] + [str(root), "textfooler", "gradient-swap", "bert", "a2t", "original",
                                                 "adversarial", "perturbed", "role", done.study]:
        assert secret not in seen, secret
    assert not any(p.name == "key.json" for p in done.sheet.parent.iterdir())
    rows = read_sheet(done.sheet)
    for part in ("1 label", "2 pair"):  # numbered in the order shown: the ids say nothing
        ids = [r["item"] for r in rows if r["part"] == part]
        assert ids == sorted(ids)
    # which text of a pair is the original: A as often as B, and not by the item order
    firsts = [item["adversarial_first"] for item in key["items"].values() if "adversarial_first" in item]
    assert 0 < sum(firsts) < len(firsts)
    roles = [key["items"][r["item"]]["role"] for r in rows if r["part"] == "1 label"]
    half = len(roles) // 2
    assert roles.count("original") == half and roles not in (["original", "adversarial"] * half,
                                                              ["adversarial", "original"] * half)


def test_the_form_is_self_contained_and_holds_the_sheet(results, tmp_path):
    root, _ = results
    done = export_study([root], tmp_path / "study", n=3, seed=1)
    html = done.form.read_text()
    assert not re.search(r"<[^>]*\s(?:src|href)\s*=|https?:|<link|@import|\burl\(", html)  # CSS url(), not JS URL
    data = json.loads(re.search(r'<script id="sheet-data" type="application/json">(.*?)</script>', html, re.S)[1])
    assert data["rows"] == read_sheet(done.sheet) and tuple(data["columns"]) == COLUMNS


def _node() -> str:
    """The node binary the form's script runs in (a test that needs it fails, naming the package, without it)."""
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.fail("this test runs the form's script in node: install nodejs (Debian package nodejs)",
                    pytrace=False)
    return node


def test_the_form_script_saves_the_same_csv(results, tmp_path):
    """The form's CSV writer (run in node) writes a filled sheet byte for byte as the sheet's writer does."""
    node = _node()
    root, _ = results
    done = export_study([root], tmp_path / "study", n=3, seed=1)
    html = done.form.read_text()
    script = re.search(r'<script id="sheet-csv">(.*?)</script>', html, re.S)[1]
    rows = read_sheet(done.sheet)
    for i, row in enumerate(rows):  # answers with the characters CSV must quote
        row.update(label='say "hi", ok' if i == 0 else "positive", meaning="3\n" if i == 1 else "4", fluent="yes")
    for row, text in zip(rows, ("=1+1", "'=quoted", "-", "@me", "+x", "\tx")):  # formulas, escaped alike
        row["text"] = text
    program = script + f"\nprocess.stdout.write(toCsv({json.dumps(COLUMNS)}, {json.dumps(rows)}));\n"
    out = subprocess.run([node, "-e", program], capture_output=True, text=True, check=True, timeout=60).stdout
    assert out == sheet_csv(rows)
    for i, code in enumerate(re.findall(r"<script>(.*?)</script>", html, re.S)):  # the page's script parses
        (tmp_path / f"form{i}.js").write_text(code)
        subprocess.run([node, "--check", str(tmp_path / f"form{i}.js")], check=True, timeout=60)


@pytest.mark.parametrize("edit, message", [
    (lambda rows: rows.append({**rows[0], "item": "T999"}), "T999'): no such item in this study's key"),
    (lambda rows: rows.pop(), "1 item(s) of the key missing from the sheet"),
    (lambda rows: rows.append(dict(rows[0])), "the item appears twice"),
    (lambda rows: rows[0].update(label="great"), "label 'great' is not one of negative, positive, unclear"),
    (lambda rows: rows[0].update(label=""), "no label"),
    (lambda rows: rows[-1].update(meaning="5"), "meaning '5' is not 1-4"),
    (lambda rows: rows[-1].update(meaning="0"), "meaning '0' is not 1-4"),
    (lambda rows: rows[-1].update(fluent="maybe"), "fluent 'maybe' is not yes or no"),
    (lambda rows: rows[-1].update(fluent=""), "no fluency rating"),
    (lambda rows: rows[0].update(text=rows[0]["text"] + " !"), "its text is not the key's"),
    (lambda rows: rows[-1].update(text_b=rows[-1]["text"]), "its texts are not the key's"),
])
def test_import_refuses_a_bad_sheet_with_one_line_and_writes_nothing(results, tmp_path, capsys, edit, message):
    root, _ = results
    done = export_study([root], tmp_path / "study", n=3, seed=1)
    filled = fill(done.sheet, done.key, honest)
    rows = read_sheet(filled)
    edit(rows)
    filled.write_text(sheet_csv(rows), encoding="utf-8")
    assert main(["annotate", "import", str(filled), "--key", str(done.key)]) == 2
    err = capsys.readouterr().err
    assert message in err and "nothing was imported" in err and "Traceback" not in err
    assert not (root / "runs" / "readings").exists()


def test_import_refuses_a_wrong_key_or_a_file_that_is_not_a_sheet(results, tmp_path, capsys):
    root, _ = results
    done = export_study([root], tmp_path / "study", n=3, seed=1)
    other = export_study([root], tmp_path / "other", n=3, seed=2)
    filled = fill(done.sheet, done.key, honest)
    assert main(["annotate", "import", str(filled), "--key", str(other.key)]) == 2
    assert "not the key's" in capsys.readouterr().err
    assert main(["annotate", "import", str(done.key), "--key", str(done.key)]) == 2
    assert "is not a rating sheet" in capsys.readouterr().err
    assert main(["annotate", "import", str(filled), "--key", str(filled)]) == 2
    assert "is not a key of `robench annotate export`" in capsys.readouterr().err
    assert main(["annotate", "import", str(filled), "--key", str(tmp_path / "none.json")]) == 2
    assert "no key" in capsys.readouterr().err


def test_export_refuses_bad_input_before_work(results, tmp_path, capsys):
    root, _ = results
    assert main(["annotate", "export", str(root), "--out", str(tmp_path / "s"), "--n", "0"]) == 2
    assert "--n 0" in capsys.readouterr().err
    assert main(["annotate", "export", str(tmp_path / "nothing"), "--out", str(tmp_path / "s")]) == 2
    assert "no runs directory" in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert main(["annotate", "export", str(root), "--out", str(tmp_path / "file")]) == 2
    assert "is a file" in capsys.readouterr().err
    assert main(["annotate", "export", str(root), "--out", str(tmp_path / "s"), "--n", "2"]) == 0
    assert main(["annotate", "export", str(root), "--out", str(tmp_path / "s"), "--n", "2"]) == 2
    assert "already holds a study" in capsys.readouterr().err


def test_readings_are_shown_only_for_the_record_they_belong_to(results, tmp_path):
    root, runs = results
    done = export_study([root], tmp_path / "study", n=4, seed=3)
    import_sheet(fill(done.sheet, done.key, honest), done.key)
    before = readings_by_run(root / "runs", [r.run_id for r in runs])
    assert before
    run_id = next(iter(before))
    record = next(r for r in runs if r.run_id == run_id)
    # the run re-run with other adversarial texts: its readings no longer apply
    spec = record.spec
    fake_run(root / "runs", spec["model"], spec["attack"], texts="other")
    after = readings_by_run(root / "runs", [r.run_id for r in runs])
    assert run_id not in after and set(after) == set(before) - {run_id}


def test_wilson_interval_arithmetic():
    # the table: TextFooler 37 and 7 of 40, gradient-swap 2 of 20, min_context_cos 1 of 20
    assert [Rate(c, n).text() for c, n in ((37, 40), (7, 40), (2, 20), (1, 20))] == \
        ["92% [80, 97] (37/40)", "18% [9, 32] (7/40)", "10% [3, 30] (2/20)", "5% [1, 24] (1/20)"]
    low, high = Rate(7, 40).interval
    assert low == pytest.approx(0.087454, abs=1e-6) and high == pytest.approx(0.319500, abs=1e-6)
    assert Rate(20, 20).interval == (wilson_interval(20, 20)[0], 1.0) and Rate(0, 20).interval[0] == 0.0
    assert Rate(0, 0).text() == "–"


def test_import_command_prints_the_summary(results, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    root, _ = results
    done = export_study([root], tmp_path / "study", n=4, seed=3)
    filled = fill(done.sheet, done.key, honest)
    assert main(["annotate", "import", str(filled), "--key", str(done.key)]) == 0
    out = capsys.readouterr().out
    assert "label kept" in out and "gradient-swap" in out and "wrote" in out


def test_the_import_table_says_once_what_every_model_shares():
    from robench.cli.annotate import short_models

    short, shared = short_models(["bert lr=1e-4 epochs=2", "imbert[im_layers=0] lr=1e-4 epochs=2", "all models"])
    assert short == {"bert lr=1e-4 epochs=2": "bert", "imbert[im_layers=0] lr=1e-4 epochs=2": "imbert[im_layers=0]",
                     "all models": "all models"} and shared == "lr=1e-4 epochs=2"
    assert short_models(["bert"]) == ({"bert": "bert"}, "")


def test_sheet_csv_reads_back(results, tmp_path):
    root, _ = results
    done = export_study([root], tmp_path / "study", n=2, seed=0)
    rows = list(csv.DictReader(io.StringIO(done.sheet.read_text())))
    assert tuple(rows[0]) == COLUMNS and all(r["label"] == r["meaning"] == r["fluent"] == "" for r in rows)


def test_readings_are_shown_by_show_and_on_the_leaderboard_and_run_pages(results, tmp_path, capsys, monkeypatch):
    from robench.report.leaderboard_page import write_html

    monkeypatch.setenv("COLUMNS", "250")
    root, runs = results
    done = export_study([root], tmp_path / "study", n=4, seed=3)
    import_sheet(fill(done.sheet, done.key, honest), done.key)
    read = readings_by_run(root / "runs", [r.run_id for r in runs])
    run_id = next(iter(read))
    expected = summarize(read[run_id])
    assert main(["show", run_id, "--results-dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"valid to a reader (all three): {expected.valid.text()}" in out and "label kept by a blind reader" in out
    page = write_html(root, tmp_path / "pages" / "leaderboard.html", run_pages=True)
    html = page.read_text()
    assert html.count('<span class="read"') == len({(r.spec["model"], r.spec["attack"]) for r in runs
                                                     if r.run_id in read})
    for rid, readings in read.items():  # one seed per row here: the cell's reading is its run's
        assert f"read valid {summarize(readings).valid.text()}" in html
    run_html = (tmp_path / "pages" / "runs" / f"{run_id}.html").read_text()
    assert "valid to a reader (all three)" in run_html
    unread = [r.run_id for r in runs if r.run_id not in read]
    for other in unread:
        assert "valid to a reader" not in (tmp_path / "pages" / "runs" / f"{other}.html").read_text()


def test_the_swap_audit_is_called_list_membership_not_validity():
    from robench.engine.audit import AUDIT_FORMAT
    from robench.report.validity import validity_facts

    audit = {"examples": 10, "swaps": 20, "antonym_example_rate": 0.1, "format": AUDIT_FORMAT,
             "rates": {"synonym": 0.9, "inflection": 0.05, "antonym": 0.05, "unlisted": 0.0}}
    facts = dict(validity_facts({"validity": audit}))
    assert facts["listed synonym swaps"] == "90.0%" and "synonym swaps" not in facts
    assert "not validity" in next(label for label in facts if label.startswith("swaps audited"))


def test_the_form_used_as_a_reader_would_saves_a_sheet_that_imports(results, tmp_path):
    """The form's script run in node on a minimal DOM (tests/data/form_dom.js): part 2 opens only once part 1 is
    complete and then locks part 1, the answers survive reopening the page, and the saved CSV is the sheet
    filled in."""
    node = _node()
    root, _ = results
    done = export_study([root], tmp_path / "study", n=3, seed=1)
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps({"label": "negative", "meaning": "3", "fluent": "no"}))
    dom = Path(__file__).parent / "data" / "form_dom.js"
    run = subprocess.run([node, str(dom), str(done.form), str(answers)], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["part2_hidden_at_start"] and report["open2_disabled_at_start"]
    assert not report["open2_disabled_when_part1_done"] and not report["part2_hidden_after_open"]
    assert report["part1_locked"] and report["reloaded_part2_open"]
    rows = read_sheet(done.sheet)
    for row in rows:
        row.update({"label": "negative"} if row["part"] == "1 label" else {"meaning": "3", "fluent": "no"})
    assert report["downloads"] == [sheet_csv(rows)] * 2
    saved = tmp_path / "saved.csv"
    saved.write_text(report["downloads"][0], encoding="utf-8")
    summaries = import_sheet(saved, done.key).summaries.values()
    n = sum(x.n for x in summaries)
    assert n == 6 and sum(x.meaning_kept.count for x in summaries) == n  # meaning 3 of 4 keeps it
    assert sum(x.fluent.count for x in summaries) == sum(x.valid.count for x in summaries) == 0


def test_the_import_table_keeps_its_headers_whole_at_80_columns(results, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    root, _ = results
    done = export_study([root], tmp_path / "study", n=4, seed=3)
    assert main(["annotate", "import", str(fill(done.sheet, done.key, honest)), "--key", str(done.key)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line for line in lines if line.split()[:2] == ["task", "attack"])
    assert header.split() == ["task", "attack", "setting", "model", "read", "label", "meaning", "fluent", "valid",
                              "gold"]
    assert all(len(line) <= 80 for line in lines if not line.startswith("wrote"))
