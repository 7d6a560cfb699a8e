"""A swapped-in word takes the original's inflection and its article agrees (robench.engine.inflection, issue 43):
the blind readers' failure examples are fixed."""
from __future__ import annotations

import pytest

from robench.engine.inflection import article_for, inflect_like, inflected_swap, penn_tags, swap_edits
from robench.engine.words import Words


def _swap(settings, sentence: str, i: int, candidate: str) -> str | None:
    words = sentence.split()
    edits = swap_edits(words, penn_tags(settings, words), i, candidate)
    if edits is None:
        return None
    return " ".join(edits.get(k, w) for k, w in enumerate(words))


@pytest.mark.parametrize("sentence, i, candidate, expected", [
    ("it chooses the wrong path", 1, "pick", "it picks the wrong path"),  # not "it pick"
    ("you do n't have to like it", 3, "got", "you do n't get to like it"),  # not "you ... got to"
    ("a totally formulaic film", 1, "absolutely", "an absolutely formulaic film"),  # not "a absolutely"
    ("a totally formulaic film", 3, "movies", "a totally formulaic movie"),  # not "formulaic films"
    ("a strong case for it", 2, "arguments", "a strong argument for it"),  # not "a strong cases"
    ("an awful movie", 1, "terrible", "a terrible movie"),
    ("A great movie", 1, "excellent", "An excellent movie"),
    ("the actors were great", 1, "performer", "the performers were great"),
])
def test_the_readers_failure_examples_are_fixed(settings, sentence, i, candidate, expected):
    assert _swap(settings, sentence, i, candidate) == expected


@pytest.mark.parametrize("sentence, i, candidate", [
    ("he wanted to qualify for the team", 3, "qualifying"),  # "to qualifying": the original in another form
    ("you do n't have to like it", 1, "does"),  # "you does n't"
    ("a strong case for it", 2, "cases"),  # "a strong cases"
    ("It was the best film", 3, "good"),
])
def test_another_form_of_the_original_word_is_no_swap(settings, sentence, i, candidate):
    words = sentence.split()
    assert inflect_like(candidate, words[i], penn_tags(settings, words)[i]) == words[i]  # re-inflected ...
    assert _swap(settings, sentence, i, candidate) is None  # ... it is the original: dropped


def test_a_candidate_that_cannot_take_the_form_is_dropped(settings):
    assert _swap(settings, "the movie was bad", 3, "quickly") is None  # no adjective "quickly"
    assert inflect_like("quickly", "chooses", "VBZ") is None  # no verb "quickly"
    assert inflect_like("xqzt", "films", "NNS") is None  # unknown to the dictionary: no guessed form


def test_inflection_keeps_case_and_leaves_uninflected_tags_alone():
    assert inflect_like("pick", "Chooses", "VBZ") == "Picks"
    assert inflect_like("PICK", "CHOSE", "VBD") == "PICKED"
    assert inflect_like("upon", "on", "IN") == "upon"


def test_article_for_sound_not_letter():
    assert [article_for(w) for w in ("film", "awful", "hour", "honest", "unique", "one", "European", "idea")] == \
        ["a", "an", "an", "an", "a", "a", "a", "an"]


def test_penn_tags_in_context(settings):
    assert penn_tags(settings, "it chooses the wrong path".split()) == ["PRP", "VBZ", "DT", "JJ", "NN"]
    assert penn_tags(settings, []) == []


def test_inflected_swap_keeps_the_text_s_spacing_and_context(settings):
    words = Words.of(("The premise .", "It was a  totally formulaic film ."))
    tags = penn_tags(settings, words.words)
    swapped = inflected_swap(words, tags, 3, "absolutely")
    assert swapped.text == ("The premise .", "It was an  absolutely formulaic film .")
    assert words.diff(swapped) == 1  # the article made to agree is no changed word of its own (Words.diff)
    assert inflected_swap(words, tags, 5, "quickly") is None
