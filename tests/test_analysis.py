"""`robench analyze`: each metric on hand-made inputs with known answers, the probes on fake
victims, the leaderboard columns, and one tiny end-to-end run through the CLI."""
from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from conftest import tiny_spec

from robench.analysis import AnalysisRecord, analysis_frame, analysis_path, analyze, read_analysis
from robench.analysis.measures import (
    LinearCKA,
    effective_rank,
    entropy,
    gini,
    linear_cka,
    mean_pairwise_cosine,
    top_k_share,
)
from robench.analysis.probes import (
    Concentration,
    deletion_importances,
    deletions,
    shuffle_effects,
    shuffled,
    summarize_words,
)
from robench.cli import main
from robench.core.errors import RobenchError

RNG = np.random.default_rng(0)


# --- CKA ---------------------------------------------------------------------------------

def test_cka_of_a_representation_with_itself_is_one():
    x = RNG.normal(size=(40, 7))
    assert linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)


def test_cka_is_invariant_to_orthogonal_transforms_and_isotropic_scaling():
    x, y = RNG.normal(size=(50, 6)), RNG.normal(size=(50, 9))
    q, _ = np.linalg.qr(RNG.normal(size=(6, 6)))
    assert linear_cka(x, 3.5 * x @ q + 2.0) == pytest.approx(1.0, abs=1e-12)  # translation too (centred)
    assert linear_cka(0.2 * x @ q, y) == pytest.approx(linear_cka(x, y), abs=1e-12)


def test_cka_is_not_invariant_to_anisotropic_scaling():
    x = RNG.normal(size=(50, 6))
    assert linear_cka(x, x * np.array([10.0, 1, 1, 1, 1, 0.1])) < 0.99


def test_cka_of_unrelated_representations_is_small_and_symmetric():
    x, y = RNG.normal(size=(2000, 4)), RNG.normal(size=(2000, 5))
    assert linear_cka(x, y) == pytest.approx(linear_cka(y, x), abs=1e-12)
    assert linear_cka(x, y) < 0.02


def test_cka_accumulated_over_batches_equals_cka_on_all_rows():
    x, y = RNG.normal(size=(37, 5)) + 4.0, RNG.normal(size=(37, 3)) - 1.0
    acc = LinearCKA()
    for start in range(0, 37, 10):
        acc.update(x[start:start + 10], y[start:start + 10])
    assert acc.n == 37
    direct = _cka_by_gram_matrices(x, y)
    assert acc.value() == pytest.approx(direct, abs=1e-10)
    assert linear_cka(x, y) == pytest.approx(direct, abs=1e-10)


def _cka_by_gram_matrices(x, y):
    """Kornblith et al.'s HSIC form with n×n Gram matrices and the centring matrix H."""
    n = len(x)
    h = np.eye(n) - np.ones((n, n)) / n
    k, l_ = h @ x @ x.T @ h, h @ y @ y.T @ h
    return np.sum(k * l_) / np.sqrt(np.sum(k * k) * np.sum(l_ * l_))


def test_cka_rejects_mismatched_rows():
    with pytest.raises(ValueError, match="same number of rows"):
        linear_cka(np.zeros((3, 2)), np.zeros((4, 2)))


# --- concentration -----------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 5, 10])
def test_gini_of_uniform_is_zero_and_of_one_hot_is_n_minus_one_over_n(n):
    assert gini(np.full(n, 0.3)) == pytest.approx(0.0, abs=1e-12)
    one_hot = np.zeros(n)
    one_hot[n // 2] = 2.0
    assert gini(one_hot) == pytest.approx((n - 1) / n)


def test_gini_known_value_and_order_independence():
    # mean absolute difference / (2 mean): pairs of [1, 2, 3] differ by 1, 2, 1 -> G = (2*4/9)/(2*2) = 2/9
    assert gini(np.array([3.0, 1.0, 2.0])) == pytest.approx(2 / 9)


@pytest.mark.parametrize("n", [1, 3, 8])
def test_entropy_of_uniform_is_log_n_and_of_one_hot_is_zero(n):
    assert entropy(np.full(n, 7.0)) == pytest.approx(math.log(n))
    assert entropy(np.eye(n)[0]) == pytest.approx(0.0)


def test_top_k_shares():
    values = np.array([1.0, 4.0, 2.0, 3.0])
    assert top_k_share(values, 1) == pytest.approx(0.4)
    assert top_k_share(values, 3) == pytest.approx(0.9)
    assert top_k_share(np.array([1.0, 1.0]), 3) == pytest.approx(1.0)


def test_concentration_metrics_are_undefined_without_positive_mass_and_reject_negatives():
    for metric in (gini, entropy, lambda v: top_k_share(v, 1)):
        assert math.isnan(metric(np.zeros(4)))
        with pytest.raises(ValueError, match="non-negative"):
            metric(np.array([1.0, -0.5]))


def test_concentration_clips_negative_importances_at_zero():
    c = Concentration.of(np.array([0.6, -0.2, 0.2, 0.0]))
    assert c.top1_share == pytest.approx(0.75) and c.top3_share == pytest.approx(1.0)
    assert c.gini == pytest.approx(gini(np.array([0.6, 0.0, 0.2, 0.0])))
    assert c.entropy == pytest.approx(-(0.75 * math.log(0.75) + 0.25 * math.log(0.25)))
    assert Concentration.of(np.array([-0.1, 0.0])) is None


# --- diversity ---------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 4, 9])
def test_effective_rank_of_identity_is_n(n):
    assert effective_rank(np.eye(n)) == pytest.approx(n)


def test_effective_rank_of_rank_one_is_one_and_of_zero_is_nan():
    u, v = RNG.normal(size=(12, 1)), RNG.normal(size=(1, 6))
    assert effective_rank(u @ v) == pytest.approx(1.0, abs=1e-6)
    assert effective_rank(np.diag([2.0, 2.0, 0.0])) == pytest.approx(2.0)
    assert math.isnan(effective_rank(np.zeros((3, 3))))


def test_mean_pairwise_cosine():
    v = RNG.normal(size=5)
    assert mean_pairwise_cosine(np.stack([v, 2 * v, 0.5 * v])) == pytest.approx(1.0)
    assert mean_pairwise_cosine(np.eye(4)) == pytest.approx(0.0)
    assert mean_pairwise_cosine(np.stack([v, -v])) == pytest.approx(-1.0)
    # pairs of (e1, e1+e2, e2): cos = 1/√2, 0, 1/√2
    assert mean_pairwise_cosine(np.array([[1.0, 0], [1, 1], [0, 1]])) == pytest.approx(math.sqrt(2) / 3)
    assert math.isnan(mean_pairwise_cosine(v[None]))


# --- probes on fake victims --------------------------------------------------------------

def test_shuffled_keeps_each_fields_words_and_is_seeded():
    text = ("the film is not good at all", "a b")
    out = shuffled(text, np.random.default_rng(3))
    assert [sorted(p.split()) for p in out] == [sorted(p.split()) for p in text]
    assert out == shuffled(text, np.random.default_rng(3))


def test_deletions_remove_each_word_of_each_field_once():
    assert deletions(("a b", "c")) == [("b", "c"), ("a", "c"), ("a b", "")]


def first_word_victim(inputs):
    """Order-sensitive fake: P(positive) = 0.9 if the first word is 'good', else 0.1."""
    p = np.array([0.9 if t[0].split()[:1] == ["good"] else 0.1 for t in inputs])
    return np.stack([1 - p, p], axis=1)


def bag_of_words_victim(inputs):
    """Order-blind fake: P(positive) = 0.2 + 0.6·['great' present] + 0.1·['fine' present] − 0.1·['dull' present]."""
    p = []
    for t in inputs:
        words = set(" ".join(t).split())
        p.append(0.2 + 0.6 * ("great" in words) + 0.1 * ("fine" in words) - 0.1 * ("dull" in words))
    p = np.array(p)
    return np.stack([1 - p, p], axis=1)


def test_shuffle_sensitivity_of_an_order_blind_victim_is_zero():
    texts, labels = [("a great fine movie",), ("dull and slow",)], np.array([1, 0])
    changed, drop = shuffle_effects(bag_of_words_victim, texts, labels, 4, np.random.default_rng(0))
    assert changed.shape == drop.shape == (2, 4)
    assert not changed.any() and np.allclose(drop, 0.0)


def test_shuffle_sensitivity_of_an_order_sensitive_victim():
    texts, labels, shuffles = [("good bad ugly",), ("good film",), ("bad good",)], np.array([1, 1, 0]), 6
    changed, drop = shuffle_effects(first_word_victim, texts, labels, shuffles, np.random.default_rng(7))
    rng = np.random.default_rng(7)  # the same shuffles, in the documented order
    starts_good = np.array([[shuffled(t, rng)[0].startswith("good") for _ in range(shuffles)] for t in texts])
    original_good = np.array([True, True, False])[:, None]
    np.testing.assert_array_equal(changed, starts_good != original_good)
    # gold = positive for rows 0-1 (0.9 -> 0.1 when the first word changes), negative for row 2 (0.9 -> 0.1)
    np.testing.assert_allclose(drop, np.where(changed, 0.8, 0.0), atol=1e-12)
    assert 0 < changed.mean() < 1


def test_shuffles_do_not_depend_on_chunking():
    texts, labels = [("good bad ugly",), ("good film x y",), ("bad good",)], np.array([1, 1, 0])
    whole = shuffle_effects(first_word_victim, texts, labels, 3, np.random.default_rng(1))
    rng = np.random.default_rng(1)
    parts = [shuffle_effects(first_word_victim, texts[i:i + 1], labels[i:i + 1], 3, rng) for i in range(3)]
    np.testing.assert_array_equal(whole[0], np.concatenate([p[0] for p in parts]))


def test_deletion_importances_and_concentration_on_a_fake_victim():
    texts, labels = [("a great fine dull movie",), ("great stuff",)], np.array([1, 0])
    imps = deletion_importances(bag_of_words_victim, texts, labels)
    np.testing.assert_allclose(imps[0], [0.0, 0.6, 0.1, -0.1, 0.0], atol=1e-12)
    np.testing.assert_allclose(imps[1], [-0.6, 0.0], atol=1e-12)  # gold negative: 'great' works against it
    summary = summarize_words(np.zeros((2, 1), bool), np.zeros((2, 1)), imps)
    assert summary["concentration_examples"] == 1  # the second input has no positive importance
    assert summary["top1_share"] == pytest.approx(6 / 7)
    assert summary["top3_share"] == pytest.approx(1.0)
    assert summary["gini"] == pytest.approx(gini(np.array([0, 0.6, 0.1, 0, 0])))
    assert summary["entropy"] == pytest.approx(-(6 / 7 * math.log(6 / 7) + 1 / 7 * math.log(1 / 7)))
    assert summary["mean_words"] == 3.5


# --- leaderboard columns -----------------------------------------------------------------

def _write_run_and_analysis(results, model, seed, flip, cka):
    from robench.core.files import atomic_write
    from robench.core.records import RunRecord
    from robench.core.types import ExampleResult
    from robench.runs.spec import RunSpec
    from robench.runs.store import RunStore

    spec = RunSpec(task="sst2", model=model, attack="advglue", backbone="minilm", seed=seed, train_size=4000)
    examples = [ExampleResult(0, 1, "a", "a", 1, 1, "failed"), ExampleResult(1, 1, "b", "b", 1, 0, "successful")]
    run = RunRecord(run_id=spec.run_id, spec=spec.to_dict(), hyperparameters={}, resources={},
                    metrics={"robust_accuracy": 0.5, "dev_accuracy": 0.8}, timings={"train_seconds": 1.0},
                    checkpoint="x")  # a run id that hashes from its spec, metrics its per-example CSV gives back
    RunStore(results / "runs", spec.run_id).finish(run, examples)
    spec = spec.to_dict()
    rec = AnalysisRecord(analysis_id=f"a-{model}-{seed}", run_id=run.run_id, spec=spec, config={},
                         metrics={"examples": 10, "shuffle_flip_rate": flip, "cka_mean": cka}, cka_per_layer=[cka],
                         resources={}, timings={}, checkpoint="x")
    atomic_write(results / "analysis" / f"a-{model}-{seed}.json", json.dumps(asdict(rec)))


def test_leaderboard_with_analysis_columns(tmp_path, capsys):
    from robench.report.leaderboard import write_leaderboard

    for seed, flip in ((0, 0.1), (1, 0.3)):
        _write_run_and_analysis(tmp_path, "freelb", seed, flip, 0.5)
    _write_run_and_analysis(tmp_path, "bert", 0, 0.05, 0.25)
    plain, _, _ = write_leaderboard(tmp_path)
    assert "shuffle_flip_rate_mean" not in plain.columns  # unchanged without the flag
    table, _, md = write_leaderboard(tmp_path, analysis_frame(tmp_path))
    row = table.set_index("model").loc["freelb"]
    assert row["shuffle_flip_rate_mean"] == pytest.approx(0.2)
    assert row["shuffle_flip_rate_std"] == pytest.approx(np.std([0.1, 0.3], ddof=1))
    assert row["analysis_seeds"] == 2 and row["cka_mean_mean"] == pytest.approx(0.5)
    assert "20.0 ± 14.1" in md.read_text() and "0.250" in md.read_text()
    assert main(["leaderboard", "--results-dir", str(tmp_path), "--with-analysis"]) == 0
    assert "shuffle_flip_rate" in capsys.readouterr().out


# --- end to end --------------------------------------------------------------------------

def test_analyze_end_to_end_through_the_cli_and_the_api(settings, tiny_backbone, tiny_data, capsys):
    argv = ["analyze", "--preset", "paper", "--backbone", str(tiny_backbone), "--epochs", "1", "--batch-size", "16",
            "--max-length", "32",
            "--lr", "1e-3", "--examples", "8", "--shuffles", "3", "--data-dir", str(tiny_data),
            "--cache-dir", str(settings.cache_dir), "--results-dir", str(settings.results_dir), "--device", "cpu",
            "--quiet"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "Shuffle: prediction changes" in out and "CKA per layer" in out

    spec = tiny_spec(tiny_backbone)
    path = analysis_path(spec, _config(8, 3), settings)
    record = read_analysis(path)
    m = record.metrics
    assert record.kind == "analysis" and record.run_id == spec.run_id and m["examples"] == 8
    assert len(record.cka_per_layer) == 3  # embeddings + 2 layers of the tiny BERT
    assert record.cka_per_layer[0] > 0.99  # fine-tuning for a few steps barely moves the embeddings
    assert all(0.0 <= v <= 1.0 + 1e-9 for v in record.cka_per_layer)
    for key in ("shuffle_flip_rate", "top1_share", "top3_share", "gini"):
        assert 0.0 <= m[key] <= 1.0
    assert m["top1_share"] <= m["top3_share"] and -1.0 <= m["token_cosine"] <= 1.0
    assert 1.0 <= m["cls_effective_rank"] <= 8.0

    # the API finds the CLI's record; recomputing gives the same numbers (fixed seeds)
    assert analyze(spec, settings, "cpu", 8, 3) == record
    again = analyze(spec, settings, "cpu", 8, 3, force=True)
    for key, value in m.items():
        assert again.metrics[key] == pytest.approx(value, abs=1e-6), key


def _config(examples, shuffles):
    from robench.analysis import AnalysisConfig

    return AnalysisConfig(examples, shuffles)


@pytest.mark.parametrize("task", ["mr", str(Path(__file__).parent / "data" / "pairs.toml")])
def test_analyze_runs_on_a_task_without_advglue_and_on_a_file_task(settings, tiny_backbone, task):
    argv = ["analyze", "--task", task, "--backbone", str(tiny_backbone), "--train-size", "32", "--epochs", "1",
            "--max-length", "32", "--examples", "4", "--shuffles", "1", "--data-dir", str(settings.data_dir),
            "--cache-dir", str(settings.cache_dir), "--results-dir", str(settings.results_dir), "--device", "cpu",
            "--quiet"]
    assert main([*argv, "--dry-run"]) == 0  # the plan resolves no attack (mr has no AdvGLUE split)
    assert main(argv) == 0  # trains, then reads the task from its files, not the registry
    (path,) = (settings.results_dir / "analysis").glob("*.json")
    assert read_analysis(path).metrics["examples"] == 4


def test_analyze_rejects_bad_settings(settings, tiny_backbone):
    with pytest.raises(RobenchError, match="examples must be positive"):
        analyze(tiny_spec(tiny_backbone), settings, "cpu", n_examples=0)
    assert main(["analyze", "--shuffles", "0", "--results-dir", str(settings.results_dir)]) == 2


def test_bench_table_states_the_paper_direction_per_model():
    from robench.bench.analysis import markdown

    bert = [{"dev_accuracy": 0.8, "shuffle_flip_rate": 0.10, "cka_mean": 0.60},
            {"dev_accuracy": 0.8, "shuffle_flip_rate": 0.12, "cka_mean": 0.62}]
    freelb = [{"dev_accuracy": 0.8, "shuffle_flip_rate": 0.20, "cka_mean": 0.605},
              {"dev_accuracy": 0.8, "shuffle_flip_rate": 0.22, "cka_mean": 0.595}]
    text = markdown({"bert": bert, "freelb": freelb}, "bert", "test")
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if line.startswith("|")}
    assert "| paper: adversarial vs vanilla | | | higher | higher | lower |" in text
    assert rows["bert"].startswith("| bert | 2 | 80.0 ± 0.0 | 11.0 ± 1.4 |")
    verdict = rows["freelb"].split(" | ")
    assert verdict[1] == "yes (+0.100)"  # more word-order sensitive, well outside the seed spread
    assert "no (-0.010, within noise)" in rows["freelb"]  # CKA mean is lower, but within noise
    assert "–" in rows["freelb"]  # metrics missing from the records


def test_analyze_works_on_an_imbert_checkpoint(settings, tiny_backbone):
    record = analyze(tiny_spec(tiny_backbone, model="imbert"), settings, "cpu", n_examples=4, shuffles=1)
    assert len(record.cka_per_layer) == 3 and all(0.0 <= v <= 1.0 + 1e-9 for v in record.cka_per_layer)
    assert record.resources["model_params"]["im_steps"] > 0


def test_bench_routes_model_specific_params():
    from robench.core.params import params_by_model

    given = ["imbert:im_gamma=0.02", "seedless=1", "smart:x=2"]
    params = params_by_model(["imbert", "bert", "smart"], given)
    assert params["imbert"] == {"im_gamma": 0.02, "seedless": 1}
    assert params["bert"] == {"seedless": 1}
