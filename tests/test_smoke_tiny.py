from conftest import tiny_spec

import robench


def test_tiny_run_end_to_end(settings, tiny_backbone):
    record = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    assert record.metrics["examples"] == 24
    assert 0.0 <= record.metrics["robust_accuracy"] <= 1.0
    assert (settings.runs_dir / f"{record.run_id}.csv").is_file()
