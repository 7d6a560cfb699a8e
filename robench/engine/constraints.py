"""The constraints of word-level attacks, as objects a recipe lists (TextAttack's design: Morris, Lifland, Yoo,
Grigsby, Jin and Qi, "TextAttack: A Framework for Adversarial Attacks, Data Augmentation, and Adversarial
Training in NLP", EMNLP 2020 demos, https://arxiv.org/abs/2005.05909).

Three kinds, by what they look at:

* `IndexConstraint` (TextAttack's pre-transformation constraints): may word i of the current text change at
  all? `Stopwords`, `RepeatModification`, `MaxWordsPerturbed`;
* `Constraint`: which candidate swaps of one word pass; most look at one swap at a time (`WordConstraint`):
  `WordCosine`, `NotAntonym`, `ListedSynonym`, `PartOfSpeech`, `WordNetPartOfSpeech`; `ContextSimilarity`
  scores all candidates of the word in one batch;
* `Similarity`: the sentence encoder's check, which the search asks last and only where its choice depends on
  it (`robench.engine.search.select_lazy`).

A recipe is a list of these (`robench.engine.recipe.Composition`); a constraint a setting leaves off is None in
the list. A candidate is a `Swap`; the constraints run in the listed order, each on the survivors of the one
before, so cheap ones go first. The `natural` setting's filters (fixed phrases, inflection, grammar) are in
`robench.engine.natural`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from robench.engine.attack import Profile
from robench.engine.budgets import max_changed_words
from robench.engine.words import Words


@dataclass(frozen=True)
class Swap:
    """A candidate: word `i` of the text replaced by `word`; `cos`: the word cosine the transformation found it
    by (a synonym table's), None when it has none (a masked LM's candidates); `agreement`: other words the swap
    changes to agree with it ((position, word): the `a`/`an` before it, `robench.engine.natural.Inflection`)."""

    i: int
    word: str
    cos: float | None = None
    agreement: tuple[tuple[int, str], ...] = ()

    def apply(self, words: Words) -> Words:
        """`words` with this swap made (its agreement edits included)."""
        for position, word in ((self.i, self.word), *self.agreement):
            words = words.replace(position, word)
        return words


class IndexConstraint:
    """Whether word `i` of `current` may change at all (TextAttack's PreTransformationConstraint)."""

    def modifiable(self, current: Words, original: Words, i: int) -> bool:
        raise NotImplementedError


class Constraint:
    """A filter over the candidate swaps of one word; `filter` keeps the passing ones, in order. A `deferred`
    constraint judges each swap on its own and costs more than a victim query: the search asks it, after the
    victim, only about the candidates it would take (`robench.engine.search.WordSwapSearch.checks`), which
    chooses the same texts as filtering the whole pool first."""

    deferred = False

    def filter(self, current: Words, original: Words, swaps: list[Swap]) -> list[Swap]:
        raise NotImplementedError


class WordConstraint(Constraint):
    """A constraint that judges each swap on its own, against the original text."""

    def allows(self, original: Words, swap: Swap) -> bool:
        raise NotImplementedError

    def filter(self, current: Words, original: Words, swaps: list[Swap]) -> list[Swap]:
        return [s for s in swaps if self.allows(original, s)]


# --- which words may change --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Stopwords(IndexConstraint):
    """A stopword never changes, matched in any case (TextAttack's StopwordModification; Jin et al., "Is BERT
    Really Robust?", AAAI 2020, and Li et al., "BERT-ATTACK", EMNLP 2020, both keep stopwords)."""

    words: frozenset[str]

    def modifiable(self, current: Words, original: Words, i: int) -> bool:
        return current.words[i].lower() not in self.words


@dataclass(frozen=True)
class RepeatModification(IndexConstraint):
    """A word changes at most once: a word that already differs from the original stays (TextAttack's
    RepeatModification, Morris et al., EMNLP 2020 demos)."""

    def modifiable(self, current: Words, original: Words, i: int) -> bool:
        return current.words[i] == original.words[i]


@dataclass(frozen=True)
class MaxWordsPerturbed(IndexConstraint):
    """At most ceil(rate x words) words differ from the original (TextAttack's MaxWordsPerturbed(max_percent);
    the 30% of Li, Yu et al., "Searching for an Effective Defender", EMNLP 2021, the 40% of BERT-Attack); None
    or 1: no cap. Once the cap is reached no word may change, so the search stops changing words."""

    rate: float | None

    def modifiable(self, current: Words, original: Words, i: int) -> bool:
        limit = max_changed_words(self.rate, len(original.words))
        return limit is None or current.diff(original) < limit


# --- which candidates pass ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class WordCosine(WordConstraint):
    """The word cosine of the swap is at least `min_cos` in a counter-fitted space (TextAttack's
    WordEmbeddingDistance; Jin et al., AAAI 2020: 0.5; Morris et al., "Reevaluating Adversarial Examples in
    Natural Language", Findings of EMNLP 2020: 0.9). The cosine is the transformation's (`Swap.cos`) when it
    has one, else `space.cos(word, candidate)`; a pair the space does not know fails."""

    min_cos: float
    space: Any = None  # .cos(a, b) -> float | None (a synonym table)

    def allows(self, original: Words, swap: Swap) -> bool:
        cos = swap.cos
        if cos is None and self.space is not None:
            cos = self.space.cos(original.words[swap.i].lower(), swap.word.lower())
        return cos is not None and cos >= self.min_cos


@dataclass(frozen=True)
class NotAntonym(WordConstraint):
    """The candidate is no listed antonym of the word, in any inflection, either direction, WordNet's indirect
    adjective antonyms included (BERT-Attack's antonym filter, Li et al., EMNLP 2020, with Mrkšić et al.'s
    counter-fitting lists, NAACL 2016, and WordNet)."""

    lexicon: Any  # .is_antonym(a, b, indirect) (robench.engine.resources.lexicon)

    def allows(self, original: Words, swap: Swap) -> bool:
        return not self.lexicon.is_antonym(original.words[swap.i].lower(), swap.word.lower(), indirect=True)


@dataclass
class ListedSynonym(WordConstraint):
    """The candidate is one of the word's `k` listed synonyms with word cosine >= `min_cos` in the synonym table
    (robench's `valid_synonyms`: a masked LM's candidate must also pass TextFooler's synonym test, Jin et al.,
    AAAI 2020). Each word's list is read once."""

    table: Any  # .neighbours(word, k, min_cos) -> [(word, cos)]
    k: int
    min_cos: float
    _listed: dict[str, frozenset[str]] = field(default_factory=dict, repr=False)

    def allows(self, original: Words, swap: Swap) -> bool:
        word = original.words[swap.i].lower()
        if word not in self._listed:
            self._listed[word] = frozenset(w for w, _ in self.table.neighbours(word, k=self.k, min_cos=self.min_cos))
        return swap.word.lower() in self._listed[word]


class ContextTags:
    """Part-of-speech tags in a context of 4 words before and 3 after word i of the original text (TextAttack's
    PartOfSpeech window), cached; `profile` hears the time spent tagging. Shared by the tag constraints."""

    def __init__(self, tagger: Any, profile: Profile | None = None) -> None:
        self.tagger, self.profile = tagger, profile or Profile()
        self._cache: dict[tuple[tuple[str, ...], int], str] = {}

    def at(self, original: Words, i: int, word: str | None = None) -> str:
        """The tag of `word` (None: the original word) in place of word i of the original."""
        before, after = original.words[max(i - 4, 0):i], original.words[i + 1:i + 4]
        key = (before + (original.words[i] if word is None else word,) + after, len(before))
        if key not in self._cache:
            with self.profile.part("pos tagging"):
                self._cache[key] = self.tagger.tag(list(key[0]))[key[1]]
        return self._cache[key]


@dataclass(frozen=True)
class PartOfSpeech(WordConstraint):
    """The candidate's tag in the original context equals the word's, nouns and verbs may swap with
    `allow_verb_noun_swap` (TextAttack's PartOfSpeech, universal tags; Jin et al., AAAI 2020). The tag is read
    at the word's own position."""

    tags: ContextTags
    allow_verb_noun_swap: bool = True

    def allows(self, original: Words, swap: Swap) -> bool:
        old, new = self.tags.at(original, swap.i), self.tags.at(original, swap.i, swap.word)
        return old == new or (self.allow_verb_noun_swap and {old, new} <= {"NOUN", "VERB"})


class WordNetPos:
    """The WordNet parts of speech of a word (cached). `senses(tag, candidate)`: the word's universal tag must be
    NOUN, VERB, ADJ or ADV, and the candidate, when WordNet knows it, must have a synset of that part of speech
    ("the movie lacks wit": "lacks" is a VERB, so the noun "dearth" is no candidate; "like" tagged ADP gets
    none). The measured effect on hand-read swaps is in docs/studies/attacks.md ("Reading the swaps")."""

    POS = {"NOUN": ("n",), "VERB": ("v",), "ADJ": ("a", "s"), "ADV": ("r",)}

    def __init__(self, wordnet: Any) -> None:
        self.wordnet = wordnet
        self._cache: dict[str, frozenset[str]] = {}

    def parts_of_speech(self, word: str) -> frozenset[str]:
        word = word.lower()
        if word not in self._cache:
            self._cache[word] = frozenset(s.pos() for s in self.wordnet.synsets(word))
        return self._cache[word]

    def __call__(self, tag: str, candidate: str) -> bool:
        wanted = self.POS.get(tag)
        if wanted is None:
            return False
        known = self.parts_of_speech(candidate)
        return not known or any(p in known for p in wanted)


@dataclass(frozen=True)
class WordNetPartOfSpeech(WordConstraint):
    """The candidate has a WordNet sense in the part of speech the word has in its context (`WordNetPos`; not in
    a paper: robench's, after the listed synonym pairs, which carry no part of speech, let "the movie lacks wit"
    become "the movie dearth wit" under Jin et al.'s check; WordNet: Miller, CACM 1995)."""

    tags: ContextTags
    senses: WordNetPos

    def allows(self, original: Words, swap: Swap) -> bool:
        return self.senses(self.tags.at(original, swap.i), swap.word)


@dataclass(frozen=True)
class ContextSimilarity(Constraint):
    """The contextual cosine at the word, before and after the swap, is at least `min_cos` (the token-level half
    of BERTScore, Zhang et al., ICLR 2020, one word at a time: `robench.engine.resources.context`). All
    candidates of a word are scored in one batch; `profile` hears the time as "context similarity"."""

    scorer: Any  # .scores(words, i, replacements) -> cosines
    min_cos: float
    profile: Profile = field(default_factory=Profile)
    deferred = True

    def filter(self, current: Words, original: Words, swaps: list[Swap]) -> list[Swap]:
        if not swaps:
            return swaps
        with self.profile.part("context similarity"):
            scores = self.scorer.scores(current.words, swaps[0].i, [s.word for s in swaps])
        return [s for s, score in zip(swaps, scores) if score >= self.min_cos]


# --- the sentence encoder ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Similarity:
    """The sentence encoder's similarity of the reference and the candidate text is at least `threshold`
    (TextAttack's SentenceEncoder constraint; the Universal Sentence Encoder of Cer et al., 2018, in Jin et al.,
    AAAI 2020, and Li et al., EMNLP 2020; robench maps the paper's threshold to its encoder).

    The reference is the original text (`against_original`) or the text being modified; with a `window`, both are
    cut to `window` words around the swapped word. With `skip_shorter_than_window`, candidates shorter than the
    window pass with similarity 1 and are not encoded (TextAttack's skip_text_shorter_than_window).
    """

    threshold: float
    metric: Literal["cosine", "angular"]
    window: int | None
    against_original: bool
    skip_shorter_than_window: bool = False

    def pair(self, current: Words, original: Words, candidate: Words, i: int) -> tuple[str, str] | None:
        reference = original if self.against_original else current
        if self.window is None:
            return reference.field_text, candidate.field_text
        if self.skip_shorter_than_window and len(candidate.words) < self.window:
            return None
        return reference.window(i, self.window), candidate.window(i, self.window)

    def score(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        cos = np.clip(np.sum(a * b, axis=-1), -1.0, 1.0)
        return cos if self.metric == "cosine" else 1.0 - np.arccos(cos) / np.pi

