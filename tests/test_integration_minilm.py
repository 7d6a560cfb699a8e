"""Integration: really fine-tune the packaged MiniLM on SST-2 and replay AdvGLUE."""
import pytest

import robench

pytestmark = pytest.mark.integration


def test_minilm_sst2_fine_tunes_well_above_chance(minilm_sst2):
    settings, spec, trained = minilm_sst2
    assert trained.record["train_examples"] == 2000
    assert trained.record["dev_accuracy"] >= 0.80, trained.record["history"]


def test_minilm_advglue_replay(minilm_sst2):
    settings, spec, trained = minilm_sst2
    record = robench.run(spec, settings, device="cpu")
    assert record.timings["train_cached"] is True
    assert record.metrics["examples"] == 148
    assert record.metrics["robust_accuracy"] < record.metrics["dev_accuracy"]
