"""What an attack recipe is: what it gets (`AttackContext`), what it returns (`AttackOutput`), its registry entry
(`AttackRecipe`, registered in `ATTACKS`), and where its time went (`Profile`).
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterator, Protocol

from robench.core.paths import Settings
from robench.core.registry import Registry
from robench.core.types import ExampleResult, Source, Task

if TYPE_CHECKING:  # annotations only: naming and listing recipes imports no torch
    from rich.console import Console

    from robench.classifier.victim import Victim


class AttackedRun(Protocol):
    """What a recipe reads of the run it attacks in (a `robench.runs.spec.RunSpec` is one)."""

    @property
    def seed(self) -> int: ...

    @property
    def data_source(self) -> Source: ...


@dataclass
class Profile:
    """Where an attack's wall time went: exclusive seconds per named part, and counts beside them.

    `part(name)` times a block; a part entered inside another pauses the outer one, so the seconds of nested
    parts add up to the wall time of the outermost (no part is counted twice). Never wrap a block that yields
    (a generator suspended inside a part would leave it running). The engine times its own parts ("search",
    "victim", each service); recipes add theirs ("candidates", "pos tagging") inside the search. Timer calls
    cost about a microsecond each.
    """

    seconds: dict[str, float] = field(default_factory=dict)
    counts: dict[str, float] = field(default_factory=dict)
    _stack: list[str] = field(default_factory=list, repr=False)
    _since: float = field(default=0.0, repr=False)

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def count(self, name: str, n: float) -> None:
        self.counts[name] = self.counts.get(name, 0) + n

    @contextlib.contextmanager
    def part(self, name: str) -> Iterator[None]:
        self._switch(name)
        try:
            yield
        finally:
            self._switch(None)

    def _switch(self, entering: str | None) -> None:
        now = time.perf_counter()
        if self._stack:
            self.add(self._stack[-1], now - self._since)
        if entering is None:
            self._stack.pop()
        else:
            self._stack.append(entering)
        self._since = now

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {"seconds": dict(self.seconds), "counts": dict(self.counts)}


@dataclass
class AttackContext:
    """What a recipe gets: the victim, the data to attack, and where to persist progress."""

    spec: AttackedRun | None  # the run's spec (a `robench.runs.spec.RunSpec`); None: an attack inside training
    task: Task
    victim: Victim
    settings: Settings
    eval_data: Any  # datasets.Dataset: the examples to attack (the recipe's split, subset by the spec's eval seed)
    dev_accuracy: float  # the fine-tuned model's accuracy on the task's whole eval split
    done: dict[int, ExampleResult]  # results of an interrupted earlier attempt, by index
    record: Callable[[ExampleResult], None]  # persist one finished example at once
    console: Console | None = None
    profile: Profile = field(default_factory=Profile)  # where the attack's time went (run record timings)
    split: Any = None  # the whole split `eval_data` was drawn from, rows in order; None: not given (inside training)


@dataclass
class AttackOutput:
    """What a recipe's attack returns: its new results and the resources it used, described once."""

    results: list[ExampleResult]  # one per example attacked now (not those in ctx.done)
    resources: dict[str, Any]  # every external resource the attack used and its substitutes, for the run record


@dataclass
class AttackRecipe:
    """A registry entry under `robench.attacks`.

    `attack(ctx, params)` returns an `AttackOutput`: one ExampleResult per attacked example,
    and a description of every external resource it used, from the resources it loaded.
    `check(task, params, settings)` rejects, *before* training, a task the recipe cannot
    handle or a resource it needs that is missing (cheap checks: no model loading).
    `summarize(results, ctx, params)` turns results into metrics (TextAttack's by default); `params` are the
    resolved attack parameters, the same object `attack` got.
    `examples(task, settings, source)` loads the split the recipe attacks (default: the task's eval
    split); the runner subsets it with the spec's `eval_size` and `eval_seed` and passes it as `ctx.eval_data`.
    `data_files` are the data-dir files the recipe reads itself (part of the run's data fingerprint).
    `resources(params)` names every resource (robench.engine.resources.identity) whose version can change what the
    attack finds, with its variant (`{"masked-lm": "built"}`): a finished record is reused only while they are
    the versions it was made with.
    """

    name: str
    summary: str
    attack: Callable[[AttackContext, Any], AttackOutput]
    params: type
    check: Callable[[Task, Any, Settings], None] = lambda task, params, settings: None
    summarize: Callable[[list[ExampleResult], AttackContext, Any], dict[str, Any]] | None = None
    query_cost_per_word: float = 0.0  # typical model queries per input word (cost estimates); 0: replay, 1/example
    load_seconds: float = 0.0  # once per run: loading its resources and auditing the swaps (cost estimates; a
    # 2-core CPU, docs/studies/presets.md "The attack's fixed cost")
    examples: Callable[[Task, Settings, Source], Any] | None = None
    data_files: tuple[str, ...] = ()
    word_swaps: bool = False  # swaps words in place: the runner adds the validity audit (robench.engine.audit)
    replay: bool = False  # evaluates fixed texts, searches nothing (AdvGLUE, a transfer): no source for a transfer
    resources: Callable[[Any], dict[str, str]] = lambda params: {}


ATTACKS: Registry[AttackRecipe] = Registry("attacks", "robench.attacks")  # the recipes (`robench list attacks`)
