"""Offline attack resources: counter-fitting, synonym tables, NLTK, sentence encoders, the built MLM."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from robench.core.errors import RobenchError
from robench.core.paths import Settings, resolve_settings
from robench.engine import resources
from robench.engine.resources import (
    MlmBuildConfig,
    SentenceEncoder,
    SynonymTable,
    build_mlm,
    build_synonyms,
    masked_lm,
    nltk_data,
    pos_tagger,
    stopwords,
    synonym_table,
)
from robench.engine.resources.counterfit import CounterFitConfig, counter_fit, normalise, pair_ids, top_neighbours
from robench.engine.resources.mlm_build import mask_tokens, masked_logits
from robench.engine.resources.threshold_calibration import calibration_pairs

TOY = ["good", "bad", "great", "awful", "fine", "table"]


def _toy_vectors() -> np.ndarray:
    rng = np.random.default_rng(0)
    base = rng.normal(size=(2, 8))
    v = np.stack([base[0], base[0] + 0.3 * rng.normal(size=8),  # good ~ bad (as in GloVe)
                  base[0] + 1.2 * rng.normal(size=8), base[0] + 0.3 * rng.normal(size=8) + 0.2,  # great, awful
                  base[0] + 0.5 * rng.normal(size=8), base[1]])  # fine, table (far away)
    return normalise(v)


def _cos(x: np.ndarray, a: str, b: str) -> float:
    return float(x[TOY.index(a)] @ x[TOY.index(b)])


def test_counter_fitting_repels_antonyms_and_attracts_synonyms():
    x0 = _toy_vectors()
    index = {w: i for i, w in enumerate(TOY)}
    ant = pair_ids([("good", "bad"), ("great", "awful"), ("good", "unknownword")], index)
    syn = pair_ids([("good", "great"), ("bad", "awful"), ("good", "fine")], index)
    assert len(ant) == 4 and len(syn) == 6  # both directions, out-of-vocabulary pairs dropped
    x, summary = counter_fit(x0, ant, syn, CounterFitConfig(steps=20))
    assert _cos(x, "good", "bad") < _cos(x0, "good", "bad") - 0.2
    assert _cos(x, "great", "awful") < _cos(x0, "great", "awful")
    assert _cos(x, "good", "great") > _cos(x0, "good", "great") + 0.1
    assert _cos(x, "bad", "awful") > _cos(x0, "bad", "awful")
    assert summary["cost_after"]["AR"] < summary["cost_before"]["AR"]
    assert summary["cost_after"]["SA"] < summary["cost_before"]["SA"]
    np.testing.assert_allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(x[TOY.index("table")], x0[TOY.index("table")], atol=1e-6)  # unconstrained, no VSP pull


def test_vsp_term_pulls_back_original_neighbours():
    x0 = _toy_vectors()
    index = {w: i for i, w in enumerate(TOY)}
    ant, syn = pair_ids([("good", "bad")], index), pair_ids([], index)
    _, without = counter_fit(x0, ant, syn, CounterFitConfig(k3=0.0, rho=0.5))
    _, with_vsp = counter_fit(x0, ant, syn, CounterFitConfig(k3=0.1, rho=0.5))
    assert with_vsp["vsp_pairs"] > 0 and without["cost_after"]["VSP"] > 0
    assert with_vsp["cost_after"]["VSP"] < without["cost_after"]["VSP"]


def test_top_neighbours_matches_brute_force():
    x = normalise(np.random.default_rng(1).normal(size=(300, 16)))
    ids, cos = top_neighbours(x, 7, block=64)
    sims = x @ x.T
    np.fill_diagonal(sims, -np.inf)
    expected = np.argsort(-sims, axis=1)[:, :7]
    np.testing.assert_array_equal(ids, expected)
    np.testing.assert_allclose(cos, np.take_along_axis(sims, expected, axis=1), rtol=1e-5)


def test_synonym_table_ordering_filtering_and_oov():
    x = _toy_vectors()
    nn, nn_cos = top_neighbours(x, 5)
    table = SynonymTable(TOY, x, nn, nn_cos, {"name": "toy"})
    got = table.neighbours("good", k=5, min_cos=-1.0)
    assert [w for w, _ in got] != [] and "good" not in [w for w, _ in got]
    assert [c for _, c in got] == sorted((c for _, c in got), reverse=True)
    assert len(table.neighbours("good", k=2, min_cos=-1.0)) == 2
    assert all(c >= 0.9 for _, c in table.neighbours("good", k=5, min_cos=0.9))
    assert table.neighbours("nonexistentword") == [] and table.cos("good", "nonexistentword") is None
    assert table.cos("good", "bad") == pytest.approx(_cos(x, "good", "bad"), abs=1e-6)


def test_neighbour_list_source(settings):
    table = synonym_table(settings, "neighbors")
    got = table.neighbours("terrible")
    assert ("horrible", 1.0) in got and got[0][0] == "dreadful"  # the file's order, nearest first
    assert table.vectors is None and table.cos("terrible", "horrible") == 1.0
    assert table.neighbours("qwertyuiopword") == [] and table.info["substitute"]
    assert table.neighbours("br") == []  # a key with an empty list


def test_counterfitted_glove_build_caches_and_separates_antonyms(settings):
    table = build_synonyms(settings, vocab_size=3000, k=10)
    assert table.vectors.shape == (3000, 50) and table.nn.shape == (3000, 10)
    probes = table.info["probe_cos"]
    assert probes["good/bad"]["after"] < probes["good/bad"]["before"]
    assert all(w.isalpha() for w in table.words)
    again = build_synonyms(settings, vocab_size=3000, k=10)
    assert again.info["key"] == table.info["key"] and again.info["path"] == table.info["path"]
    np.testing.assert_array_equal(again.nn, table.nn)


def test_stopwords_textattack_list_and_nltk_fallback(settings, monkeypatch):
    words = stopwords(settings)
    assert {"the", "a", "not", "however"} <= words and "good" not in words
    assert words.info["name"] == "textfooler-stopwords" and not words.info["substitute"]
    monkeypatch.setattr(nltk_data, "_textattack_textfooler_stopwords", lambda: None)
    fallback = stopwords(settings)
    assert len(fallback) == 179 and "the" in fallback and fallback.info["substitute"]


def test_pos_tagger_universal_tags(settings):
    tagger = pos_tagger(settings)
    tags = tagger.tag("The quick brown fox jumps over the lazy dog".split())
    assert tags[0] == "DET" and tags[-1] == "NOUN" and tags[4] == "VERB" and tags[5] == "ADP"
    assert tagger.tag("a truly wonderful film".split())[1:] == ["ADV", "ADJ", "NOUN"]
    assert tagger.tag([]) == []


@pytest.mark.parametrize("damage", ["weights", "classes", "zip", "missing"])
def test_the_tagger_check_reads_its_files_without_nltk_and_names_a_damaged_one(settings, tmp_path, damage):
    """A run checks the tagger before training by parsing its files (no NLTK import, which costs seconds): a
    truncated JSON, an empty class list, a corrupt tagset zip or a missing file is one error naming the file."""
    import shutil

    taggers = tmp_path / "nltk_data" / "taggers"
    shutil.copytree(settings.data_dir / "nltk_data" / "taggers", taggers)
    data = dataclasses.replace(settings, data_dir=tmp_path)
    resources.check_pos_tagger(data)  # whole: passes
    eng = taggers / "averaged_perceptron_tagger_eng"
    if damage == "weights":
        (eng / "averaged_perceptron_tagger_eng.weights.json").write_text('{"NN": {"a"')
    elif damage == "classes":
        (eng / "averaged_perceptron_tagger_eng.classes.json").write_text("[]")
    elif damage == "zip":
        raw = bytearray((taggers / "universal_tagset.zip").read_bytes())
        raw[200:260] = bytes(60)
        (taggers / "universal_tagset.zip").write_bytes(bytes(raw))
    else:
        shutil.rmtree(eng)
    with pytest.raises(RobenchError, match="averaged_perceptron_tagger_eng|universal_tagset.zip"):
        resources.check_pos_tagger(data)


def test_the_tagger_is_loaded_once_per_folder_and_again_after_a_file_changed(settings, tmp_path, monkeypatch):
    """Settings that differ only in their caches share one loaded tagger (0.6 s a load); a tagger file changed in
    place is checked again, and a damaged one is refused, never served from the earlier load."""
    import shutil

    import nltk

    monkeypatch.setattr(nltk.data, "path", list(nltk.data.path))  # the damaged copy must not lead NLTK's path after
    other = dataclasses.replace(settings, cache_dir=tmp_path / "other-cache")
    assert pos_tagger(settings) is pos_tagger(other)
    shutil.copytree(settings.data_dir / "nltk_data" / "taggers", tmp_path / "nltk_data" / "taggers")
    data = dataclasses.replace(settings, data_dir=tmp_path)
    first = pos_tagger(data)
    assert first is not pos_tagger(settings) and first is pos_tagger(data)
    assert str(tmp_path / "nltk_data" / "taggers") in first.info["origin"]  # loaded from its own folder
    (tmp_path / "nltk_data" / "taggers" / "averaged_perceptron_tagger_eng" /
     "averaged_perceptron_tagger_eng.weights.json").write_text('{"NN": {"a"')
    with pytest.raises(RobenchError, match="averaged_perceptron_tagger_eng.weights.json"):
        pos_tagger(data)


def test_sentence_encoder_cache_and_metrics():
    calls = []

    def encode(texts):
        calls.append(list(texts))
        return normalise(np.array([[len(t), 1.0] for t in texts], dtype=np.float32))

    enc = SentenceEncoder("fake", encode, {"name": "fake"}, batch_size=2)
    cos = enc.cosine(["ab", "abcd", "ab"], ["ab", "a", "abcdefgh"])
    assert cos[0] == pytest.approx(1.0) and cos[1] < 1.0
    np.testing.assert_allclose(enc.angular(["abcd"], ["a"]), 1 - np.arccos(cos[1]) / np.pi, rtol=1e-6)
    assert sum(len(c) for c in calls) == 4  # each distinct text embedded once
    enc.embed(["ab", "abcd"])
    assert sum(len(c) for c in calls) == 4
    with pytest.raises(RobenchError, match="metric"):
        enc.threshold_for(0.5, "euclid")
    with pytest.raises(RobenchError, match="calibrate"):
        enc.threshold_for(0.123, "cosine")


@pytest.mark.integration
def test_minilm_sentence_encoder_orders_similarity(settings):
    enc = resources.sentence_encoder(settings, torch.device("cpu"))
    emb = enc.embed(["the movie was great", "the stock market fell sharply today"])
    np.testing.assert_allclose(np.linalg.norm(emb, axis=1), 1.0, atol=1e-5)
    sims = enc.cosine(["the movie was great"] * 3,
                      ["the film was great", "the movie was awful", "the stock market fell sharply today"])
    assert sims[0] > sims[2] and sims[1] > sims[2]
    assert enc.threshold_for(0.840845, "angular") == pytest.approx(0.826887)
    assert enc.threshold_for(0.2, "cosine") == 0.2
    use = resources.sentence_encoder(settings, None, "use-m3")
    sims = use.cosine(["the movie was great"] * 2, ["the film was great", "the stock market fell sharply today"])
    assert sims[0] > sims[1] and use.threshold_for(0.840845, "angular") == 0.840845


def _tiny_mlm():
    from transformers import BertConfig, BertForMaskedLM

    torch.manual_seed(0)
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    return BertForMaskedLM(config).eval()


def test_masked_only_decoding_equals_full_head():
    model = _tiny_mlm()
    ids = torch.randint(5, 50, (3, 12))
    attention = torch.ones_like(ids)
    attention[2, 8:] = 0
    special = attention == 0
    inputs, chosen, labels = mask_tokens(ids, special, torch.Generator().manual_seed(0), 4, 50, prob=0.3)
    assert chosen.any() and not (chosen & special).any()
    full = model(input_ids=inputs, attention_mask=attention).logits
    fast = masked_logits(model, inputs, attention, chosen)
    torch.testing.assert_close(fast, full[chosen], rtol=1e-5, atol=1e-5)
    hf_labels = torch.full_like(ids, -100)
    hf_labels[chosen] = labels
    reference = model(input_ids=inputs, attention_mask=attention, labels=hf_labels).loss
    torch.testing.assert_close(torch.nn.functional.cross_entropy(fast, labels), reference)


def test_build_mlm_tiny_saves_and_reloads(settings, tiny_backbone):
    backbone = str(tiny_backbone)
    config = MlmBuildConfig(steps=3, batch_size=8, max_length=24, heldout=40, lr=1e-3, save_dtype="bfloat16")
    record = build_mlm(settings, torch.device("cpu"), config, backbone=backbone)
    assert record["steps_done"] == 3 and 0.0 <= record["heldout_accuracy_after"] <= 1.0
    assert record["corpus"]["sources"]["sst2-train"] == 96 and record["corpus"]["heldout_texts"] == 40
    target = resources.mlm_dir(settings, backbone)
    assert all(p.stat().st_size <= 15_000_000 for p in target.glob("*.safetensors"))
    loaded = masked_lm(settings, backbone=backbone)
    assert loaded.info["heldout_masked_accuracy"] == record["heldout_accuracy_after"]
    from transformers import BertModel

    base = BertModel.from_pretrained(tiny_backbone)
    word = loaded.model.bert.embeddings.word_embeddings.weight
    torch.testing.assert_close(word, base.embeddings.word_embeddings.weight)  # frozen, shared with the backbone
    assert loaded.model.cls.predictions.decoder.weight.data_ptr() == word.data_ptr()  # tied
    trained = loaded.model.bert.encoder.layer[0].attention.self.query.weight
    assert trained.dtype == torch.float32  # saved in bfloat16, loaded as float32
    assert not torch.allclose(trained, base.encoder.layer[0].attention.self.query.weight)
    batch = loaded.tokenizer(["a [MASK] movie"], return_tensors="pt")
    assert loaded.model(**batch).logits.shape[-1] == len(loaded.tokenizer)


def test_build_mlm_cli_keeps_an_existing_build(settings, tiny_backbone, capsys):
    from robench.cli import main

    build_mlm(settings, torch.device("cpu"), MlmBuildConfig(steps=1, batch_size=4, max_length=16, heldout=20),
              backbone=str(tiny_backbone))
    stamp = (resources.mlm_dir(settings, str(tiny_backbone)) / "build.json").stat().st_mtime_ns
    argv = ["resources", "build-mlm", "--backbone", str(tiny_backbone), "--data-dir", str(settings.data_dir),
            "--cache-dir", str(settings.cache_dir), "--quiet"]
    assert main(argv) == 0
    assert "kept the existing build" in capsys.readouterr().out
    assert (resources.mlm_dir(settings, str(tiny_backbone)) / "build.json").stat().st_mtime_ns == stamp


def test_missing_resources_name_the_file_and_the_fix(tmp_path, tiny_backbone):
    empty = tmp_path / "data"
    empty.mkdir()
    settings = resolve_settings(empty, tmp_path / "cache", tmp_path / "results")
    with pytest.raises(RobenchError, match="nltk_data"):
        pos_tagger(settings)
    with pytest.raises(RobenchError, match="counterfitted_neighbors.json"):
        synonym_table(settings, "neighbors")
    with pytest.raises(RobenchError, match="mrksic_ppdb_antonyms.txt"):
        synonym_table(settings, "counterfitted-glove")
    with pytest.raises(RobenchError, match="unknown synonym source"):
        synonym_table(settings, "wordnet-ish")
    with pytest.raises(RobenchError, match="robench resources build-mlm"):
        masked_lm(settings)
    with pytest.raises(RobenchError, match="sst2/train.tsv"):
        build_mlm(settings, torch.device("cpu"), MlmBuildConfig(steps=1), backbone=str(tiny_backbone))
    with pytest.raises(RobenchError, match="unknown sentence encoder"):
        resources.sentence_encoder(settings, None, "use-v9")
    with pytest.raises(RobenchError, match="data directory"):
        pos_tagger(Settings(None, tmp_path / "cache", tmp_path / "results"))


def test_cli_resources_list(settings, capsys):
    from robench.cli import main

    rc = main(["resources", "list", "--data-dir", str(settings.data_dir), "--cache-dir", str(settings.cache_dir)])
    out = capsys.readouterr().out
    assert rc == 0 and "pos-tagger" in out and "masked-lm" in out
    described = resources.describe_all(settings)
    assert described["masked-lm:built"]["status"].startswith("not built")
    assert json.dumps(described)


def test_resources_list_shows_every_location_in_full(settings, capsys, monkeypatch):
    from robench.classifier.backbone import resolve_backbone
    from robench.cli import main

    described = resources.describe_all(settings)
    assert all(info.get("location") for info in described.values()), described
    assert described["backbone:minilm"]["location"] == str(resolve_backbone("minilm").location)
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["resources", "list", "--data-dir", str(settings.data_dir), "--cache-dir",
                 str(settings.cache_dir)]) == 0
    rows = [line.split("│") for line in capsys.readouterr().out.splitlines() if line.count("│") == 5]
    cells = "".join(row[3].strip() for row in rows)  # the location column, its folded lines joined
    for info in described.values():  # folded at 80 columns, never cut
        assert info.get("location", "") in cells


def test_calibration_pairs_are_single_swaps_in_windows(settings):
    table, stop = synonym_table(settings, "neighbors"), stopwords(settings)
    pairs = calibration_pairs(settings, table, stop, n=10, seed=0)
    assert 0 < len(pairs["window"]) == len(pairs["sentence"]) <= 10
    for a, b in pairs["window"]:
        wa, wb = a.split(), b.split()
        assert len(wa) == len(wb) == 15 and sum(x != y for x, y in zip(wa, wb)) == 1
    for a, b in pairs["sentence"]:
        wa, wb = a.split(), b.split()
        changed = sum(x != y for x, y in zip(wa, wb))
        assert len(wa) == len(wb) and 1 <= changed <= round(0.4 * len(wa))
