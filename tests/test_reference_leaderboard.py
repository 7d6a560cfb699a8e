"""The committed reference leaderboard is regenerated bit for bit from the committed records it links to,
and every committed record is a cell of the reference protocol (results/grid-reference.toml)."""
import shutil
from pathlib import Path

from robench.grid.config import expand, load_config
from robench.report.leaderboard import load_records, write_leaderboard
from robench.report.leaderboard_page import write_html

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "results" / "reference"


def test_reference_leaderboard_regenerates_from_its_records(tmp_path):
    shutil.copytree(REFERENCE / "runs", tmp_path / "runs", ignore=shutil.ignore_patterns("*.html"))  # pages: rebuilt
    _, csv_path, md_path = write_leaderboard(tmp_path)
    html_path = write_html(tmp_path, tmp_path / "leaderboard.html")
    for path in (csv_path, md_path, tmp_path / "settings.csv", tmp_path / "settings.md", Path(html_path)):
        assert path.read_bytes() == (REFERENCE / path.name).read_bytes(), path.name
    run_pages = sorted((REFERENCE / "runs").glob("*.html"))
    assert [p.name for p in run_pages] == sorted(p.name for p in (tmp_path / "runs").glob("*.html"))
    for path in run_pages:
        assert (tmp_path / "runs" / path.name).read_bytes() == path.read_bytes(), path.name


def test_every_reference_record_is_a_protocol_cell_and_linked_from_the_page():
    page = (REFERENCE / "leaderboard.html").read_text(encoding="utf-8")
    records = load_records(REFERENCE / "runs")
    assert records.older == 0 and records.current
    protocol = expand(load_config(REPO / "results" / "grid-reference.toml"))
    cells = {_cell(s.to_dict()): s.model_params for s in protocol}
    seen = set()
    for rec in records.current:
        cell = _cell(rec.spec)
        assert cell in cells and cell not in seen, rec.run_id
        assert cells[cell].items() <= _comparable(rec.spec["model_params"]).items(), rec.run_id
        seen.add(cell)
        # the page links each run's page of adversarial examples, which links its record
        assert f'href="runs/{rec.run_id}.html"' in page
        run_page = REFERENCE / "runs" / f"{rec.run_id}.html"
        assert f'href="{rec.run_id}.json"' in run_page.read_text(encoding="utf-8")
    assert page.count('href="runs/') == len(records.current)


def _cell(spec: dict) -> tuple:
    keys = ("task", "model", "attack", "backbone", "seed", "train_size", "eval_size", "eval_seed")
    return tuple(spec[k] for k in keys) + (tuple(sorted(spec["train"].items())),)


def _comparable(params: dict) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in params.items()}


def test_one_model_setting_per_checkpoint_across_advglue_and_the_word_level_attacks():
    """Each model's AdvGLUE rows and word-level rows share its model setting (the checkpoint's identity), so
    leaderboard.csv, leaderboard.md and the page have one row per model, and the AdvGLUE rows of settings.csv
    carry the worst case of the same checkpoints."""
    import pandas as pd

    settings = pd.read_csv(REFERENCE / "settings.csv")
    assert settings.groupby("model")["model_setting_id"].nunique().eq(1).all()
    assert settings.groupby("model")["attack"].nunique().eq(4).all()
    assert settings["worst_case_accuracy_mean"].notna().all() and settings["worst_case_accuracy_ci_low"].notna().all()
    table = pd.read_csv(REFERENCE / "leaderboard.csv")
    assert len(table) == table["model"].nunique() == settings["model"].nunique() == 4
    assert list(table["rank"]) == sorted(table["rank"]) and table["worst_case_accuracy_ci_low"].notna().all()
    for attack in ("advglue", "textfooler", "bert-attack", "gradient-swap"):
        assert table[f"{attack}.robust_accuracy_mean"].notna().all() and table[f"{attack}.seeds"].eq(3).all()
    rows = [line for line in (REFERENCE / "leaderboard.md").read_text().splitlines() if line.startswith("| sst2 |")]
    assert len(rows) == 4
    page = (REFERENCE / "leaderboard.html").read_text(encoding="utf-8")
    assert page.count("<tr>") == 1 + table["model"].nunique()  # the header, then one row per checkpoint setting


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
    """settings.csv keeps the long table for machines: the old leaderboard.csv's columns, one row per setting
    (4 models x 4 attacks), and each row's numbers are its checkpoint's prefixed columns in leaderboard.csv."""
    import pandas as pd

    lines = (REFERENCE / "settings.csv").read_text().splitlines()
    assert lines[0] == PER_SETTING_HEADER and len(lines) == 1 + 16
    settings = pd.read_csv(REFERENCE / "settings.csv")
    table = pd.read_csv(REFERENCE / "leaderboard.csv").set_index("model_setting_id")
    for _, row in settings.iterrows():
        for column in ("robust_accuracy_mean", "robust_accuracy_ci_low", "robust_accuracy_ci_high", "examples"):
            assert table.loc[row["model_setting_id"], f"{row['attack']}.{column}"] == row[column]


def test_readme_results_table_is_the_reference_leaderboard():
    """The README's results table is results/reference/leaderboard.md verbatim (bench/readme_results.py, `make
    readme-results`), and leaderboard.md is regenerated from the records above, so the README cannot drift."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_results", REPO / "bench" / "readme_results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    expected = module.results_block((REFERENCE / "leaderboard.md").read_text(encoding="utf-8"))
    assert module.readme_block(readme) == expected, "README results out of date: run `make readme-results`"
