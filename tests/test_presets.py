"""Presets resolve to explicit spec values; --dry-run does nothing; the estimate comes before any training."""
from __future__ import annotations

import pytest

from robench.cli import build_parser, main
from robench.cli.common import specs_from_args
from robench.runs.presets import PRESETS


@pytest.fixture
def base(settings, tiny_backbone):
    return ["--backbone", str(tiny_backbone), "--data-dir", str(settings.data_dir), "--cache-dir",
            str(settings.cache_dir), "--results-dir", str(settings.results_dir), "--max-length", "32", "--quiet"]


def _specs(settings, *argv):
    return list(specs_from_args(build_parser().parse_args(list(argv)), settings))


def test_quick_is_the_default_and_equals_its_values_spelled_out(settings):
    quick = PRESETS["quick"]
    implicit = _specs(settings, "run", "--model", "imbert", "--attack", "textfooler")[0]
    spelled = _specs(settings, "run", "--model", "imbert", "--attack", "textfooler", "--preset", "paper",
                     "--train-size", str(quick.train_size), "--epochs", str(quick.epochs), "--lr", str(quick.lr),
                     "--batch-size", str(quick.batch_size), "--eval-size", str(quick.search_eval_size))[0]
    assert implicit.run_id == spelled.run_id
    assert (implicit.train_size, implicit.eval_size, implicit.train.epochs) == (1000, 30, 3)
    assert "preset" not in implicit.to_dict()


def test_replay_attacks_keep_their_whole_split_and_paper_is_the_full_setting(settings):
    assert _specs(settings, "run", "--attack", "advglue")[0].eval_size is None
    paper = _specs(settings, "run", "--attack", "textfooler", "--preset", "paper")[0]
    assert (paper.train_size, paper.eval_size, paper.train.epochs) == (None, None, 3)


def test_explicit_flags_override_the_preset(settings):
    spec = _specs(settings, "run", "--attack", "textfooler", "--preset", "quick", "--train-size", "200",
                  "--epochs", "1", "--eval-size", "7", "--lr", "3e-5")[0]
    assert (spec.train_size, spec.train.epochs, spec.eval_size, spec.train.lr) == (200, 1, 7, 3e-5)
    assert spec.train.batch_size == PRESETS["quick"].batch_size


def test_full_names_the_whole_split_as_in_grid_configs(settings, capsys):
    import robench

    spec = _specs(settings, "run", "--attack", "textfooler", "--train-size", "full", "--eval-size", "full")[0]
    assert (spec.train_size, spec.eval_size, spec.train.epochs) == (None, None, PRESETS["quick"].epochs)
    assert robench.make_spec(settings, attack="textfooler", train_size="full", eval_size="full") == spec
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--train-size", "all"])
    assert "expected a positive integer or full" in capsys.readouterr().err
    with pytest.raises(robench.RobenchError, match="--train-size must be a positive integer, or full"):
        robench.run(settings=settings, train_size=0)


def test_the_library_builds_the_same_specs_as_the_cli(settings):
    import robench

    for argv, options in [(("run", "--model", "imbert", "--attack", "textfooler"), dict(model="imbert",
                                                                                        attack="textfooler")),
                          (("run", "--attack", "textfooler", "--preset", "paper", "--epochs", "1", "--seed", "2"),
                           dict(attack="textfooler", preset="paper", epochs=1, seed=2)),
                          (("run", "--param", "gamma=0.5", "--model", "smart"), dict(model="smart",
                                                                                    model_params={"gamma": 0.5}))]:
        assert robench.make_spec(settings, **options) == _specs(settings, *argv)[0]
    assert robench.make_spec(settings).train_size == PRESETS["quick"].train_size  # quick, as `robench run`


def test_library_options_are_checked(settings):
    import robench

    with pytest.raises(robench.RobenchError, match="unknown run option"):
        robench.make_spec(settings, modle="bert")
    with pytest.raises(robench.RobenchError, match="with an explicit RunSpec"):
        robench.run(robench.RunSpec(), settings, model="bert")


def test_a_grid_takes_a_preset_and_its_config_overrides_it():
    from robench.grid.config import expand, load_config

    base = {"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue", "textfooler"]}
    quick = {s.attack: s for s in expand(load_config({**base, "preset": "quick"}))}
    assert quick["textfooler"].eval_size == PRESETS["quick"].search_eval_size and quick["advglue"].eval_size is None
    assert (quick["advglue"].train_size, quick["advglue"].train.lr) == (1000, PRESETS["quick"].lr)
    explicit = expand(load_config({**base, "preset": "quick", "train_size": 64, "train": {"lr": 3e-5}}))[0]
    assert (explicit.train_size, explicit.train.lr, explicit.train.epochs) == (64, 3e-5, PRESETS["quick"].epochs)
    default = expand(load_config(base))[0]  # a grid without a preset: the full setting (paper), as before
    assert (default.train_size, default.eval_size, default.train) == (None, None, robench_train_defaults())


def robench_train_defaults():
    from robench.runs.spec import TrainConfig

    return TrainConfig()


@pytest.mark.parametrize("command", ["run", "train", "analyze"])
def test_dry_run_trains_nothing_and_writes_nothing_but_its_speed_measurement(capsys, settings, base, command):
    code = main([command, *base, "--dry-run"])
    out = capsys.readouterr().out
    assert code == 0
    assert "checkpoint:" in out and "to train" in out and "estimate on cpu" in out
    assert command != "analyze" or "analysis record:" in out and "to measure" in out
    assert not settings.results_dir.exists() and not (settings.cache_dir / "checkpoints").exists()
    assert len(list((settings.cache_dir / "estimates").glob("*.json"))) == 1  # the next dry run reuses it


def test_the_estimate_line_comes_before_the_first_training_step(capsys, settings, base, monkeypatch):
    import robench.cli.runs as run_commands
    import robench.training.loop as training

    events = []
    say = run_commands.say_estimate
    monkeypatch.setattr(run_commands, "say_estimate", lambda estimate: (events.append("estimate"), say(estimate)))
    loop = training._train_loop
    monkeypatch.setattr(training, "_train_loop", lambda *a, **k: (events.append("train"), loop(*a, **k))[1])
    assert main(["train", *base, "--epochs", "1"]) == 0
    assert events == ["estimate", "train"]
    err = " ".join(capsys.readouterr().err.split())
    assert "estimate on cpu: total ~" in err and " train ~" in err


def test_bench_estimate_compares_the_estimate_with_real_runs(capsys, settings, tiny_backbone):
    from robench.bench.estimate import EstimateBenchOptions, estimate_bench

    options = EstimateBenchOptions(models=("bert", "imbert"), attack="advglue", backbone=str(tiny_backbone),
                                   train_size=32, eval_size=4, device="cpu")
    rows = estimate_bench(options, settings)
    assert [(r["model"], r["stage"]) for r in rows] == [("bert", "train"), ("bert", "attack"),
                                                         ("imbert", "train"), ("imbert", "attack"), ("all", "total")]
    assert all(r["estimated"] > 0 and r["measured"] > 0 for r in rows)
    assert rows[-1]["measured"] == pytest.approx(sum(r["measured"] for r in rows[:-1]))
    for model in ("bert", "imbert"):  # both stages report the one trained model's accuracy on the 48 dev examples
        train, attack = (r["dev_accuracy"] for r in rows if r["model"] == model)
        assert train == attack and 48 * train == pytest.approx(round(48 * train))
    attacks = [r for r in rows if r["stage"] == "attack"]
    assert all(r["estimated_queries"] == 4 and r["measured_queries"] >= 4 for r in attacks)  # replay: 1 per example
    assert "measured / estimated" in capsys.readouterr().out
    assert not (settings.cache_dir / "checkpoints").exists()  # the real runs used a scratch cache


def test_the_bench_scratch_cache_keeps_the_resources_it_builds(settings, tmp_path):
    """The scratch cache shares the user's resources folder even before it exists: a resource the bench builds
    is kept for the next bench (it built them again every time, ~1 min of its attack stage)."""
    from robench.bench.estimate import _scratch_settings
    from robench.engine.resources.files import resources_dir

    assert not resources_dir(settings).exists()
    (tmp_path / "scratch").mkdir()
    scratch = _scratch_settings(settings, tmp_path / "scratch")
    (resources_dir(scratch) / "built.json").write_text("{}")
    assert (resources_dir(settings) / "built.json").read_text() == "{}"
    assert scratch.cache_dir != settings.cache_dir and scratch.results_dir != settings.results_dir


def test_bench_estimate_tabulates_a_first_and_a_second_dry_run_in_a_scratch_cache(capsys, monkeypatch, settings):
    from robench.bench import estimate
    from robench.bench.estimate import DRY_RUN_TARGET, DryRunTiming, EstimateBenchOptions, dry_run_bench

    calls = []

    def timed(options, model, scratch):
        calls.append((model, scratch.cache_dir, scratch.results_dir))
        return DryRunTiming(16.0 if len(calls) % 2 else 4.0, 9.0, "estimate on cpu: total ~4 min")

    monkeypatch.setattr(estimate, "_timed_dry_run", timed)
    options = EstimateBenchOptions(models=("bert", "imbert"), attack="advglue", device="cpu", dry_run=True)
    rows = dry_run_bench(options, settings)
    assert [c[0] for c in calls] == ["bert", "bert", "imbert", "imbert"]
    assert len({c[1] for c in calls}) == 1 and calls[0][1] != settings.cache_dir  # one scratch cache, not the user's
    assert calls[0][2] != settings.results_dir
    assert [(r["model"], r["first"], r["again"], r["target"]) for r in rows] == [
        ("bert", 16.0, 4.0, DRY_RUN_TARGET), ("imbert", 16.0, 4.0, DRY_RUN_TARGET)]
    out = capsys.readouterr().out
    assert "16.0 / 9.0" in out and "total ~4 min" in out and "no" in out


@pytest.mark.integration  # two real `robench run --dry-run` processes
def test_bench_estimate_times_a_first_and_a_second_dry_run(capsys, settings, tiny_backbone):
    from robench.bench.estimate import DRY_RUN_TARGET, EstimateBenchOptions, dry_run_bench

    options = EstimateBenchOptions(models=("bert",), attack="advglue", backbone=str(tiny_backbone), train_size=32,
                                   eval_size=4, device="cpu", dry_run=True)
    (row,) = dry_run_bench(options, settings)
    assert row["model"] == "bert" and row["first"] > 0 and row["again"] > 0 and row["target"] == DRY_RUN_TARGET
    assert row["first_cpu"] > 0 and row["again_cpu"] > 0 and row["estimated"].startswith("estimate on cpu: total ~")
    assert "total ~" in capsys.readouterr().out  # the first's estimate, in the table
    assert not (settings.cache_dir / "estimates").exists()  # the dry runs used a scratch cache


def test_speed_measurement_queries_look_like_an_attacks():
    from robench.runs.speed import leave_one_out

    assert leave_one_out(("a premise", "x y z")) == [("a premise", "y z"), ("a premise", "x z"),
                                                      ("a premise", "x y")]
    assert leave_one_out(("",)) == [("",)]


def test_attack_bar_shows_outcomes_so_far():
    from robench.core.progress import AttackTally

    tally = AttackTally("textfooler", ["skipped"])
    assert tally.description() == "textfooler (1 skipped)"
    tally.add("successful")
    assert tally.add("failed") == "textfooler (1 successful, 1 failed, 1 skipped)"


def test_long_cpu_estimates_say_how_to_cut_them():
    from robench.runs.estimate import CostEstimate

    long_run = CostEstimate(4000.0, 1000.0, 1000, 30, "cpu")
    assert "--preset quick" in long_run.advice() and "grid config" in long_run.advice(grid=True)
    assert CostEstimate(4000.0, 1000.0, 1000, 30, "cuda").advice() is None
    assert CostEstimate(60.0, 60.0, 1000, 30, "cpu").advice() is None


def test_bench_estimate_counts_a_build_and_a_dev_pass_once_and_totals_the_runs():
    from types import SimpleNamespace

    from robench.bench.estimate import _stage_rows, _total_row
    from robench.runs.estimate import CostEstimate

    guess = CostEstimate(None, 30.0, 0, 10, "cpu", attack_queries=100.0, given=True, dev_seconds=12.0,
                         dev_examples=872)
    record = SimpleNamespace(spec={"checkpoint": {"kind": "checkpoint"}}, metrics={"dev_accuracy": 0.8},
                             timings={"train_stage_seconds": 15.0, "attack_seconds": 40.0, "victim_queries": 120})
    first = _stage_rows("textfooler (reference)", guess, record, builds=10.0, dev=12.0)
    assert [(r["stage"], r["estimated"], r["measured"]) for r in first] == [("load + dev pass", 12.0, 15.0),
                                                                          ("attack", 40.0, 40.0)]
    assert first[1]["seconds_per_query_ratio"] is None  # built resources inside: not told apart
    later = _stage_rows("advglue (reference)", guess, record, builds=0.0, dev=0.0)
    assert later[0]["estimated"] == 0.0 and later[0]["ratio"] is None  # the dev pass was cached by then
    assert later[1]["seconds_per_query_ratio"] == pytest.approx((40.0 / 120) / (30.0 / 100))
    total = _total_row(first + later)
    assert (total["stage"], total["estimated"], total["measured"]) == ("total", 82.0, 110.0)
    assert total["ratio"] == pytest.approx(110.0 / 82.0)
