"""Every resource that can change an attack's output is checked against the record before reuse
(robench.engine.resources.identity): a record made with a 2-step masked LM is not returned as finished once the MLM
is rebuilt differently, a resume does not mix two builds, older records (the published reference's) are compared on
what they recorded, and `--protocol reference` refuses an MLM other than the published one. The run ids stay."""
from __future__ import annotations

import json
import logging

import pytest
from conftest import tiny_spec

import robench
from robench.core.errors import RobenchError
from robench.core.manifest import write_manifest
from robench.core.records import RunRecord
from robench.core.types import ExampleResult
from robench.engine.attack import ATTACKS
from robench.engine.resources.identity import RESOURCES, differing, identities, identity_digest, identity_problem
from robench.engine.resources.mlm import mlm_dir
from robench.runs.store import RunStore

PUBLISHED_ACCURACY = 0.15791393143690738  # the reference's BERT-Attack records' MLM (docs/studies/attacks.md)


def fake_mlm_build(settings, steps: int, accuracy: float, weights: bytes) -> None:
    """What `robench resources build-mlm` leaves (build.json, weights, manifest), without training anything."""
    folder = mlm_dir(settings)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "build.json").write_text(json.dumps({"steps_done": steps, "heldout_accuracy_after": accuracy}))
    (folder / "model.safetensors").write_bytes(weights)
    (folder / "config.json").write_text("{}")
    write_manifest(folder)


@pytest.fixture
def mlm_run(monkeypatch):
    """The AdvGLUE replay declared as reading the built MLM, so a cheap end-to-end run depends on it."""
    monkeypatch.setattr(ATTACKS.get("advglue"), "resources", lambda params: {"masked-lm": "built"})


def test_a_record_made_with_another_mlm_build_is_not_returned_as_finished(settings, tiny_backbone, work, mlm_run,
                                                                          caplog):
    from robench.runs import runner

    fake_mlm_build(settings, 2, 0.01, b"two steps")
    first = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    assert first.resources["identity"]["masked-lm"]["steps"] == 2
    assert runner.plan(tiny_spec(tiny_backbone), settings, device="cpu", cost=False).record_finished
    fake_mlm_build(settings, 400, PUBLISHED_ACCURACY, b"four hundred steps")  # rebuilt differently
    assert not runner.plan(tiny_spec(tiny_backbone), settings, device="cpu", cost=False).record_finished
    with caplog.at_level(logging.WARNING):
        again = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    assert "other resources: masked-lm" in caplog.text and "steps 2 then, 400 now" in caplog.text
    assert again.run_id == first.run_id  # the id is unchanged: the record is checked, not re-keyed
    assert again.resources["identity"]["masked-lm"]["steps"] == 400
    assert work.counts == {"trained": 1, "attacked": 2}  # attacked again, on the cached checkpoint
    assert runner.plan(tiny_spec(tiny_backbone), settings, device="cpu", cost=False).record_finished


def test_only_the_weights_differ_is_enough(settings):
    fake_mlm_build(settings, 400, PUBLISHED_ACCURACY, b"one build")
    before = identities(settings, {"masked-lm": "built"})
    fake_mlm_build(settings, 400, PUBLISHED_ACCURACY, b"another build, same steps and accuracy")
    after = identities(settings, {"masked-lm": "built"})
    assert "weights" in identity_problem({"identity": before}, after)
    assert identity_problem({"identity": after}, after) is None


def legacy_resources(accuracy: float) -> dict:
    """A record's resources as the published reference wrote them: no `identity`, the MLM's info only."""
    return {"attack": {"masked_lm": {"name": "robench-built-mlm-minilm", "heldout_masked_accuracy": accuracy},
                       "masked_lm_heldout_accuracy": accuracy}}


def test_an_older_record_is_compared_on_what_it_recorded(settings):
    fake_mlm_build(settings, 400, PUBLISHED_ACCURACY, b"w")
    now = identities(settings, {"masked-lm": "built", "stopwords": "default"})
    assert identity_problem(legacy_resources(PUBLISHED_ACCURACY), now) is None
    stopped_early = legacy_resources(0.0952)
    assert differing(stopped_early, now) == {"masked-lm": f"heldout_accuracy 0.0952 then, {PUBLISHED_ACCURACY!r} now"}
    # a TextAttack recipe's record nests the MLM under "used"
    used = stopped_early["attack"]["masked_lm"]
    nested = {"attack": {"masked_lm": {"substitutes": "bert-base-uncased", "used": used}}}
    assert "masked-lm" in differing(nested, now)


def test_a_resume_does_not_mix_two_builds(tmp_path, caplog):
    store = RunStore(tmp_path / "runs", "r1")
    result = ExampleResult(index=0, label=1, original_prediction=1, perturbed_prediction=0, status="successful",
                           original_text="a", perturbed_text="b", queries=3)
    store.append(result, {"made_with": "hp", "resources": "build-a"})
    assert list(store.load_partial(made_with="hp", resources="build-a")) == [0]
    with caplog.at_level(logging.WARNING):
        assert list(store.load_partial(made_with="hp", resources="build-b")) == []
    assert "other resources" in caplog.text


def test_every_recipe_names_only_declared_resources():

    for name in ("textfooler", "bert-attack", "gradient-swap", "advglue"):
        recipe = ATTACKS.get(name)
        uses = recipe.resources(recipe.params())
        assert set(uses) <= set(RESOURCES.names()), (name, uses)
    assert ATTACKS.get("bert-attack").resources(ATTACKS.get("bert-attack").params())["masked-lm"] == "built"
    assert "masked-lm" not in ATTACKS.get("textfooler").resources(ATTACKS.get("textfooler").params())
    natural = ATTACKS.get("textfooler").resources(ATTACKS.get("textfooler").params(budget="natural"))
    assert {"natural-filters", "context-similarity"} <= set(natural)


def test_a_missing_resource_is_named_not_raised(settings):
    found = identities(settings, {"masked-lm": "built"})["masked-lm"]
    assert found["variant"] == "built" and "no masked LM built" in found["unavailable"]
    assert identity_digest(found) == identity_digest(dict(found))


class _Resolved:
    def __init__(self, identity):
        self.identity = identity

    def resource_identity(self):
        return self.identity


def test_the_protocol_refuses_an_mlm_other_than_the_published_one(settings):
    from robench.report.reference import require_published_resources

    published = RunRecord(run_id="pub", spec={"attack": "bert-attack"}, hyperparameters={},
                          resources=legacy_resources(PUBLISHED_ACCURACY), metrics={}, timings={}, checkpoint="")
    fake_mlm_build(settings, 173, 0.0952, b"stopped early")
    with pytest.raises(RobenchError, match=r"other resources than the published run pub: masked-lm "
                                           r"\(heldout_accuracy 0.15791393143690738 then, 0.0952 now\).*"
                                           r"robench resources build-mlm --force"):
        require_published_resources("reference", published, _Resolved(identities(settings, {"masked-lm": "built"})))
    fake_mlm_build(settings, 400, PUBLISHED_ACCURACY, b"the published build")
    require_published_resources("reference", published, _Resolved(identities(settings, {"masked-lm": "built"})))
