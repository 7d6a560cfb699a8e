"""The lexicon's relations are a built, content-keyed, verified resource (issue 45: `robench show` spent 35 s per
call walking WordNet): loading the cached build gives the same relations, and WordNet's morphology, without
loading WordNet."""
from __future__ import annotations

import json
import logging

import pytest


@pytest.mark.integration  # the real relations, built from the lists and WordNet
def test_the_cached_relations_are_the_built_ones_and_need_no_wordnet(settings, caplog):
    from robench.engine.resources import lexicon as lexicon_module
    from robench.engine.resources.files import resources_dir

    build = lexicon_module.lexicon.__wrapped__  # past the per-process cache
    with caplog.at_level(logging.INFO, logger="robench.phases"):
        built = build(settings)
    assert "building the lexicon's relations" in caplog.text
    (folder,) = resources_dir(settings).glob("relations-*")
    assert (folder / "manifest.json").is_file()

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="robench.phases"):
        cached = build(settings)
    assert "building" not in caplog.text
    assert "reader" not in vars(cached.wordnet)  # WordNet itself is not loaded
    for field in ("synonyms", "antonyms", "indirect_antonyms", "sense_rank", "info"):
        assert getattr(cached, field) == getattr(built, field), field

    reader = lexicon_module.wordnet_reader(settings)  # NLTK's own morphy on the same words
    words = sorted(set(json.loads((settings.data_dir / lexicon_module.ALZANTOT_FILE).read_text()))
                   | {form for pos in "nvar" for form in reader._exception_map[pos]})
    words = [w for w in words if w.isascii() and w.isalpha()]
    assert len(words) > 40_000
    assert all(cached.wordnet._morphy(w, pos) == reader._morphy(w, pos) for w in words for pos in "nvar")
    assert cached.lemmas("loved") == {"loved", "love"} and cached.is_inflection("worse", "bad")
    assert cached.wordnet.synsets("film") and "reader" in vars(cached.wordnet)  # loaded when asked for synsets

    from robench.engine.resources.files import cached_build

    (folder / "relations.json").write_text("{}")  # damaged: refused with a warning, so built again
    assert cached_build(folder, lexicon_module._load_relations) is None and "is damaged" in caplog.text


@pytest.fixture
def settings(tmp_path, shared_data):
    from robench.core.paths import resolve_settings

    return resolve_settings(shared_data, tmp_path / "cache", tmp_path / "results")


def test_an_attack_loads_wordnet_with_its_resources_once_not_in_its_first_example(settings, monkeypatch):
    """`load_wordnet_pos` (the recipes' resource loader) loads NLTK's reader before the attack, so the first
    example's candidate generation does not pay for it (the bench's warm-up then covers it too); a lexicon cut's
    WordNet has no reader to load."""
    from types import SimpleNamespace

    from robench.attacks import common
    from robench.engine.resources import lexicon as lexicon_module

    loads = []
    reader = SimpleNamespace(synsets=lambda word, pos=None: [SimpleNamespace(pos=lambda: "n")])
    monkeypatch.setattr(lexicon_module, "wordnet_reader", lambda s: loads.append(s) or reader)
    wordnet = lexicon_module.CachedWordNet({"exceptions": {}, "lemma_pos": {}}, settings)
    monkeypatch.setattr(common, "lexicon", lambda s: SimpleNamespace(wordnet=wordnet))
    senses = common.load_wordnet_pos(settings)
    assert len(loads) == 1
    assert senses("NOUN", "film") and not senses("VERB", "film") and len(loads) == 1

    cut = SimpleNamespace(synsets=lambda word, pos=None: [])  # not a CachedWordNet: nothing is loaded or asked
    monkeypatch.setattr(common, "lexicon", lambda s: SimpleNamespace(wordnet=cut))
    assert common.load_wordnet_pos(settings).wordnet is cut
