import pytest

from robench.core.errors import RobenchError
from robench.core.registry import ATTACKS, MODELS, TASKS, Registry


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
