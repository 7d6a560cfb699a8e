"""A finished run's attacked examples, with the words the attack changed marked (for `robench show` and the
per-run pages).

Words are found the way the attack engine finds them (`split_words`, TextAttack's tokenisation); the
two word sequences are aligned with `difflib`, so swaps, insertions and deletions are all marked. The
pieces of a text (words and the separators between them) join back to exactly the original string.
"""
from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher
from pathlib import Path

from robench.core.errors import RobenchError
from robench.core.records import RunRecord, find_record, read_examples, read_record
from robench.core.types import ExampleResult
from robench.data import TASKS
from robench.engine.words import split_words
from robench.report.verify import record_fault

OUTCOMES = ("successful", "failed", "skipped", "error")


@dataclass(frozen=True)
class Piece:
    text: str
    changed: bool = False
    mark: str = ""  # a changed word's swap class worth marking: "antonym" or "unlisted" (robench.report.validity)


@dataclass
class RunExamples:
    record: RunRecord
    examples: list[ExampleResult]
    label_names: tuple[str, ...] | None  # None: the task is not known here (e.g. a plugin that is not installed)

    def label(self, index: int) -> str:
        if index < 0:
            return "–"
        names = self.label_names
        return names[index] if names is not None and index < len(names) else str(index)

    def counts(self) -> dict[str, int]:
        return {o: sum(e.status == o for e in self.examples) for o in OUTCOMES}


def word_diff(original: str, perturbed: str) -> tuple[list[Piece], list[Piece]]:
    """Both texts as pieces, with the words that differ between them marked `changed`.

    An empty `original` (a replayed adversarial set such as AdvGLUE has no paired original) marks nothing.
    """
    before, after = split_words(original), split_words(perturbed)
    if not original:
        return [], _pieces(perturbed, after, set())
    changed_before, changed_after = set(), set()
    for op, i1, i2, j1, j2 in SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if op != "equal":
            changed_before.update(range(i1, i2))
            changed_after.update(range(j1, j2))
    return _pieces(original, before, changed_before), _pieces(perturbed, after, changed_after)


@dataclass(frozen=True)
class Change:
    """One edit of an inline diff: `old` words replaced by `new` ones (either may be empty)."""

    old: str
    new: str


def inline_diff(original: str, perturbed: str) -> list[str | Change]:
    """`perturbed` as plain runs of text and the `Change`s that made it from `original`, aligned word by word as
    `word_diff` aligns them: joining each run and each change's `new` gives `perturbed` back exactly."""
    before, after = _spans(original, split_words(original)), _spans(perturbed, split_words(perturbed))
    out: list[str | Change] = []
    pos = 0
    for op, i1, i2, j1, j2 in SequenceMatcher(a=[original[a:b] for a, b in before],
                                              b=[perturbed[a:b] for a, b in after], autojunk=False).get_opcodes():
        if op == "equal":
            continue
        start = after[j1][0] if j1 < len(after) else len(perturbed)  # a deletion: before the next word
        end = after[j2 - 1][1] if j1 < j2 else start
        out.append(perturbed[pos:start])
        out.append(Change(original[before[i1][0]:before[i2 - 1][1]] if i1 < i2 else "", perturbed[start:end]))
        pos = end
    out.append(perturbed[pos:])
    return [piece for piece in out if piece != ""]


def _spans(text: str, words: list[str]) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for word in words:
        start = text.index(word, pos)
        spans.append((start, start + len(word)))
        pos = start + len(word)
    return spans


def _pieces(text: str, words: list[str], changed: set[int]) -> list[Piece]:
    out, pos = [], 0
    for i, word in enumerate(words):
        start = text.index(word, pos)
        if start > pos:
            out.append(Piece(text[pos:start]))
        out.append(Piece(word, i in changed))
        pos = start + len(word)
    if pos < len(text):
        out.append(Piece(text[pos:]))
    return out


def load_run(runs_dir: Path, run_id: str) -> RunExamples:
    """A finished run's record and its per-example results."""
    record = read_record(find_record(runs_dir, run_id))
    if (fault := record_fault(record, runs_dir)) is not None:
        raise RobenchError(f"run record {record.run_id} does not verify: {fault}; re-run it (or delete it)")
    return RunExamples(record, read_examples(runs_dir, record.run_id), label_names(record))


def label_names(record: RunRecord) -> tuple[str, ...] | None:
    source = record.spec.get("task_source")
    if source is not None:
        return tuple(source["labels"])
    try:
        return TASKS.get(record.spec.get("task", "")).label_names
    except RobenchError:
        return None
