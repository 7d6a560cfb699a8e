"""The filters of the `natural` budget setting (issue 43; docs/guide/natural.md): swaps a reader accepts.

Blind readers found four in five word-level adversarial examples broken or shifted. Beside Morris et al.'s
thresholds (`robench.engine.budgets.NATURAL`), the setting adds, cheapest first:

* `FixedPhrases` (which words may change): no swap inside a multi-word expression, a name or a title;
* `Inflection`: a candidate takes the original word's inflection, and an `a`/`an` before it agrees;
* the sense constraint (`robench.engine.sense.sense_constraint`);
* `GrammarCheck`: no swap that adds grammar lints (Harper) the text before it did not have.

`load_natural(settings, device)` loads them once; `natural_constraints` is the list every word-level recipe
appends after its own constraints, and `describe` what the run record says about them.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Sequence

from robench.core.errors import RobenchError
from robench.core.paths import Settings
from robench.engine.attack import Profile
from robench.engine.constraints import Constraint, IndexConstraint, Swap
from robench.engine.inflection import swap_edits
from robench.engine.words import Words, split_words

COLLOCATION_MIN_COUNT = 3  # a bigram seen fewer times in the corpus is no collocation
COLLOCATION_MIN_PMI = 5.0  # natural-log pointwise mutual information of a collocation
GRAMMAR_WINDOW = 15  # words around the swap that Harper reads (Morris et al.'s window)
_SENTENCE_END = ".!?"


@dataclass
class FixedPhrases(IndexConstraint):
    """A word inside a fixed phrase, a name or a title never changes (robench's; the readers' "falls short" ->
    "falls brief", "Saturday Night Live" -> "Saturday Evening Live"). A word is fixed when it is in

    * a WordNet multi-word lemma (Miller, CACM 1995; "fall_short", "at_least"), matched on each word's WordNet
      base forms;
    * a collocation: a bigram with pointwise mutual information >= `COLLOCATION_MIN_PMI` and at least
      `COLLOCATION_MIN_COUNT` occurrences in the local corpora (Church and Hanks, "Word Association Norms, Mutual
      Information, and Lexicography", ACL 1989; "rather than", "saturday night", "punch-drunk love");
    * a capitalised word inside a sentence (a name or a title in cased text; "I" excepted).

    Decided once per original text (cached)."""

    multiword: frozenset[tuple[str, ...]]
    collocations: frozenset[tuple[str, str]]
    lemmas: Callable[[str], Iterable[str]]  # a word's base forms, itself included (lower case; `Lexicon.lemmas`)
    _fixed: dict[tuple[str, ...], frozenset[int]] = field(default_factory=dict, repr=False)

    def modifiable(self, current: Words, original: Words, i: int) -> bool:
        return i not in self.fixed(original)

    def fixed(self, words: Words) -> frozenset[int]:
        """The positions of `words` that may not change."""
        if words.words not in self._fixed:
            self._fixed[words.words] = frozenset(self._names(words) | self._phrases(words.words))
        return self._fixed[words.words]

    @staticmethod
    def _names(words: Words) -> set[int]:
        return {i for i, word in enumerate(words.words) if i > 0 and word[:1].isupper() and word != "I"
                and not any(c in words.seps[i] for c in _SENTENCE_END)}

    def _phrases(self, words: Sequence[str]) -> set[int]:
        lower = [w.lower() for w in words]
        out = {j for i in range(len(lower) - 1) if (lower[i], lower[i + 1]) in self.collocations for j in (i, i + 1)}
        forms = [{w, *self.lemmas(w)} for w in lower]  # at most a few forms each
        for n in (2, 3, 4):
            for start in range(len(lower) - n + 1):
                if any(combo in self.multiword for combo in itertools.product(*forms[start:start + n])):
                    out.update(range(start, start + n))
        return out


@dataclass
class Inflection(Constraint):
    """Each candidate re-inflected into the Penn tag the original word has in its sentence, by lemminflect
    (`robench.engine.inflection.swap_edits`; the readers' "it pick", "a absolutely formulaic films"); an `a`/`an`
    right before it is made to agree (`Swap.agreement`). A candidate that cannot take the form, or that becomes
    the original word, is dropped; candidates that become the same word are kept once. Morris et al. (2020) found
    45% of TextFooler's swaps ungrammatical; inflection is the part of that a dictionary fixes."""

    penn_tags: Callable[[Sequence[str]], list[str]]  # Penn Treebank tags of words in context
    _tags: dict[tuple[str, ...], list[str]] = field(default_factory=dict, repr=False)

    def filter(self, current: Words, original: Words, swaps: list[Swap]) -> list[Swap]:
        if original.words not in self._tags:
            self._tags[original.words] = self.penn_tags(original.words)
        tags, out, seen = self._tags[original.words], [], set()
        for swap in swaps:
            edits = swap_edits(current.words, tags, swap.i, swap.word)
            if edits is None or edits[swap.i] in seen:
                continue
            seen.add(edits[swap.i])
            agreement = tuple((j, w) for j, w in sorted(edits.items()) if j != swap.i)
            out.append(Swap(swap.i, edits[swap.i], swap.cos, swap.agreement + agreement))
        return out


@dataclass
class GrammarCheck(Constraint):
    """A swap may not add grammar lints: the lints Harper (an offline grammar checker, harper-py) finds in the
    `window` words around the swap, counted by kind, must not grow from the text before the swap to the text
    after it. Morris et al., "Reevaluating Adversarial Examples in Natural Language", Findings of EMNLP 2020,
    rejected swaps that add LanguageTool errors; Harper stands in for LanguageTool (Java, a download). Lints per
    window are cached; `profile` hears the time as "grammar check"."""

    linter: Any  # .lint(text) -> lints with .lint_kind
    window: int = GRAMMAR_WINDOW
    profile: Profile = field(default_factory=Profile)
    deferred = True
    _kinds: dict[str, Counter] = field(default_factory=dict, repr=False)

    def kinds(self, text: str) -> Counter:
        """The lints of `text`, counted by kind."""
        if text not in self._kinds:
            with self.profile.part("grammar check"):
                self._kinds[text] = Counter(lint.lint_kind for lint in self.linter.lint(text))
        return self._kinds[text]

    def filter(self, current: Words, original: Words, swaps: list[Swap]) -> list[Swap]:
        if not swaps:
            return swaps
        before = self.kinds(current.window(swaps[0].i, self.window))
        return [s for s in swaps if not self.kinds(s.apply(current).window(s.i, self.window)) - before]


@dataclass
class NaturalFilters:
    """The loaded filters of the `natural` setting."""

    fixed: FixedPhrases
    inflection: Inflection
    sense: Constraint
    grammar: GrammarCheck
    info: dict[str, Any]


def natural_constraints(natural: NaturalFilters | None, profile: Profile | None = None, params: Any = None
                        ) -> list[IndexConstraint | Constraint]:
    """The `natural` setting's filters in the order they run, after a recipe's own constraints ([] without);
    `profile` hears the grammar check's time; `params` (a recipe's) may move the sense threshold
    (`sense_min_cos`) or turn the grammar check off (`grammar_check`), as the frontier study does."""
    if natural is None:
        return []
    grammar = dataclasses.replace(natural.grammar, profile=profile) if profile else natural.grammar
    sense, sense_min_cos = natural.sense, getattr(params, "sense_min_cos", None)
    if dataclasses.is_dataclass(sense) and hasattr(sense, "profile"):  # the real sense filter: its time and threshold
        sense = dataclasses.replace(sense, profile=profile or sense.profile,
                                    min_cos=sense.min_cos if sense_min_cos is None else sense_min_cos)
    return [natural.fixed, natural.inflection, sense, *([grammar] if getattr(params, "grammar_check", True) else [])]


def describe(natural: NaturalFilters | None) -> dict[str, Any] | None:
    """The run record's entry: each filter that ran, its method and parameters."""
    return None if natural is None else dict(natural.info)


def check_natural(settings: Settings) -> None:
    """Before training: the inputs of the `natural` filters are there (a RobenchError naming what is missing)."""
    from robench.engine.resources.files import data_file
    from robench.engine.resources.lexicon import lexicon_inputs

    for relative in COLLOCATION_CORPORA:
        data_file(settings, relative, "collocation corpus")
    lexicon_inputs(settings)
    try:
        import harper  # noqa: F401
    except ImportError as exc:
        raise RobenchError("the natural setting's grammar check needs harper-py (pip install harper-py)") from exc


def natural_resources() -> dict[str, str]:
    """The resources the `natural` filters read (robench.engine.resources.identity), with their variants."""
    return {"pos-tagger": "default", "lexicon": "default", "context-similarity": "default",
            "natural-filters": "default"}


def natural_identity(settings: Settings) -> dict[str, str]:
    """The filters' own inputs: the collocation corpora's checksums and the grammar and inflection packages."""
    from robench.engine.resources.files import data_file, inputs_digest

    corpora = [data_file(settings, relative, "collocation corpus") for relative in COLLOCATION_CORPORA]
    return {"corpora": inputs_digest(settings, corpora), "harper": _version("harper-py"),
            "lemminflect": _version("lemminflect")}


def load_natural(settings: Settings, device: Any) -> NaturalFilters:
    """The `natural` setting's filters on the offline resources (tagger, WordNet, corpora, Harper, sense)."""
    from robench.engine.resources.lexicon import lexicon
    from robench.engine.resources.nltk_data import pos_tagger
    from robench.engine.sense import sense_constraint

    tagger = pos_tagger(settings).tagger
    collocations = corpus_collocations(settings)
    sense = sense_constraint(settings, device)
    info = {
        "fixed_phrases": {"method": "WordNet multi-word lemmas, corpus collocations (PMI >= "
                          f"{COLLOCATION_MIN_PMI}, count >= {COLLOCATION_MIN_COUNT}; {len(collocations)} bigrams), "
                          "capitalised words inside a sentence", "corpora": list(COLLOCATION_CORPORA)},
        "inflection": "lemminflect, Penn tags of the NLTK perceptron tagger; a/an agreement",
        "sense": type(sense).__name__ + (f" (min_cos {sense.min_cos})" if hasattr(sense, "min_cos") else ""),
        "grammar": {"checker": f"harper-py {_version('harper-py')}", "window": GRAMMAR_WINDOW,
                    "rule": "no lint kind more frequent after the swap than before"},
    }
    return NaturalFilters(FixedPhrases(wordnet_multiword(settings), collocations, lexicon(settings).lemmas),
                          Inflection(lambda words: [t for _, t in tagger.tag(list(words))]), sense,
                          GrammarCheck(harper_linter()), info)


@functools.lru_cache(maxsize=2)
def wordnet_multiword(settings: Settings) -> frozenset[tuple[str, ...]]:
    """WordNet's multi-word lemmas of 2-4 words, lower case, as word tuples ("fall_short" -> ("fall", "short"))."""
    from robench.engine.resources.lexicon import lexicon

    wordnet = lexicon(settings).wordnet
    names = wordnet.lemma_names() if hasattr(wordnet, "lemma_names") else wordnet.all_lemma_names()
    return frozenset(parts for name in names if 2 <= len(parts := tuple(name.lower().split("_"))) <= 4)


COLLOCATION_CORPORA = ("mr/rt-polarity.pos", "mr/rt-polarity.neg", "ag_news/test.csv",
                       "ud_english_ewt/en_ewt-ud-dev.conllu", "ud_english_ewt/en_ewt-ud-test.conllu")


@functools.lru_cache(maxsize=2)
def corpus_collocations(settings: Settings) -> frozenset[tuple[str, str]]:
    """The collocations of the local corpora (`COLLOCATION_CORPORA` in the data dir): lower-case bigrams seen at
    least `COLLOCATION_MIN_COUNT` times with PMI >= `COLLOCATION_MIN_PMI`."""
    from robench.engine.resources.files import data_file

    unigrams: Counter = Counter()
    bigrams: Counter = Counter()
    for relative in COLLOCATION_CORPORA:
        for line in data_file(settings, relative, "collocation corpus").read_text(encoding="latin-1").splitlines():
            if relative.endswith(".conllu"):
                if not line.startswith("# text = "):
                    continue
                line = line[len("# text = "):]
            words = [w.lower() for w in split_words(line)]
            unigrams.update(words)
            bigrams.update(zip(words, words[1:]))
    total = sum(unigrams.values())
    return frozenset(pair for pair, n in bigrams.items() if n >= COLLOCATION_MIN_COUNT
                     and math.log(n * total / (unigrams[pair[0]] * unigrams[pair[1]])) >= COLLOCATION_MIN_PMI)


@functools.lru_cache(maxsize=1)
def harper_linter() -> Any:
    """One Harper linter for the process (building its dictionary takes ~1.5 s; not thread-safe)."""
    import harper

    return harper.Linter()


def _version(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(package)
    except PackageNotFoundError:
        return "unknown"
