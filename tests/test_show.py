"""`robench show` at 80 columns, piped (issue 45): wrapped at words, edits marked `[[old -> new]]`; titles name the
model as the record does; `run` ends with a `next:` line."""
from __future__ import annotations

from robench.cli import main
from robench.core.records import RunRecord
from robench.core.types import ExampleResult
from robench.runs.spec import RunSpec
from robench.runs.store import RunStore

LONG = ("an exhilarating , gorgeously photographed and wonderfully acted portrait of a family coming apart at the "
        "seams , whose quietly devastating final act lingers long after the credits roll")


def _finished(settings, spec: dict) -> str:
    spec = RunSpec(**spec).to_dict()
    run_id = RunSpec(**spec).run_id  # a record's run id hashes from its spec, or reports refuse it
    results = [ExampleResult(0, 1, LONG, LONG.replace("gorgeously", "handsomely").replace("final act", "finale"),
                             1, 0, "successful", 12, 30, 2),
               ExampleResult(1, 1, "a fine film", "a film", 1, 0, "successful", 5, 3, 1),
               ExampleResult(2, 0, "", "a replayed dull film", 0, 0, "failed", 1, 4, 0)]
    metrics = {"clean_accuracy": 1.0, "robust_accuracy": 1 / 3, "attack_success_rate": 2 / 3}  # as the CSV gives
    RunStore(settings.runs_dir, run_id).finish(RunRecord(run_id, spec, {}, {}, metrics, {}, ""), results)
    return run_id


def test_show_piped_at_80_columns_wraps_at_words_and_marks_edits(capsys, settings, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    run_id = _finished(settings, {"task": "sst2", "model": "demo", "attack": "textfooler", "seed": 0,
                                  "backbone": "minilm"})
    assert main(["show", run_id, "--results-dir", str(settings.results_dir)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(map(len, lines)) <= 80 and not any(line != line.rstrip() for line in lines)
    assert "[[gorgeously -> handsomely]]" in out and "[[final act -> finale]]" in out and "[[fine -> ]] film" in out
    words = set(LONG.split()) | {"handsomely", "finale", "[[gorgeously", "handsomely]]", "[[final", "finale]]", "->"}
    first = lines.index(next(line for line in lines if line.startswith("#0 ")))
    body = lines[first + 1: lines.index("", first)]
    assert len(body) >= 3 and all(word in words for line in body for word in line.split())  # no broken word
    assert "a replayed dull film  (replayed: no original)" in out
    assert lines[0].startswith("demo × textfooler on sst2 (backbone minilm, seed 0): 2 successful, 1 failed")


def test_titles_name_a_checkpoint_as_its_record_does(settings):
    from robench.cli.common import run_title
    from robench.cli.runs import summary_table

    spec = {"task": "sst2", "model": "checkpoint:mymodel@b8ab3e18", "attack": "advglue", "seed": 0,
            "backbone": "bert", "checkpoint": {"kind": "checkpoint", "location": "/x/mymodel", "sha256": "b8ab3e18"}}
    assert run_title(spec) == "checkpoint:mymodel@b8ab3e18 × advglue on sst2"
    record = RunRecord("r", spec, {}, {}, {"examples": 8, "robust_accuracy": 0.5}, {}, "")
    assert str(summary_table(record).title) == "checkpoint:mymodel@b8ab3e18 × advglue on sst2: 8 examples"
    assert run_title({**spec, "checkpoint": None, "model": "bert"}) == \
        "bert × advglue on sst2 (backbone bert, seed 0)"


def test_the_run_summary_never_calls_a_difference_across_example_sets_an_accuracy_drop():
    """AdvGLUE's replay has no clean accuracy: its dev accuracy minus accuracy under attack compares two sets of
    examples, so the summary names it so, also for a record written when it was stored as `accuracy_drop`."""
    from rich.console import Console

    from robench.cli.runs import summary_table

    spec = {"task": "sst2", "model": "bert", "attack": "advglue", "seed": 0, "backbone": "minilm"}
    for metrics in ({"dev_accuracy": 0.84, "clean_accuracy": None, "robust_accuracy": 0.31, "accuracy_drop": None,
                     "dev_minus_robust": 0.53},
                    {"dev_accuracy": 0.84, "clean_accuracy": None, "robust_accuracy": 0.31, "accuracy_drop": 0.53}):
        console = Console(width=200, record=True)
        console.print(summary_table(RunRecord("r", spec, {}, {}, {"examples": 148, **metrics}, {}, "")))
        out = console.export_text()
        assert "Accuracy drop" not in out and "Dev accuracy - accuracy under attack (other examples) │ 53.00%" in out
    console = Console(width=200, record=True)
    console.print(summary_table(RunRecord("r", {**spec, "attack": "textfooler"}, {}, {},
                                          {"examples": 100, "clean_accuracy": 0.8, "robust_accuracy": 0.3}, {}, "")))
    assert "Accuracy drop (clean - under attack, same examples) │ 50.00%" in console.export_text()
