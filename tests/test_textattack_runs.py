"""`textattack:<recipe>` end to end through robench.run: budgets and resume, example errors, bad parameters, real
offline resources, the attack bench and BERT-Attack's masked LM (the offline fixes: test_textattack_backend.py)."""
from __future__ import annotations

import csv
import json

import pytest
from conftest import tiny_spec

import robench
from robench.core.errors import RobenchError
from robench.core.types import ExampleResult
from robench.data.loading import load_split, subset
from robench.runs.resolve import resolve_run
from robench.runs.store import RunStore, hyperparameters_hash

# ---------------------------------------------------------------- end to end through robench.run


def _rows(settings, record):
    return list(csv.DictReader(open(settings.runs_dir / f"{record.run_id}.csv")))


@pytest.mark.textattack
def test_deepwordbug_end_to_end_with_budget_and_resume(settings, tiny_backbone):
    """A cheap recipe (no model resources) through the runner: records, budget, and resume from ctx.done."""
    spec = tiny_spec(tiny_backbone, attack="textattack:deepwordbug", eval_size=6, attack_params={"query_budget": 5})
    resolved = resolve_run(spec, settings)
    first = subset(load_split(resolved.task, "eval", settings.data_dir, "local"), 6, spec.eval_seed)[0]
    planted = ExampleResult(index=0, label=first["label"], original_text=first["sentence"], perturbed_text="x",
                            original_prediction=1, perturbed_prediction=1, status="failed", queries=3, num_words=1)
    store = RunStore(settings.runs_dir, resolved.spec.run_id)
    store.append(planted, {"made_with": hyperparameters_hash(resolved.hyperparameters())})  # as if an
    # interrupted attempt had finished example 0
    record = robench.run(spec, settings, device="cpu")
    rows = _rows(settings, record)
    assert len(rows) == 6 and rows[0]["perturbed_text"] == "x"  # example 0 was not attacked again
    assert {r["status"] for r in rows} <= {"skipped", "failed", "successful"}
    assert all(int(r["queries"]) <= 5 for r in rows)  # TextAttack stopped at the per-example budget
    assert record.metrics["examples"] == 6 and record.metrics["errors"] == 0
    assert "DeepWordBugGao2018" in record.resources["attack"]["backend"]
    assert record.resources["attack"]["nltk"]["downloads"] == "disabled"


@pytest.mark.textattack
def test_example_errors_are_recorded_and_the_run_goes_on(settings, tiny_backbone, monkeypatch):
    import robench.attacks.textattack.results as mapping

    original = mapping.to_example_result

    def flaky(index, label, result):
        if index == 1:
            raise ValueError("boom")
        return original(index, label, result)

    monkeypatch.setattr(mapping, "to_example_result", flaky)
    record = robench.run(tiny_spec(tiny_backbone, attack="textattack:pruthi", eval_size=3), settings, device="cpu")
    rows = _rows(settings, record)
    assert [r["status"] == "error" for r in rows] == [False, True, False]
    assert rows[1]["error"] == "ValueError: boom" and record.metrics["errors"] == 1


def test_bad_params_fail_before_training(settings, tiny_backbone):
    with pytest.raises(RobenchError, match="query_budget"):
        robench.run(tiny_spec(tiny_backbone, attack="textattack:pwws", attack_params={"query_budget": 0}), settings,
                    device="cpu")
    with pytest.raises(RobenchError, match="unknown hyperparameter"):
        robench.run(tiny_spec(tiny_backbone, attack="textattack:pwws", attack_params={"kk": 3}), settings, device="cpu")
    with pytest.raises(RobenchError, match="cannot run the natural setting.*textfooler, gradient-swap or bert-attack"):
        robench.run(tiny_spec(tiny_backbone, attack="textattack:textfooler", attack_params={"budget": "natural"}),
                    settings, device="cpu")
    with pytest.raises(RobenchError, match="set its knobs directly"):
        robench.run(tiny_spec(tiny_backbone, attack="textattack:pwws", attack_params={"budget": "morris2020"}),
                    settings, device="cpu")


@pytest.mark.integration
def test_textfooler_end_to_end_on_real_offline_resources(settings, tiny_backbone):
    """The real TextFooler recipe with robench's neighbour lists, MiniLM encoder and NLTK tagger, no downloads."""
    spec = tiny_spec(tiny_backbone, attack="textattack:textfooler", eval_size=4,
                     attack_params={"synonym_source": "neighbors"})
    record = robench.run(spec, settings, device="cpu")
    rows = _rows(settings, record)
    assert len(rows) == 4 and record.metrics["errors"] == 0, [r["error"] for r in rows]
    attacked = [r for r in rows if r["status"] != "skipped"]
    assert attacked and all(int(r["queries"]) > 1 for r in attacked)
    for r in rows:
        if r["status"] == "successful":
            assert r["perturbed_text"] != r["original_text"] and int(r["words_perturbed"]) >= 1
    res = record.resources["attack"]
    assert res["synonyms"]["used"]["name"] == "counterfitted-neighbors"
    assert res["sentence_encoder"]["used"]["name"] == "minilm-sentence-encoder"
    assert res["sentence_encoder"]["recipe_threshold"] == 0.840845057 and res["sentence_encoder"]["metric"] == "angular"
    from robench.engine.resources import MINILM_THRESHOLDS

    assert res["sentence_encoder"]["threshold"] == MINILM_THRESHOLDS[("angular", 0.840845)]  # the calibrated mapping
    assert "POS" in " ".join(res["nltk"]["used"])


@pytest.mark.textattack
def test_bench_attack_writes_the_comparison(tmp_path, tiny_data, tiny_backbone, capsys, monkeypatch, lexicon_cut):
    """`robench bench attack` on the tiny backbone: both attacks, one table, CSV and Markdown (the swap audit's
    lexicon from the tiny cut, not the real relations)."""
    from robench.cli import main

    monkeypatch.setenv("ROBENCH_LEXICON_CUT", str(lexicon_cut))

    assert main(["bench", "attack", "--examples", "3", "--backbone", str(tiny_backbone), "--train-size", "32",
                 "--epochs", "1", "--synonym-source", "neighbors", "--sentence-encoder", "use-m3", "--data-dir",
                 str(tiny_data), "--cache-dir", str(tmp_path / "cache"), "--results-dir", str(tmp_path / "res"),
                 "--device", "cpu", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "accuracy under attack" in out and "speed-up" in out
    rows = list(csv.reader(open(tmp_path / "res" / "bench" / "attack-sst2-3.csv")))
    assert rows[0] == ["metric", "textfooler", "textattack:textfooler", "textattack:textfooler (stock wrapper)"]
    metrics = {r[0]: r[1:] for r in rows[1:]}
    assert metrics["examples (errors)"] == ["3 (0)"] * 3
    assert metrics["  robench speed-up, wall (target: 5x)"][0] == "1.00x"
    # the stock wrapper only changes padding, so TextAttack finds the same texts either way
    assert metrics["same adversarial text as robench"][1] == metrics["same adversarial text as robench"][2]
    assert (tmp_path / "res" / "bench" / "attack-sst2-3.md").read_text().startswith("### TextFooler on sst2")
    records = [json.loads(p.read_text()) for p in (tmp_path / "res" / "runs").glob("*.json")]
    assert sorted(r["spec"]["attack"] for r in records) == ["textattack:textfooler"] * 2 + ["textfooler"]
    assert len({r["checkpoint"] for r in records}) == 1  # one victim checkpoint for all
    stock = [r for r in records if r["spec"]["attack_params"].get("model_wrapper") == "huggingface"]
    assert len(stock) == 1 and "HuggingFaceModelWrapper" in stock[0]["resources"]["attack"]["backend"]


@pytest.mark.textattack
def test_bert_attack_uses_the_given_masked_lm_not_a_download(settings, tiny_backbone, tiny_mlm, monkeypatch,
                                                             lexicon_cut):
    monkeypatch.setenv("ROBENCH_LEXICON_CUT", str(lexicon_cut))  # the swap audit's lexicon: the tiny cut's
    spec = tiny_spec(tiny_backbone, attack="textattack:bert-attack", eval_size=3,
                     attack_params={"mlm": str(tiny_mlm), "sentence_encoder": "use-m3"})
    record = robench.run(spec, settings, device="cpu")
    rows = _rows(settings, record)
    assert len(rows) == 3 and record.metrics["errors"] == 0, [r["error"] for r in rows]
    res = record.resources["attack"]
    assert res["masked_lm"]["used"]["name"] == str(tiny_mlm) and res["masked_lm"]["substitutes"] == "bert-base-uncased"
    assert res["sentence_encoder"]["threshold"] == 0.2 and res["sentence_encoder"]["metric"] == "cosine"
