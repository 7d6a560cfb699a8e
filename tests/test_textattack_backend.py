"""`textattack:<recipe>`: the fixes for TextAttack 0.3.11's offline failures, the version check, result mapping,
end-to-end runs."""
from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import textwrap
from collections import OrderedDict

import numpy as np
import pytest
import torch
from conftest import REPO, tiny_spec

import robench
from robench.core.errors import RobenchError
from robench.core.paths import resolve_settings
from robench.core.types import ExampleResult
from robench.data.loading import load_split, subset
from robench.runs.resolve import resolve_run
from robench.runs.store import RunStore, hyperparameters_hash


@pytest.fixture(scope="module")
def ta(tmp_path_factory, tiny_data):
    """textattack, imported the robench way (offline NLTK, downloads disabled)."""
    from robench.attacks.textattack.compat import load_textattack

    settings = resolve_settings(tiny_data, tmp_path_factory.mktemp("ta-cache"), tmp_path_factory.mktemp("ta-res"))
    return load_textattack(settings)


# ---------------------------------------------------------------- failure 1: NLTK download at import

OFFLINE_IMPORT = textwrap.dedent("""
    import os, socket, sys
    def no_network(*args, **kwargs):
        raise AssertionError("network access attempted")
    socket.socket.connect = no_network
    socket.create_connection = no_network
    from robench.engine.attack import ATTACKS
    assert "textattack:textfooler" in ATTACKS.names("textattack:*")
    assert "textattack" not in sys.modules, "registering the recipes must not import textattack"
    from robench.attacks.textattack.compat import load_textattack, offline_nltk
    from robench.core.paths import resolve_settings
    settings = resolve_settings(sys.argv[1], sys.argv[2], sys.argv[3])
    import nltk  # its own import sets KMP_* variables
    before = dict(os.environ)
    with offline_nltk(settings) as skipped:
        ta = load_textattack(settings)
        import nltk
        nltk.download("omw-1.4")  # what WordSwapWordNet does in its constructor
    assert skipped == ["omw-1.4"], skipped
    assert dict(os.environ) == before, "environment changed by the import"
    import huggingface_hub.constants
    assert "textattack" not in huggingface_hub.constants.HF_HOME, "Hugging Face cache redirected"
    import nltk
    assert nltk.download.__module__ == "nltk.downloader", "nltk.download left patched"
    print("OK", ta.__version__ if hasattr(ta, "__version__") else "")
""")


@pytest.mark.textattack
def test_import_is_offline_lazy_and_leaves_no_trace(tmp_path, tiny_data):
    home, cache = tmp_path / "home", tmp_path / "cache"
    home.mkdir()
    env = {**os.environ, "HOME": str(home), "OMP_NUM_THREADS": "1"}
    env.pop("TA_CACHE_DIR", None)
    proc = subprocess.run([sys.executable, "-c", OFFLINE_IMPORT, str(tiny_data), str(cache), str(tmp_path / "res")],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "OK" in proc.stdout
    assert (cache / "textattack" / "post_install_check_3").is_file()  # TextAttack's marker stays in robench's cache
    assert not (home / ".cache" / "textattack").exists()


def test_missing_nltk_data_is_a_clear_error(tmp_path):
    from robench.attacks.textattack.compat import load_textattack

    (tmp_path / "data").mkdir()
    settings = resolve_settings(tmp_path / "data", tmp_path / "cache", tmp_path / "res")
    with pytest.raises(RobenchError, match="nltk_data"):
        load_textattack(settings)


# ---------------------------------------------------------------- failure 2: nearest_neighbours without nn_matrix

WORDS = ["good", "great", ",", "e.g.", "fine", "--", "nice", "bad"]
# neighbours by id, nearest first; -1 pads a short list
NN = np.array([[1, 2, 3, 4, 5], [0, 4, 6, -1, -1], [5, 0, 1, 3, -1], [2, 0, 1, 4, 5],
               [0, 1, 6, 2, -1], [2, 3, 0, -1, -1], [1, 4, 0, -1, -1], [0, 2, -1, -1, -1]])


def _vectors(n: int, dim: int = 8) -> np.ndarray:
    v = np.random.default_rng(0).normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_table_embedding_answers_nearest_neighbours_for_every_word(ta):
    """Every kept word has neighbours from the table's nn_matrix (never TextAttack's topk path, which crashes)."""
    from robench.attacks.textattack.adapters import table_embedding

    for vectors in (_vectors(len(WORDS)), None):
        emb = table_embedding(WORDS, vectors, NN)
        for i in range(len(emb.nn_matrix)):
            for topn in (1, 3, 50):
                found = emb.nearest_neighbours(i, topn)
                assert len(found) <= topn and all(isinstance(j, int) and 0 <= j < len(emb.nn_matrix) for j in found)
                assert i not in found


def test_table_embedding_supplies_nn_matrix_in_table_order(ta):
    from robench.attacks.textattack.adapters import table_embedding

    emb = table_embedding(WORDS, _vectors(len(WORDS)), NN)
    assert emb.nn_matrix is not None
    names = lambda w, k: [emb.index2word(i) for i in emb.nearest_neighbours(emb.word2index(w), k)]  # noqa: E731
    assert names("good", 50) == ["great", "fine"]  # ",", "e.g." and "--" dropped, order kept
    assert names("good", 1) == ["great"]
    assert names("nice", 50) == ["great", "fine", "good"]
    assert names("bad", 50) == ["good"]
    np.testing.assert_allclose(emb[emb.word2index("fine")], _vectors(len(WORDS))[4])


# ---------------------------------------------------------------- failure 3: non-alphabetic vocabulary vs the window


class _Encoder:
    """A deterministic stand-in for robench's sentence encoder (bag of hashed characters)."""

    info = {"name": "test-encoder"}

    def embed(self, texts):
        out = np.zeros((len(texts), 16), dtype=np.float32)
        for row, text in enumerate(texts):
            for ch in text:
                out[row, ord(ch) % 16] += 1.0
        return out


def _window_constraint(ta):
    from robench.attacks.textattack.adapters import RobenchSentenceEncoder

    return RobenchSentenceEncoder(_Encoder(), threshold=0.1, metric="angular", compare_against_original=False,
                                  window_size=15)


def test_table_swaps_replace_exactly_one_word(ta):
    """Punctuation ("," "--") and multi-word ("e.g.") entries are dropped, so every swap replaces one word by one
    word: the window constraint always finds the modified index (a deletion leaves it none: StopIteration)."""
    from textattack.shared import AttackedText
    from textattack.transformations import WordSwapEmbedding

    from robench.attacks.textattack.adapters import table_embedding

    emb = table_embedding(WORDS, _vectors(len(WORDS)), NN)
    assert sorted(emb._word2index) == ["bad", "fine", "good", "great", "nice"]
    for sentence in ("a good film .", "nice , bad -- fine"):
        text = AttackedText(sentence)
        for i in range(len(text.words)):
            for swap in WordSwapEmbedding(max_candidates=50, embedding=emb)(text, indices_to_modify={i}):
                assert swap.attack_attrs["newly_modified_indices"] == {i}
                assert len(swap.words) == len(text.words) and swap.words[i] != text.words[i]


def test_filtered_vocabulary_keeps_the_window_working(ta):
    from textattack.shared import AttackedText
    from textattack.transformations import WordSwapEmbedding

    from robench.attacks.textattack.adapters import table_embedding

    text = AttackedText("a good film .")
    swaps = WordSwapEmbedding(max_candidates=5, embedding=table_embedding(WORDS, _vectors(len(WORDS)), NN))(
        text, indices_to_modify={1})
    assert [t.text for t in swaps] == ["a great film .", "a fine film ."]
    kept = _window_constraint(ta)._check_constraint_many(swaps, text)
    assert len(kept) == 2 and all("similarity_score" in t.attack_attrs for t in kept)


def test_encoder_constraint_uses_the_encoder_and_its_threshold_mapping(ta, monkeypatch):
    """A USE constraint becomes the robench encoder with the mapped threshold, same metric and window."""
    from textattack.constraints.semantics.sentence_encoders import UniversalSentenceEncoder

    import robench.engine.resources as resources
    from robench.attacks.textattack.recipes import TextAttackParams, TextAttackSpec, encoder_constraint, load_resources

    class Mapped(_Encoder):
        def threshold_for(self, paper: float, metric: str) -> float:
            return paper / 2 if metric == "angular" else paper

    asked = []
    monkeypatch.setattr(resources, "sentence_encoder", lambda settings, device, name: asked.append(name) or Mapped())
    needs_encoder = TextAttackSpec("x", "X", "", frozenset({"encoder"}))
    encoder = load_resources(needs_encoder, TextAttackParams(), None, torch.device("cpu")).encoder
    use = UniversalSentenceEncoder(threshold=0.840845057, metric="angular", compare_against_original=False,
                                   window_size=15, skip_text_shorter_than_window=True)
    c = encoder_constraint(use, TextAttackParams(), encoder)
    assert c.threshold == pytest.approx(0.840845057 / 2) and c.metric == "angular" and c.window_size == 15
    assert c.skip_text_shorter_than_window and not c.compare_against_original and use.model is None
    assert encoder_constraint(use, TextAttackParams(similarity_threshold=0.5), encoder).threshold == 0.25
    assert encoder_constraint(use, TextAttackParams(encoder_threshold=0.7), encoder).threshold == 0.7
    whole = UniversalSentenceEncoder(threshold=0.2, metric="cosine")  # BERT-Attack: no window
    encoder = load_resources(needs_encoder, TextAttackParams(sentence_encoder="use-m3"), None, None).encoder
    c = encoder_constraint(whole, TextAttackParams(sentence_encoder="use-m3"), encoder)
    assert c.window_size == float("inf") and c.threshold == 0.2 and asked == ["minilm", "use-m3"]


def test_neighbour_lists_without_vectors(ta):
    """robench's "neighbors" source has no vectors: listed neighbours have cosine 1.0, others 0.0."""
    from textattack.constraints.semantics import WordEmbeddingDistance
    from textattack.shared import AttackedText
    from textattack.transformations import WordSwapEmbedding

    from robench.attacks.textattack.adapters import table_embedding

    emb = table_embedding(WORDS, None, NN)
    good, great, bad = (emb.word2index(w) for w in ("good", "great", "bad"))
    assert emb.get_cos_sim(good, great) == 1.0 and emb.get_cos_sim(great, bad) == 0.0
    text = AttackedText("a good film .")
    swaps = WordSwapEmbedding(max_candidates=50, embedding=emb)(text, indices_to_modify={1})
    kept = WordEmbeddingDistance(embedding=emb, min_cos_sim=0.5)._check_constraint_many(swaps, text)
    assert [t.text for t in kept] == ["a great film .", "a fine film ."]
    with pytest.raises(RobenchError, match="no vectors"):
        emb.get_mse_dist(good, great)


def test_homoglyph_swap_without_the_missing_data_file(ta):
    """TextBugger's homoglyph swap builds without the file the 0.3.11 wheel does not ship, and swaps as before."""
    from robench.attacks.textattack.adapters import HomoglyphSwap

    swap = HomoglyphSwap()
    assert swap._get_replacement_words("ok") == ["оk", "o𝒌"]  # Cyrillic o, math italic k
    assert swap.homos_intentional == {}


def test_check_refuses_other_textattack_versions(settings, monkeypatch):
    """The backend patches TextAttack 0.3.11: any other installed version fails the check, naming both."""
    from robench.attacks.textattack import compat
    from robench.attacks.textattack.recipes import TextAttackParams
    from robench.data import TASKS
    from robench.engine.attack import ATTACKS

    recipe, task = ATTACKS.get("textattack:pruthi"), TASKS.get("sst2")
    recipe.check(task, TextAttackParams(), settings)  # the installed version is the supported one
    monkeypatch.setattr(compat, "installed_version", lambda: "0.3.10")
    with pytest.raises(RobenchError, match=r"TextAttack 0\.3\.11, but textattack 0\.3\.10 is installed"):
        recipe.check(task, TextAttackParams(), settings)
    monkeypatch.setattr(compat, "installed_version", lambda: None)
    with pytest.raises(RobenchError, match="textattack is not installed"):
        recipe.check(task, TextAttackParams(), settings)


def test_importing_textattack_restores_only_the_environment_it_changed(monkeypatch):
    """TextAttack's import rewrites cache variables: they are put back, a variable it added goes, and every other
    variable is left alone (the environment was cleared and refilled before, for every thread at once)."""
    import os

    from robench.attacks.textattack import compat

    class Watched(dict):
        def __init__(self, data):
            super().__init__(data)
            self.writes: list[str] = []

        def __setitem__(self, key, value):
            self.writes.append(key)
            super().__setitem__(key, value)

        def __delitem__(self, key):
            self.writes.append(key)
            super().__delitem__(key)

        def clear(self):
            raise AssertionError("the environment was cleared")

    env = Watched({"HF_HOME": "/mine/hf", "PATH": "/bin", "KEEP": "1", "GONE": "x"})
    monkeypatch.setattr(os, "environ", env)
    with compat.environ_restored():
        env["HF_HOME"] = "/textattack/hf"  # changed
        env["TA_CACHE_DIR"] = "/cache/textattack"  # added
        del env["GONE"]  # removed
        env.writes.clear()
    assert env == {"HF_HOME": "/mine/hf", "PATH": "/bin", "KEEP": "1", "GONE": "x"}
    assert sorted(env.writes) == ["GONE", "HF_HOME", "TA_CACHE_DIR"]  # PATH and KEEP never touched


# ---------------------------------------------------------------- result mapping


def _goal_result(ta, text, probs, status, queries=0, label=1):
    from textattack.goal_function_results import ClassificationGoalFunctionResult

    probs = torch.tensor(probs)
    return ClassificationGoalFunctionResult(text, probs, int(probs.argmax()), status, 0.0, queries, label)


def test_result_mapping(ta):
    from textattack.attack_results import (
        FailedAttackResult,
        MaximizedAttackResult,
        SkippedAttackResult,
        SuccessfulAttackResult,
    )
    from textattack.goal_function_results import GoalFunctionResultStatus as S
    from textattack.shared import AttackedText

    from robench.attacks.textattack.results import to_example_result

    pair = OrderedDict(premise="the cat sat .", hypothesis="a good cat")
    orig = AttackedText(pair)
    pert = orig.replace_words_at_indices([1, 4], ["dog", "fine"])
    assert pert.text != orig.text

    skipped = to_example_result(3, 1, SkippedAttackResult(_goal_result(ta, orig, [0.9, 0.1], S.SKIPPED, 1)))
    assert (skipped.status, skipped.original_prediction) == ("skipped", 0)
    assert (skipped.queries, skipped.words_perturbed) == (1, 0)
    assert skipped.original_text == "the cat sat . [SEP] a good cat" and skipped.num_words == 6

    success = to_example_result(4, 1, SuccessfulAttackResult(_goal_result(ta, orig, [0.2, 0.8], S.SEARCHING, 1),
                                                             _goal_result(ta, pert, [0.7, 0.3], S.SUCCEEDED, 17)))
    assert success == ExampleResult(index=4, label=1, original_text="the cat sat . [SEP] a good cat",
                                    perturbed_text="the dog sat . [SEP] a fine cat", original_prediction=1,
                                    perturbed_prediction=0, status="successful", queries=17, num_words=6,
                                    words_perturbed=2)

    failed = to_example_result(5, 1, FailedAttackResult(_goal_result(ta, orig, [0.2, 0.8], S.SEARCHING, 1),
                                                         _goal_result(ta, pert, [0.4, 0.6], S.SEARCHING, 9)))
    assert (failed.status, failed.perturbed_prediction, failed.queries) == ("failed", 1, 9)

    kept = to_example_result(6, 1, MaximizedAttackResult(_goal_result(ta, orig, [0.2, 0.8], S.MAXIMIZING, 1),
                                                         _goal_result(ta, pert, [0.3, 0.7], S.MAXIMIZING, 5)))
    flipped = to_example_result(7, 1, MaximizedAttackResult(_goal_result(ta, orig, [0.2, 0.8], S.MAXIMIZING, 1),
                                                            _goal_result(ta, pert, [0.6, 0.4], S.MAXIMIZING, 5)))
    assert (kept.status, flipped.status) == ("failed", "successful")


def test_error_result_does_not_count_the_pair_separator():
    from robench.attacks.textattack.results import unattacked_result

    result = unattacked_result(0, 1, ("the cat sat .", "a good cat"), "error", ValueError("boom"), 3)
    assert result.original_text == "the cat sat . [SEP] a good cat" and result.num_words == 6


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
