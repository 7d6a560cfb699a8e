"""rich progress bars for long work (training, attacks), silent when no console is given; and `phase`, the one line
that names work of more than about 2 seconds which has no bar (loading libraries, building a resource)."""
from __future__ import annotations

import contextlib
import logging
import time
from collections import Counter
from collections.abc import Iterable, Iterator

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Column

PHASES = logging.getLogger("robench.phases")  # the CLI prints these on stderr (not with --quiet)


@contextlib.contextmanager
def phase(what: str) -> Iterator[None]:
    """Say that `what` starts ("building the synonym lexicon (first use, about 70 s)") and, when it took more than
    2 s, how long it took: INFO records of the `robench.phases` logger."""
    PHASES.info("%s", what)
    start = time.perf_counter()
    yield
    if (seconds := time.perf_counter() - start) > 2:
        PHASES.info("%s: done in %.0f s", what.split(" (")[0], seconds)


def progress_bar(console: Console | None) -> Progress:
    """A bar whose counters (done/total, elapsed, remaining) keep their room on a narrow terminal: the description
    gives way first (cut with an ellipsis), then the bar."""
    return Progress(
        TextColumn("[progress.description]{task.description}",
                   table_column=Column(ratio=3, no_wrap=True, overflow="ellipsis")),
        BarColumn(bar_width=None, table_column=Column(ratio=1)),
        MofNCompleteColumn(table_column=Column(no_wrap=True, min_width=9, justify="right")),
        TimeElapsedColumn(table_column=Column(no_wrap=True, min_width=7)),
        TimeRemainingColumn(table_column=Column(no_wrap=True, min_width=7)),
        console=console, disable=console is None, transient=False, expand=True,
    )


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
