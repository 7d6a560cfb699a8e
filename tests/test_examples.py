"""The runnable examples under examples/ run as documented (on the tiny backbone)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, REPO / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.integration  # textfooler's real sentence encoder
def test_own_model_example_three_paths_agree(settings, tiny_backbone, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    example = _load("own_model")
    trained, checkpoint, in_memory, function = example.main([
        "--backbone", str(tiny_backbone), "--epochs", "1", "--eval-size", "4", "--data-dir", str(settings.data_dir),
        "--cache-dir", str(settings.cache_dir), "--results-dir", str(settings.results_dir)])
    assert trained.spec["task"] == "reviews" and trained.metrics["examples"] == 4
    assert checkpoint.metrics == trained.metrics and in_memory.metrics == trained.metrics
    assert checkpoint.run_id == in_memory.run_id  # one identity per set of weights, by path or in memory
    assert len({trained.run_id, checkpoint.run_id, function.run_id}) == 3
    assert function.spec["model"] == "callable:keywords" and function.metrics["clean_accuracy"] > 0.5
    assert "callable:keywords" in capsys.readouterr().out
