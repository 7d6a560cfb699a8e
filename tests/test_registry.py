import pytest

from robench.core.errors import RobenchError
from robench.core.registry import Registry
from robench.data import TASKS
from robench.engine.attack import ATTACKS
from robench.training.defense import MODELS


def test_builtins_are_registered_with_source():
    assert "bert" in MODELS.names()
    assert "advglue" in ATTACKS.names()
    assert {"sst2", "mr", "agnews", "qnli", "rte"} <= set(TASKS.names())
    assert all(e.source == "robench" for e in MODELS.entries() if e.name == "bert")


def test_unknown_name_suggests_close_matches():
    with pytest.raises(RobenchError, match="did you mean bert"):
        MODELS.get("bret")
    with pytest.raises(RobenchError, match="did you mean sst2"):
        TASKS.get("sst-2")


def test_decorator_registration_and_patterns():
    reg: Registry[object] = Registry("widgets", "robench.core.errors")  # any importable module
    obj = object()
    reg.register("alpha")(obj)
    assert reg.get("alpha") is obj
    assert reg.names("al*") == ["alpha"]
    with pytest.raises(RobenchError, match="registered twice"):
        reg.register("alpha")(object())


def test_composed_model_names():
    from robench.training.defense import resolve_model

    bert = resolve_model("bert")
    assert bert.resolve_params({}) == {}
    with pytest.raises(RobenchError, match="unknown hyperparameter"):
        bert.resolve_params({"gamma": 1.0})
    with pytest.raises(RobenchError, match="unknown model"):
        resolve_model("bert+nothing")


def _package(tmp_path, monkeypatch, name: str, files: dict[str, str]) -> None:
    """A built-in package `name` on sys.path, from {relative path: source}."""
    for rel, text in files.items():
        (tmp_path / name / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name / rel).write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))


def test_a_failed_builtin_import_raises_again_rather_than_reading_as_unknown(tmp_path, monkeypatch):
    # issue 44: discovery was marked done before the import ran, so the second lookup said "unknown widget"
    _package(tmp_path, monkeypatch, "broken_builtins", {"__init__.py": "raise ImportError('missing dependency x')"})
    reg: Registry[object] = Registry("widgets", "broken_builtins")
    for _ in range(2):
        with pytest.raises(ImportError, match="missing dependency x"):
            reg.get("alpha")


def test_a_failed_lazy_module_raises_again_and_keeps_its_name(tmp_path, monkeypatch):
    _package(tmp_path, monkeypatch, "lazy_builtins", {
        "__init__.py": "LAZY = {'alpha': 'lazy_builtins.alpha', 'beta': 'lazy_builtins.beta'}",
        "alpha.py": "raise ImportError('missing dependency y')",
        "beta.py": "from robench.core.registry import Registry\n",
    })
    reg: Registry[object] = Registry("widgets", "lazy_builtins")
    assert reg.names() == ["alpha", "beta"]  # declared, nothing imported
    for _ in range(2):
        with pytest.raises(ImportError, match="missing dependency y"):
            reg.get("alpha")
    assert "alpha" in reg
    with pytest.raises(RobenchError, match="does not register it"):
        reg.get("beta")


def test_lazy_tables_name_exactly_what_the_modules_register():
    import importlib

    import robench.attacks
    import robench.models

    for registry, package in ((MODELS, robench.models), (ATTACKS, robench.attacks)):
        for module in set(package.LAZY.values()):
            importlib.import_module(module)
        builtin = {e.name for e in registry.entries() if e.source == "robench"}
        assert builtin == set(package.LAZY), registry.kind
        assert all(registry.get(name) is not None for name in package.LAZY)


def test_looking_up_names_and_parsing_arguments_import_no_torch():
    import subprocess
    import sys

    code = """
import sys
from robench.engine.attack import ATTACKS
from robench.training.defense import MODELS
from robench.data import TASKS
assert "imbert" in MODELS and "textfooler" in ATTACKS.names() and MODELS.get("bert").name == "bert"
TASKS.get("sst2")
try:
    ATTACKS.get("textfoolr")
except Exception as exc:
    assert "did you mean textfooler" in str(exc)
from robench.cli import main
try:
    main(["run", "--epochs", "two"])
except SystemExit:
    pass
assert main(["run", "--model", "imbert+frelb", "--quiet"]) == 2
assert main(["run", "--attack", "textfoolr", "--quiet"]) == 2
heavy = sorted({"torch", "transformers", "datasets", "pandas", "scipy"} & set(sys.modules))
assert not heavy, heavy
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "argument --epochs: invalid int value" in done.stderr
    assert "unknown model 'frelb'; did you mean freelb" in done.stderr
    assert "unknown attack 'textfoolr'; did you mean textfooler" in done.stderr


def test_reports_read_a_word_level_recipe_without_torch():
    """The leaderboard labels a setting by the recipe's defaults, and `show` reads the report modules: neither
    loads torch or scipy (issue 45: `show` and `leaderboard` over a small run in seconds)."""
    import subprocess
    import sys

    code = """
import dataclasses, sys
from robench.core.params import make_params
from robench.engine.attack import ATTACKS
from robench.training.defense import MODELS
assert dataclasses.asdict(make_params(ATTACKS.get("textfooler").params, {}, "textfooler"))
MODELS.get("bert")
import robench.report.examples, robench.report.identity, robench.report.readings, robench.report.stats
heavy = sorted({"torch", "transformers", "scipy"} & set(sys.modules))
assert not heavy, heavy
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
