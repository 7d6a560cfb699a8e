"""The contract every defence in the model registry keeps (built-in and the test plugin), on the tiny backbone.

A defence builds on a backbone, trains a step that moves its weights with a finite loss, saves as safetensors
and loads back through transformers' Auto classes with the same outputs, and refuses bad hyperparameters: an
unknown key, a non-finite number, and a value outside a field's documented range.
"""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

import pytest
import torch

from robench.core.errors import RobenchError
from robench.core.params import Range
from robench.training.config import TrainConfig
from robench.training.defense import MODELS, ComposedDefense, Defense
from robench.training.loop import make_optimizer, train_step

PLUGIN = Path(__file__).parent / "plugins" / "robench-example-defense"


def _defences() -> list[Defense]:
    sys.path.insert(0, str(PLUGIN))  # the test plugin from its source tree (tests/test_plugin.py installs it)
    try:
        from robench_example_defense import EXAMPLE
    finally:
        sys.path.remove(str(PLUGIN))
    found = [e.load() for e in MODELS.entries()]
    return found + ([EXAMPLE] if EXAMPLE.name not in {d.name for d in found} else [])


DEFENCES = _defences()


def _batch(tokenizer) -> dict[str, torch.Tensor]:
    enc = tokenizer(["a fine film", "a dull , tedious film", "warm and clever", "flat"], padding=True,
                    return_tensors="pt")
    return {**enc, "labels": torch.tensor([1, 0, 1, 0])}


@pytest.mark.parametrize("defence", DEFENCES, ids=lambda d: d.name)
def test_a_defence_trains_a_step_that_moves_its_weights(defence, tiny_backbone):
    from transformers import AutoTokenizer

    composed = ComposedDefense(defence.name, (defence,))
    params = composed.resolve_params({})
    torch.manual_seed(0)
    model = composed.build(str(tiny_backbone), 2, params)
    before = [p.detach().clone() for p in model.parameters()]
    optimizer, scheduler = make_optimizer(model, TrainConfig(lr=1e-3), total_steps=1)
    loss = train_step(composed.objective(model, params), optimizer, scheduler,
                      _batch(AutoTokenizer.from_pretrained(tiny_backbone)), torch.device("cpu"), 1.0)
    assert math.isfinite(float(loss)) and float(loss) > 0
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))


@pytest.mark.parametrize("defence", DEFENCES, ids=lambda d: d.name)
def test_a_defence_saves_as_safetensors_and_loads_with_the_same_outputs(defence, tiny_backbone, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from robench.runs.given import register_architectures

    composed = ComposedDefense(defence.name, (defence,))
    model = composed.build(str(tiny_backbone), 2, composed.resolve_params({})).eval()
    model.save_pretrained(tmp_path, safe_serialization=True)
    assert (tmp_path / "model.safetensors").is_file() and not list(tmp_path.glob("*.bin"))
    register_architectures()
    loaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model)
    batch = {k: v for k, v in _batch(AutoTokenizer.from_pretrained(tiny_backbone)).items() if k != "labels"}
    with torch.no_grad():
        assert torch.allclose(model(**batch).logits, loaded(**batch).logits, atol=1e-6)


def _bad_values(defence: Defense) -> list[tuple[str, object]]:
    """An unknown key, then per numeric field NaN, inf and (where documented) a value outside its range."""
    bad: list[tuple[str, object]] = [("no_such_param", 1)]
    for f in dataclasses.fields(defence.params):
        if not isinstance(f.default, (int, float)) or isinstance(f.default, bool):
            continue
        bad += [(f.name, float("nan")), (f.name, float("inf"))]
        limits: Range | None = f.metadata.get("range")
        if limits is not None and limits.low is not None:
            bad.append((f.name, limits.low - 1))
        if limits is not None and limits.high is not None:
            bad.append((f.name, limits.high + 1))
    return bad


@pytest.mark.parametrize("defence", DEFENCES, ids=lambda d: d.name)
def test_a_defence_refuses_bad_hyperparameters_before_building(defence):
    composed = ComposedDefense(defence.name, (defence,))
    for key, value in _bad_values(defence):
        with pytest.raises(RobenchError, match=key):
            composed.resolve_params({key: value})


@pytest.mark.parametrize("defence", DEFENCES, ids=lambda d: d.name)
def test_every_numeric_hyperparameter_of_a_defence_has_a_documented_range(defence):
    unbounded = [f.name for f in dataclasses.fields(defence.params)
                 if isinstance(f.default, (int, float)) and not isinstance(f.default, bool)
                 and f.metadata.get("range") is None]
    assert unbounded == [], f"{defence.name}: give these fields a range with robench.core.params.bounded"


def test_the_contract_covers_every_registered_defence_and_the_plugin():
    """Every defence module on disk (models/*.py) is registered under its own name and so checked here, and so
    is the test plugin's; nothing else is."""
    import robench.models

    modules = {p.stem for p in Path(robench.models.__file__).parent.glob("*.py") if p.stem != "__init__"}
    assert {"bert", "imbert", "freelb", "smart", "safer"} <= modules
    assert sorted(d.name for d in DEFENCES) == sorted(modules | {"example"})
