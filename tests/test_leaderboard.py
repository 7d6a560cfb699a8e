"""The leaderboard: one row per setting, intervals from the per-example CSVs, older records skipped,
the paired comparison with a baseline."""
import json

import pandas as pd
import pytest
from test_compare import fake_run

from robench.cli import main
from robench.report.leaderboard import load_records, write_leaderboard
from robench.report.stats import MIN_SEEDS, wilson_interval

SEEDS = tuple(range(MIN_SEEDS))  # enough matched seeds for a verdict


def test_runs_differing_in_eval_size_or_an_attack_parameter_are_separate_rows(tmp_path):
    runs = tmp_path / "runs"
    for seed in (0, 1):
        fake_run(runs, ["failed"] * 20, seed=seed, eval_size=20)
        fake_run(runs, ["failed"] * 10, seed=seed, eval_size=10)
        fake_run(runs, ["failed"] * 10, seed=seed, eval_size=10, attack_params={"k": 20})
    table, _, md = write_leaderboard(tmp_path)
    budget = "budget=textdefender"  # the budget setting is always named (robench.engine.budgets)
    assert list(table["setting"]) == [f"{budget} eval=10", f"{budget} eval=20", f"{budget} textfooler[k=20] eval=10"]
    assert list(table["seeds"]) == [2, 2, 2] and list(table["examples"]) == [10, 20, 10]
    assert f"| sst2 | bert | textfooler | minilm | full | {budget} eval=20 | 2 | 20 |" in md.read_text()


def test_all_correct_rows_have_the_wilson_interval_of_their_examples(tmp_path):
    for seed in (0, 1, 2):
        fake_run(tmp_path / "runs", ["failed"] * 30, seed=seed)
    table, csv_path, md = write_leaderboard(tmp_path)
    row = table.iloc[0]
    low, _ = wilson_interval(30, 30)
    assert (row["robust_accuracy_ci_low"], row["robust_accuracy_ci_high"]) == (pytest.approx(low), 1.0)
    assert (row["clean_accuracy_ci_low"], row["clean_accuracy_ci_high"]) == (pytest.approx(low), 1.0)
    header = csv_path.read_text().splitlines()[0].split(",")
    assert header[header.index("robust_accuracy_mean"):header.index("robust_accuracy_mean") + 4] == [
        "robust_accuracy_mean", "robust_accuracy_std", "robust_accuracy_ci_low", "robust_accuracy_ci_high"]
    assert f"100.0 [{100 * low:.1f}, 100.0]" in md.read_text() and "80.0 ± 0.0" in md.read_text()  # dev: no CSV


def test_the_leaderboard_is_reproducible_byte_for_byte(tmp_path):
    for seed in (0, 1):
        fake_run(tmp_path / "runs", ["failed"] * 7 + ["successful"] * 5 + ["skipped"] * 3, seed=seed)
    _, csv_path, md = write_leaderboard(tmp_path)
    first = csv_path.read_bytes(), md.read_bytes()
    write_leaderboard(tmp_path)
    assert (csv_path.read_bytes(), md.read_bytes()) == first


def test_older_format_records_are_skipped_and_reported(tmp_path, capsys):
    new = fake_run(tmp_path / "runs", ["failed"] * 10, seed=0)
    old = fake_run(tmp_path / "runs", ["failed"] * 10, seed=1)
    path = tmp_path / "runs" / f"{old.run_id}.json"
    data = json.loads(path.read_text())
    del data["format"]
    data.pop("manifest", None)  # format-1 records were written before records carried a manifest
    path.write_text(json.dumps(data))
    records = load_records(tmp_path / "runs")
    assert [r.run_id for r in records.current] == [new.run_id] and records.older == 1
    table, _, _ = write_leaderboard(tmp_path)
    assert list(table["seeds"]) == [1]
    assert main(["leaderboard", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"skipped 1 run record(s) of an older format in {tmp_path / 'runs'}" in out


def test_leaderboard_with_a_baseline(tmp_path, capsys):
    runs = tmp_path / "runs"
    for seed in SEEDS:
        fake_run(runs, ["failed"] * 60 + ["successful"] * 40, model="bert", seed=seed)
        fake_run(runs, ["failed"] * 80 + ["successful"] * 20, model="freelb", seed=seed)
        fake_run(runs, ["failed"] * 60 + ["successful"] * 40, model="smart", seed=seed)
    table, _, md = write_leaderboard(tmp_path, baseline="bert")
    diff = table.set_index("model")["robust_accuracy_diff"]
    assert pd.isna(diff["bert"]) and diff["freelb"] == pytest.approx(0.2) and diff["smart"] == 0.0
    text = md.read_text()
    assert "robust_accuracy vs bert" in text and "+20.0 [" in text and "p=1 Holm 1 |" in text
    assert text.count(" *") == 1 and "family of 2 comparisons" in text
    rows = table.set_index("model")
    assert rows.loc["freelb", "robust_accuracy_diff_verdict"] == "more robust than the baseline"
    assert rows.loc["freelb", "robust_accuracy_diff_p_holm"] >= rows.loc["freelb", "robust_accuracy_diff_p"]
    assert main(["leaderboard", "--results-dir", str(tmp_path), "--baseline", "bert"]) == 0


def test_too_few_seeds_are_marked_and_get_no_verdict(tmp_path):
    runs = tmp_path / "runs"
    for seed in SEEDS[:-1]:
        fake_run(runs, ["failed"] * 60 + ["successful"] * 40, model="bert", seed=seed)
        fake_run(runs, ["failed"] * 80 + ["successful"] * 20, model="freelb", seed=seed)
    table, _, md = write_leaderboard(tmp_path, baseline="bert")
    assert "(insufficient seeds)" in md.read_text() and " *" not in md.read_text()
    assert table.set_index("model").loc["freelb", "robust_accuracy_diff_verdict"] == "insufficient seeds"


def test_duplicate_records_of_a_seed_are_resolved_and_reported(tmp_path, capsys):
    """An explicit default parameter gave an older run another run id: one record per (setting, seed), the
    newest, and the leaderboard says which it set aside."""
    import dataclasses

    from robench.core.files import atomic_write

    runs = tmp_path / "runs"
    old = fake_run(runs, ["failed"] * 10, seed=0)
    fake_run(runs, ["failed"] * 10, seed=1)
    new = fake_run(runs, ["successful"] * 10, seed=0, attack_params={"k": 20})
    newer = dataclasses.replace(new, run_id=old.run_id + "-again", created="2026-02-01T00:00")
    atomic_write(runs / f"{newer.run_id}.json", json.dumps(dataclasses.asdict(newer)))
    (runs / f"{newer.run_id}.csv").write_bytes((runs / f"{new.run_id}.csv").read_bytes())
    (runs / f"{new.run_id}.json").unlink()
    newer_json = json.loads((runs / f"{newer.run_id}.json").read_text())
    newer_json["spec"] = json.loads((runs / f"{old.run_id}.json").read_text())["spec"]
    newer_json["hyperparameters"] = json.loads((runs / f"{old.run_id}.json").read_text())["hyperparameters"]
    atomic_write(runs / f"{newer.run_id}.json", json.dumps(newer_json))
    records = load_records(runs)
    assert records.duplicates == ((old.run_id, newer.run_id),)
    table, _, _ = write_leaderboard(tmp_path)
    assert list(table["seeds"]) == [2] and table["robust_accuracy_mean"].iloc[0] == pytest.approx(0.5)
    assert main(["leaderboard", "--results-dir", str(tmp_path)]) == 0
    assert f"resolved 1 duplicate record(s) of one setting and seed in {runs}" in capsys.readouterr().out


def test_page_shows_intervals_draws_them_and_marks_significant_differences(tmp_path):
    from robench.report.leaderboard_page import write_html

    runs = tmp_path / "runs"
    for seed in SEEDS:
        fake_run(runs, ["failed"] * 60 + ["successful"] * 40, model="bert", seed=seed)
        fake_run(runs, ["failed"] * 80 + ["successful"] * 20, model="freelb", seed=seed)
        fake_run(runs, ["failed"] * 61 + ["successful"] * 39, model="smart", seed=seed)
    table, _, _ = write_leaderboard(tmp_path, baseline="bert")
    html = write_html(tmp_path, tmp_path / "page.html", baseline="bert").read_text()
    rows = {r.model: r for r in table.itertuples()}
    for model, row in rows.items():  # each cell and each dot plot's point carry the row's 95% interval
        interval = f"[{100 * row.robust_accuracy_ci_low:.1f}, {100 * row.robust_accuracy_ci_high:.1f}]"
        assert f'<span class="v">{100 * row.robust_accuracy_mean:.1f}</span>' in html
        assert f'<span class="ci">{interval}</span>' in html
        assert f"{model} / TextFooler: {100 * row.robust_accuracy_mean:.1f}% {interval}</title>" in html
    assert html.count('class="whisker"') == 2 * 3 + 3  # scatter: two per point; dot plot: one per row
    assert html.count('class="sig up"') == 1 and 'class="sig down"' not in html  # freelb only; smart is noise
    assert html.count('class="sig same"') == 1 and ">baseline</span>" in html
    assert write_html(tmp_path, tmp_path / "again.html", baseline="bert").read_text() == html


def test_compare_command(tmp_path, capsys):
    runs = tmp_path / "runs"
    for seed in SEEDS:
        fake_run(runs, ["failed"] * 60 + ["successful"] * 40, model="bert", seed=seed)
        fake_run(runs, ["failed"] * 30 + ["successful"] * 70, model="freelb", seed=seed)
        fake_run(runs, ["failed"] * 60 + ["successful"] * 40, model="smart", seed=seed)
    assert main(["compare", "--results-dir", str(tmp_path), "--baseline", "bert"]) == 0
    out = capsys.readouterr().out
    assert "less robust than the baseline" in out and "not distinguishable from the baseline" in out
    assert "-30.0 [" in out
    assert main(["compare", "--results-dir", str(tmp_path), "--baseline", "imbert"]) == 2
    assert "no run records of the baseline model 'imbert'" in capsys.readouterr().err


def test_analyses_of_two_model_settings_are_not_merged(tmp_path):
    from dataclasses import asdict

    from robench.analysis import analysis_frame
    from robench.analysis.records import AnalysisRecord
    from robench.core.files import atomic_write

    for i, layers in enumerate(([0], [1, 2])):
        spec = {"task": "sst2", "model": "imbert", "attack": "advglue", "backbone": "minilm", "seed": 0,
                "train_size": 100, "model_params": {"im_layers": layers}}
        rec = AnalysisRecord(analysis_id=f"a{i}", run_id="r", spec=spec, config={}, metrics={"examples": 10},
                             cka_per_layer=[], resources={}, timings={}, checkpoint="x")
        atomic_write(tmp_path / "analysis" / f"a{i}.json", json.dumps(asdict(rec)))
    assert len(analysis_frame(tmp_path)) == 2


def test_a_real_run_and_its_analysis_join_on_the_checkpoint(settings, tiny_backbone):
    """`robench run` with the AdvGLUE replay (whose data fingerprint includes the AdvGLUE file) and `robench
    analyze` of the same spec: the analysis records its resolved spec and the training data's fingerprint, so
    it has the run's model setting and `leaderboard --with-analysis` fills the row."""
    from conftest import tiny_spec

    import robench
    from robench.analysis import analysis_frame, analyze

    run = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    train_data = run.resources["data"]["train_fingerprint"]
    assert run.spec["data_fingerprint"] != train_data  # the replay's file is in the run's fingerprint
    record = analyze(tiny_spec(tiny_backbone), settings, "cpu", 8, 2)
    assert record.spec["data_fingerprint"] == record.resources["data"]["train_fingerprint"] == train_data
    assert record.spec["model_params"] == {} and record.spec["train_size"] == run.spec["train_size"]
    table, _, _ = write_leaderboard(settings.results_dir, analysis_frame(settings.results_dir))
    assert list(table["analysis_seeds"]) == [1]
    assert table["shuffle_flip_rate_mean"].iloc[0] == pytest.approx(record.metrics["shuffle_flip_rate"])


def test_markdown_has_one_row_per_checkpoint_with_the_attacks_as_columns(tmp_path):
    """The AdvGLUE replay and a word-level attack of one model are columns of one row of the checkpoint table."""
    runs = tmp_path / "runs"
    for seed in (0, 1):
        fake_run(runs, ["failed"] * 6 + ["successful"] * 4, model="bert", seed=seed, attack="advglue", eval_size=None)
        fake_run(runs, ["failed"] * 2 + ["successful"] * 8, model="bert", seed=seed)
    table, _, md = write_leaderboard(tmp_path)
    assert table["model_setting_id"].nunique() == 1 and len(table) == 2
    by_checkpoint = md.read_text().split("## One row per setting")[0]
    rows = [line for line in by_checkpoint.splitlines() if line.startswith("| sst2 |")]
    assert len(rows) == 1 and "| advglue |" in by_checkpoint.splitlines()[2]
    assert rows[0].count("[") >= 2  # both attacks' accuracies, each with its interval
