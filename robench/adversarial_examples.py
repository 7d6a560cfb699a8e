"""A finished run's attacked examples, with the words the attack changed marked (for `robench show` and the
per-run pages).

Words are found the way the attack engine finds them (`split_words`, TextAttack's tokenisation); the
two word sequences are aligned with `difflib`, so swaps, insertions and deletions are all marked. The
pieces of a text (words and the separators between them) join back to exactly the original string.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, fields
from difflib import SequenceMatcher
from pathlib import Path

from robench.errors import RobenchError
from robench.registries import TASKS
from robench.results import RunRecord, read_record
from robench.types import ExampleResult
from robench.words import split_words

OUTCOMES = ("successful", "failed", "skipped", "error")


@dataclass(frozen=True)
class Piece:
    text: str
    changed: bool = False


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


def find_record(runs_dir: Path, run_id: str) -> Path:
    """The record of `run_id`, or of the one run whose id starts with it."""
    exact = runs_dir / f"{run_id}.json"
    if exact.is_file():
        return exact
    matches = sorted(p for p in runs_dir.glob(f"{run_id}*.json"))
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise RobenchError(f"no run {run_id!r} in {runs_dir} (run ids are the names of its .json files)")
    raise RobenchError(f"{run_id!r} matches {len(matches)} runs: {', '.join(p.stem for p in matches[:5])}")


def load_run(runs_dir: Path, run_id: str) -> RunExamples:
    """A finished run's record and its per-example results."""
    path = find_record(runs_dir, run_id)
    record = read_record(path)
    csv_path = path.with_suffix(".csv")
    if not csv_path.is_file():
        raise RobenchError(f"run {record.run_id} has no per-example file {csv_path}")
    return RunExamples(record, read_examples(csv_path), label_names(record))


def read_examples(path: Path) -> list[ExampleResult]:
    types = {f.name: f.type for f in fields(ExampleResult)}
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return [ExampleResult(**{k: int(v) if types[k] == "int" else v for k, v in row.items() if k in types})
            for row in rows]


def label_names(record: RunRecord) -> tuple[str, ...] | None:
    source = record.spec.get("task_source")
    if source is not None:
        return tuple(source["labels"])
    try:
        return TASKS.get(record.spec.get("task", "")).label_names
    except RobenchError:
        return None
