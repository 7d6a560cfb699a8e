"""A real third-party plugin package, pip-installed, works with no change to robench.

The package (tests/plugins/robench-example-defense: a defense and an attack) is installed into a temporary
target directory, never into the environment running the tests (parallel workers share it), and robench runs
in a subprocess with that directory on PYTHONPATH, so it finds the plugin through its entry points exactly as
it would in an environment where the plugin is installed.
"""
import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path

import pytest

PLUGIN = Path(__file__).parent / "plugins" / "robench-example-defense"
DIST = "robench-example-defense"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """A directory with the plugin installed in it (from a copy of its source: builds write into the tree)."""
    root = tmp_path_factory.mktemp("plugin")
    source = root / "src"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    site = root / "site"
    subprocess.run([sys.executable, "-m", "pip", "-q", "install", "--no-deps", "--no-build-isolation",
                    "--no-index", "--target", str(site), str(source)], check=True, capture_output=True, timeout=300)
    assert (site / "robench_example_defense").is_dir()
    return site


def _robench(site: Path, *args):
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONPATH": path,
           "COLUMNS": "400"}  # `robench list` tables on one line per entry
    return subprocess.run([sys.executable, "-m", "robench.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def _where(settings, tiny_backbone):
    return ["--backbone", str(tiny_backbone), "--data-dir", str(settings.data_dir), "--cache-dir",
            str(settings.cache_dir), "--results-dir", str(settings.results_dir), "--epochs", "1", "--max-length",
            "32", "--quiet"]


def test_the_shared_environment_stays_without_the_plugin(plugin_site):
    assert list(plugin_site.glob("robench_example_defense-*.dist-info/entry_points.txt"))
    with pytest.raises(PackageNotFoundError):
        distribution(DIST)  # not installed where this process (and every other test worker) looks
    # nothing importable from the shared environment's path (another test may have imported the plugin from its
    # source tree, which leaves it in sys.modules but installs nothing)
    assert importlib.machinery.PathFinder.find_spec("robench_example_defense", sys.path) is None


@pytest.mark.integration
def test_plugin_is_listed_with_its_source(plugin_site):
    for kind, name in (("models", "example"), ("attacks", "example-typo")):
        proc = _robench(plugin_site, "list", kind)
        assert proc.returncode == 0, proc.stderr
        line = next((line for line in proc.stdout.splitlines() if f" {name} " in f" {line} "), None)
        assert line is not None and f"plugin {DIST}" in line, proc.stdout


@pytest.mark.integration
def test_run_with_plugin_model(plugin_site, settings, tiny_backbone):
    proc = _robench(plugin_site, "run", "--model", "example", *_where(settings, tiny_backbone), "--param",
                    "smoothing=0.2")
    assert proc.returncode == 0, proc.stderr
    (record,) = settings.runs_dir.glob("*.json")
    saved = json.loads(record.read_text())
    assert saved["spec"]["model"] == "example" and saved["hyperparameters"]["model"] == {"smoothing": 0.2}


@pytest.mark.integration
def test_run_with_plugin_attack(plugin_site, settings, tiny_backbone):
    proc = _robench(plugin_site, "run", "--attack", "example-typo", "--eval-size", "4", "--attack-param",
                    "query_budget=30", *_where(settings, tiny_backbone))
    assert proc.returncode == 0, proc.stderr
    (record,) = settings.runs_dir.glob("*.json")
    saved = json.loads(record.read_text())
    assert saved["spec"]["attack"] == "example-typo" and saved["metrics"]["examples"] == 4
    assert saved["hyperparameters"]["attack"] == {"max_modification_rate": 0.3, "query_budget": 30,
                                                  "concurrency": 16}
    assert saved["resources"]["attack"]["external_resources"] == "none"
