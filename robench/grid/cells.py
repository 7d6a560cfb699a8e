"""A grid's units of work and where each stands: one attack run (`GridCell`) and one shared fine-tuning
(`TrainJob`); the driver plans and moves them, the live board draws them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from robench.runs.resolve import ResolvedRun
    from robench.runs.spec import RunSpec

State = Literal["pending", "training", "attacking", "done", "failed", "skipped"]


@dataclass
class GridCell:
    """One run of the grid, resolved once (`plan_cells`), and where it stands."""

    resolved: ResolvedRun
    checkpoint: str  # the checkpoint key it shares with the other attacks on the same model
    state: State = "pending"
    attempts: int = 0
    error: str = ""

    @property
    def spec(self) -> RunSpec:
        return self.resolved.spec  # with its data fingerprint: the run id


@dataclass
class TrainJob:
    """One fine-tuning job, shared by every cell whose spec differs only in the attack (it trains the first's)."""

    resolved: ResolvedRun
    key: str
    cells: list[GridCell]
    state: State = "pending"
    attempts: int = 0
    error: str = ""

    @property
    def spec(self) -> RunSpec:
        return self.resolved.spec
