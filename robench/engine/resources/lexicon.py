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

Reading them means walking WordNet's synsets (about 35 s), so they are built once, on first use, into
`<cache_dir>/resources/relations-<key>` (one JSON file and its manifest, `robench.core.manifest`), keyed by the
SHA-256 of every input file, and verified before each reuse: `robench show`, the audit and the attacks load them
in about a second. WordNet's morphology comes with them (its exception lists and lemma index, run through
NLTK's `morphy` rules), so that loading NLTK's WordNet reader waits until something asks for synsets.
"""
from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from robench.core.files import atomic_write
from robench.core.hashing import content_hash, file_sha256
from robench.core.manifest import write_manifest
from robench.core.paths import Settings
from robench.core.progress import expected_seconds, phase
from robench.engine.resources.cut import RELATIONS as CUT_RELATIONS
from robench.engine.resources.cut import CutWordNet, cut_dir, load_cut_relations
from robench.engine.resources.files import cached_build, data_file, resources_dir, staged_dir

ALZANTOT_FILE = "counterfitted/counterfitted_neighbors.json"
PPDB_SYNONYMS = "counterfitted/mrksic_ppdb_synonyms.txt"
ANTONYM_FILES = ("counterfitted/mrksic_ppdb_antonyms.txt", "counterfitted/mrksic_wordnet_antonyms.txt")
SYNONYM_RESOURCES = ("alzantot", "ppdb", "wordnet")
WORDNET_POS = ("n", "v", "a", "r")
WORDNET_DIR = "nltk_data/corpora/wordnet"
RELATIONS_FORMAT = 1  # bump when a change would change what the build produces
RELATIONS_FILE = "relations.json"
RELATIONS_BUILD_SECONDS = 13  # building the relations on the reference machine idle, measured (13 s, 2026-12-05,
# docs/studies/presets.md); the estimate and the phase line scale it to this machine now
# (robench.core.progress.expected_seconds): at load 23-24 on its 2 cores it took 719 s (21.5 s of CPU)
WORDNET_LOAD_SECONDS = 10  # loading NLTK's WordNet reader, likewise
Relation = dict[str, frozenset[str]]
log = logging.getLogger(__name__)


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


class CachedWordNet:
    """WordNet for the lexicon: `_morphy` from the built relations' morphology, without loading WordNet; `synsets`
    (the attacks' POS checks, the table build) loads NLTK's reader on first use."""

    # NLTK 3.10.4's WordNetCorpusReader.MORPHOLOGICAL_SUBSTITUTIONS for the parts of speech robench asks about
    SUBSTITUTIONS = {
        "n": [("s", ""), ("ses", "s"), ("ves", "f"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
              ("men", "man"), ("ies", "y")],
        "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"), ("ing", "")],
        "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
        "r": [],
    }

    def __init__(self, morphology: dict[str, Any], settings: Settings) -> None:
        self._exceptions: dict[str, dict[str, list[str]]] = morphology["exceptions"]
        self._lemma_pos: dict[str, str] = morphology["lemma_pos"]  # lemma -> its parts of speech, e.g. "nv"
        self._settings = settings

    def lemma_names(self) -> Iterable[str]:
        """Every WordNet lemma, multi-word ones joined by "_" (NLTK's `all_lemma_names`)."""
        return self._lemma_pos.keys()

    def _morphy(self, form: str, pos: str) -> list[str]:
        """The base forms of `form` as `pos` that WordNet lists: NLTK's `_morphy` (3.10.4), step for step."""
        exceptions = self._exceptions[pos]
        if form in exceptions:
            forms = exceptions[form]
        else:
            forms = [form[: -len(old)] + new for old, new in self.SUBSTITUTIONS[pos] if form.endswith(old)]
        out: list[str] = []
        for candidate in [form, *forms]:
            if pos in self._lemma_pos.get(candidate, "") and candidate not in out:
                out.append(candidate)
        return out

    @functools.cached_property
    def reader(self):
        """NLTK's WordNet reader (about 10 s to load)."""
        with phase("loading WordNet", expected_seconds(WORDNET_LOAD_SECONDS)):
            return wordnet_reader(self._settings)

    def synsets(self, word: str, pos: str | None = None) -> list:
        return self.reader.synsets(word, pos=pos)

    def load(self) -> None:
        """NLTK's reader loaded now rather than at the first `synsets` call (an attack loads it with its other
        resources, so the first example's candidate generation does not pay for it)."""
        _ = self.reader


def _morphology(wn) -> dict[str, Any]:
    """What `CachedWordNet._morphy` needs of the loaded reader: its exception lists and its lemma index."""
    return {"exceptions": {pos: {form: list(bases) for form, bases in wn._exception_map[pos].items()}
                           for pos in WORDNET_POS},
            "lemma_pos": {lemma: "".join(p for p in WORDNET_POS if p in by_pos)
                          for lemma, by_pos in wn._lemma_pos_offset_map.items()}}


def wordnet_reader(settings: Settings):
    """NLTK's WordNet reader from the data dir's nltk_data, loaded (a RobenchError when WordNet is not there)."""
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


def lexicon_inputs(settings: Settings) -> dict[str, Path]:
    """Every file the relations are read from, by the name the key and the record use (a clear error naming the
    first one missing: the cheap check before any work); under `ROBENCH_LEXICON_CUT`, the cut's relations file."""
    if (cut := cut_dir()) is not None:
        return {name: cut / CUT_RELATIONS for name in ("alzantot", "ppdb", *ANTONYM_FILES)}
    files = {"alzantot": data_file(settings, ALZANTOT_FILE, "Alzantot et al. counter-fitted neighbour lists"),
             "ppdb": data_file(settings, PPDB_SYNONYMS, "Mrkšić PPDB synonym list"),
             **{rel: data_file(settings, rel, "Mrkšić antonym list") for rel in ANTONYM_FILES}}
    wordnet = data_file(settings, WORDNET_DIR, "WordNet 3.0 (nltk_data)")
    return {**files, **{f"wordnet/{p.name}": p for p in sorted(wordnet.iterdir()) if p.is_file()}}


@functools.lru_cache(maxsize=4)  # loaded once per process
def lexicon(settings: Settings) -> Lexicon:
    """The lexical relations of the data dir's lists and WordNet (see the module docstring): the cached build when
    it verifies, else built now (13 s idle) and cached; under `ROBENCH_LEXICON_CUT`, the cut's (its WordNet
    knows the parts of speech of the cut table's words only: robench.engine.resources.cut)."""
    inputs = lexicon_inputs(settings)
    if (cut := cut_dir()) is not None:
        lex = _lexicon_of(load_cut_relations(cut), inputs, settings)
        lex.wordnet = CutWordNet(lex.wordnet._morphy, cut)
        return lex
    target = relations_dir(settings, inputs)
    relations = cached_build(target, _load_relations)
    if relations is None:
        with phase("building the lexicon's relations from its lists and WordNet (first use)",
                   expected_seconds(RELATIONS_BUILD_SECONDS)):
            relations = _build_relations(settings, inputs)
        _save_relations(target, relations)
    return _lexicon_of(relations, inputs, settings)


def relations_dir(settings: Settings, inputs: dict[str, Path]) -> Path:
    """Where the relations of `inputs` (`lexicon_inputs`) are cached: keyed by the SHA-256 of every input."""
    key = content_hash({"format": RELATIONS_FORMAT, "inputs": {name: file_sha256(path, settings.cache_dir)
                                                               for name, path in inputs.items()}}, 12)
    return resources_dir(settings) / f"relations-{key}"


def _load_relations(target: Path) -> dict[str, Any]:
    return json.loads((target / RELATIONS_FILE).read_text(encoding="utf-8"))


def _save_relations(target: Path, relations: dict[str, Any]) -> None:
    """Cache the build; a cache dir that cannot be written only costs building it again next time."""
    try:
        with staged_dir(target) as tmp:
            atomic_write(tmp / RELATIONS_FILE, json.dumps(relations, sort_keys=True, separators=(",", ":")))
            write_manifest(tmp)
    except OSError as exc:
        log.warning("could not cache the lexicon's relations in %s (%s); they are built again next time", target, exc)


def _build_relations(settings: Settings, inputs: dict[str, Path]) -> dict[str, Any]:
    started = time.perf_counter()
    alzantot: dict[str, set[str]] = {}
    for word, neighbours in json.loads(inputs["alzantot"].read_text(encoding="utf-8")).items():
        for other in neighbours:
            _add(alzantot, word.lower(), other.lower())
    ppdb: dict[str, set[str]] = {}
    for a, b in read_pairs(inputs["ppdb"]):
        _add(ppdb, a, b)
    wn = wordnet_reader(settings)
    wn_syn, ant, indirect, ranks = _wordnet_relations(wn)
    for rel in ANTONYM_FILES:
        for a, b in read_pairs(inputs[rel]):
            _add(ant, a, b)

    def listed(relation: dict[str, set[str]]) -> dict[str, list[str]]:
        return {w: sorted(v) for w, v in sorted(relation.items())}

    return {"format": RELATIONS_FORMAT, "synonyms": {"alzantot": listed(alzantot), "ppdb": listed(ppdb),
                                                     "wordnet": listed(wn_syn)},
            "antonyms": listed(ant), "indirect_antonyms": listed(indirect),
            "sense_rank": sorted([a, b, r] for (a, b), r in ranks.items()), "morphology": _morphology(wn),
            "build_seconds": round(time.perf_counter() - started, 1)}


def _lexicon_of(relations: dict[str, Any], inputs: dict[str, Path], settings: Settings) -> Lexicon:
    def frozen(relation: dict[str, list[str]]) -> Relation:
        return {w: frozenset(v) for w, v in relation.items()}

    synonyms = {name: frozen(relation) for name, relation in relations["synonyms"].items()}
    ant, indirect = frozen(relations["antonyms"]), frozen(relations["indirect_antonyms"])
    info = {"name": "robench-lexicon", "synonyms": {"alzantot": str(inputs["alzantot"]), "ppdb": str(inputs["ppdb"]),
                                                    "wordnet": "WordNet 3.0 synsets (nltk_data)"},
            "antonyms": [str(inputs[rel]) for rel in ANTONYM_FILES] + ["WordNet 3.0 lemma antonyms"],
            "inflections": "WordNet 3.0 morphy (n, v, a, r)",
            "pairs": {**{name: sum(map(len, rel.values())) // 2 for name, rel in synonyms.items()},
                      "antonyms": sum(map(len, ant.values())) // 2,
                      "indirect_antonyms": sum(map(len, indirect.values())) // 2}}
    ranks = {(a, b): r for a, b, r in relations["sense_rank"]}
    return Lexicon(synonyms, ant, indirect, CachedWordNet(relations["morphology"], settings), ranks, info)
