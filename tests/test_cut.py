"""robench.engine.resources.cut: the lexicon resources cut to the words of given texts answer exactly as the whole
for those texts (candidates, cosines, parts of speech, the audit's relations) and refuse any other word."""
from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from robench.core.errors import RobenchError
from robench.engine.resources import cut
from robench.engine.resources.tables import SynonymTable

TEXTS = ["The movie is good , not bad .", "A fine film ; really GOOD acting !"]


class FakeWordNet:
    """synsets(word) -> stand-ins with .pos(), from a fixed table (unknown words: none)."""

    POS = {"good": "asn", "fine": "as", "great": "a", "film": "nv", "movie": "n", "bad": "a", "awful": "s"}

    def synsets(self, word: str):
        return [cut.PartOfSpeech(p) for p in self.POS.get(word, "")]


def _whole() -> SynonymTable:
    rng = np.random.default_rng(0)
    words = ["good", "fine", "great", "nice", "movie", "film", "picture", "bad", "awful", "acting", "really", "zebra"]
    vectors = rng.normal(size=(len(words), 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    nn = np.full((len(words), 4), -1, dtype=np.int32)
    lists = {"good": ["fine", "great", "nice"], "movie": ["film", "picture"], "film": ["movie", "picture"],
             "bad": ["awful"], "fine": ["good", "zebra"], "great": ["good"]}
    index = {w: i for i, w in enumerate(words)}
    for w, others in lists.items():
        nn[index[w], :len(others)] = [index[o] for o in others]
    nn_cos = np.where(nn >= 0, np.einsum("vd,vkd->vk", vectors, vectors[np.clip(nn, 0, None)]), -np.inf)
    return SynonymTable(words, vectors, nn, nn_cos.astype(np.float32), {"name": "lexicon", "key": "k1"})


@pytest.fixture
def written(tmp_path):
    relations = tmp_path / "relations.json"
    relations.write_text(json.dumps({"synonyms": {}, "antonyms": {}}))
    folder = tmp_path / "cut"
    described = cut.write_cut(_whole(), relations, FakeWordNet(), TEXTS, folder, {"texts": "two"})
    return folder, described


def test_the_cut_gives_the_whole_tables_candidates_and_cosines_for_the_texts_words(written, monkeypatch):
    folder, described = written
    whole, small = _whole(), cut.load_cut_table(folder)
    words = cut.text_words(TEXTS)
    assert set(words) >= {"the", "good", "movie", "film", "acting", "really"} and "GOOD" not in words
    assert described["words"] == len(words) and described["of"]["key"] == "k1"
    assert small.info["cut"]["words_sha256"] == described["words_sha256"] and small.info["name"] == "lexicon"
    for word in words:
        for k, min_cos in ((4, -math.inf), (2, -math.inf), (4, 0.0), (1, 0.5)):
            assert small.neighbours(word, k, min_cos) == whole.neighbours(word, k, min_cos)
        for other, _ in whole.neighbours(word, 4, -math.inf):
            assert small.cos(word, other) == whole.cos(word, other)
    assert small.neighbours("the") == [] and small.cos("the", "good") is None  # unknown to the whole table too
    assert "zebra" in small.words and "nice" in small.words and "acting" in small.words
    assert "bad" in small.words and "awful" in small.words  # a word of the texts and its candidate


def test_a_word_outside_the_cut_is_refused_not_answered_as_unknown(written):
    small = cut.load_cut_table(written[0])
    for ask in (lambda: small.neighbours("zebra"), lambda: small.neighbours("picture"),  # candidates' rows
                lambda: small.neighbours("nowhere"), lambda: small.cos("good", "nowhere")):
        with pytest.raises(RobenchError, match="outside the synonym table cut"):
            ask()


def test_the_cuts_wordnet_gives_the_parts_of_speech_of_its_words_only(written):
    folder, _ = written
    wordnet = cut.CutWordNet(lambda form, pos: [form], folder)
    for word in cut.load_cut_table(folder).words:
        assert sorted(s.pos() for s in wordnet.synsets(word)) == sorted(set(FakeWordNet.POS.get(word, "")))
    with pytest.raises(RobenchError, match="parts of speech of its words only"):
        wordnet.synsets("nowhere")


def test_robench_reads_the_cut_named_by_the_environment(written, settings, monkeypatch):
    from robench.engine.constraints import WordNetPos
    from robench.engine.resources.lexicon import lexicon, lexicon_inputs
    from robench.engine.resources.synonyms import require_synonym_source, synonym_table

    folder, described = written
    relations = {"synonyms": {"alzantot": {"good": ["fine"], "fine": ["good"]}, "ppdb": {}, "wordnet": {}},
                 "antonyms": {"good": ["bad"], "bad": ["good"]}, "indirect_antonyms": {}, "sense_rank": [],
                 "morphology": {"exceptions": {p: {} for p in "nvar"}, "lemma_pos": {"good": "a", "film": "nv"}}}
    (folder / cut.RELATIONS).write_text(json.dumps(relations))
    from robench.core.manifest import write_manifest

    write_manifest(folder)
    monkeypatch.setenv(cut.CUT_ENV, str(folder))
    empty = dataclasses.replace(settings, data_dir=Path(settings.cache_dir) / "no-data")
    require_synonym_source(empty, "lexicon")  # no data dir lists needed
    assert set(lexicon_inputs(empty).values()) == {folder / cut.RELATIONS}
    table = synonym_table(empty, "lexicon")
    assert isinstance(table, cut.CutTable) and table.info["cut"] == described
    lex = lexicon(empty)
    assert lex.is_antonym("good", "bad") and lex.is_synonym("good", "fine") and not lex.is_antonym("good", "fine")
    assert WordNetPos(lex.wordnet)("NOUN", "film") and not WordNetPos(lex.wordnet)("VERB", "movie")
    (folder / cut.POS).write_text("{}")  # tampered: refused with a clear error
    cut._verified.cache_clear()
    with pytest.raises(RobenchError, match="no usable cut"):
        cut.cut_dir()
