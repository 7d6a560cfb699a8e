"""`robench bench attack`'s limit (issue 30): the raw forward rate on the attack's own inputs, the fraction of it
the attack reaches, and the profile of the attack's time. Tiny random BERT configs; no timed assertions: the
checks are the accounting (parts add up, the raw pass changes nothing) and what is printed and written."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from robench.core.types import Profile
from robench.engine.victim import QueryCounter, Victim


class FakeClock:
    """`time.perf_counter` that advances only when told."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_profile_counts_nested_parts_once(monkeypatch):
    import robench.core.types as types

    clock = FakeClock()
    monkeypatch.setattr(types.time, "perf_counter", clock)
    profile = Profile()
    with profile.part("search"):
        clock.now += 1.0
        with profile.part("candidates"):
            clock.now += 2.0
            with profile.part("pos tagging"):
                clock.now += 4.0
            clock.now += 8.0
        clock.now += 16.0
    with profile.part("embed"):
        clock.now += 32.0
    assert profile.seconds == {"search": 17.0, "candidates": 10.0, "pos tagging": 4.0, "embed": 32.0}
    assert sum(profile.seconds.values()) == clock.now  # exclusive: nothing counted twice
    assert profile.to_dict()["seconds"] == profile.seconds


def test_time_forward_runs_the_inputs_again_and_changes_nothing(tiny_backbone):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_backbone, num_labels=2)
    victim = Victim(model, AutoTokenizer.from_pretrained(tiny_backbone), torch.device("cpu"), batch_size=2)
    texts = [("a long and winding film about nothing",), ("good",), ("a dull film",)]
    probs = victim.predict_proba(texts + texts[:1], QueryCounter())
    assert victim.evaluated_inputs == [("good",), ("a dull film",), ("a long and winding film about nothing",)]
    state = (victim.model_evaluations, victim.forward_calls, victim.forward_seconds, dict(victim._cache))
    assert state[0] == 3 and state[1] == 2 and state[2] > 0  # two sorted batches of at most 2

    shapes = []
    forward = victim.model.forward
    victim.model.forward = lambda **enc: shapes.append(tuple(enc["input_ids"].shape)) or forward(**enc)
    assert victim.time_forward(victim.evaluated_inputs) > 0
    assert shapes == [(2, 5), (1, 9)]  # the same batching as the attack's (shortest first, batch_size)
    assert (victim.model_evaluations, victim.forward_calls, victim.forward_seconds) == state[:3]
    assert victim._cache.keys() == state[3].keys()
    assert np.array_equal(victim.predict_proba(texts + texts[:1]), probs)


def _bench(tmp_path: Path, tiny_data: Path, tiny_backbone: Path, *extra: str) -> None:
    from robench.cli import main

    assert main(["bench", "attack", "--examples", "3", "--backbone", str(tiny_backbone), "--train-size", "32",
                 "--epochs", "1", "--sentence-encoder", "use-m3", "--data-dir", str(tiny_data),
                 "--cache-dir", str(tmp_path / "cache"), "--results-dir", str(tmp_path / "res"), "--device", "cpu",
                 "--quiet", *extra]) == 0


def _table(path: Path) -> dict[str, list[str]]:
    rows = list(csv.reader(open(path)))
    return {r[0]: r[1:] for r in rows}


def _seconds(cell: str) -> float:
    return float(cell.split(" s")[0])


def _check_profile(profile: dict[str, list[str]], column: int) -> None:
    """The profile's exclusive parts add up to the attack stage's wall time (rounded to 0.01 s per row)."""
    parts = [k for k in profile if k not in ("part", "attack stage wall time") and not k.startswith("  ")]
    total = sum(_seconds(profile[k][column]) for k in parts)
    assert total == pytest.approx(_seconds(profile["attack stage wall time"][column]), abs=0.01 * len(parts) + 1e-9)


def test_bench_attack_prints_the_fraction_and_the_profile(tmp_path, tiny_data, tiny_backbone, capsys):
    _bench(tmp_path, tiny_data, tiny_backbone, "--synonym-source", "neighbors", "--no-stock")
    out = capsys.readouterr().out
    assert "fraction of the raw rate" in out and "Profile: where the attack stage's time goes" in out
    assert "load average" in out
    bench = tmp_path / "res" / "bench"
    metrics = _table(bench / "attack-sst2-3.csv")
    assert metrics["metric"] == ["textfooler", "textattack:textfooler"]
    for column in range(2):
        forwards = int(metrics["victim forwards (inputs run through the model)"][column])
        assert forwards > 0 and float(metrics["raw forward rate, same inputs (per second)"][column]) > 0
        assert metrics["  fraction of the raw rate (target: 85%)"][column].endswith("%")
    records = {r["spec"]["attack"]: r for r in map(json.loads, map(Path.read_text, (tmp_path / "res" / "runs")
                                                                   .glob("*.json")))}
    ours = records["textfooler"]["timings"]
    assert int(metrics["victim forwards (inputs run through the model)"][0]) == ours["victim_queries"]
    assert ours["profile"]["counts"]["victim forwards"] == ours["victim_queries"]
    assert set(ours["profile"]["seconds"]) >= {"attack", "engine", "search", "victim forward", "candidates",
                                               "pos tagging", "victim bookkeeping"}
    assert "profile" not in records["textattack:textfooler"]["timings"]  # TextAttack's code is not the engine

    profile = _table(bench / "attack-sst2-3-profile.csv")
    assert profile["part"] == ["textfooler", "textattack:textfooler"]
    assert {"victim forward", "POS tagging", "candidate generation", "search bookkeeping"} <= set(profile)
    _check_profile(profile, 0)
    assert profile["POS tagging"][1] == "-"  # not timed inside TextAttack
    assert (bench / "attack-sst2-3-profile.md").read_text().startswith("### Profile of TextFooler on sst2")


@pytest.fixture(scope="module")
def tiny_mlm(tmp_path_factory, tiny_backbone) -> Path:
    """A 2-layer random BertForMaskedLM with the MiniLM tokenizer, saved like a hub model."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    path = tmp_path_factory.mktemp("tiny-mlm")
    torch.manual_seed(0)
    BertForMaskedLM(BertConfig.from_pretrained(tiny_backbone)).save_pretrained(path, safe_serialization=True)
    AutoTokenizer.from_pretrained(tiny_backbone).save_pretrained(path)
    return path


@pytest.mark.parametrize("attack", ["bert-attack", "gradient-swap"])
def test_bench_attack_profiles_the_other_recipes(attack, tmp_path, tiny_data, tiny_backbone, tiny_mlm, capsys):
    extra = ["--robench-param", f"masked_lm={tiny_mlm}"] if attack == "bert-attack" else \
        ["--synonym-source", "neighbors"]
    _bench(tmp_path, tiny_data, tiny_backbone, "--attack", attack, *extra)
    assert "fraction of the raw rate" in capsys.readouterr().out
    bench = tmp_path / "res" / "bench"
    metrics = _table(bench / f"attack-{attack}-sst2-3.csv")
    assert metrics["metric"] == [attack]  # robench's recipe alone
    assert metrics["  fraction of the raw rate (target: 85%)"][0].endswith("%")
    profile = _table(bench / f"attack-{attack}-sst2-3-profile.csv")
    model_part = "masked LM (candidates)" if attack == "bert-attack" else "victim input gradients"
    assert model_part in profile and _seconds(profile[model_part][0]) >= 0  # the further model cost, apart
    _check_profile(profile, 0)
    (record,) = [json.loads(p.read_text()) for p in (tmp_path / "res" / "runs").glob("*.json")]
    assert record["spec"]["attack"] == attack
    seconds = record["timings"]["profile"]["seconds"]
    assert ("mlm" if attack == "bert-attack" else "victim gradient") in seconds
    assert sum(v for k, v in seconds.items() if k != "attack") == pytest.approx(seconds["attack"], abs=1e-3)
