"""A checkpoint that cannot load is refused in one `robench: error:` line naming the fix, before any work, and no
error leaves a `.lock` file behind (issue 45: a checkpoint saved without its tokenizer ran 45 s, then a traceback)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_own_model import save_classifier

from robench.cli import main

LABELS = {0: "negative", 1: "positive"}


def _no_tokenizer(ckpt: Path) -> None:
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        (ckpt / name).unlink(missing_ok=True)


def _broken_tokenizer(ckpt: Path) -> None:
    for name in ("tokenizer.json", "vocab.txt"):
        (ckpt / name).unlink()


def _no_config(ckpt: Path) -> None:
    (ckpt / "config.json").unlink()


def _masked_lm(ckpt: Path) -> None:
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "architectures": ["BertForMaskedLM"]}))


def _unknown_model_type(ckpt: Path) -> None:
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "model_type": "notamodel"}))


def _garbage_weights(ckpt: Path) -> None:
    (ckpt / "model.safetensors").write_bytes(b"not a tensor file" * 8)


def _truncated_weights(ckpt: Path) -> None:
    weights = ckpt / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])


def _no_weights(ckpt: Path) -> None:
    (ckpt / "model.safetensors").unlink()


@pytest.mark.parametrize("damage,message", [
    (_no_tokenizer, "has no tokenizer: save the one the model was trained with beside it, "
                    "tokenizer.save_pretrained('{ckpt}')"),
    (_broken_tokenizer, "its tokenizer does not load"),
    (_no_config, "has no config.json: save the model with model.save_pretrained('{ckpt}')"),
    (_masked_lm, "holds a BertForMaskedLM, not a sequence classifier"),
    (_unknown_model_type, "unreadable config.json (ValueError: The checkpoint you are trying to load has model type "
                          "`notamodel` but Transformers does not recognize this architecture.)"),
    (_garbage_weights, "unreadable weights model.safetensors"),
    (_truncated_weights, "unreadable weights model.safetensors"),
    (_no_weights, "has no weight files"),
])
def test_a_checkpoint_that_cannot_load_is_one_error_line_before_any_work(capsys, monkeypatch, settings, tiny_backbone,
                                                                        tmp_path, damage, message):
    import robench.runs.runner

    ckpt = save_classifier(tiny_backbone, tmp_path / "my-model", LABELS)
    damage(ckpt)
    monkeypatch.setattr(robench.runs.runner, "run_resolved", lambda *a, **k: pytest.fail("the run started"))
    code = main(["run", "--checkpoint", str(ckpt), "--task", "sst2", "--data-dir", str(settings.data_dir),
                 "--cache-dir", str(settings.cache_dir), "--results-dir", str(settings.results_dir), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("robench: error:"), err
    assert message.format(ckpt=ckpt) in " ".join(err.split()), err
    assert not settings.runs_dir.exists()


def test_weights_that_do_not_fit_the_config_fail_in_one_line_and_leave_no_lock(capsys, settings, tiny_backbone,
                                                                               tmp_path):
    ckpt = save_classifier(tiny_backbone, tmp_path / "my-model", LABELS)
    config = json.loads((ckpt / "config.json").read_text())
    (ckpt / "config.json").write_text(json.dumps({**config, "intermediate_size": 2 * config["intermediate_size"]}))
    code = main(["run", "--checkpoint", str(ckpt), "--task", "sst2", "--eval-size", "4", "--data-dir",
                 str(settings.data_dir), "--cache-dir", str(settings.cache_dir), "--results-dir",
                 str(settings.results_dir), "--quiet", "--device", "cpu"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "could not load checkpoint" in err and "tokenizer.save_pretrained(" in " ".join(err.split()), err
    assert not list(settings.runs_dir.glob("*.lock"))  # refused while its identity is taken, before any run


def test_no_lock_is_left_after_an_error_in_a_run(monkeypatch, settings, tiny_backbone, tmp_path):
    import robench.runs.runner
    from robench.core.errors import RobenchError
    from robench.runs.options import RunOptions, specs

    def fail(*args, **kwargs):
        assert list(settings.runs_dir.glob("*.lock"))  # held while the run works
        raise RobenchError("the model broke")

    ckpt = save_classifier(tiny_backbone, tmp_path / "my-model", LABELS)
    monkeypatch.setattr(robench.runs.runner, "prepare_model", fail)
    (spec,) = specs(RunOptions(checkpoint=str(ckpt), seeds=(0,)), settings)
    with pytest.raises(RobenchError, match="the model broke"):
        robench.runs.runner.run(spec, settings, device="cpu")
    assert settings.runs_dir.is_dir() and not list(settings.runs_dir.glob("*.lock"))
