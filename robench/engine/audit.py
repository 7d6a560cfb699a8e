"""The validity audit of a word-substitution attack: what its successful swaps are. A measurement, never a filter.

Each swap (a word of the original replaced at the same position in the adversarial text) of a successful attack
is put in exactly one class, checked in this order:

* `antonym`: a listed antonym pair in any inflection, either direction (Mrkšić et al.'s PPDB and WordNet lists,
  WordNet 3.0's lemma antonyms; `lexicon.Lexicon.is_antonym`, direct antonyms only);
* `inflection`: the same lemma, whether or not a list names the pair: a change of number, tense or degree
  ("lacks" -> "lacked", "director" -> "directors", "good" -> "best"; `Lexicon.is_inflection`);
* `synonym`: listed synonyms of different lemmas, as written or between lemmas: WordNet synset lemmas, Mrkšić's
  PPDB synonyms or the Alzantot et al. neighbour sets (`Lexicon.is_synonym`);
* `unlisted`: anything else (topical relatives, sense changes, MLM guesses: "delicious" -> "canned").

Antonym comes first: a pair both lists name is counted as an antonym. Inflection comes before synonym: PPDB and
the Alzantot lists name many inflections ("director" ~ "directors"), and an audit of format 1, which checked
synonym first, counted them as synonyms (7-9% of the valid TextFooler's and gradient-swap's swaps on the v3
reference, 26% of the valid BERT-Attack's). `robench audit` re-audits such records.

Per run (`audit`): the number of swaps, the share of each class, the share of successful examples with at least
one antonym swap, and, per synonym resource, the share of swaps it lists, so that a reader can judge the rate on
resources the attack's own candidate source was not built from (`independent_synonym_rate`). Case is ignored.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from robench.core.types import ExampleResult
from robench.engine.resources.lexicon import SYNONYM_RESOURCES, Lexicon
from robench.engine.words import FIELD_SEPARATOR, is_article_agreement, split_words

CLASSES = ("synonym", "antonym", "inflection", "unlisted")
AUDIT_FORMAT = 2  # 2: inflection checked before synonym (module docstring)


def classify(lex: Lexicon, old: str, new: str) -> str:
    """The audit class of replacing `old` by `new` (see the module docstring)."""
    a, b = old.lower(), new.lower()
    if lex.is_antonym(a, b):
        return "antonym"
    if lex.is_inflection(a, b):
        return "inflection"
    if lex.is_synonym(a, b):
        return "synonym"
    return "unlisted"


def swaps(original: str, perturbed: str) -> list[tuple[str, str]] | None:
    """The (old, new) words that differ, position by position, in the perturbed (last) text field; None when the
    two do not have the same number of words (not a word substitution). An `a`/`an` made to agree is no swap."""
    a = split_words(original.split(FIELD_SEPARATOR)[-1])
    b = split_words(perturbed.split(FIELD_SEPARATOR)[-1])
    if len(a) != len(b):
        return None
    return [(x, y) for x, y in zip(a, b) if x.lower() != y.lower() and not is_article_agreement(x, y)]


@dataclass
class SwapAudit:
    """The audit of one run's successful examples (rates are None when there is no swap)."""

    examples: int  # successful examples audited
    swaps: int
    rates: dict[str, float | None]  # class -> share of swaps
    counts: dict[str, int]
    examples_with_antonym: int
    antonym_example_rate: float | None  # share of successful examples with >= 1 antonym swap
    resource_rates: dict[str, float | None]  # synonym resource -> share of swaps it lists
    source_lists: list[str]  # the synonym resources the attack's candidates were drawn from
    independent_synonym_rate: float | None  # share of swaps listed by a resource outside source_lists
    not_word_swaps: int  # successful examples whose texts differ in length (not audited)
    lexicon: dict[str, Any] = field(default_factory=dict)
    format: int = AUDIT_FORMAT

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _rate(count: int, total: int) -> float | None:
    return count / total if total else None


def audit(results: Iterable[ExampleResult], lex: Lexicon, source_lists: Sequence[str] = ()) -> SwapAudit:
    """Classify every swap of the successful examples of `results` (see the module docstring)."""
    counts: Counter[str] = Counter({c: 0 for c in CLASSES})
    listed: Counter[str] = Counter({r: 0 for r in SYNONYM_RESOURCES})
    independent = [r for r in SYNONYM_RESOURCES if r not in source_lists]
    n_examples = with_antonym = skipped = independent_hits = 0
    for result in results:
        if result.status != "successful":
            continue
        pairs = swaps(result.original_text, result.perturbed_text)
        if pairs is None:
            skipped += 1
            continue
        n_examples += 1
        classes = [classify(lex, a, b) for a, b in pairs]
        counts.update(classes)
        with_antonym += "antonym" in classes
        for a, b in pairs:
            hits = lex.resources_of(a, b)
            listed.update(hits)
            independent_hits += any(r in independent for r in hits)
    total = sum(counts.values())
    return SwapAudit(
        examples=n_examples, swaps=total, rates={c: _rate(counts[c], total) for c in CLASSES},
        counts=dict(counts), examples_with_antonym=with_antonym,
        antonym_example_rate=_rate(with_antonym, n_examples),
        resource_rates={r: _rate(listed[r], total) for r in SYNONYM_RESOURCES}, source_lists=list(source_lists),
        independent_synonym_rate=_rate(independent_hits, total) if independent else None,
        not_word_swaps=skipped, lexicon={"name": lex.info.get("name"), "pairs": lex.info.get("pairs")})


def is_stale(validity: Any) -> bool:
    """A record's `metrics.validity` audit made with an older class order than this module's (re-audit it)."""
    return isinstance(validity, dict) and validity.get("format", 1) < AUDIT_FORMAT


def swap_classes(lex: Lexicon, original: str, perturbed: str) -> list[tuple[str, str, str]]:
    """(old, new, class) of each swap of one example, for display; [] when not a word substitution."""
    return [(a, b, classify(lex, a, b)) for a, b in swaps(original, perturbed) or []]


def source_lists_of(resources: dict[str, Any]) -> list[str]:
    """The synonym resources a record's attack drew its candidates from (`resources.attack` of the record)."""
    info = resources.get("synonyms") or {}
    if isinstance(info, dict) and "used" in info:  # the TextAttack backend nests the table's info
        info = info["used"]
    return list(info.get("synonym_lists", [])) if isinstance(info, dict) else []
