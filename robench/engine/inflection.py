"""A swapped-in word takes the inflection of the word it replaces, and an `a`/`an` before it agrees.

Blind readers found word-level swaps that break agreement ("it pick", "to qualifying", "a strong cases") and
articles ("a absolutely formulaic films"), issue 43. Here a candidate is re-inflected from its own lemma into
the Penn Treebank tag the original word has in its sentence (NLTK's perceptron tagger from the data dir):

* `penn_tags`: the Penn tag of each word in context;
* `inflect_like`: the candidate in the original's form, by `lemminflect` (its dictionary only, no
  out-of-vocabulary rules); None when the candidate has no lemma of the original's part of speech or that
  lemma has no form for the tag: such a candidate is dropped;
* `article_for` / `swap_edits`: the swap as word edits, with an `a`/`an` right before it corrected;
  `inflected_swap` applies them to a `Words` (the corrected article changes a second position; `Words.diff` does
  not count it as a changed word). The `natural` setting runs this as `robench.engine.natural.Inflection`.

Words whose tag is not inflected (determiners, prepositions, proper nouns, ...) are kept as given. The case of
the original word is kept (`recover_case`).
"""
from __future__ import annotations

from typing import Sequence

from robench.core.paths import Settings
from robench.engine.words import Words, recover_case

# Penn tags lemminflect inflects, by the part of speech its lemmatiser takes
UPOS = {"NN": "NOUN", "NNS": "NOUN", "JJ": "ADJ", "JJR": "ADJ", "JJS": "ADJ", "RB": "ADV", "RBR": "ADV",
        "RBS": "ADV", **{tag: "VERB" for tag in ("VB", "VBD", "VBG", "VBN", "VBP", "VBZ")}}
ARTICLES = ("a", "an")
# spellings whose first sound is not what the first letter suggests (written out: English has no rule for them)
_AN_CONSONANT_LETTER = ("hour", "honest", "honor", "honour", "heir")
_A_VOWEL_LETTER = ("one", "once", "uni", "use", "usu", "uti", "ure", "uro", "eu", "ewe", "ubiq", "uku")


def penn_tags(settings: Settings, words: Sequence[str]) -> list[str]:
    """The Penn Treebank tag of each word in context (NLTK's averaged perceptron tagger, from the data dir)."""
    from robench.engine.resources.nltk_data import pos_tagger

    return [tag for _, tag in pos_tagger(settings).tagger.tag(list(words))] if words else []


def inflect_like(candidate: str, original: str, tag: str) -> str | None:
    """`candidate` in the form `original` has as `tag` (e.g. "pick" for "chooses"/VBZ -> "picks"), cased like
    `original`; None when the candidate cannot take that form. A tag lemminflect does not inflect keeps the
    candidate as given."""
    upos = UPOS.get(tag)
    if upos is None:
        return recover_case(candidate, original)
    import lemminflect

    lemmas = lemminflect.getLemma(candidate.lower(), upos, lemmatize_oov=False)
    if not lemmas:
        return None
    forms = lemminflect.getInflection(lemmas[0], tag, inflect_oov=False)
    if not forms:
        return None
    form = original.lower() if original.lower() in forms else forms[0]  # "be": am/are, as the original has it
    return recover_case(form, original)


def article_for(word: str) -> str:
    """"an" before a vowel sound, else "a" (by spelling, with the common exceptions: "an hour", "a unique")."""
    lower = word.lower()
    if lower.startswith(_AN_CONSONANT_LETTER):
        return "an"
    if lower.startswith(_A_VOWEL_LETTER):
        return "a"
    return "an" if lower[:1] and lower[0] in "aeiou" else "a"


def swap_edits(words: Sequence[str], tags: Sequence[str], i: int, candidate: str) -> dict[int, str] | None:
    """The edits (word position -> new word) that put `candidate` at position `i` in the original's inflection
    (`tags`: `penn_tags(words)`), with an `a`/`an` right before it made to agree; None (drop it) when the
    candidate cannot take the original's form, or in that form is the original word ("qualifying" for
    "qualify": another form of the same word, not a swap)."""
    word = inflect_like(candidate, words[i], tags[i])
    if word is None or word.lower() == words[i].lower():  # no form, or an inflection of the original itself
        return None
    edits = {i: word}
    if i > 0 and words[i - 1].lower() in ARTICLES:
        article = article_for(word)
        article = article.capitalize() if words[i - 1][0].isupper() else article
        if article != words[i - 1]:
            edits[i - 1] = article
    return edits


def inflected_swap(words: Words, tags: Sequence[str], i: int, candidate: str) -> Words | None:
    """`words` with `candidate` swapped in at `i` as `swap_edits` makes it (`tags`: `penn_tags(words.words)`),
    or None when the candidate cannot take the original's form."""
    edits = swap_edits(words.words, tags, i, candidate)
    if edits is None:
        return None
    for position, word in sorted(edits.items()):
        words = words.replace(position, word)
    return words
