"""rich progress bars for long work (training, attacks), silent when no console is given; and `phase`, the one line
that names work of more than about 2 seconds which has no bar (loading libraries, building a resource).

Neither is ever silent for long: a phase says every HEARTBEAT seconds how long it has run (against its expected
time, when it has one: `expected_seconds`), and a bar on a console that is not a terminal (a pipe, a log file), where
rich draws nothing until the bar ends, prints a plain line every PLAIN_EVERY seconds instead."""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Column

PHASES = logging.getLogger("robench.phases")  # the CLI prints these on stderr (not with --quiet)
HEARTBEAT = 2.0  # seconds: a phase says how long it has run this often (in a pipe, after its first PLAIN_EVERY
# seconds, every PLAIN_EVERY)
PLAIN_EVERY = 10.0  # seconds between a bar's plain lines, and a phase's, where no terminal redraws them


def expected_seconds(idle_seconds: float) -> float:
    """Work that takes `idle_seconds` on the reference machine idle, on this machine as loaded now
    (`robench.core.machine.slowdown`: a short probe of one core)."""
    from robench.core.machine import slowdown

    return idle_seconds * slowdown()


@contextlib.contextmanager
def phase(what: str, expected: float | None = None) -> Iterator[None]:
    """Say that `what` starts ("building the synonym lexicon (first use)"), with its `expected` seconds on this
    machine when given; every HEARTBEAT seconds how long it has run (INFO records with `heartbeat=True`, which a
    handler may draw in place); and, when it took more than 2 s, how long it took: INFO records of the
    `robench.phases` logger."""
    name = what.split(" (")[0]
    PHASES.info("%s", what if expected is None else f"{what}; expected ~{clock(expected)} on this machine now")
    start = time.perf_counter()
    with heartbeat(name, expected):
        yield
    if (seconds := time.perf_counter() - start) > 2:
        PHASES.info("%s: done in %.0f s", name, seconds)


@contextlib.contextmanager
def heartbeat(name: str, expected: float | None = None) -> Iterator[None]:
    """Every HEARTBEAT seconds while the block runs, `name: 12 s so far` (of its `expected` seconds) as an INFO
    record of `robench.phases` with `heartbeat=True` (a phase's, or work that says its own first and last line)."""
    start, stop = time.perf_counter(), threading.Event()
    beat = threading.Thread(target=_beat, args=(name, expected, start, stop), daemon=True)
    beat.start()
    try:
        yield
    finally:
        stop.set()
        beat.join()


def _beat(name: str, expected: float | None, start: float, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT):
        spent = time.perf_counter() - start
        of = "" if expected is None else f" of ~{clock(expected)} expected"
        PHASES.info("%s: %s so far%s", name, clock(spent), of, extra={"heartbeat": True, "elapsed": spent})


def clock(seconds: float) -> str:
    """`42 s`, `3 min 5 s`: a short duration as a person reads it."""
    seconds = max(round(seconds), 0)
    return f"{seconds} s" if seconds < 90 else f"{seconds // 60} min {seconds % 60} s"


def progress_bar(console: Console | None) -> Progress:
    """A bar whose counters (done/total, elapsed, remaining) keep their room on a narrow terminal: the description
    gives way first (cut with an ellipsis), then the bar;
    on a console that is not a terminal, plain lines (`PlainProgress`)."""
    if console is not None and not console.is_terminal:
        return PlainProgress(console)
    return Progress(
        TextColumn("[progress.description]{task.description}",
                   table_column=Column(ratio=3, no_wrap=True, overflow="ellipsis")),
        BarColumn(bar_width=None, table_column=Column(ratio=1)),
        MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=9, justify="right")),
        TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=7)),
        TimeRemainingColumn(table_column=Column(no_wrap=True, min_width=7)),
        console=console, disable=console is None, transient=False, expand=True,
    )


class PlainProgress(Progress):
    """A progress bar for a pipe or a log file: nothing drawn, but a plain line per task every PLAIN_EVERY seconds
    and when it completes (`train bert epoch 1/3 loss 0.512: 12/94 (13%), 40 s, ~4 min 33 s left`)."""

    def __init__(self, console: Console) -> None:
        super().__init__(console=console, disable=True)
        self._printed: dict[Any, float] = {}

    def update(self, task_id, **kwargs: Any) -> None:  # type: ignore[override]
        super().update(task_id, **kwargs)
        self._maybe_print(task_id)

    def advance(self, task_id, advance: float = 1) -> None:
        super().advance(task_id, advance)
        self._maybe_print(task_id)

    def _maybe_print(self, task_id) -> None:
        task = self._tasks[task_id]
        now = time.monotonic()
        if not task.finished and now - self._printed.setdefault(task_id, now) < PLAIN_EVERY:
            return
        if task.finished and self._printed.get(task_id) == float("inf"):
            return
        self._printed[task_id] = float("inf") if task.finished else now
        self.console.print(plain_line(task.description, task.completed, task.total, task.elapsed or 0.0),
                           markup=False, highlight=False, soft_wrap=True)


def plain_line(description: str, done: float, total: float | None, elapsed: float) -> str:
    """One progress line for a pipe: what, how far, how long so far, and how long is left at this pace."""
    if not total:
        return f"{description}: {done:.0f}, {clock(elapsed)}"
    left = "" if not done or done >= total else f", ~{clock(elapsed * (total - done) / done)} left"
    return f"{description}: {done:.0f}/{total:.0f} ({100 * done / total:.0f}%), {clock(elapsed)}{left}"


class AttackTally:
    """Outcomes so far, for an attack bar's description: `textfooler (12 successful, 3 failed, 2 skipped)`."""

    def __init__(self, name: str, done: Iterable[str] = ()) -> None:
        self.name, self.counts = name, Counter(done)

    def add(self, status: str) -> str:
        self.counts[status] += 1
        return self.description()

    def description(self) -> str:
        parts = [f"{self.counts[s]} {s}" for s in ("successful", "failed", "skipped", "error") if self.counts[s]]
        return f"{self.name} ({', '.join(parts)})" if parts else self.name
