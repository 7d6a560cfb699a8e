"""Every comparison statistic of the reference's studies (docs/studies/reference.md, results.md, gpu.md) regenerates
from the packed records (studies/doc_figures.py), and the replicated positive control's result
(studies/control_replication.py) from its records."""
import json
import shutil

import pytest
from study_scripts import load_study

from robench.core.packed import EXAMPLES, RECORDS

figures = load_study("doc_figures")


def test_the_reader_finds_each_labelled_statistic_and_skips_the_history():
    text = ("imbert − bert = −0.7 [−3.8, +2.4] points, p 0.58, detectable 4.6; claim p 0.0013, claim Holm p 0.014; "
            "Holm p 0.076 over 25, D 9.8; 36.1% and p 91% stay out.")
    assert figures.page_figures(text) == [
        ("interval", "−0.7 [−3.8, +2.4]"), ("p", "0.58"), ("detectable", "4.6"), ("claim p", "0.0013"),
        ("claim Holm p", "0.014"), ("Holm p", "0.076"), ("D", "9.8")]
    given = figures.Figures(intervals=[(-0.7, -3.8, 2.4)])
    given.by_label.update({"p": [0.576], "detectable": [4.6], "claim p": [0.00127], "claim Holm p": [0.0140],
                           "Holm p": [0.0763], "D": [9.84]})
    assert figures.stale(text, given) == []
    given.by_label["claim Holm p"] = [0.0127]  # over another family: the page's 0.014 is stale
    given.intervals = [(1.8, -8.4, 11.9)]
    assert figures.stale(text, given) == ["interval −0.7 [−3.8, +2.4]", "claim Holm p 0.014"]


def test_the_history_section_is_exempt(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("## A\n\np 0.5\n\n## History\n\np 0.9 [old]\n\n## B\n\nHolm p 1\n")
    assert figures.page_figures(figures.checked_text(page)) == [("p", "0.5"), ("Holm p", "1")]


def test_every_statistic_of_the_reference_studies_regenerates_from_the_packed_records(shared_data, monkeypatch,
                                                                                    tmp_path):
    """The untrained-checkpoint rule reads the older records' dev splits, hence the data directory."""
    monkeypatch.setenv("ROBENCH_DATA_DIR", str(shared_data))
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    given = figures.records_figures()
    texts = {page.name: figures.checked_text(page) for page in figures.PAGES}
    assert len(figures.page_figures(texts["reference.md"])) >= 40  # the page's comparisons are read, not skipped
    stale = {name: found for name, text in texts.items() if (found := figures.stale(text, given))}
    assert not stale, f"figures the records do not give (python studies/doc_figures.py): {stale}"


def test_the_replicated_control_regenerates_from_its_records(shared_data, monkeypatch, tmp_path):
    folder = figures.ROOT / "results" / "control-replication"
    monkeypatch.setenv("ROBENCH_DATA_DIR", str(shared_data))
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    for name in (RECORDS, EXAMPLES):
        shutil.copy(folder / name, tmp_path / name)
    load_study("control_replication").main(tmp_path)
    for name in ("confirmatory.md", "confirmatory.json"):
        assert (tmp_path / name).read_text() == (folder / name).read_text(), name
    from robench.core.packed import runs_to_read
    from robench.core.records import iter_records
    from robench.grid.config import expand, load_config

    def cell(spec: dict) -> str:  # the spec as the grid asks for it (the data's fingerprint is added at the run)
        return json.dumps({k: v for k, v in spec.items() if k != "data_fingerprint"}, sort_keys=True)

    registered = expand(load_config(figures.ROOT / "results" / "grid-control-replication.toml"))
    cells = {cell(spec.to_dict()) for spec in registered}
    records = list(iter_records(runs_to_read(tmp_path)))
    assert all(cell(r.spec) in cells for r in records)  # every record a registered cell
    assert len(records) == len(cells) == 10  # all ten: the registered result is on all five seeds
    assert json.loads((folder / "confirmatory.json").read_text())["complete"] is True


@pytest.mark.parametrize("seeds, verdict, complete", [((5, 6, 7, 8, 9), "confirmed: more robust", True),
                                                       ((5, 6, 7), "insufficient seeds", False)])
def test_the_registered_analysis(tmp_path, seeds, verdict, complete):
    """a2t right under attack on 10 more of 100 examples than bert at every seed: confirmed at the 5 registered
    seeds; at 3, no verdict, and the result says it is incomplete."""
    import numpy as np
    from test_compare import fake_run, statuses

    from robench.core.packed import pack_results_dir

    rng = np.random.default_rng(0)
    for seed in seeds:
        for model, robust in (("bert", 30), ("a2t", 40)):
            kept = robust + int(rng.integers(0, 3))
            fake_run(tmp_path / "runs", statuses(kept, 100 - kept, rng=rng), model=model, seed=seed, eval_size=100)
    pack_results_dir(tmp_path, tmp_path / "cache")
    result = load_study("control_replication").main(tmp_path)
    assert (result["verdict"], result["complete"], result["seeds"], result["family"]) == (verdict, complete,
                                                                                         list(seeds), 1)
    assert ("Incomplete" in (tmp_path / "confirmatory.md").read_text()) is not complete


def test_the_registered_analysis_before_any_pair(tmp_path):
    from test_compare import fake_run, statuses

    from robench.core.packed import pack_results_dir

    for seed in (7, 8):
        fake_run(tmp_path / "runs", statuses(30, 70), model="bert", seed=seed, eval_size=100)
    pack_results_dir(tmp_path, tmp_path / "cache")
    result = load_study("control_replication").main(tmp_path)
    assert result["verdict"] == "no a2t - bert pair yet" and result["finished"] == {"bert": [7, 8], "a2t": []}
    assert ("Incomplete: 0 of the 5 registered seeds paired** (finished runs: bert 7 8, a2t none)"
            in (tmp_path / "confirmatory.md").read_text())
