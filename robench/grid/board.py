"""The live board: a rich table of a grid's cells, redrawn as jobs start and finish."""
from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from robench.grid.cells import GridCell, State, TrainJob

STYLE = {"pending": "dim", "training": "yellow", "attacking": "cyan", "done": "green", "failed": "bold red",
         "skipped": "blue"}


class Board:
    """A rich table: one row per checkpoint (task, model, seed, ...), then its train job and one column per attack
    (per attack and eval size, where an attack has several)."""

    def __init__(self, cells: list[GridCell], trains: list[TrainJob], title: str) -> None:
        self.cells, self.title = cells, title
        self.train_state = {t.key: t for t in trains}
        sizes: dict[str, set] = {}
        for cell in cells:
            sizes.setdefault(cell.spec.attack, set()).add(cell.spec.eval_size)
        self.attack_columns = {(c.spec.attack, c.spec.eval_size): c.spec.attack if len(sizes[c.spec.attack]) == 1
                               else f"{c.spec.attack} n={_text(c.spec.eval_size)}" for c in cells}
        varying = [k for k in ("backbone", "train_size") if len({getattr(c.spec, k) for c in cells}) > 1]
        self.columns = ["task", "model", "seed", *varying]
        self.rows: dict[str, list[GridCell]] = {}
        for cell in cells:
            self.rows.setdefault(cell.checkpoint, []).append(cell)
        self._live = None

    def table(self):
        from rich.table import Table

        counts = {s: sum(c.state == s for c in self.cells) for s in STYLE}
        caption = "  ".join(f"[{STYLE[s]}]{s} {n}[/]" for s, n in counts.items() if n)
        table = Table(title=self.title, caption=caption)
        for name in [*self.columns, "train", *self.attack_columns.values()]:
            table.add_column(name)
        for key, row in self.rows.items():
            train = self.train_state.get(key)
            states = {(c.spec.attack, c.spec.eval_size): _label(c.state, c.attempts) for c in row}
            table.add_row(*[_text(getattr(row[0].spec, k)) for k in self.columns],
                          "skipped" if train is None else _label(train.state, train.attempts),
                          *[states.get(column, "") for column in self.attack_columns])
        return table

    def live(self, console: Any):
        if console is None:
            return contextlib.nullcontext()
        from rich.live import Live

        self._live = Live(self.table(), console=console, refresh_per_second=2, vertical_overflow="visible")
        return self._live

    def refresh(self) -> None:
        if self._live is not None:
            self._live.update(self.table())


def _text(value: Any) -> str:
    return "full" if value is None else str(value)


def _label(state: State, attempts: int) -> str:
    tries = f" ({attempts} tries)" if attempts > 1 or (state == "failed" and attempts) else ""
    return f"[{STYLE[state]}]{state}{tries}[/]"
