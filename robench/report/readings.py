"""Blind readings of adversarial examples (`robench annotate`), stored beside the run records they read.

A reading is one successful adversarial example as human readers judged it: the label a blind reader gave the
adversarial text and its original (each read alone, shuffled among the others), the meaning kept (1-4) and
whether the swap kept the text fluent. A study's readings of one runs directory are one file,
`<runs_dir>/readings/<study>.json` (not `*.json` in the runs directory itself, which holds only run records),
written atomically; a packed results directory keeps them in `<results_dir>/readings/` (core.packed).
Each reading names its run id and the exact original and adversarial texts, and is shown
only for the record whose per-example results still hold those texts at that index (`readings_by_run`): a
re-run record does not inherit readings of different texts.

`Summary` counts them: label kept (the reader's label of the adversarial text is the gold label), meaning kept
(>= 3 of 4), fluent, valid (all three), each with its Wilson 95% interval, and the control: originals the reader
labelled as gold.
"""
from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Iterable

from robench.core.errors import RobenchError
from robench.core.files import atomic_write
from robench.core.packed import READINGS_DIR, shown_path
from robench.core.records import read_examples
from robench.report.stats import wilson_interval

log = logging.getLogger(__name__)

READINGS_FORMAT = 1
MEANING_KEPT = 3  # a meaning rating of at least this (of 4) keeps the meaning
UNCLEAR = "unclear"  # a reader's label when the text says neither


@dataclass(frozen=True)
class Reading:
    study: str
    run_id: str
    index: int
    original_text: str
    perturbed_text: str
    gold: str  # the gold label's name
    label_original: str  # the blind reader's label of the original (a label name or UNCLEAR)
    label_adversarial: str  # ... and of the adversarial text
    meaning: int  # 1-4: how much of the original's meaning the adversarial text keeps
    fluent: bool  # the swap left the text as fluent as the original

    @property
    def label_kept(self) -> bool:
        return self.label_adversarial == self.gold

    @property
    def meaning_kept(self) -> bool:
        return self.meaning >= MEANING_KEPT

    @property
    def valid(self) -> bool:
        return self.label_kept and self.meaning_kept and self.fluent


@dataclass(frozen=True)
class Rate:
    count: int
    n: int

    @property
    def share(self) -> float:
        return self.count / self.n if self.n else float("nan")

    @property
    def interval(self) -> tuple[float, float]:
        """Wilson 95%."""
        low, high = wilson_interval(self.count, self.n)
        return float(low), float(high)

    def text(self) -> str:
        """ "92% [80, 97] (37/40)" """
        if not self.n:
            return "–"
        low, high = self.interval
        return f"{100 * self.share:.0f}% [{100 * low:.0f}, {100 * high:.0f}] ({self.count}/{self.n})"


@dataclass(frozen=True)
class Summary:
    label_kept: Rate
    meaning_kept: Rate
    fluent: Rate
    valid: Rate
    originals_as_gold: Rate  # the control: originals the blind reader labelled as gold

    @property
    def n(self) -> int:
        return self.valid.n

    def facts(self) -> list[tuple[str, str]]:
        """(label, value) lines for `robench show` and the run page."""
        return [("blind reading (robench annotate)", f"{self.n} successful example(s) read"),
                ("label kept by a blind reader", self.label_kept.text()),
                (f"meaning kept (>= {MEANING_KEPT} of 4)", self.meaning_kept.text()),
                ("fluent", self.fluent.text()),
                ("valid to a reader (all three)", self.valid.text()),
                ("originals labelled as gold (control)", self.originals_as_gold.text())]


def summarize(readings: Iterable[Reading]) -> Summary:
    readings = list(readings)
    n = len(readings)

    def rate(test) -> Rate:
        return Rate(sum(1 for r in readings if test(r)), n)

    return Summary(rate(lambda r: r.label_kept), rate(lambda r: r.meaning_kept), rate(lambda r: r.fluent),
                   rate(lambda r: r.valid), rate(lambda r: r.label_original == r.gold))


def readings_path(runs_dir: Path, study: str) -> Path:
    return Path(runs_dir) / READINGS_DIR / f"{study}.json"


def write_readings(runs_dir: Path, study: str, readings: list[Reading], imported: str) -> Path:
    """Store one study's readings of `runs_dir` (replacing that study's earlier import), atomically; `imported`:
    when (ISO time), which orders studies that read the same example."""
    path = readings_path(runs_dir, study)
    rows = [asdict(r) for r in sorted(readings, key=lambda r: (r.run_id, r.index))]
    atomic_write(path, json.dumps({"format": READINGS_FORMAT, "study": study, "imported": imported,
                                   "readings": rows}, indent=1, ensure_ascii=False) + "\n")
    return path


def load_readings(runs_dir: Path) -> list[Reading]:
    """Every study's readings of `runs_dir`, the earliest import first; a file that does not parse is skipped
    with a warning."""
    studies = []
    for path in sorted((Path(runs_dir) / READINGS_DIR).glob("*.json")):
        try:
            studies.append(_parse(path))
        except RobenchError as exc:
            log.warning("%s", exc)
    return [r for _, readings in sorted(studies, key=lambda s: s[0]) for r in readings]


_NAMES = {f.name: f.type for f in fields(Reading)}


def _parse(path: Path) -> tuple[str, list[Reading]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("format") != READINGS_FORMAT:
            raise ValueError(f"format {data.get('format')!r}, not {READINGS_FORMAT}")
        return str(data["imported"]), [_reading(row) for row in data["readings"]]
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise RobenchError(f"skipping readings file {shown_path(path)}: malformed ({exc}); re-import its sheet "
                           "(`robench annotate import`)") from exc


def _reading(row: dict) -> Reading:
    if set(row) != set(_NAMES):
        raise ValueError(f"a reading has fields {sorted(row)}")
    reading = Reading(**row)
    types = {"index": int, "meaning": int, "fluent": bool}
    if any(not isinstance(getattr(reading, k), types.get(k, str)) for k in _NAMES) or \
            not 1 <= reading.meaning <= 4:
        raise ValueError(f"a reading of run {reading.run_id!r} has a value of the wrong type or range")
    return reading


def readings_by_run(runs_dir: Path, run_ids: Iterable[str]) -> dict[str, list[Reading]]:
    """The readings of each of `run_ids` that still belong to it: its per-example results hold, at the reading's
    index, a successful example with exactly the texts that were read. Runs without readings are left out."""
    wanted = set(run_ids)
    by_run: dict[str, list[Reading]] = {}
    for reading in load_readings(runs_dir):
        if reading.run_id in wanted:
            by_run.setdefault(reading.run_id, []).append(reading)
    out = {}
    for run_id, readings in by_run.items():
        try:
            examples = {e.index: e for e in read_examples(runs_dir, run_id)}
        except RobenchError:
            continue
        kept = [r for r in readings if (e := examples.get(r.index)) is not None and e.status == "successful"
                and (e.original_text, e.perturbed_text) == (r.original_text, r.perturbed_text)]
        if kept:
            out[run_id] = _one_per_example(kept)
    return out


def _one_per_example(readings: list[Reading]) -> list[Reading]:
    """One reading per example (`readings` in import order): when several studies read it, the latest import
    counts, so that no example is counted twice."""
    latest: dict[int, Reading] = {}
    for r in readings:
        latest[r.index] = r
    return [latest[i] for i in sorted(latest)]


def reading_facts(runs_dir: Path, run_id: str) -> list[tuple[str, str]]:
    """The (label, value) lines of one run's blind reading for `robench show` and the run page; [] without one."""
    readings = readings_by_run(runs_dir, [run_id]).get(run_id)
    return summarize(readings).facts() if readings else []
