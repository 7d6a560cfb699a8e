"""The plain types every layer shares: a task, one attacked example's result, a component without parameters.

A leaf module: it imports nothing (no torch, nothing from robench) and registers nothing. What a defence is
(`robench.training.defense`, `robench.training.objective`) and what an attack recipe is
(`robench.engine.attack`) live in the layers that own them.

Attack conventions follow TextAttack so numbers are comparable:
* skipped    - the clean prediction was already wrong; not attacked;
* failed     - attacked, the model still predicts the gold label;
* successful - attacked, the prediction flipped;
* error      - the recipe raised on this example; recorded, left out of the metrics.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal

Split = Literal["train", "eval"]
Source = Literal["local", "hub"]
Status = Literal["skipped", "failed", "successful", "error"]


@dataclass(frozen=True)
class Task:
    """A text-classification task and how to load it from each source."""

    name: str
    text_fields: tuple[str, ...]
    label_names: tuple[str, ...]
    local: Callable[[Path, Split], "object"]  # (data_dir, split) -> Dataset
    hub: Callable[[Split], "object"]  # split -> Dataset
    advglue: str | None = None  # key of the AdvGLUE dev split for this task
    note: str = ""  # how the offline data differs from the canonical task, if it does
    summary: str = ""  # what the task is, for `robench list`
    data_files: tuple[str, ...] = ()  # data-dir files `local` reads (fingerprinted); empty: hash the rows
    uses_data_dir: bool = True  # False: `local` reads the task's own files (tasks from files) and gets no data dir
    adversarial: Callable[[], "object"] | None = None  # fixed adversarial examples to replay (like AdvGLUE)

    @property
    def num_labels(self) -> int:
        return len(self.label_names)


@dataclass
class ExampleResult:
    """One attacked example; one row of the per-example CSV."""

    index: int  # row in the evaluated split
    label: int
    original_text: str
    perturbed_text: str
    original_prediction: int
    perturbed_prediction: int
    status: Status
    queries: int = 0
    num_words: int = 0
    words_perturbed: int = 0
    error: str = ""


@dataclass(frozen=True)
class NoParams:
    pass
