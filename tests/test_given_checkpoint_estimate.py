"""A checkpoint robench did not train: its dry run and its run print an estimate (its inference rate timed in
seconds), its dev pass runs once per checkpoint and data (cached across attacks), a protocol's dry run adds its
runs up, and it is described as it is: no training settings robench did not use, its architecture from its
config, what was read from its directory."""
from __future__ import annotations

import json

from test_own_model import save_classifier

from robench.cli import main


def _cli(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _checkpoint(tiny_backbone, tmp_path):
    return save_classifier(tiny_backbone, tmp_path / "my-model", {0: "negative", 1: "positive"})


def test_a_checkpoint_dry_run_estimates_and_shows_what_it_read_and_no_training(capsys, where, tiny_backbone,
                                                                            tmp_path):
    ckpt = _checkpoint(tiny_backbone, tmp_path)
    code, out, err = _cli(capsys, "run", "--checkpoint", ckpt, "--attack", "advglue", "--eval-size", 4,
                          "--dry-run", *where)
    assert code == 0, err
    spec = json.loads(out[:out.index("\ncheckpoint:")])["spec"]
    assert "train" not in spec and "train_size" not in spec and spec["input"] == {"max_length": 128}
    assert "batch_size" not in out and "epochs" not in out and "lr" not in spec
    assert "(given: attacked as it is)" in out
    assert f"read from {ckpt.resolve()}:" in out
    assert "  architecture: bert, 2 layers, hidden 32 (BertForSequenceClassification) (config.json)" in out
    assert "  labels: 0=negative, 1=positive (id2label)" in out and "  tokenizer: BertTokenizer" in out
    assert "model.safetensors" in out and "training: none by robench" in out
    assert "timing checkpoint:my-model@" in err and "loading it and attack-shaped predictions" in err
    lines = out[out.index("estimate on cpu"):].splitlines()
    assert "  train: none (a given checkpoint)" in lines
    assert any(line.startswith("  dev pass ~") and "once per checkpoint and data" in line for line in lines)
    assert any(line.startswith("  attack ~") for line in lines)
    assert any(line.startswith("  speed measured just now under load ") for line in lines)
    assert "no cost estimate" not in out


def test_the_dev_pass_runs_once_per_checkpoint_and_data(capsys, settings, where, tiny_backbone, tmp_path,
                                                        monkeypatch):
    import robench.runs.runner as runner

    ckpt = _checkpoint(tiny_backbone, tmp_path)
    passes = []
    accuracy = runner.accuracy
    monkeypatch.setattr(runner, "accuracy", lambda *a: passes.append(1) or accuracy(*a))
    records = []
    for eval_size in (4, 6):  # two attacks of one checkpoint and data: one dev pass
        code, out, err = _cli(capsys, "run", "--checkpoint", ckpt, "--attack", "advglue", "--eval-size", eval_size,
                              *where)
        assert code == 0, err
        records.append(json.loads(next(settings.runs_dir.glob(f"*{_run_id(out)}.json")).read_text()))
    assert passes == [1]
    assert records[0]["metrics"]["dev_accuracy"] == records[1]["metrics"]["dev_accuracy"]
    assert records[0]["resources"]["model"]["architecture"].startswith("bert, 2 layers, hidden 32")
    code, out, err = _cli(capsys, "run", "--checkpoint", ckpt, "--attack", "advglue", "--eval-size", 8,
                          "--dry-run", *where)
    assert "  dev pass: cached (measured before for this checkpoint and data)" in out


def _run_id(out: str) -> str:
    return next(line for line in out.splitlines() if line.startswith("record: ")).rsplit("/", 1)[1][:-5]


def test_an_edited_dev_pass_cache_is_measured_again(settings, tiny_backbone, tmp_path):
    from robench.runs import devpass
    from robench.runs.options import RunOptions, specs
    from robench.runs.resolve import resolve_run

    ckpt = _checkpoint(tiny_backbone, tmp_path)
    (spec,) = specs(RunOptions(checkpoint=str(ckpt), attack="advglue", eval_size=4), settings)
    resolved = resolve_run(spec, settings)
    assert devpass.cached(resolved) is None
    devpass.store(resolved, 0.75)
    assert devpass.cached(resolved) == 0.75
    path = devpass.cache_path(resolved)
    path.write_text(path.read_text().replace("0.75", "0.95"))
    assert devpass.cached(resolved) is None


def test_a_given_checkpoints_board_row_shows_no_training_settings(capsys, settings, where, tiny_backbone, tmp_path):
    from robench.core.records import iter_records
    from robench.report.leaderboard_page import _facets, _training

    ckpt = _checkpoint(tiny_backbone, tmp_path)
    assert _cli(capsys, "run", "--checkpoint", ckpt, "--attack", "advglue", "--eval-size", 4, *where)[0] == 0
    (record,) = iter_records(settings.runs_dir)
    facets = _facets(record, None)
    assert facets["backbone"] == "bert, 2 layers, hidden 32 (BertForSequenceClassification)"
    assert not any(k.startswith("train") for k in facets)
    (row,) = _training(record, facets)
    assert row[0] == "training" and row[1].startswith("none by robench") and "epochs" not in row[1]
    assert _cli(capsys, "leaderboard", "--html", tmp_path / "board.html", "--results-dir", settings.results_dir)[0] == 0
    page = (tmp_path / "board.html").read_text()
    assert "batch_size=32" not in page and "epochs=3" not in page and "whole split" not in page


def test_used_settings_keep_a_given_checkpoints_input_length_only():
    from robench.runs.spec import RunSpec, used_settings

    trained = RunSpec().to_dict()
    assert used_settings(trained) == trained
    given = RunSpec(checkpoint={"kind": "checkpoint", "location": "x", "weights_sha256": "ab" * 32}).to_dict()
    shown = used_settings(given)
    assert shown["input"] == {"max_length": 128} and not {"train", "train_size", "model_params"} & set(shown)
