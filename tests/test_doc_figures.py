"""Every comparison statistic of docs/studies/reference.md regenerates from the packed records (studies/doc_figures.py),
and the replicated positive control's result (studies/control_replication.py) from its records."""
import shutil

import pytest
from study_scripts import load_study

from robench.core.packed import EXAMPLES, RECORDS

figures = load_study("doc_figures")


def test_the_reader_finds_each_labelled_statistic_and_skips_the_history():
    text = ("imbert − bert = −0.7 [−3.8, +2.4] points, p 0.58, detectable 4.6; claim p 0.0013, claim Holm p 0.014; "
            "Holm p 0.076 over 25; 36.1% and p 91% stay out.")
    assert figures.page_figures(text) == [
        ("interval", "−0.7 [−3.8, +2.4]"), ("p", "0.58"), ("detectable", "4.6"), ("claim p", "0.0013"),
        ("claim Holm p", "0.014"), ("Holm p", "0.076")]
    given = figures.Figures(intervals=[(-0.7, -3.8, 2.4)])
    given.by_label.update({"p": [0.576], "detectable": [4.6], "claim p": [0.00127], "claim Holm p": [0.0140],
                           "Holm p": [0.0763]})
    assert figures.stale(text, given) == []
    given.by_label["claim Holm p"] = [0.0127]  # over another family: the page's 0.014 is stale
    given.intervals = [(1.8, -8.4, 11.9)]
    assert figures.stale(text, given) == ["interval −0.7 [−3.8, +2.4]", "claim Holm p 0.014"]


def test_the_history_section_is_exempt(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("## A\n\np 0.5\n\n## History\n\np 0.9 [old]\n\n## B\n\nHolm p 1\n")
    assert figures.page_figures(figures.checked_text(page)) == [("p", "0.5"), ("Holm p", "1")]


def test_every_statistic_of_the_reference_study_regenerates_from_the_packed_records(shared_data, monkeypatch,
                                                                                    tmp_path):
    """The untrained-checkpoint rule reads the older records' dev splits, hence the data directory."""
    monkeypatch.setenv("ROBENCH_DATA_DIR", str(shared_data))
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    text = figures.checked_text()
    assert len(figures.page_figures(text)) >= 40  # the page's comparisons are read, not skipped
    stale = figures.stale(text, figures.records_figures())
    assert not stale, f"docs/studies/reference.md has figures the records do not give: {stale}"


def test_the_replicated_control_regenerates_from_its_records(shared_data, monkeypatch, tmp_path):
    folder = figures.ROOT / "results" / "control-replication"
    if not (folder / RECORDS).is_file():
        pytest.skip("the replication's records are not packed yet (results/preregistration/a2t-control.md)")
    monkeypatch.setenv("ROBENCH_DATA_DIR", str(shared_data))
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    for name in (RECORDS, EXAMPLES):
        shutil.copy(folder / name, tmp_path / name)
    load_study("control_replication").main(tmp_path)
    for name in ("confirmatory.md", "confirmatory.json"):
        assert (tmp_path / name).read_text() == (folder / name).read_text(), name
