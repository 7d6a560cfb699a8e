"""The leaderboard: one row per checkpoint (`leaderboard.{csv,md}`, the page) and one per setting
(`settings.{csv,md}`), ranked, intervals from the per-example CSVs, older records skipped, the paired comparison
with a baseline."""
import json
import os

import pandas as pd
import pytest
from test_compare import fake_run

from robench.cli import main
from robench.report.leaderboard import load_records, write_leaderboard
from robench.report.stats import MIN_SEEDS, wilson_interval

SEEDS = tuple(range(MIN_SEEDS))  # enough matched seeds for a verdict


def test_runs_differing_in_eval_size_or_an_attack_parameter_are_separate_rows(tmp_path):
    """settings.{csv,md}: one row per setting; leaderboard.csv: the checkpoint's one row, a column group each."""
    runs = tmp_path / "runs"
    for seed in (0, 1):
        fake_run(runs, ["failed"] * 20, seed=seed, eval_size=20)
        fake_run(runs, ["failed"] * 10, seed=seed, eval_size=10)
        fake_run(runs, ["failed"] * 10, seed=seed, eval_size=10, attack_params={"k": 20})
    table, _, _ = write_leaderboard(tmp_path)
    settings = pd.read_csv(tmp_path / "settings.csv")
    budget = "budget=textdefender"  # the budget setting is always named (robench.engine.budgets)
    labels = [f"{budget} eval=10", f"{budget} eval=20", f"{budget} textfooler[k=20] eval=10"]
    assert list(settings["setting"]) == labels
    assert list(settings["seeds"]) == [2, 2, 2] and list(settings["examples"]) == [10, 20, 10]
    text = (tmp_path / "settings.md").read_text()
    assert f"| sst2 | bert | textfooler | minilm | full | {budget} eval=20 | 2 | 20 |" in text
    assert len(table) == 1 and table.loc[0, "seeds"] == 2  # one attack with three settings: named by label
    assert [table.loc[0, f"textfooler {label}.examples"] for label in labels] == [10, 20, 10]


def test_a_smaller_run_of_one_attack_sets_no_headline_number(tmp_path):
    """A 10-example smoke run of freelb beside both models' 40-example runs (issue 61): the board ranks on the
    larger runs; the smoke run (all broken) neither sets freelb's worst case or rank nor leaves bert, which has
    no such run, unranked."""
    runs = tmp_path / "runs"
    for seed in (0, 1):
        fake_run(runs, ["failed"] * 30 + ["successful"] * 10, model="bert", seed=seed, eval_size=40)
        fake_run(runs, ["failed"] * 20 + ["successful"] * 20, model="freelb", seed=seed, eval_size=40)
    fake_run(runs, ["successful"] * 10, model="freelb", seed=0, eval_size=10)
    table, _, _ = write_leaderboard(tmp_path)
    rows = table.set_index("model")
    assert list(table["model"]) == ["bert", "freelb"] and list(table["rank"]) == [1, 2]
    assert set(rows["rank_by"]) == {"worst_case_accuracy"}
    assert list(rows["rank_accuracy"]) == [0.75, 0.5] and rows.loc["freelb", "worst_case_accuracy_mean"] == 0.5


def test_the_field_s_setting_and_natural_are_separate_rows_and_columns(tmp_path):
    """One attack under `textdefender` and under `natural` (issue 43): never merged, each named by its setting."""
    runs = tmp_path / "runs"
    for seed in (0, 1):
        fake_run(runs, ["failed"] * 10, seed=seed)
        fake_run(runs, ["failed"] * 5 + ["successful"] * 5, seed=seed, attack_params={"budget": "natural"})
    table, _, md = write_leaderboard(tmp_path)
    settings = pd.read_csv(tmp_path / "settings.csv")
    assert sorted(settings["setting"]) == ["budget=natural eval=200", "budget=textdefender eval=200"]
    assert len(table) == 1
    assert table.loc[0, "textfooler budget=textdefender eval=200.robust_accuracy_mean"] == 1.0
    assert table.loc[0, "textfooler budget=natural eval=200.robust_accuracy_mean"] == 0.5
    header = (tmp_path / "leaderboard.md").read_text().splitlines()[0]
    assert "| textfooler budget=natural eval=200 | textfooler budget=textdefender eval=200 |" in header
    assert "budget=natural" in (tmp_path / "settings.md").read_text()


def test_all_correct_rows_have_the_wilson_interval_of_their_examples(tmp_path):
    for seed in (0, 1, 2):
        fake_run(tmp_path / "runs", ["failed"] * 30, seed=seed)
    table, csv_path, md = write_leaderboard(tmp_path)
    row = table.iloc[0]
    low, _ = wilson_interval(30, 30)
    assert (row["textfooler.robust_accuracy_ci_low"], row["textfooler.robust_accuracy_ci_high"]) == (
        pytest.approx(low), 1.0)
    assert (row["textfooler.clean_accuracy_ci_low"], row["textfooler.clean_accuracy_ci_high"]) == (
        pytest.approx(low), 1.0)
    for path, prefix in ((csv_path, "textfooler."), (tmp_path / "settings.csv", "")):
        header = path.read_text().splitlines()[0].split(",")
        at = header.index(f"{prefix}robust_accuracy_mean")
        assert header[at:at + 4] == [f"{prefix}robust_accuracy_{k}" for k in ("mean", "std", "ci_low", "ci_high")]
    for text in (md.read_text(), (tmp_path / "settings.md").read_text()):
        assert f"100.0 [{100 * low:.1f}, 100.0]" in text and "80.0 ± 0.0" in text  # dev: no per-example CSV


def test_the_leaderboard_is_reproducible_byte_for_byte(tmp_path):
    for seed in (0, 1):
        fake_run(tmp_path / "runs", ["failed"] * 7 + ["successful"] * 5 + ["skipped"] * 3, seed=seed)
    paths = [tmp_path / name for name in ("leaderboard.csv", "leaderboard.md", "settings.csv", "settings.md")]
    write_leaderboard(tmp_path)
    first = [p.read_bytes() for p in paths]
    write_leaderboard(tmp_path)
    assert [p.read_bytes() for p in paths] == first


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


def test_a_family_of_one_comparison_is_named_in_the_singular(tmp_path):
    for seed in SEEDS:
        fake_run(tmp_path / "runs", ["failed"] * 60 + ["successful"] * 40, model="bert", seed=seed)
        fake_run(tmp_path / "runs", ["failed"] * 80 + ["successful"] * 20, model="freelb", seed=seed)
    _, _, md = write_leaderboard(tmp_path, baseline="bert")
    assert "(exploratory: 1 comparison);" in md.read_text() and "1 comparisons" not in md.read_text()


def test_leaderboard_with_a_baseline(tmp_path, capsys):
    runs = tmp_path / "runs"
    for seed in SEEDS:
        fake_run(runs, ["failed"] * 60 + ["successful"] * 40, model="bert", seed=seed)
        fake_run(runs, ["failed"] * 80 + ["successful"] * 20, model="freelb", seed=seed)
        fake_run(runs, ["failed"] * 60 + ["successful"] * 40, model="smart", seed=seed)
    table, _, md = write_leaderboard(tmp_path, baseline="bert")
    diff = table.set_index("model")["textfooler.robust_accuracy_diff"]
    assert pd.isna(diff["bert"]) and diff["freelb"] == pytest.approx(0.2) and diff["smart"] == 0.0
    for text, column in ((md.read_text(), "textfooler vs bert"),
                         ((tmp_path / "settings.md").read_text(), "robust_accuracy vs bert")):
        # smart is bert exactly: every difference 0, so no variation and no verdict (issue 46), not "p=1 Holm 1"
        assert f"| {column} |" in text and "+20.0 [" in text and "+0.0 (no variation) |" in text
        assert text.count("(exploratory, 2): more robust than the baseline (D ") == 1
        assert "exploratory: 2 comparisons" in text
    rows = table.set_index("model")
    assert rows.loc["freelb", "textfooler.robust_accuracy_diff_verdict"] == "more robust than the baseline"
    assert rows.loc["freelb", "textfooler.robust_accuracy_diff_p_holm"] >= rows.loc["freelb",
                                                                                   "textfooler.robust_accuracy_diff_p"]
    settings = pd.read_csv(tmp_path / "settings.csv")
    assert "robust_accuracy_diff_verdict" in settings.columns  # one verdict column: the duplicate is gone
    assert not [c for c in [*settings.columns, *table.columns] if c.endswith("robust_accuracy_verdict")]
    assert main(["leaderboard", "--results-dir", str(tmp_path), "--baseline", "bert"]) == 0


def test_too_few_seeds_are_marked_and_get_no_verdict(tmp_path):
    runs = tmp_path / "runs"
    for seed in SEEDS[:-1]:
        fake_run(runs, ["failed"] * 60 + ["successful"] * 40, model="bert", seed=seed)
        fake_run(runs, ["failed"] * 80 + ["successful"] * 20, model="freelb", seed=seed)
    table, _, md = write_leaderboard(tmp_path, baseline="bert")
    assert "(exploratory, 1): insufficient seeds |" in md.read_text() and "(D " not in md.read_text()
    assert table.set_index("model").loc["freelb", "textfooler.robust_accuracy_diff_verdict"] == "insufficient seeds"


def test_duplicate_records_of_a_seed_are_resolved_and_reported(tmp_path, capsys):
    """An explicit default parameter gave an older run another run id: one record per (setting, seed), the
    newest, and the leaderboard says which it set aside."""
    import dataclasses

    from robench.core.files import atomic_write
    from robench.core.records import with_manifest

    runs = tmp_path / "runs"
    old = fake_run(runs, ["failed"] * 10, seed=0)
    fake_run(runs, ["failed"] * 10, seed=1)
    # the default k (50) given explicitly: another run id (each hashing from its own spec), the same setting
    new = fake_run(runs, ["successful"] * 10, seed=0, attack_params={"k": 50})
    newer = with_manifest(dataclasses.replace(new, created="2026-02-01T00:00"), runs)
    atomic_write(runs / f"{newer.run_id}.json", json.dumps(dataclasses.asdict(newer)))
    records = load_records(runs)
    assert records.duplicates == ((old.run_id, newer.run_id),)
    table, _, _ = write_leaderboard(tmp_path)
    assert list(table["seeds"]) == [2] and table["textfooler.robust_accuracy_mean"].iloc[0] == pytest.approx(0.5)
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
    for _, row in table.iterrows():  # each cell and each dot plot's point carry the row's 95% interval
        mean, low, high = (100 * row[f"textfooler.robust_accuracy_{k}"] for k in ("mean", "ci_low", "ci_high"))
        interval = f"[{low:.1f}, {high:.1f}]"
        assert f'<span class="v">{mean:.1f}</span>' in html
        assert f'<span class="ci">{interval}</span>' in html
        assert f"#{row['rank']} {row['model']} / TextFooler: {mean:.1f}% {interval}</title>" in html
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
    assert "less robust than the baseline" in out and "no variation" in out  # smart is bert exactly (issue 46)
    assert "-30.0 [" in out and "detectable" in out
    assert main(["compare", "--results-dir", str(tmp_path), "--baseline", "imbert"]) == 2
    assert "no run records of the baseline model 'imbert'" in capsys.readouterr().err


def test_analyses_of_two_model_settings_are_not_merged(tmp_path):
    from dataclasses import asdict

    from robench.analysis import analysis_frame
    from robench.analysis.spec import AnalysisRecord
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
    table, _, md = write_leaderboard(settings.results_dir, analysis_frame(settings.results_dir))
    assert list(table["analysis_seeds"]) == [1]
    assert table["shuffle_flip_rate_mean"].iloc[0] == pytest.approx(record.metrics["shuffle_flip_rate"])
    joined = pd.read_csv(settings.results_dir / "settings.csv")  # the per-setting table joins it too
    assert list(joined["analysis_seeds"]) == [1] and "shuffle_flip_rate" in md.read_text()


def test_markdown_has_one_row_per_checkpoint_with_the_attacks_as_columns(tmp_path):
    """The AdvGLUE replay and a word-level attack of one model are columns of one row of the checkpoint table."""
    runs = tmp_path / "runs"
    for seed in (0, 1):
        fake_run(runs, ["failed"] * 6 + ["successful"] * 4, model="bert", seed=seed, attack="advglue", eval_size=None)
        fake_run(runs, ["failed"] * 2 + ["successful"] * 8, model="bert", seed=seed)
    table, _, md = write_leaderboard(tmp_path)
    assert table["model_setting_id"].nunique() == 1 and len(table) == 1
    assert len(pd.read_csv(tmp_path / "settings.csv")) == 2
    lines = md.read_text().splitlines()
    rows = [line for line in lines if line.startswith("| sst2 |")]
    assert len(rows) == 1 and "| advglue | textfooler |" in lines[0]  # AdvGLUE first, as on the page
    assert rows[0].count("[") >= 2  # both attacks' accuracies, each with its interval


def test_checkpoints_are_ranked_as_the_page_ranks_them(tmp_path):
    """Within a task, by worst-case accuracy under attack, highest first; equal values share a rank (ties in
    order of dev accuracy, then model); the page shows the rows in the CSV's order with the CSV's ranks."""
    from robench.report.leaderboard_page import write_html

    runs = tmp_path / "runs"
    for seed in (0, 1):
        for model, failed in (("bert", 60), ("freelb", 80), ("smart", 60), ("imbert", 30)):
            fake_run(runs, ["failed"] * failed + ["successful"] * (100 - failed), model=model, seed=seed)
    table, _, md = write_leaderboard(tmp_path)
    assert list(table["model"]) == ["freelb", "bert", "smart", "imbert"] and list(table["rank"]) == [1, 2, 2, 4]
    assert set(table["rank_by"]) == {"worst_case_accuracy"}
    assert list(table["rank_accuracy"]) == list(table["worst_case_accuracy_mean"]) == [0.8, 0.6, 0.6, 0.3]
    assert [line.split(" | ")[1:3] for line in md.read_text().splitlines()[2:6]] == [
        ["1", "freelb"], ["2", "bert"], ["2", "smart"], ["4", "imbert"]]
    html = write_html(tmp_path, tmp_path / "page.html").read_text()
    legend = [html.index(f"#{rank} {model}</li>") for model, rank in zip(table["model"], table["rank"])]
    assert legend == sorted(legend)


def test_without_a_worst_case_checkpoints_are_ranked_by_their_lowest_accuracy_under_attack(tmp_path):
    runs = tmp_path / "runs"
    fake_run(runs, ["failed"] * 5 + ["successful"] * 5, model="bert", attack="advglue", eval_size=None)
    fake_run(runs, ["failed"] * 7 + ["successful"] * 3, model="freelb", attack="advglue", eval_size=None)
    table, _, _ = write_leaderboard(tmp_path)  # AdvGLUE replays another split: no worst case
    assert list(table["model"]) == ["freelb", "bert"] and list(table["rank"]) == [1, 2]
    assert set(table["rank_by"]) == {"lowest_robust_accuracy"}
    assert list(table["rank_accuracy"]) == list(table["advglue.robust_accuracy_mean"]) == [0.7, 0.5]


def test_a_checkpoint_still_missing_an_attack_has_no_worst_case_and_no_rank(tmp_path):
    """imbert has only TextFooler so far (70% under it) while bert has TextFooler and gradient-swap: imbert's
    minimum over the attacks it has would be a worst case over fewer attacks, so it gets none and no rank until
    its gradient-swap lands; bert keeps its worst case and rank, and the note says why imbert has none."""
    runs = tmp_path / "runs"
    for seed in (0, 1):
        fake_run(runs, ["failed"] * 6 + ["successful"] * 4, model="bert", seed=seed)
        fake_run(runs, ["failed"] * 5 + ["successful"] * 5, model="bert", seed=seed, attack="gradient-swap")
        fake_run(runs, ["failed"] * 7 + ["successful"] * 3, model="imbert", seed=seed)
    table, _, md = write_leaderboard(tmp_path)
    assert list(table["model"]) == ["bert", "imbert"] and table["rank"].tolist()[0] == 1
    assert pd.isna(table["rank"].iloc[1]) and pd.isna(table["worst_case_accuracy_mean"].iloc[1])
    assert table["worst_case_accuracy_mean"].iloc[0] == pytest.approx(0.5)
    assert set(table["rank_by"]) == {"worst_case_accuracy"}
    assert "no rank: a checkpoint without a result under some attack setting" in md.read_text()


def test_one_model_s_real_advglue_and_word_level_records_are_one_row_of_every_output(tmp_path):
    """bert's reference records (AdvGLUE and three word-level attacks, five seeds): one row in leaderboard.csv,
    leaderboard.md and the page; its attack settings are prefixed columns holding the per-setting values of
    settings.csv (one row per setting, as the long table always had)."""
    from robench.report.leaderboard_page import write_html
    from robench.report.reference import reference_runs_dir

    for path in reference_runs_dir("reference", tmp_path / "cache").glob("sst2-bert-*"):
        if path.suffix in (".json", ".csv"):
            (tmp_path / "runs").mkdir(exist_ok=True)
            (tmp_path / "runs" / path.name).write_bytes(path.read_bytes())
    _, csv_path, md_path = write_leaderboard(tmp_path)
    html = write_html(tmp_path, tmp_path / "page.html").read_text()
    table, settings = pd.read_csv(csv_path), pd.read_csv(tmp_path / "settings.csv")
    assert len(table) == 1 and len(settings) == 4 and settings["model_setting_id"].nunique() == 1
    assert [line for line in md_path.read_text().splitlines() if line.startswith("| sst2 |")] == [
        md_path.read_text().splitlines()[2]]
    assert html.count("<tr>") == 2  # the header, then the checkpoint
    row = table.iloc[0]
    assert (row["rank"], row["seeds"], row["model_setting_id"]) == (1, 5, settings["model_setting_id"].iloc[0])
    for attack in ("advglue", "textfooler", "bert-attack", "gradient-swap"):
        setting = settings[settings["attack"] == attack].iloc[0]
        shared = [c for c in settings.columns if f"{attack}.{c}" in table.columns]
        assert {"robust_accuracy_mean", "robust_accuracy_ci_low", "robust_accuracy_ci_high", "examples", "seeds",
                "attack_label", "setting_id"} <= set(shared)
        if attack != "advglue":  # the replay has no clean accuracy or success rate of its own
            assert {"clean_accuracy_mean", "clean_accuracy_ci_low", "attack_success_rate_mean",
                    "accuracy_drop_mean"} <= set(shared)
        for column in shared:
            assert row[f"{attack}.{column}"] == setting[column] or pd.isna(setting[column]), (attack, column)
        for column in ("dev_accuracy_mean", "worst_case_accuracy_mean", "worst_case_accuracy_ci_low",
                       "model_label", "backbone", "train_size"):
            assert row[column] == setting[column], column


def test_leaderboard_and_show_load_no_torch_datasets_or_scipy_stats(tmp_path):
    """Issue 45: `show` and `leaderboard` answer in seconds. Over runs that all drew one eval subset, the worst
    case joins them without reading the eval split (so no `datasets`, no torch) and the intervals take their
    quantiles from scipy.special; `show` loads no pandas either. Checked in a fresh process."""
    import subprocess
    import sys

    runs = tmp_path / "runs"
    for seed in (0, 1):  # two seeds (the t quantile), black-box and white-box attacks (the sign test); the labels
        for attack in ("textfooler", "gradient-swap", "bert-attack"):  # read each recipe's defaults
            fake_run(runs, ["failed"] * 12 + ["successful"] * 6 + ["skipped"] * 2, seed=seed, attack=attack,
                     eval_size=20)
    run_id = next(runs.glob("*textfooler*.json")).stem
    code = f"""
import sys
from robench.cli import main
assert main(["show", {run_id!r}, "--results-dir", {str(tmp_path)!r}, "--limit", "20"]) == 0
heavy = sorted({{"torch", "transformers", "datasets", "pandas", "scipy"}} & set(sys.modules))
assert not heavy, ("show", heavy)
assert main(["leaderboard", "--results-dir", {str(tmp_path)!r}]) == 0
heavy = sorted({{"torch", "transformers", "datasets", "scipy.stats"}} & set(sys.modules))
assert not heavy, ("leaderboard", heavy)
"""
    env = {k: v for k, v in os.environ.items() if k != "ROBENCH_DATA_DIR"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    cases = json.loads((tmp_path / "worstcase.json").read_text())
    assert [c["examples"] for c in cases] == [20, 20]  # both attacks joined on every example


def test_the_eval_split_is_read_only_when_runs_drew_different_subsets(tmp_path, monkeypatch):
    from robench.core.records import iter_records
    from robench.report import worstcase

    read = []
    monkeypatch.setattr(worstcase, "_split_texts", lambda *where: read.append(where))
    for attack in ("textfooler", "gradient-swap"):
        fake_run(tmp_path / "one", ["failed"] * 4, attack=attack, eval_size=4)
    worstcase.worst_cases(tmp_path / "one")
    assert read == []
    fake_run(tmp_path / "two", ["failed"] * 4, attack="textfooler", eval_size=4)
    fake_run(tmp_path / "two", ["failed"] * 6, attack="gradient-swap", eval_size=6)
    worstcase.worst_cases(tmp_path / "two")
    assert len(read) == 1  # one split, read once for both runs
    keys = worstcase.ExampleKeys()  # without the records to decide from: the split is read, as before
    keys.split(next(iter_records(tmp_path / "one")))
    assert len(read) == 2
