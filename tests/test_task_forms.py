"""Every command that takes `--task` takes it in the forms `robench run` does: a registered task, a task file
(`my_task.toml`) or the one-line `csv:FILE` (with --text-column, --label-column, --labels); a grid config takes
task files and says why not the one-line form. All through `robench.runs.options.task_spec`."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from robench.core.errors import RobenchError
from robench.core.paths import resolve_settings

DATA = Path(__file__).resolve().parent / "data"


@pytest.fixture
def task_file(tmp_path) -> Path:
    shutil.copy(DATA / "reviews.csv", tmp_path / "reviews.csv")
    (tmp_path / "my_task.toml").write_text('name = "reviews"\ntrain = "reviews.csv"\neval = "reviews.csv"\n'
                                           'text_columns = ["review"]\nlabel_column = "stars"\n'
                                           'labels = ["neg", "pos"]\n')
    return tmp_path / "my_task.toml"


def _settings(tmp_path):
    return resolve_settings(None, str(tmp_path / "cache"), str(tmp_path / "results"))


def test_bench_attack_specs_take_a_task_file_and_the_one_line_form(tmp_path, task_file):
    from robench.bench.attack import AttackBenchOptions, specs

    for options in (AttackBenchOptions(task=str(task_file), stock=False),
                    AttackBenchOptions(task=f"csv:{task_file.parent / 'reviews.csv'}", text_column="review",
                                       label_column="stars", labels="neg,pos", stock=False)):
        runs = specs(options, "hub", _settings(tmp_path))
        assert len(runs) == 2
        for spec in runs.values():
            assert spec.task_source is not None and spec.data_source == "local"
            assert spec.task_source["labels"] == ["neg", "pos"] and spec.task in ("reviews", "reviews")
    assert specs(AttackBenchOptions(), "local")["textfooler"].task_source is None  # a registered task: as before


def test_bench_defenses_specs_take_a_task_file(tmp_path, task_file):
    from robench.bench.defenses import DefensesOptions

    spec = DefensesOptions(task=str(task_file)).spec(_settings(tmp_path), "bert", 0, 4000, {})
    assert spec.task == "reviews" and spec.task_source["text_columns"] == ["review"] and spec.data_source == "local"


def test_bench_flags_reach_the_options(task_file):
    from robench.cli import build_parser
    from robench.cli.bench import options

    for name, cls in (("attack", "AttackBenchOptions"), ("defenses", "DefensesOptions")):
        args = build_parser().parse_args(["bench", name, "--task", "csv:x.csv", "--text-column", "review",
                                          "--labels", "neg,pos"])
        module = __import__(f"robench.bench.{name}", fromlist=[cls])
        opts = options(getattr(module, cls), args)
        assert (opts.task, opts.text_column, opts.labels) == ("csv:x.csv", "review", "neg,pos")


def test_analyze_takes_a_task_file(tmp_path, task_file):
    from robench.cli import build_parser
    from robench.cli.common import specs_from_args

    args = build_parser().parse_args(["analyze", "--task", str(task_file), "--model", "bert"])
    [spec] = specs_from_args(args, _settings(tmp_path))
    assert spec.task == "reviews" and spec.task_source is not None


def test_grid_takes_task_files_relative_to_its_config_and_refuses_the_one_line_form(tmp_path, task_file):
    from robench.grid.config import expand, load_config

    config = tmp_path / "grid.toml"
    config.write_text('tasks = ["my_task.toml", "sst2"]\nmodels = ["bert"]\nattacks = ["advglue"]\n')
    specs = expand(load_config(config))
    assert [s.task for s in specs] == ["reviews", "sst2"]
    assert specs[0].task_source["name"] == "reviews" and specs[0].data_source == "local"
    assert specs[1].task_source is None
    config.write_text('tasks = ["csv:reviews.csv"]\nmodels = ["bert"]\nattacks = ["advglue"]\n')
    with pytest.raises(RobenchError, match="a grid takes a task file"):
        load_config(config)
    config.write_text('tasks = ["missing.toml"]\nmodels = ["bert"]\nattacks = ["advglue"]\n')
    with pytest.raises(RobenchError, match="does not exist"):
        load_config(config)
