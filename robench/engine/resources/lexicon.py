"""Lexical relations from the offline lists: who is a synonym, an antonym or an inflection of whom.

Sources (all in the data dir, see its README):

* `alzantot`: the Alzantot et al. (EMNLP 2018) neighbour sets, `counterfitted/counterfitted_neighbors.json`
  (via Jia et al. 2019): for each word its N <= 8 nearest neighbours in the real counter-fitted PARAGRAM-SL999
  space within Euclidean distance delta = 0.5 of the unit vectors, i.e. cosine >= 1 - 0.5^2 / 2 = 0.875; used
  in both directions (the distance is symmetric);
* `ppdb`: Mrkšić et al. (NAACL 2016)'s PPDB synonym pairs, `counterfitted/mrksic_ppdb_synonyms.txt`;
* `wordnet`: WordNet 3.0 (nltk_data): single-word lemmas sharing a synset;
* antonyms: Mrkšić et al.'s PPDB and WordNet antonym pairs (`mrksic_ppdb_antonyms.txt`,
  `mrksic_wordnet_antonyms.txt`) and WordNet's own antonymy read from the synsets (the antonyms of every lemma of
  a synset hold for all its lemmas); `indirect=True` adds WordNet's indirect antonyms of adjectives (a satellite
  adjective inherits the antonyms of the head it is `similar_to`: "awful" ~ "bad" <-> "good");
* inflections: two words are inflections of each other when they share a lemma under WordNet's morphology
  (`morphy` for nouns, verbs, adjectives and adverbs: "loved" -> "love", "worse" -> "bad").

Every relation is over lower-case words and holds "in any inflection": `antonym(a, b)` is true when some lemma
of a and some lemma of b (each word counting as its own lemma) are listed antonyms, in either direction.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from robench.core.paths import Settings
from robench.engine.resources.files import data_file

ALZANTOT_FILE = "counterfitted/counterfitted_neighbors.json"
PPDB_SYNONYMS = "counterfitted/mrksic_ppdb_synonyms.txt"
ANTONYM_FILES = ("counterfitted/mrksic_ppdb_antonyms.txt", "counterfitted/mrksic_wordnet_antonyms.txt")
SYNONYM_RESOURCES = ("alzantot", "ppdb", "wordnet")
WORDNET_POS = ("n", "v", "a", "r")
Relation = dict[str, frozenset[str]]


def _is_word(word: str) -> bool:
    return word.isascii() and word.isalpha()


def _add(rel: dict[str, set[str]], a: str, b: str) -> None:
    if a != b and _is_word(a) and _is_word(b):
        rel.setdefault(a, set()).add(b)
        rel.setdefault(b, set()).add(a)


def read_pairs(path: Path) -> list[tuple[str, str]]:
    """Space-separated word pairs, one a line, lower-cased (Mrkšić's constraint-list format)."""
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            pairs.append((parts[0].lower(), parts[1].lower()))
    return pairs


def _frozen(rel: dict[str, set[str]]) -> Relation:
    return {w: frozenset(v) for w, v in rel.items()}


@dataclass(eq=False)  # hashed by identity: `lemmas` is cached per instance
class Lexicon:
    """Symmetric synonym relations by resource, antonyms, and lemmas (see the module docstring)."""

    synonyms: dict[str, Relation]  # resource name -> word -> synonyms
    antonyms: Relation  # direct: the Mrkšić lists and WordNet's lemma antonymy
    indirect_antonyms: Relation  # WordNet's indirect antonymy of satellite adjectives
    wordnet: object = field(repr=False)  # nltk's WordNet reader (morphology)
    sense_rank: dict[tuple[str, str], int] = field(repr=False, default_factory=dict)  # WordNet pair -> rank
    info: dict = field(default_factory=dict)

    @functools.lru_cache(maxsize=200_000)  # noqa: B019 - one Lexicon per process; words repeat constantly
    def lemmas(self, word: str) -> frozenset[str]:
        """The word itself and its WordNet base forms over all parts of speech."""
        word = word.lower()
        out = {word}
        if _is_word(word):
            for pos in WORDNET_POS:
                out.update(b.lower() for b in self.wordnet._morphy(word, pos))
        return frozenset(out)

    def synonyms_of(self, word: str, resources: Iterable[str] = SYNONYM_RESOURCES) -> set[str]:
        """The listed synonyms of `word` (exactly this form) in the chosen resources."""
        word = word.lower()
        out: set[str] = set()
        for name in resources:
            out |= self.synonyms[name].get(word, frozenset())
        out.discard(word)
        return out

    def is_synonym(self, a: str, b: str, resources: Iterable[str] = SYNONYM_RESOURCES) -> bool:
        """Listed synonyms in one of `resources`, as written or between their lemmas ("films" ~ "movies")."""
        resources = tuple(resources)
        la, lb = self.lemmas(a), self.lemmas(b)
        return any(y in self.synonyms[name].get(x, ()) for name in resources for x in la for y in lb)

    def is_antonym(self, a: str, b: str, indirect: bool = False) -> bool:
        """Listed antonyms in any inflection, either direction; `indirect` adds WordNet's adjective clusters."""
        la, lb = self.lemmas(a), self.lemmas(b)
        relations = (self.antonyms, self.indirect_antonyms) if indirect else (self.antonyms,)
        return any(y in rel.get(x, ()) for rel in relations for x in la for y in lb)

    def is_inflection(self, a: str, b: str) -> bool:
        """Different words with a lemma in common ("lacks" ~ "lacked")."""
        a, b = a.lower(), b.lower()
        return a != b and bool(self.lemmas(a) & self.lemmas(b))

    def resources_of(self, a: str, b: str) -> list[str]:
        """The synonym resources that list the pair (as written or between lemmas)."""
        return [name for name in SYNONYM_RESOURCES if self.is_synonym(a, b, (name,))]


def _wordnet(settings: Settings):
    from robench.engine.resources.nltk_data import nltk_data_dir

    nltk_data_dir(settings)
    data_file(settings, "nltk_data/corpora/wordnet", "WordNet 3.0 (nltk_data)")
    from nltk.corpus import wordnet

    wordnet.ensure_loaded()
    return wordnet


def _wordnet_relations(wn) -> tuple[dict[str, set[str]], dict[str, set[str]], dict[str, set[str]],
                                    dict[tuple[str, str], int]]:
    """(synset synonyms, direct antonyms, indirect adjective antonyms, sense ranks) over single-word lower-case
    lemmas. The sense rank of a synonym pair is the best, over the synsets they share, of the larger of the
    synset's ranks among the two words' senses (`_sense_rank`)."""
    syn: dict[str, set[str]] = {}
    ant: dict[str, set[str]] = {}
    indirect: dict[str, set[str]] = {}
    rank: dict[tuple[str, str], int] = {}
    for synset in wn.all_synsets():
        names = [lemma.name().lower() for lemma in synset.lemmas()]
        for i, a in enumerate(names):
            for b in names[i + 1:]:
                _add(syn, a, b)
                if a != b and _is_word(a) and _is_word(b):
                    r = max(_sense_rank(wn, a, synset), _sense_rank(wn, b, synset))
                    for pair in ((a, b), (b, a)):
                        rank[pair] = min(rank.get(pair, r), r)
        opposite = {a.name().lower() for lemma in synset.lemmas() for a in lemma.antonyms()}
        for a in names:
            for b in opposite:
                _add(ant, a, b)
        if synset.pos() == "s":  # a satellite: the antonyms of its head(s) hold indirectly for all its lemmas
            heads = {a.name().lower() for head in synset.similar_tos() for lemma in head.lemmas()
                     for a in lemma.antonyms()}
            for a in names:
                for b in heads:
                    _add(indirect, a, b)
    return syn, ant, indirect, rank


def _sense_rank(wn, word: str, synset) -> int:
    """1 + the position of `synset` among `word`'s synsets of its part of speech (WordNet orders senses by
    frequency in its tagged corpora, most frequent first)."""
    pos = "a" if synset.pos() == "s" else synset.pos()
    senses = [s for s in wn.synsets(word, pos=pos)]
    return senses.index(synset) + 1 if synset in senses else len(senses) + 1


@functools.lru_cache(maxsize=4)  # built once per process (about 15 s: WordNet's synsets are walked once)
def lexicon(settings: Settings) -> Lexicon:
    """The lexical relations of the data dir's lists and WordNet (see the module docstring)."""
    alz_path = data_file(settings, ALZANTOT_FILE, "Alzantot et al. counter-fitted neighbour lists")
    ppdb_path = data_file(settings, PPDB_SYNONYMS, "Mrkšić PPDB synonym list")
    ant_paths = [data_file(settings, rel, "Mrkšić antonym list") for rel in ANTONYM_FILES]
    alzantot: dict[str, set[str]] = {}
    for word, neighbours in json.loads(alz_path.read_text(encoding="utf-8")).items():
        for other in neighbours:
            _add(alzantot, word.lower(), other.lower())
    ppdb: dict[str, set[str]] = {}
    for a, b in read_pairs(ppdb_path):
        _add(ppdb, a, b)
    wn = _wordnet(settings)
    wn_syn, ant, indirect, ranks = _wordnet_relations(wn)
    for path in ant_paths:
        for a, b in read_pairs(path):
            _add(ant, a, b)
    info = {"name": "robench-lexicon", "synonyms": {"alzantot": str(alz_path), "ppdb": str(ppdb_path),
                                                    "wordnet": "WordNet 3.0 synsets (nltk_data)"},
            "antonyms": [str(p) for p in ant_paths] + ["WordNet 3.0 lemma antonyms"],
            "inflections": "WordNet 3.0 morphy (n, v, a, r)",
            "pairs": {"alzantot": sum(map(len, alzantot.values())) // 2, "ppdb": sum(map(len, ppdb.values())) // 2,
                      "wordnet": sum(map(len, wn_syn.values())) // 2, "antonyms": sum(map(len, ant.values())) // 2,
                      "indirect_antonyms": sum(map(len, indirect.values())) // 2}}
    return Lexicon({"alzantot": _frozen(alzantot), "ppdb": _frozen(ppdb), "wordnet": _frozen(wn_syn)},
                   _frozen(ant), _frozen(indirect), wn, ranks, info)
