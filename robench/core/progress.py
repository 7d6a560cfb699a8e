"""rich progress bars for long work (training, attacks); silent when no console is given."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def progress_bar(console: Console | None) -> Progress:
    return Progress(
        TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TimeElapsedColumn(), TimeRemainingColumn(),
        console=console, disable=console is None, transient=False,
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
