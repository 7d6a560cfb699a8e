"""`robench analyze --syntax`: CoNLL-U parsing, the MST decoder, the structural probe and the BLiMP
scorer on inputs with known answers; the frozen MLM head's build; fail-fast errors; a tiny end-to-end run."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import tiny_spec

from robench.analysis.blimp import BlimpSet, Pair, evaluate, head_log_probs, load_set, prefix_rows, score_set
from robench.analysis.conllu import Sentence, parse_conllu
from robench.analysis.structural_probe import (
    mst_edges,
    predict,
    probe_distances,
    probe_layer,
    spearman,
    train_probe,
    uuas,
)
from robench.analysis.syntax_config import BlimpConfig, ProbeConfig, SyntaxConfig
from robench.core.errors import RobenchError

CONLLU = """# sent_id = a
# text = I can't go.
1-2\tcan't\t_\t_\t_\t_\t_\t_\t_\t_
1\tI\tI\tPRON\tPRP\t_\t3\tnsubj\t_\t_
2\tca\tcan\tAUX\tMD\t_\t3\taux\t_\t_
3\tn't\tnot\tPART\tRB\t_\t4\tadvmod\t_\t_
4\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
4.1\tgone\tgo\tVERB\tVBN\t_\t_\t_\t4:conj\t_
5\t.\t.\tPUNCT\t.\t_\t4\tpunct\t_\t_

# text = Yes
1\tYes\tyes\tINTJ\tUH\t_\t0\troot\t_\t_
"""


# --- CoNLL-U ---------------------------------------------------------------------------

def test_conllu_parsing_skips_multiword_tokens_and_empty_nodes():
    first, second = parse_conllu(CONLLU)
    assert first.words == ("I", "ca", "n't", "go", ".") and first.heads == (3, 3, 4, 0, 4)
    assert first.upos[-1] == "PUNCT" and second.words == ("Yes",) and second.heads == (0,)
    assert first.edges() == {(0, 2), (1, 2), (2, 3), (3, 4)}
    d = first.distances()
    assert d[0, 1] == 2 and d[0, 3] == 2 and d[0, 4] == 3 and d[1, 4] == 3 and (d == d.T).all()


def test_conllu_rejects_broken_trees():
    with pytest.raises(RobenchError, match="10 tab-separated"):
        parse_conllu("1\tI\tI\n")
    with pytest.raises(RobenchError, match="exactly one root"):
        parse_conllu("1\ta\ta\tX\tX\t_\t0\troot\t_\t_\n2\tb\tb\tX\tX\t_\t0\troot\t_\t_\n")


def test_ewt_files_parse(shared_data):
    from robench.analysis.conllu import read_conllu

    dev = read_conllu(shared_data / "ud_english_ewt" / "en_ewt-ud-dev.conllu")
    assert len(dev) == 2001 and all(len(s.edges()) == len(s) - 1 for s in dev[:200])


# --- MST, UUAS, Spearman ------------------------------------------------------------------

def test_mst_decoder_on_a_hand_made_distance_matrix():
    # 0-1 and 1-2 are close, 3 is closest to 1; 2-3 and 0-3 are far.  MST: {0-1, 1-2, 1-3}.
    d = np.array([[0, 1, 3, 5],
                  [1, 0, 2, 2.5],
                  [3, 2, 0, 4],
                  [5, 2.5, 4, 0]], dtype=float)
    assert mst_edges(d) == {(0, 1), (1, 2), (1, 3)}
    d[0, 1] = d[1, 0] = 0.0  # a zero distance is still an edge (scipy reads 0 as "no edge")
    assert mst_edges(d) == {(0, 1), (1, 2), (1, 3)}
    assert mst_edges(np.zeros((1, 1))) == set()


def test_uuas_ignores_punctuation_and_spearman_is_one_on_gold():
    sentence = Sentence(("a", "b", "c", "."), ("X", "X", "X", "PUNCT"), (2, 0, 2, 2))
    gold = sentence.distances().astype(float)
    assert uuas([gold], [sentence]) == 1.0
    wrong = gold.copy()
    wrong[0, 2] = wrong[2, 0] = 0.5  # a-c now the closest pair: MST {a-c, a-b} or {a-c, b-c}
    assert uuas([wrong], [sentence]) == pytest.approx(0.5)
    long = Sentence(tuple("abcdef"), ("X",) * 6, (0, 1, 2, 3, 4, 5))  # a chain, length 6
    assert spearman([long.distances().astype(float)], [long.distances()]) == pytest.approx(1.0)


# --- the structural probe -----------------------------------------------------------------

def _random_tree(rng: np.random.Generator, n: int) -> Sentence:
    heads = [0] + [int(rng.integers(1, i + 1)) for i in range(1, n)]  # word i+1 attaches to an earlier word
    return Sentence(tuple(f"w{i}" for i in range(n)), ("X",) * n, tuple(heads))


def _path_states(sentence: Sentence, width: int) -> np.ndarray:
    """Word i -> indicator of the arcs on its path to the root: ||h_i - h_j||^2 is the tree distance."""
    h = np.zeros((len(sentence), width))
    for i in range(len(sentence)):
        node = i
        while sentence.heads[node] != 0:
            h[i, node] = 1.0
            node = sentence.heads[node] - 1
    return h


def test_probe_recovers_trees_whose_distances_a_linear_map_represents_exactly():
    rng = np.random.default_rng(0)
    width, dim = 8, 12
    mix = rng.normal(size=(width, dim))  # states = path indicators mixed into 12 dims (full row rank)
    sentences = [_random_tree(rng, int(rng.integers(5, width + 1))) for _ in range(120)]
    states = [torch.tensor(_path_states(s, width) @ mix, dtype=torch.float32) for s in sentences]
    exact = torch.tensor(np.linalg.pinv(mix).T, dtype=torch.float32)  # B = pinv(mix)^T recovers the indicators
    assert np.allclose(predict(exact, states[:1])[0], sentences[0].distances(), atol=1e-3)
    assert uuas(predict(exact, states), sentences) == 1.0

    config = ProbeConfig(rank=width, epochs=60, lr=0.02, batch_size=20)
    train, test = slice(0, 80), slice(80, 120)
    result = probe_layer(states[train], sentences[train], states[test], sentences[test], 0, config)
    assert result.uuas == 1.0 and result.spearman > 0.95 and result.train_loss < 0.1
    b, _ = train_probe(states[train], [torch.from_numpy(s.distances()) for s in sentences[train]], config)
    assert torch.equal(b, train_probe(states[train], [torch.from_numpy(s.distances()) for s in sentences[train]],
                                      config)[0])  # fixed seed: the same probe


def test_probe_distances_are_squared_norms_of_mapped_differences():
    b, h = torch.randn(3, 5), torch.randn(4, 5)
    d = probe_distances(b, h)
    assert torch.allclose(d[1, 3], ((b @ (h[1] - h[3])) ** 2).sum(), atol=1e-5) and torch.all(d.diagonal() < 1e-4)


# --- BLiMP --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tokenizer():
    from robench.classifier.backbone import load_tokenizer, resolve_backbone

    return load_tokenizer(resolve_backbone("minilm").location)


def _unigram_log_probs(tokenizer, favoured: dict[str, float]):
    """A stub MLM: the same distribution at every masked position, some words favoured."""
    logits = torch.zeros(len(tokenizer))
    for word, value in favoured.items():
        logits[tokenizer.convert_tokens_to_ids(word)] = value

    def log_probs(ids, attention_mask, chosen):
        return torch.log_softmax(logits, -1).expand(int(chosen.sum()), -1)
    return log_probs


def test_blimp_one_prefix_scorer_prefers_the_sentence_whose_word_the_head_prefers(tokenizer):
    pair = Pair("Mary saw herself.", "Mary saw himself.", "Mary saw", "herself", "himself")
    [row] = prefix_rows(tokenizer, pair)  # both words are one sub-word: one masked input, two candidates
    assert tokenizer.decode(row.ids) == "[CLS] mary saw [MASK]. [SEP]"
    one = BlimpSet("anaphor_gender_agreement", "morphology", True, [pair])
    assert score_set(_unigram_log_probs(tokenizer, {"herself": 5.0}), tokenizer, one, 8).tolist() == [1.0]
    assert score_set(_unigram_log_probs(tokenizer, {"himself": 5.0}), tokenizer, one, 8).tolist() == [0.0]


def test_blimp_pll_scorer_sums_every_masked_token(tokenizer):
    seen = []

    def log_probs(ids, attention_mask, chosen):
        seen.append((ids.clone(), chosen.clone()))
        return _unigram_log_probs(tokenizer, {"cat": 4.0})(ids, attention_mask, chosen)

    two = BlimpSet("x", "syntax", False, [Pair("the cat sleeps.", "the dog sleeps."),
                                          Pair("the dog sleeps.", "the cat sleeps.")])
    assert score_set(log_probs, tokenizer, two, batch_size=3).tolist() == [1.0, 0.0]
    ids = torch.cat([i for i, _ in seen])
    chosen = torch.cat([c for _, c in seen])
    assert len(ids) == 16 and (chosen.sum(1) == 1).all()  # 4 tokens per sentence, one masked per copy
    assert (ids[chosen] == tokenizer.mask_token_id).all()
    result = evaluate(log_probs, tokenizer, [two], 4)
    assert result.per_set == {"x": 0.5} and result.per_field == {"syntax": 0.5} and result.overall == 0.5


def test_blimp_multi_subword_words_are_masked_whole(tokenizer):
    pair = Pair("He saw zebras.", "He saw zebraz.", "He saw", "zebras", "zebraz")
    rows = prefix_rows(tokenizer, pair)
    assert len(rows) == 2 and len(rows[1].positions) > 1
    assert all(rows[1].ids[p] == tokenizer.mask_token_id for p in rows[1].positions)


def test_blimp_sets_load_and_anaphor_sets_use_the_one_prefix_method(shared_data):
    s = load_set(shared_data / "blimp" / "anaphor_number_agreement.jsonl", BlimpConfig(pll_pairs=3, prefix_pairs=5))
    assert s.one_prefix and len(s.pairs) == 5 and s.field == "morphology"
    s = load_set(shared_data / "blimp" / "adjunct_island.jsonl", BlimpConfig(pll_pairs=3, prefix_pairs=5))
    assert not s.one_prefix and len(s.pairs) == 3


def test_head_log_probs_decodes_only_masked_positions():
    head = torch.nn.Linear(4, 7)
    hidden = torch.randn(2, 3, 4)
    chosen = torch.tensor([[False, True, False], [True, False, True]])
    log_probs = head_log_probs(lambda ids, mask: hidden, head, torch.device("cpu"))
    out = log_probs(torch.zeros(2, 3), torch.ones(2, 3), chosen)
    assert out.shape == (3, 7) and torch.allclose(out.exp().sum(-1), torch.ones(3))
    assert torch.allclose(out[1], torch.log_softmax(head(hidden[1, 0]), -1))


# --- the MLM head, fail-fast errors, end to end --------------------------------------------------

@pytest.fixture
def syntax_data(tmp_path, tiny_data, shared_data):
    """A data dir: tiny_data's files plus blimp/ and ud_english_ewt/ from shared/data."""
    root = tmp_path / "syntax-data"
    root.mkdir()
    for entry in tiny_data.iterdir():
        (root / entry.name).symlink_to(entry)
    for part in ("blimp", "ud_english_ewt"):
        (root / part).symlink_to(shared_data / part)
    return root


@pytest.fixture
def syntax_settings(tmp_path, syntax_data):
    from robench.core.paths import resolve_settings

    return resolve_settings(syntax_data, tmp_path / "cache", tmp_path / "results")


def test_mlm_head_build_is_head_only_and_reloads(syntax_settings, tiny_backbone):
    from robench.analysis.mlm_head import MlmHeadConfig, build_mlm_head, load_mlm_head, mlm_head_dir

    settings = syntax_settings
    record = build_mlm_head(settings, config=MlmHeadConfig(texts=64, heldout=32, steps=3, batch_size=16),
                            backbone=str(tiny_backbone))
    assert record["steps_done"] == 3 and 0.0 <= record["heldout_accuracy_after"] <= 1.0
    assert record["train_positions"] > 0 and record["heldout_positions"] > 0
    saved = json.loads((mlm_head_dir(settings, str(tiny_backbone)) / "build.json").read_text())
    assert saved["build_id"] == record["build_id"]
    loaded = load_mlm_head(settings, str(tiny_backbone))
    names = {n for n, _ in loaded.head.named_parameters()}
    assert names == {"dense.weight", "dense.bias", "norm.weight", "norm.bias", "bias"}  # the decoder weight is frozen
    from transformers import AutoModel

    embeddings = AutoModel.from_pretrained(tiny_backbone).get_input_embeddings().weight
    assert torch.equal(loaded.head.embeddings, embeddings.detach())  # tied to the pre-trained embeddings
    assert loaded.info["heldout_masked_accuracy"] == record["heldout_accuracy_after"]


def test_syntax_analysis_fails_fast_without_data_or_head(settings, syntax_settings, tiny_backbone):
    from robench.analysis import analyze
    from robench.analysis.syntax import require_inputs
    from robench.cli import main

    with pytest.raises(RobenchError, match="BLiMP data not found"):
        require_inputs(settings, str(tiny_backbone))  # tiny_data has no blimp/
    settings = syntax_settings
    with pytest.raises(RobenchError, match="build-mlm-head"):
        analyze(tiny_spec(tiny_backbone), settings, "cpu", 4, 1, syntax=SyntaxConfig())
    assert not settings.checkpoints_dir.exists() or not any(settings.checkpoints_dir.iterdir())  # nothing trained
    argv = ["analyze", "--syntax", "--backbone", str(tiny_backbone), "--data-dir", str(settings.data_dir),
            "--cache-dir", str(settings.cache_dir), "--results-dir", str(settings.results_dir), "--quiet"]
    assert main(argv) == 2
    with pytest.raises(RobenchError, match="pll_pairs must be positive"):
        BlimpConfig(pll_pairs=0)


def test_syntax_analysis_end_to_end(syntax_settings, tiny_backbone, capsys):
    from robench.analysis import analysis_frame, analyze, read_analysis
    from robench.analysis.mlm_head import MlmHeadConfig, build_mlm_head
    from robench.cli import main

    settings = syntax_settings
    build_mlm_head(settings, config=MlmHeadConfig(texts=64, heldout=32, steps=3, batch_size=16),
                   backbone=str(tiny_backbone))
    argv = ["analyze", "--syntax", "--backbone", str(tiny_backbone), "--epochs", "1", "--batch-size", "16",
            "--max-length", "32", "--lr", "1e-3", "--train-size", "64",
            "--examples", "4", "--shuffles", "1", "--blimp-pll-pairs", "1",
            "--blimp-prefix-pairs", "2", "--probe-train-sentences", "12", "--probe-test-sentences", "10",
            "--probe-layers", "0", "2", "--probe-epochs", "2", "--data-dir", str(settings.data_dir),
            "--cache-dir", str(settings.cache_dir), "--results-dir", str(settings.results_dir), "--device", "cpu",
            "--quiet"]
    assert main(argv) == 0
    assert "BLiMP anaphor gender agreement" in capsys.readouterr().out
    syntax = SyntaxConfig(BlimpConfig(1, 2), ProbeConfig(epochs=2, train_sentences=12, test_sentences=10,
                                                         layers=(0, 2)))
    from robench.analysis import AnalysisConfig, analysis_path

    spec = tiny_spec(tiny_backbone, train_size=64)
    record = read_analysis(analysis_path(spec, AnalysisConfig(4, 1, 32, syntax), settings))
    m = record.metrics
    for key in ("blimp_anaphor_gender_agreement", "blimp_anaphor_number_agreement", "blimp_overall",
                "blimp_morphology", "backbone_blimp_overall", "probe_uuas_best", "backbone_probe_uuas_best"):
        assert 0.0 <= m[key] <= 1.0, key
    assert m["probe_best_layer"] in (0, 2) and len(record.syntax["fine_tuned"]["probe"]) == 2
    assert len(record.syntax["pre_trained"]["blimp"]["per_set"]) == 67
    res = record.resources["syntax"]
    assert res["blimp"]["sets"] == 67 and len(res["blimp"]["fingerprint"]) == 16
    assert res["ud_english_ewt"]["ewt_train"]["sentences"] == 12 and "heldout_masked_accuracy" in res["mlm_head"]
    assert list((settings.cache_dir / "syntax").glob("*.json"))  # the pre-trained side is cached
    again = analyze(spec, settings, "cpu", 4, 1, force=True, syntax=syntax)
    for key, value in m.items():  # fixed seeds; the pre-trained side now comes from the cache
        assert again.metrics[key] == pytest.approx(value, abs=1e-6), key
    frame = analysis_frame(settings.results_dir)
    assert frame["blimp_overall"].iloc[0] == pytest.approx(m["blimp_overall"])


def _record(model: str, seed: int, anaphor: float, uuas_best: float):
    from robench.analysis import AnalysisRecord

    metrics = {"blimp_anaphor_gender_agreement": anaphor, "blimp_anaphor_number_agreement": anaphor,
               "blimp_overall": 0.6, "probe_uuas_best": uuas_best}
    metrics.update({f"backbone_{k}": 0.7 for k in list(metrics)})
    spec = {"task": "sst2", "backbone": "minilm", "train_size": 400, "train": {"epochs": 2}, "model": model,
            "seed": seed}
    return AnalysisRecord("id", "run", spec, {"syntax": {}}, metrics, [], {}, {}, "ckpt", syntax={"x": 1})


def test_syntax_report_intervals_and_the_paper_direction():
    from robench.analysis.syntax_report import difference, interval, report, verdict

    mean, half = interval([0.5, 0.6, 0.7])
    assert mean == pytest.approx(0.6) and half == pytest.approx(4.302653 * 0.1 / np.sqrt(3), rel=1e-5)
    assert np.isnan(interval([0.5])[1]) and verdict(0.1, float("nan")).startswith("holds (one seed")
    assert verdict(0.01, 0.02) == "within noise" and verdict(-0.05, 0.02) == "opposite"
    assert verdict(0.0, float("nan")) == "no difference"
    assert difference([0.8, 0.82], [0.5, 0.52])[0] == pytest.approx(0.3)
    records = [_record("bert", s, 0.50 + 0.01 * s, 0.40) for s in range(3)]
    records += [_record("freelb", s, 0.80 + 0.01 * s, 0.40 + 0.001 * s) for s in range(3)]
    text = report(records, "bert")
    assert "| pre-trained encoder | – | 70.0 | 70.0 | 70.0 | 70.0 |" in text
    freelb = [line for line in text.splitlines() if line.startswith("| freelb | +")][0]
    assert "+30.0 ± 3.5: holds" in freelb and "+0.1 ± 0.2: within noise" in freelb
    with pytest.raises(RobenchError, match="no analysis records with syntax"):
        report([], "bert")


def test_pre_trained_results_cache_is_reused_and_a_broken_file_recomputed(settings):
    from robench.analysis.syntax import backbone_cached

    calls = []

    def compute():
        calls.append(1)
        return {"blimp_overall": 0.5}

    key = {"format": 1, "backbone": "x", "config": {"layers": (0, 2)}}
    first = backbone_cached(settings, key, compute)
    assert backbone_cached(settings, key, compute) == first and len(calls) == 1
    [path] = (settings.cache_dir / "syntax").glob("*.json")
    path.write_text("{not json")
    assert backbone_cached(settings, key, compute)["result"] == {"blimp_overall": 0.5} and len(calls) == 2
