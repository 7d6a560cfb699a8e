"""A real third-party plugin package, pip-installed, works with no change to robench."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = Path(__file__).parent / "plugins" / "robench-example-defense"


def _pip(*args):
    subprocess.run([sys.executable, "-m", "pip", "-q", *args], check=True, capture_output=True, timeout=300)


@pytest.fixture(scope="module")
def installed_plugin():
    _pip("install", "--no-deps", "--no-build-isolation", str(PLUGIN))
    yield
    _pip("uninstall", "-y", "robench-example-defense")


def _robench(*args):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    return subprocess.run([sys.executable, "-m", "robench.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


@pytest.mark.integration
def test_plugin_is_listed_with_its_source(installed_plugin):
    proc = _robench("list", "models")
    assert proc.returncode == 0, proc.stderr
    assert "example" in proc.stdout and "plugin robench-example-defense" in proc.stdout


@pytest.mark.integration
def test_run_with_plugin_model(installed_plugin, settings, tiny_backbone):
    proc = _robench("run", "--model", "example", "--backbone", str(tiny_backbone), "--data-dir",
                    str(settings.data_dir), "--cache-dir", str(settings.cache_dir), "--results-dir",
                    str(settings.results_dir), "--epochs", "1", "--max-length", "32", "--quiet",
                    "--param", "smoothing=0.2")
    assert proc.returncode == 0, proc.stderr
    (record,) = settings.runs_dir.glob("*.json")
    saved = json.loads(record.read_text())
    assert saved["spec"]["model"] == "example" and saved["hyperparameters"]["model"] == {"smoothing": 0.2}
