"""`--dry-run`: the calibration behind the estimate is cached by the cost-relevant setting and the data's content
(with a staleness rule), a dry run without one says that it calibrates and how long it took, and `--no-estimate`
skips the estimate."""
from __future__ import annotations

import json

from conftest import tiny_spec

from robench.cli import main


def _dry_run(capsys, settings, backbone, *extra):
    args = ["run", "--model", "bert", "--attack", "textfooler", "--backbone", str(backbone), "--train-size", "16",
            "--eval-size", "2", "--data-dir", str(settings.data_dir), "--cache-dir", str(settings.cache_dir),
            "--results-dir", str(settings.results_dir), "--device", "cpu", "--dry-run", *extra]
    assert main(args) == 0
    return capsys.readouterr()


def test_a_dry_run_calibrates_once_per_data_then_reuses_its_calibration(capsys, settings, tiny_backbone, tmp_path):
    import shutil

    from robench.core.paths import resolve_settings

    private = tmp_path / "data"  # this test edits a data file: never the session's shared tiny data
    shutil.copytree(settings.data_dir, private, symlinks=True)
    settings = resolve_settings(private, settings.cache_dir, settings.results_dir)
    first = _dry_run(capsys, settings, tiny_backbone)
    assert "calibrating bert on cpu (no calibration cached for this setting)" in first.err
    assert "calibrated in " in first.err and "estimate on cpu: train ~" in first.out
    assert list((settings.cache_dir / "estimates").glob("*.json"))  # the dry run caches its calibration
    second = _dry_run(capsys, settings, tiny_backbone)
    assert "calibrating" not in second.err
    assert _run_id(second.out) == _run_id(first.out)

    data = settings.data_dir / "sst2" / "dev.tsv"  # the data changed: a new run id, and a calibration of its own
    data.write_text(data.read_text() + "a new sentence .\t1\n")
    third = _dry_run(capsys, settings, tiny_backbone)
    assert "calibrating" in third.err and _run_id(third.out) != _run_id(first.out)


def _run_id(out: str) -> str:
    return json.loads(out[:out.index("\ncheckpoint:")])["run_id"]


def test_no_estimate_skips_the_calibration(capsys, settings, tiny_backbone):
    out = _dry_run(capsys, settings, tiny_backbone, "--no-estimate")
    assert "no cost estimate (--no-estimate)" in out.out and "calibrating" not in out.err
    assert not (settings.cache_dir / "estimates").exists()


def test_a_stale_calibration_is_measured_again(settings, tiny_backbone):
    import torch

    from robench.runs.estimate import _cache_path, _cached_calibration, estimate
    from robench.runs.resolve import resolve_run

    run = resolve_run(tiny_spec(tiny_backbone), settings)
    estimate(run, torch.device("cpu"), train_cached=False)
    path = _cache_path(run, torch.device("cpu"))
    saved = json.loads(path.read_text())
    assert not isinstance(_cached_calibration(path), str)
    saved["measured"] -= 8 * 24 * 3600
    path.write_text(json.dumps(saved))
    assert _cached_calibration(path) == "measured over a week ago"
    lines = []
    estimate(run, torch.device("cpu"), train_cached=False, say=lines.append)
    assert "measured over a week ago" in lines[0] and lines[1].startswith("calibrated in ")


def test_the_calibration_is_shared_across_cost_free_parameters_only(settings, tiny_backbone):
    import torch

    from robench.runs.estimate import _cache_path
    from robench.runs.resolve import resolve_run

    def path(params):
        return _cache_path(resolve_run(tiny_spec(tiny_backbone, model="imbert", model_params=params), settings),
                           torch.device("cpu"))

    assert path({"im_gamma": 0.02}) == path({}) == path({"im_damping": 0.3})  # step sizes: the same cost
    assert path({"im_steps": 2}) != path({}) and path({"im_layers": [0]}) != path({})
