"""Your checkpoint beside a published protocol: `run --checkpoint DIR --protocol NAME`, then `leaderboard` and
`compare --with-reference` (robench.report.reference, robench.report.single)."""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from test_own_model import _cli, save_classifier

import robench
from robench.core.records import RunRecord, iter_records, read_examples
from robench.core.types import ExampleResult
from robench.runs.spec import RunSpec, TrainConfig
from robench.runs.store import RunStore

SEEDS = (0, 1, 2, 3, 4)


def _publish(published: Path, template: RunRecord, texts: list[ExampleResult]) -> None:
    """The baseline's five seeds at `template`'s attack setting, on the same examples, as a published protocol
    holds them (bert right under attack on about 60% of them)."""
    rng = np.random.default_rng(0)
    for seed in SEEDS:
        spec = RunSpec(**{**{k: template.spec[k] for k in ("task", "attack", "eval_size", "eval_seed",
                                                           "data_source", "attack_params")},
                          "model": "bert", "seed": seed, "train_size": 3000, "train": TrainConfig(epochs=2)})
        results = []
        for r in texts:
            right = bool(rng.random() < 0.6)
            results.append(dataclasses.replace(r, original_prediction=r.label, status="failed" if right else "skipped",
                                               perturbed_prediction=r.label if right else 1 - r.label))
        robust = sum(r.status == "failed" for r in results) / len(results)
        record = RunRecord(run_id=spec.run_id, spec=spec.to_dict(),
                           hyperparameters={**template.hyperparameters, "train": dataclasses.asdict(spec.train)},
                           resources={"data": template.resources["data"]},
                           metrics={"examples": len(results), "dev_accuracy": 0.85, "clean_accuracy": None,
                                    "robust_accuracy": robust},
                           timings={"train_seconds": 1.0}, checkpoint="ckpt", created=f"2026-01-01T00:00:0{seed}")
        RunStore(published, spec.run_id).finish(record, results)


@pytest.fixture
def protocol(settings, tiny_backbone, tmp_path, monkeypatch):
    """A published protocol "toy" (AdvGLUE on the tiny data, bert at 5 seeds) and a checkpoint of your own."""
    ckpt = save_classifier(tiny_backbone, tmp_path / "mine", {0: "negative", 1: "positive"})
    scratch = dataclasses.replace(settings, results_dir=tmp_path / "scratch")
    template = robench.evaluate(str(ckpt), task="sst2", attack="advglue", settings=scratch, device="cpu")
    published = tmp_path / "published" / "runs"
    _publish(published, template, read_examples(scratch.runs_dir, template.run_id))
    monkeypatch.setattr("robench.report.reference.reference_runs_dir",
                        lambda name: published if name == "toy" else pytest.fail(name))
    # the tiny random checkpoint is at chance; the comparison is what is tested here (test_chance.py: the flag)
    monkeypatch.setattr("robench.report.untrained.untrained_runs", lambda *args, **kwargs: {})
    monkeypatch.setattr("robench.report.leaderboard.untrained_runs", lambda *args, **kwargs: {})
    return ckpt


def test_my_checkpoint_beside_the_reference_in_one_command(capsys, settings, where, protocol):
    code, out, err = _cli(capsys, "run", "--checkpoint", protocol, "--protocol", "toy", *where)
    assert code == 0, err
    assert "next: robench leaderboard --with-reference toy" in out
    (mine,) = iter_records(settings.runs_dir)
    assert mine.spec["attack"] == "advglue" and mine.spec["eval_size"] is None

    code, out, err = _cli(capsys, "compare", "--with-reference", "toy", "--results-dir", settings.results_dir)
    assert code == 0, err
    text = " ".join(out.split())
    assert "1 vs 0 1 2 3 4" in text and "one checkpoint of your own against the baseline's seeds" in text

    code, out, err = _cli(capsys, "leaderboard", "--with-reference", "toy", "--results-dir", settings.results_dir,
                          "--html", settings.results_dir / "board.html")
    assert code == 0, err
    board = settings.results_dir / "with-toy"
    rows = (board / "leaderboard.md").read_text().splitlines()
    assert sum(line.startswith("| sst2 |") for line in rows) == 2  # bert's published row and mine
    table = {r["model"]: r for r in _csv(board / "leaderboard.csv")}
    assert table["bert"]["seeds"] == "5" and float(table[mine.spec["model"]]["advglue.robust_accuracy_diff_seeds"]) == 5
    said = table[mine.spec["model"]]["advglue.robust_accuracy_diff_verdict"]
    assert said in ("more robust than the baseline", "less robust than the baseline") or \
        said.startswith("inconclusive: differences up to ")
    assert mine.spec["model"] in (settings.results_dir / "board.html").read_text()
    assert not list((settings.results_dir / "runs").glob("*.html"))  # run pages only when asked


def test_the_protocol_sets_its_own_attacks(capsys, where, protocol):
    code, _, err = _cli(capsys, "run", "--checkpoint", protocol, "--protocol", "toy", "--attack", "textfooler",
                        *where)
    assert code == 2 and "sets the task, attacks and eval sizes: drop --attack" in err
    code, _, err = _cli(capsys, "run", "--protocol", "toy", *where)
    assert code == 2 and "add --checkpoint DIR" in err


def test_with_reference_needs_a_run_at_the_protocols_settings(capsys, settings, where, protocol):
    settings.runs_dir.mkdir(parents=True)
    code, _, err = _cli(capsys, "compare", "--with-reference", "toy", "--results-dir", settings.results_dir)
    assert code == 2 and "--protocol toy` first" in err


def test_the_published_records_are_found_through_one_function(tmp_path):
    from robench.core.errors import RobenchError
    from robench.report.reference import reference_runs_dir

    runs = reference_runs_dir("reference", tmp_path / "cache")  # the shipped packed records, unpacked
    published = Path(__file__).resolve().parents[1] / "results" / "reference" / "records.jsonl"
    assert len(list(runs.glob("*.json"))) == len(published.read_text().splitlines())
    with pytest.raises(RobenchError, match="no shipped reference protocol 'nope'"):
        reference_runs_dir("nope")


def _csv(path: Path) -> list[dict]:
    import csv

    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_a_given_checkpoints_run_id_names_its_weights_not_its_path_or_name():
    spec = RunSpec(checkpoint={"kind": "checkpoint", "location": "/x", "weights_sha256": "ab" * 32,
                               "label_map": None}, model="checkpoint:x@abababab")
    moved = RunSpec(checkpoint={**spec.checkpoint, "location": "/y"}, model="checkpoint:y@abababab")
    assert spec.run_id.startswith("sst2-weights_abababab-advglue-s0-") and moved.run_id == spec.run_id
    assert json.loads(json.dumps(spec.to_dict()))["checkpoint"]["location"] == "/x"  # the record keeps where


@pytest.mark.integration  # every published spec resolved on the real data (QNLI's dev split), about 20 s
def test_the_shipped_protocols_resolve_to_their_published_parameters(settings, tiny_backbone, tmp_path, monkeypatch,
                                                                     shared_data):
    """Every attack of each shipped protocol, resolved today for a checkpoint, has its published run's
    parameters: the knobs added since they ran hold their earlier values (`KNOBS_ADDED_LATER`). The bug: a
    `--protocol reference` run stopped at 'resolves here to other parameters'. (The resource check, the masked LM
    built, is tests/test_resource_identity.py's.)"""
    from robench.engine import resources
    from robench.report import reference

    monkeypatch.setattr(reference, "require_published_resources", lambda *args: None)
    monkeypatch.setattr(resources, "require_masked_lm", lambda *args: None)  # no MLM built in the unit tests
    sst2 = save_classifier(tiny_backbone, tmp_path / "sst2", {0: "negative", 1: "positive"})
    qnli = save_classifier(tiny_backbone, tmp_path / "qnli", {0: "entailment", 1: "not_entailment"})
    real = dataclasses.replace(settings, data_dir=shared_data)  # the tiny data has no QNLI
    for name, ckpt in (("reference", sst2), ("reference-lowres", sst2), ("reference-qnli", qnli)):
        runs = reference.protocol_runs(name, str(ckpt), settings if name != "reference-qnli" else real)
        published = {r.spec["attack"] for r in reference.baseline_records(name)}
        assert {r.spec.attack for r in runs} == published, name
