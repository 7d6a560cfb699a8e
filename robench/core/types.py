"""The plain types every layer shares: tasks, defenses, attack recipes and their results.

A leaf module: it imports nothing from robench at run time and registers nothing.
Built-in entries register themselves in their own modules (`robench.data.tasks`,
`robench.models`, `robench.attacks`).

Attack conventions follow TextAttack so numbers are comparable:
* skipped    - the clean prediction was already wrong; not attacked;
* failed     - attacked, the model still predicts the gold label;
* successful - attacked, the prediction flipped;
* error      - the recipe raised on this example; recorded, left out of the metrics.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Literal, Protocol

if TYPE_CHECKING:  # annotations only: importing core imports no torch
    import torch
    from rich.console import Console
    from torch import nn

    from robench.classifier.victim import Victim
    from robench.core.paths import Settings
    from robench.runs.spec import RunSpec

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


@dataclass
class TrainingContext:
    """What the training loop hands an objective before the first epoch (`Objective.prepare`).

    `texts` and `labels` are the training subset, in its order; `encode(texts, labels)` tokenizes task inputs
    into training features exactly as the loop does (list of dicts, one per input, with "labels").
    """

    model: nn.Module
    tokenizer: Any
    task: Task
    texts: list[tuple[str, ...]]
    labels: list[int]
    encode: Callable[[Any, Any], list[dict[str, Any]]]
    settings: Settings
    device: torch.device
    seed: int
    epochs: int
    batch_size: int
    max_length: int
    console: Console | None = None


class Objective:
    """Cross-entropy fine-tuning; subclasses change how a step makes its gradients.

    Hooks of the training loop (`robench.training.loop`), all optional: `prepare` (once, before the first
    epoch, with the loop's `TrainingContext`), `epoch_features` (the examples of one epoch: a2t adds its
    adversarial examples, SAFER its random substitutions), `planned_examples` (how many examples an epoch will
    have, for the learning-rate schedule), `epoch_report` (what the epoch's extra work cost, into the training
    record), and the class methods `check` (before any training: the schedule and resources) and `fingerprint`
    (resources that determine the weights, into the checkpoint key).
    """

    def __init__(self, model: nn.Module, params: Any) -> None:
        self.model = model
        self.params = params

    def step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """Compute the loss for `batch`, call backward, return the detached loss."""
        loss = self.model(**batch).loss
        loss.backward()
        return loss.detach()

    def after_optimizer_step(self) -> None:
        """Hook run after each optimizer step (e.g. SMART's EMA teacher update)."""

    def prepare(self, context: TrainingContext) -> None:
        """Called once before the first epoch (load resources, keep the context)."""

    def epoch_features(self, epoch: int, features: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        """The training features of 1-based `epoch`, given the clean ones; None: the clean features."""
        return None

    @classmethod
    def planned_examples(cls, params: Any, epoch: int, n_train: int) -> int:
        """How many examples 1-based `epoch` will train on (the learning-rate schedule's length, cost estimates)."""
        return n_train

    def epoch_report(self) -> dict[str, Any]:
        """What the last `epoch_features` call did and cost (merged into the epoch's training history)."""
        return {}

    @classmethod
    def check(cls, params: Any, train: Any, settings: Settings) -> None:
        """Before any training: raise a RobenchError for a schedule (`train`: the TrainConfig) or a missing
        resource this objective cannot train with (cheap checks only)."""

    @classmethod
    def extra_cost(cls, params: Any, train_words: list[int], epochs: int, eval_examples: int) -> dict[str, float]:
        """Work beyond the loop's optimisation steps and the attack's queries, in model queries (at the victim's
        measured rate), for cost estimates: "train" (a2t's training attack) and "attack" (SAFER's certificate).
        `train_words`: the word count of each training input; `eval_examples`: the examples attacked."""
        return {}

    @classmethod
    def fingerprint(cls, params: Any, settings: Settings) -> dict[str, Any] | None:
        """Identity of the external resources the weights depend on (None: none); part of the checkpoint key."""
        return None


class Architecture(Protocol):
    def __call__(self, backbone: str, num_labels: int, params: Any) -> nn.Module: ...


@dataclass(frozen=True)
class Defense:
    """A registry entry under `robench.models`."""

    name: str
    summary: str
    architecture: Architecture | None = None  # None: plain BERT
    objective: type[Objective] | None = None  # None: cross-entropy
    params: type = NoParams  # dataclass of this component's hyperparameters


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

    spec: RunSpec
    task: Task
    victim: Victim
    settings: Settings
    eval_data: Any  # datasets.Dataset: the examples to attack (the recipe's split, subset by the spec's eval seed)
    dev_accuracy: float  # the fine-tuned model's accuracy on the task's whole eval split
    done: dict[int, ExampleResult]  # results of an interrupted earlier attempt, by index
    record: Callable[[ExampleResult], None]  # persist one finished example at once
    console: Console | None = None
    profile: Profile = field(default_factory=Profile)  # where the attack's time went (run record timings)


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
    """

    name: str
    summary: str
    attack: Callable[[AttackContext, Any], AttackOutput]
    params: type
    check: Callable[[Task, Any, Settings], None] = lambda task, params, settings: None
    summarize: Callable[[list[ExampleResult], AttackContext, Any], dict[str, Any]] | None = None
    queries_per_word: float = 0.0  # typical model queries per input word (cost estimates); 0: replay, 1/example
    examples: Callable[[Task, Settings, Source], Any] | None = None
    data_files: tuple[str, ...] = ()
    word_swaps: bool = False  # swaps words in place: the runner adds the validity audit (robench.engine.audit)
