"""Property: any value of any numeric flag, hyperparameter or grid `[train]` key gives a clear error
(exit 2, one `robench: error:` line, or argparse's usage error) or a valid run, never a traceback.

The work after validation is stubbed (`robench.runs.runner.run_stages`): what is checked is that every value
either is rejected up front or reaches the work stage as a valid spec. Bounded example counts keep
each property to seconds; docs/guide/reliability.md lists what each one covers.
"""
from __future__ import annotations

import dataclasses
import json
import math
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import robench.runs.runner
from robench.cli import main
from robench.core.params import check_values
from robench.core.records import RunRecord
from robench.engine.attack import ATTACKS
from robench.runs.spec import TrainConfig
from robench.training.defense import MODELS

FLAGS = ("--seed", "--eval-seed", "--train-size", "--eval-size", "--epochs", "--lr", "--batch-size", "--max-length")
NUMBERS = st.one_of(
    st.integers(min_value=-2**70, max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 2**32, 2**32 - 1, 7, 8, 128, 129, 1e-300, 1e308, 0.5]),
)
VALUES = st.one_of(NUMBERS, st.booleans(), st.text(max_size=6), st.lists(st.integers(-3, 3), max_size=3))
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def _argv_text(value) -> str:
    return json.dumps(value) if isinstance(value, (bool, list)) else str(value)


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(value)  # strings and lists: JSON is (nearly always) TOML; if not, TOML's own error


@pytest.fixture
def accepted(monkeypatch):
    """Stub the work after validation; collect the specs that reached it."""
    specs = []

    def stub(resolved, *rest):
        specs.append(resolved.spec)
        return robench.runs.runner.Attacked(RunRecord(
            run_id=resolved.spec.run_id, spec=resolved.spec.to_dict(), hyperparameters={}, resources={},
            metrics={"examples": 0}, timings={}, checkpoint=""), None)

    monkeypatch.setattr(robench.runs.runner, "run_stages", stub)
    return specs


@pytest.fixture
def base(tiny_data, tiny_backbone, tmp_path):
    return ["--backbone", str(tiny_backbone), "--data-dir", str(tiny_data), "--cache-dir", str(tmp_path / "cache"),
            "--results-dir", str(tmp_path / "results"), "--quiet"]


def _clear_error_or_valid(capsys, argv) -> int:
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse: a usage line and one error line, exit 2
        assert exc.code == 2
        capsys.readouterr()
        return 2
    lines = capsys.readouterr().err.strip().splitlines()
    if code == 2:
        assert len(lines) == 1 and lines[0].startswith("robench: error: "), lines
    else:
        assert code == 0, lines
    return code


def _valid(spec) -> None:
    assert 0 <= spec.seed < 2**32 and 0 <= spec.eval_seed < 2**32 and spec.data_fingerprint
    assert all(size is None or size >= 1 for size in (spec.train_size, spec.eval_size))
    TrainConfig(**dataclasses.asdict(spec.train))  # re-validates: finite and in range
    for value in (*spec.model_params.values(), *spec.attack_params.values()):
        assert not isinstance(value, float) or math.isfinite(value)


@FAST
@given(flag=st.sampled_from(FLAGS), value=VALUES)
def test_numeric_flags(capsys, base, accepted, flag, value):
    if _clear_error_or_valid(capsys, ["run", *base, f"{flag}={_argv_text(value)}"]) == 0:
        _valid(accepted[-1])


DEFENCES = {name: MODELS.get(name).params for name in MODELS.names()}  # every registered defence (plugins too)
RECIPES = {name: ATTACKS.get(name).params for name in ATTACKS.names()}  # every recipe (families take no params)


def _keys(owners: dict[str, type]) -> list[tuple[str, str]]:
    return [(owner, f.name) for owner, cls in owners.items() for f in dataclasses.fields(cls)]


def _in_range(cls: type, values: dict) -> None:
    """Every accepted value has its field's type and lies in its documented range."""
    check_values(cls, values)
    for f in dataclasses.fields(cls):
        limits = f.metadata.get("range")
        if f.name in values and limits is not None and values[f.name] is not None:
            assert limits.contains(values[f.name]), (f.name, values[f.name])


@FAST
@given(target=st.sampled_from(_keys(DEFENCES)), value=VALUES)
def test_model_hyperparameters(capsys, base, accepted, target, value):
    model, key = target
    argv = ["run", *base, "--model", model, "--param", f"{key}={_argv_text(value)}"]
    if _clear_error_or_valid(capsys, argv) == 0:
        _valid(accepted[-1])
        _in_range(DEFENCES[model], accepted[-1].model_params)


@pytest.mark.parametrize("recipe", [name for name, cls in RECIPES.items() if dataclasses.fields(cls)])
@FAST
@given(value=VALUES, data=st.data())
def test_attack_hyperparameters(capsys, base, accepted, recipe, value, data):
    key = data.draw(st.sampled_from([f.name for f in dataclasses.fields(RECIPES[recipe])]), label="key")
    argv = ["run", *base, "--attack", recipe, "--attack-param", f"{key}={_argv_text(value)}"]
    if _clear_error_or_valid(capsys, argv) == 0:
        _valid(accepted[-1])
        _in_range(RECIPES[recipe], accepted[-1].attack_params)


def _numeric(cls: type) -> list[dataclasses.Field]:
    hints = typing.get_type_hints(cls)
    numeric = {int, float, int | None, float | None}
    return [f for f in dataclasses.fields(cls) if hints.get(f.name) in numeric]


OWN = {name: cls for name, cls in {**DEFENCES, **RECIPES}.items() if cls.__module__.split(".")[0] == "robench"}


@pytest.mark.parametrize("owner", sorted(OWN))  # a plugin's ranges are its own (tests/test_contracts.py)
def test_every_numeric_hyperparameter_has_a_documented_range(owner):
    """Every number a defence or recipe of robench takes has both ends of a range in code, and the same range in
    docs/guide/hyperparameters.md, so an absurd value is an error before any work."""
    from robench.core.params import Range

    cls = OWN[owner]
    docs = (Path(__file__).resolve().parents[1] / "docs" / "guide" / "hyperparameters.md").read_text(encoding="utf-8")
    for f in _numeric(cls):
        limits: Range | None = f.metadata.get("range")
        assert limits is not None and limits.low is not None and limits.high is not None, (owner, f.name)
        text = limits.describe(typing.get_type_hints(cls)[f.name] in (int, int | None))
        row = f"| `{cls.__name__}` | `{f.name}` | {text} |"
        assert row in docs, f"docs/guide/hyperparameters.md needs the row: {row}"


TRAIN_KEYS = tuple(f.name for f in dataclasses.fields(TrainConfig))


@FAST
@given(key=st.sampled_from(TRAIN_KEYS), value=VALUES, seeds=st.lists(NUMBERS, min_size=1, max_size=2))
def test_grid_train_keys_and_seeds_at_dry_run(capsys, base, tiny_backbone, tmp_path, key, value, seeds):
    config = tmp_path / "grid.toml"
    config.write_text(
        f'tasks = ["sst2"]\nmodels = ["bert"]\nattacks = ["advglue"]\nbackbones = [{json.dumps(str(tiny_backbone))}]\n'
        f"seeds = [{', '.join(_toml(s) for s in seeds)}]\n[train]\n{key} = {_toml(value)}\n", encoding="utf-8")
    flags = [a for a in base if a not in ("--backbone", str(tiny_backbone))]
    _clear_error_or_valid(capsys, ["grid", str(config), "--dry-run", *flags])
    capsys.readouterr()
