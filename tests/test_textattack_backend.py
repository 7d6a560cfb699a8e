"""`textattack:<recipe>`: the fixes for TextAttack 0.3.11's offline failures, the version check, result mapping
(end-to-end runs: test_textattack_runs.py)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import OrderedDict

import numpy as np
import pytest
import torch
from conftest import REPO

from robench.core.errors import RobenchError
from robench.core.paths import resolve_settings
from robench.core.types import ExampleResult


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
