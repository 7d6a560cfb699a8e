"""The committed reference leaderboards (results/reference: the v3 protocol, results/grid-reference.toml;
results/reference-lowres: IM-BERT's low-resource claim, results/grid-reference-lowres.toml; results/reference-qnli:
its AdvGLUE claim on QNLI, results/grid-reference-qnli.toml) are regenerated bit for bit from their packed records
(`make reference`; the records as shipped with the package, `robench.report.reference`), every record is a cell
of its protocol and linked from the page, and every model and seed was attacked on the same examples."""
import shutil
from pathlib import Path

import pandas as pd
import pytest
from study_scripts import load_study

from robench.core.packed import EXAMPLES, RECORDS
from robench.core.records import read_examples
from robench.grid.config import expand, load_config
from robench.report.leaderboard import load_records, write_leaderboard
from robench.report.leaderboard_page import write_html
from robench.report.reference import SHIPPED, reference_runs_dir

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
REFERENCE = RESULTS / "reference"
PROTOCOLS = {"reference": "grid-reference.toml", "reference-lowres": "grid-reference-lowres.toml",
             "reference-qnli": "grid-reference-qnli.toml"}
GENERATED = ("leaderboard.csv", "leaderboard.md", "settings.csv", "settings.md", "worstcase.json", "worstcase.md")


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def test_the_shipped_protocols_are_the_committed_ones():
    assert sorted(SHIPPED) == sorted(PROTOCOLS)


# the published records whole, and the real lexicon (its relations built from the data dir) for the run pages
@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_reference_leaderboard_regenerates_from_its_records(name, tmp_path, capsys, monkeypatch, shared_data, cache):
    """leaderboard.{csv,md}, settings.{csv,md}, worstcase.{json,md} and compare.txt byte for byte; the page (not
    committed: generated on demand) links each run's page of adversarial examples, which links its record."""
    from robench.cli import main

    monkeypatch.setenv("ROBENCH_DATA_DIR", str(shared_data))  # the run pages mark unlisted swaps from its lists
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(cache))
    committed = RESULTS / name
    for packed in (RECORDS, EXAMPLES):
        shutil.copy(committed / packed, tmp_path / packed)
    table, *_ = write_leaderboard(tmp_path, baseline="bert", cache_dir=cache)
    for generated in GENERATED:
        assert (tmp_path / generated).read_bytes() == (committed / generated).read_bytes(), generated
    capsys.readouterr()
    main(["compare", "--baseline", "bert", "--results-dir", str(tmp_path)])
    assert capsys.readouterr().out == (committed / "compare.txt").read_text(encoding="utf-8")
    page = write_html(tmp_path, tmp_path / "site" / "leaderboard.html", baseline="bert", table=table,
                      cache_dir=cache, run_pages=True).read_text(encoding="utf-8")
    records = load_records(reference_runs_dir(name, cache)).current
    assert page.count('href="runs/') == len(records) and page.count("<tr>") == 1 + len(table)
    for rec in records:  # the page links each run's page of adversarial examples, which links its record
        assert f'href="runs/{rec.run_id}.html"' in page
        run_page = (tmp_path / "site" / "runs" / f"{rec.run_id}.html").read_text(encoding="utf-8")
        assert f'{rec.run_id}.json"' in run_page


@pytest.mark.integration  # the published records whole
@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_every_reference_record_is_a_protocol_cell(name, cache):
    records = load_records(reference_runs_dir(name, cache))
    assert records.older == 0 and records.current
    protocol = expand(load_config(RESULTS / PROTOCOLS[name]))
    cells = {_cell(s.to_dict()): s.model_params for s in protocol}
    seen = set()
    for rec in records.current:
        cell = _cell(rec.spec)
        assert cell in cells and cell not in seen, rec.run_id
        assert cells[cell].items() <= _comparable(rec.spec["model_params"]).items(), rec.run_id
        seen.add(cell)


@pytest.mark.integration  # the published records whole
@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_every_model_and_seed_was_attacked_on_the_same_examples(name, cache):
    """Paired comparisons need it: per attack (and training size), every record's examples are the same dev
    sentences (the whole AdvGLUE split; eval_seed 0's subset for the word-level attacks)."""
    runs = reference_runs_dir(name, cache)
    examples: dict[tuple, dict[str, tuple]] = {}
    for rec in load_records(runs).current:
        key = (rec.spec["attack"], rec.spec["train_size"])
        examples.setdefault(key, {})[rec.run_id] = tuple(sorted(r.index for r in read_examples(runs, rec.run_id)))
    for key, per_run in examples.items():
        assert len(set(per_run.values())) == 1, key
        size = 148 if key[0] == "advglue" else {"reference": 300, "reference-lowres": 100}[name]
        assert len(next(iter(per_run.values()))) == size, key


@pytest.mark.parametrize("name", sorted(PROTOCOLS))
def test_one_model_setting_per_checkpoint_across_advglue_and_the_word_level_attacks(name):
    """Each checkpoint's AdvGLUE rows and word-level rows share its model setting, so leaderboard.csv,
    leaderboard.md and the page have one row per checkpoint setting (model x training size), and the AdvGLUE
    rows of settings.csv carry the worst case of the same checkpoints where the word-level attacks are done."""
    committed = RESULTS / name
    settings = pd.read_csv(committed / "settings.csv")
    checkpoint = ["model", "train_size"]
    assert settings.groupby(checkpoint)["model_setting_id"].nunique().eq(1).all()
    table = pd.read_csv(committed / "leaderboard.csv")
    assert len(table) == len(table.groupby(checkpoint)) == len(settings.groupby(checkpoint))
    ranks = table["rank"].dropna().tolist()
    assert ranks == sorted(ranks) and table["rank"].iloc[len(ranks):].isna().all()  # the unranked come last
    complete = settings.groupby(checkpoint)["attack"].transform("nunique").eq(4)  # advglue + the three
    if complete.any():
        assert settings.loc[complete, "worst_case_accuracy_mean"].notna().all()
    tasks = tuple(f"| {task} |" for task in table["task"].unique())
    rows = [line for line in (committed / "leaderboard.md").read_text().splitlines() if line.startswith(tasks)]
    assert len(rows) == len(table)  # the page too: test_reference_leaderboard_regenerates_from_its_records


def _cell(spec: dict) -> tuple:
    keys = ("task", "model", "attack", "backbone", "seed", "train_size", "eval_size", "eval_seed")
    return tuple(spec[k] for k in keys) + (tuple(sorted(spec["train"].items())),)


def _comparable(params: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}


# leaderboard.csv's header before it had one row per checkpoint (git show ca44fd6~1:results/reference/leaderboard.csv)
PER_SETTING_HEADER = (
    "task,model,attack,backbone,train_size,setting,seeds,examples,dev_accuracy_mean,dev_accuracy_std,"
    "clean_accuracy_mean,clean_accuracy_std,clean_accuracy_ci_low,clean_accuracy_ci_high,robust_accuracy_mean,"
    "robust_accuracy_std,robust_accuracy_ci_low,robust_accuracy_ci_high,accuracy_drop_mean,accuracy_drop_std,"
    "dev_minus_robust_mean,dev_minus_robust_std,attack_success_rate_mean,attack_success_rate_std,"
    "attack_success_rate_ci_low,attack_success_rate_ci_high,perturbed_word_rate_mean,perturbed_word_rate_std,"
    "avg_words_per_input_mean,avg_words_per_input_std,avg_queries_mean,avg_queries_std,train_seconds_mean,"
    "train_seconds_std,model_label,attack_label,setting_id,model_setting_id,worst_case_accuracy_mean,"
    "worst_case_accuracy_std,worst_case_accuracy_ci_low,worst_case_accuracy_ci_high,masking_flags")


def test_settings_csv_is_the_per_setting_table_the_leaderboard_had():
    """settings.csv keeps the long table for machines: the old leaderboard.csv's columns (then the comparison
    with the baseline), one row per setting, and each row's numbers are its checkpoint's prefixed columns in
    leaderboard.csv."""
    lines = (REFERENCE / "settings.csv").read_text().splitlines()
    header = lines[0].split(",")
    assert [c for c in header if c in PER_SETTING_HEADER.split(",")] == PER_SETTING_HEADER.split(",")
    settings = pd.read_csv(REFERENCE / "settings.csv")
    assert len(lines) == 1 + len(settings) == 1 + settings["setting_id"].nunique()
    table = pd.read_csv(REFERENCE / "leaderboard.csv").set_index("model_setting_id")
    for _, row in settings.iterrows():
        for column in ("robust_accuracy_mean", "robust_accuracy_ci_low", "robust_accuracy_ci_high", "examples"):
            assert table.loc[row["model_setting_id"], f"{row['attack']}.{column}"] == row[column]


def test_readme_results_table_is_the_reference_leaderboard():
    """The README's results table is written from results/reference/leaderboard.csv (studies/readme_results.py,
    `make readme-results`: model, clean, worst case, one column per attack, the verdict against bert; at most 8
    columns), and leaderboard.csv is regenerated from the records above, so the README cannot drift."""
    module = _study("readme_results")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    expected = module.results_block(pd.read_csv(REFERENCE / "leaderboard.csv"))
    assert module.readme_block(readme) == expected, "README results out of date: run `make readme-results`"
    header = expected.splitlines()[1]
    assert header.startswith("| model | clean") and header.count(" | ") + 1 <= 8


@pytest.mark.integration  # the published records whole
@pytest.mark.parametrize("script, outputs", [("claims", ("claims.md", "claims.json")), ("cost", ("cost.md",))])
def test_the_claims_and_cost_tables_regenerate_from_the_records(script, outputs, tmp_path):
    """results/reference/claims.{md,json} (IM-BERT's claims against bert, with their verdicts) and cost.md (the
    measured cost per cell kind) are what their scripts (studies/) write from the committed records."""
    _study(script).main(tmp_path)
    for name in outputs:
        assert (tmp_path / name).read_bytes() == (REFERENCE / name).read_bytes(), f"{name}: run `make reference`"


def test_the_natural_settings_cost_table_regenerates_from_the_records(tmp_path):
    """results/natural/cost.md (the natural setting against textdefender on the same checkpoints and sentences) is
    what studies/natural_cost.py writes from the packed records of results/natural and results/reference."""
    _study("natural_cost").main(tmp_path)
    assert (tmp_path / "cost.md").read_bytes() == (RESULTS / "natural" / "cost.md").read_bytes()


@pytest.mark.parametrize("study", ["natural-reading", "natural-lm-reading"])
def test_the_natural_settings_blind_reading_tables_regenerate_from_their_readings(tmp_path, study):
    """results/<study>/reading.md (a natural setting's blind reading per attack: issue 43's, and issue 57's with the
    language model) is what studies/natural_reading.py writes from the study's packed records and readings."""
    _study("natural_reading").main(tmp_path, RESULTS / study)
    assert (tmp_path / "reading.md").read_bytes() == (RESULTS / study / "reading.md").read_bytes()


def test_the_reader_control_of_the_language_models_reading_regenerates(tmp_path):
    """results/natural-lm-reading/control.md (one reader, the earlier readings' top-band pairs against the LM's
    selections) is what studies/natural_reading_control.py writes from the filled sheet and key."""
    _study("natural_reading_control").main(tmp_path)
    assert (tmp_path / "control.md").read_bytes() == (RESULTS / "natural-lm-reading" / "control.md").read_bytes()


@pytest.mark.parametrize("study", ["natural", "natural-lm-control"])
def test_the_natural_settings_comparison_regenerates_from_its_records(tmp_path, capsys, monkeypatch, cache, study):
    """results/<study>/compare.txt (the positive control under the natural setting, and under issue 57's read
    setting) byte for byte."""
    from robench.cli import main

    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(cache))
    for packed in (RECORDS, EXAMPLES):
        shutil.copy(RESULTS / study / packed, tmp_path / packed)
    capsys.readouterr()
    main(["compare", "--baseline", "bert", "--results-dir", str(tmp_path)])
    assert capsys.readouterr().out == (RESULTS / study / "compare.txt").read_text(encoding="utf-8")


def test_textfoolers_success_on_five_seeds_under_the_read_setting_regenerates(tmp_path):
    """results/natural-lm-control/success.md (TextFooler's success rate per seed on bert and a2t, issue 57's read
    setting) is what studies/natural_lm_control.py writes from the packed records."""
    _study("natural_lm_control").main(tmp_path)
    success = (RESULTS / "natural-lm-control" / "success.md").read_bytes()
    assert (tmp_path / "success.md").read_bytes() == success


_study = load_study


@pytest.mark.integration  # resolves the published specs with the real backbone
def test_a_run_made_today_at_a_published_setting_is_that_setting(cache, shared_data):
    """The knobs added since the reference was run (`robench.core.records.KNOBS_ADDED_LATER`) hold their earlier
    values by default, so a run resolved now at a published spec has the published record's setting and attack
    setting: a checkpoint run under --protocol reference is compared with the published seeds, and a new seed of
    the replicated control joins the old ones (the bug: they formed settings of their own)."""
    import dataclasses

    from robench.core.paths import resolve_settings
    from robench.report.identity import attack_setting_id, setting_id
    from robench.runs.resolve import resolve_run
    from robench.runs.spec import RunSpec

    settings = resolve_settings(shared_data, cache / "resolve", cache / "results")
    for rec in load_records(reference_runs_dir("reference", cache)).current:
        if rec.spec["attack"] not in ("textfooler", "gradient-swap") or rec.spec["seed"] != 0:
            continue
        now = resolve_run(RunSpec.from_dict(rec.spec), settings).hyperparameters()
        today = dataclasses.replace(rec, hyperparameters={**rec.hyperparameters, "attack": now["attack"]})
        assert set(now["attack"]) > set(rec.hyperparameters["attack"]), rec.run_id  # knobs added since
        assert attack_setting_id(today) == attack_setting_id(rec) and setting_id(today) == setting_id(rec), rec.run_id
