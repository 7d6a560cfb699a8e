"""The word view of a text, as TextAttack's `AttackedText.words` sees it.

`split_words` finds words exactly as TextAttack's `words_from_text` does;
`Words` is a task input seen as the words of its last text field (the only
field attacks perturb), keeping the field's exact spacing, so word swaps,
deletions and windows give the same strings as TextAttack's. `join_fields`
writes a multi-field text as one string, the form results and records show.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

if TYPE_CHECKING:
    from robench.classifier.victim import Text

FIELD_SEPARATOR = " [SEP] "  # between the fields of a pair task's text in results (TextAttack's display)

_EDGE = "'-_*@"
# TextAttack also keeps these look-alike characters inside words (its visual-attack homoglyphs)
_HOMOGLYPHS = "˗৭Ȣ𝟕бƼᏎƷᒿlO`ɑЬϲԁе𝚏ɡհіϳ𝒌ⅼｍոорԛⲅѕ𝚝սѵԝ×уᴢ"
_WORD = re.compile("[\\w" + re.escape(_HOMOGLYPHS) + r"'\-_*@]+")


def join_fields(fields: Iterable[str]) -> str:
    """The fields of one task input as one string: "premise [SEP] hypothesis"."""
    return FIELD_SEPARATOR.join(fields)


def split_words(text: str) -> list[str]:
    """Words as TextAttack's `words_from_text` finds them (punctuation dropped, inner ' - kept)."""
    words = []
    for token in text.split():
        for piece in _WORD.findall(token.strip(_EDGE)):
            if piece := piece.strip(_EDGE):
                words.append(piece)
    return words


def count_words(fields: Iterable[str]) -> int:
    """Words in a task input, over all its fields: the pair separator is not a word (TextAttack's count)."""
    return sum(len(split_words(field)) for field in fields)


def is_one_word(word: str) -> bool:
    return split_words(word) == [word]


def is_article_agreement(a: str, b: str) -> bool:
    """`a` and `b` are the indefinite article in its two forms ("a" -> "an"): an agreement edit, not a swap."""
    return a != b and {a.lower(), b.lower()} == {"a", "an"}


def recover_case(word: str, like: str) -> str:
    """`word` cased like `like`: lower, UPPER or Capitalised (as TextAttack's recover_word_case)."""
    if like.islower():
        return word.lower()
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[:1].isupper() and like[1:].islower():
        return word.capitalize()
    return word


@dataclass(frozen=True)
class Words:
    """A task input seen as the words of its last text field, the only field attacks perturb.

    `field_text` is that field's text; `seps` holds the len(words)+1 strings around
    the words, so field_text = seps[0] + words[0] + seps[1] + ... + words[-1] + seps[-1].
    """

    context: tuple[str, ...]  # the fields before the perturbed one (premise, question, ...)
    words: tuple[str, ...]
    seps: tuple[str, ...]
    field_text: str = ""

    @classmethod
    def of(cls, text: Text) -> "Words":
        last = text[-1]
        words, seps, pos = split_words(last), [], 0
        for word in words:
            start = last.index(word, pos)
            seps.append(last[pos:start])
            pos = start + len(word)
        seps.append(last[pos:])
        return cls(tuple(text[:-1]), tuple(words), tuple(seps), last)

    @classmethod
    def _build(cls, context: tuple[str, ...], words: tuple[str, ...], seps: tuple[str, ...]) -> "Words":
        parts = [seps[0]]
        for word, sep in zip(words, seps[1:]):
            parts += [word, sep]
        return cls(context, words, seps, "".join(parts))

    @property
    def text(self) -> Text:
        """The whole task input: the context fields and the perturbed field."""
        return (*self.context, self.field_text)

    def replace(self, i: int, word: str) -> "Words":
        return self._build(self.context, self.words[:i] + (word,) + self.words[i + 1:], self.seps)

    def delete(self, i: int) -> "Words":
        joined = re.sub(r"\s+", " ", self.seps[i] + self.seps[i + 1])
        if i == 0:
            joined = joined.lstrip()
        seps = self.seps[:i] + (joined,) + self.seps[i + 2:]
        return self._build(self.context, self.words[:i] + self.words[i + 1:], seps)

    def window(self, i: int, size: int) -> str:
        """The `size` words around word `i` (TextAttack's `text_window_around_index`)."""
        n, half = len(self.words), (size - 1) / 2
        if i - half < 0:
            start, end = 0, min(size - 1, n - 1)
        elif i + half >= n:
            start, end = max(0, n - size), n - 1
        else:
            start, end = i - math.ceil(half), i + math.floor(half)
        parts = [self.words[start]]
        for j in range(start + 1, end + 1):
            parts += [self.seps[j], self.words[j]]
        return "".join(parts)

    def diff(self, other: "Words") -> int:
        """Word positions that differ (same length: word swaps only); an `a`/`an` made to agree with the swapped
        word after it is no changed word of its own."""
        return sum(a != b and not is_article_agreement(a, b) for a, b in zip(self.words, other.words))
