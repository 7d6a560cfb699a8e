"""A RunSpec resolved once: every name looked up, every hyperparameter validated, before any work."""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from robench.classifier.backbone import Backbone, resolve_backbone
from robench.core.errors import RobenchError
from robench.core.hashing import content_hash
from robench.core.params import make_params
from robench.core.paths import Settings
from robench.core.types import Source, Split, Task
from robench.data import TASKS
from robench.data.file_tasks import has_train_file, task_from_definition
from robench.data.fingerprint import files_fingerprint, task_fingerprint
from robench.data.loading import RunTexts, load_split, run_texts, subset_indices
from robench.engine.attack import ATTACKS, AttackRecipe
from robench.runs.given import checkpoint_label_order, parse_label_map
from robench.runs.spec import MAX_SEED, RunSpec
from robench.training.defense import ComposedDefense, resolve_model

log = logging.getLogger(__name__)
MAX_ATTACK_WORDS = 2_000  # longest text a word-level search attack takes (robench.runs.resolve.check_attack_lengths)


class SplitReader:
    """The run's data, each split read once (`robench.data.loading.load_split`) and kept: "train", "eval", and
    "attacked" (the split the attack draws from). Resolving reads through it, and the resolved run carries it, so
    training and the attack reuse what resolving read."""

    def __init__(self, task: Task, settings: Settings, source: Source, read: dict[str, Any] | None = None) -> None:
        self.task, self.settings, self.source = task, settings, source
        self.read: dict[str, Any] = dict(read or {})

    def __call__(self, name: Split) -> Any:
        """The task's `name` split."""
        if name not in self.read:
            self.read[name] = load_split(self.task, name, self.settings.data_dir, self.source)
        return self.read[name]

    def attacked(self, recipe: AttackRecipe | None) -> Any:
        """The split the attack draws its examples from: the recipe's own (AdvGLUE's) or the task's eval split."""
        if "attacked" not in self.read:
            own = recipe.examples if recipe is not None else None
            self.read["attacked"] = self("eval") if own is None else own(self.task, self.settings, self.source)
        return self.read["attacked"]


@dataclass(frozen=True)
class ResolvedRun:
    """What a run needs, looked up from its spec once and passed down to training and the attack."""

    spec: RunSpec
    settings: Settings
    task: Task
    defense: ComposedDefense | None  # None: the run attacks a given model (spec.checkpoint)
    model_params: dict[str, Any]  # the defense's hyperparameters, defaults filled in
    backbone: Backbone | None  # None: the run attacks a given model
    train_data: str  # fingerprint of the task's train and eval data
    data: SplitReader = field(compare=False, repr=False)  # the data the run has read so far, each split once
    recipe: AttackRecipe | None = None  # None: training only
    attack_params: Any = None  # the recipe's params dataclass
    label_order: tuple[int, ...] | None = None  # a saved checkpoint's output for each task label

    def split(self, name: Split) -> Any:
        """The task's `name` split, read on first use and kept with the run."""
        return self.data(name)

    def attacked_split(self) -> Any:
        """The split the attack draws its examples from: the recipe's own (AdvGLUE's) or the task's eval split."""
        return self.data.attacked(self.recipe)

    def resource_identity(self) -> dict[str, Any]:
        """The identity of every resource the attack reads (robench.engine.resources.identity), as it is now: the
        recipe's own, and the lexicon that audits a word-level attack's swaps. Empty for training only."""
        from robench.engine.resources.identity import identities

        if self.recipe is None:
            return {}
        uses = {**self.recipe.resources(self.attack_params), **({"lexicon": "default"} if self.recipe.word_swaps
                                                                 else {})}
        return identities(self.settings, uses)

    def texts(self) -> RunTexts:
        """What the run reads, as texts: its training subset (none for a given checkpoint), the whole eval split
        and the attacked subset (`robench.data.loading.run_texts`), each split read once per run."""
        spec = self.spec
        return run_texts(self.task, self.split, self.attacked_split if self.recipe is not None else None,
                         spec.trains, spec.train_size, spec.seed, spec.eval_size, spec.eval_seed)

    def hyperparameters(self) -> dict[str, Any]:
        """Training, defense and attack hyperparameters as recorded in a run record (of a given model's
        training settings only the input length applies)."""
        attack = dataclasses.asdict(self.attack_params) if self.attack_params is not None else None
        train = dataclasses.asdict(self.spec.train) if self.spec.trains else {"max_length": self.spec.train.max_length}
        return {"train": train, "model": self.model_params, "attack": attack}


def resolve_run(spec: RunSpec, settings: Settings, attack: bool = True) -> ResolvedRun:
    """Fail fast, before any training, on every bad name, hyperparameter, missing resource or data file in
    `spec`; fingerprint the data the run reads."""
    check_spec(spec)
    if spec.eval_size is None and spec.eval_seed != 0:  # the whole split: the eval seed chooses nothing, so it
        spec = dataclasses.replace(spec, eval_seed=0)  # is not part of the run id either (one run, one record)
    if spec.trains and spec.task_source is not None and not has_train_file(spec.task_source):
        raise RobenchError(f"task {spec.task!r} has no train file, so there is nothing to fine-tune on: attack an "
                           "existing model with --checkpoint (robench.evaluate in Python), or add a train file")
    splits: dict[str, Any] = {}
    task = resolve_task(spec, splits)
    read = SplitReader(task, settings, spec.data_source, splits)
    defense, model_params, backbone, order = None, {}, None, None
    if spec.trains:
        defense = resolve_model(spec.model)
        model_params = defense.resolve_params(spec.model_params)
        defense.check_training(model_params, spec.train, settings)
        backbone = resolve_backbone(spec.backbone)
        if backbone.max_positions is not None and spec.train.max_length > backbone.max_positions:
            raise RobenchError(f"--max-length {spec.train.max_length} exceeds the {backbone.max_positions} "
                               f"positions of backbone {spec.backbone!r}; use --max-length "
                               f"{backbone.max_positions} or less")
    elif spec.checkpoint.get("kind") == "checkpoint":
        order = checkpoint_label_order(spec.checkpoint["location"], task,
                                       parse_label_map(spec.checkpoint.get("label_map")))
    if spec.data_source == "local" and task.uses_data_dir:
        settings.require_data_dir()
    recipe = attack_params = None
    if attack:
        recipe = ATTACKS.get(spec.attack)
        attack_params = make_params(recipe.params, spec.attack_params, f"attack {spec.attack!r}")
        recipe.check(task, attack_params, settings)
        if recipe.query_cost_per_word and recipe.examples is None:
            check_attack_lengths(spec, task, read("eval"))
    train_data = data_fingerprint(spec, task, settings, read)
    data = train_data  # the run's fingerprint adds the files the recipe reads itself (AdvGLUE's)
    if recipe is not None and recipe.data_files and spec.data_source == "local" and task.uses_data_dir:
        data = content_hash([train_data, files_fingerprint(settings.data_dir, recipe.data_files, settings.cache_dir)])
    spec = dataclasses.replace(spec, data_fingerprint=data, train_size=effective_train_size(spec, task, read),
                               model_params=_canonical(spec.model_params, model_params,
                                                       defense.resolve_params({}) if defense is not None else {}),
                               attack_params=_canonical(spec.attack_params, dataclasses.asdict(attack_params)
                                                        if attack_params is not None else {}, _attack_defaults(recipe)))
    return ResolvedRun(spec, settings, task, defense, model_params, backbone, train_data, read, recipe, attack_params,
                       order)


def _canonical(given: dict[str, Any], resolved: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The parameters the user gave, each as its parsed value in JSON form (`im_layers="0,1,2"` and
    `im_layers=[0, 1, 2]` are one setting, so one run id), without those given at their default value
    (`im_gamma=0.01` spelled out is the default run, not a second record of the same setting)."""
    plain = {k: json.loads(json.dumps(resolved[k])) if k in resolved else v for k, v in given.items()}
    defaults = json.loads(json.dumps(defaults, default=str))
    return {k: v for k, v in plain.items() if k not in defaults or defaults[k] != v}


def _attack_defaults(recipe: AttackRecipe | None) -> dict[str, Any]:
    if recipe is None:
        return {}
    return dataclasses.asdict(make_params(recipe.params, {}, f"attack {recipe.name!r}"))


def check_attack_lengths(spec: RunSpec, task: Task, split: Any) -> None:
    """A word-level search asks the model about the whole text once or more per word it tries, so its cost grows
    with the square of the text's length (a 100,000-character text: hours, and gigabytes of cached queries):
    an attacked text of more than MAX_ATTACK_WORDS words is an error before any work, naming its rows (`split`:
    the task's eval split)."""
    rows = subset_indices(len(split), spec.eval_size, spec.eval_seed)
    texts = split[task.text_fields[-1]]  # the attacked field (of a pair, the second)
    long = [(i, n) for i in rows if (n := len(str(texts[i]).split())) > MAX_ATTACK_WORDS]
    if long:
        shown = ", ".join(f"row {i} ({n:,} words)" for i, n in long[:3])
        raise RobenchError(f"{len(long)} text(s) the {spec.attack} attack would search are longer than "
                           f"{MAX_ATTACK_WORDS:,} words ({shown}{', ...' if len(long) > 3 else ''}); a word-level "
                           "search queries the model with the whole text for every word it tries: shorten or drop "
                           "them, or choose other examples (--eval-size, --eval-seed)")


def effective_train_size(spec: RunSpec, task: Task, read: Callable[[Split], Any]) -> int | None:
    """`spec.train_size`, or None (the whole split) when it is at least the train split's size: the same training
    rows, so the same run id and checkpoint as no --train-size. The record says how many examples were used
    (`resources.data.train_examples`)."""
    if not spec.trains or spec.train_size is None:
        return spec.train_size
    rows = len(read("train"))
    if spec.train_size < rows:
        return spec.train_size
    log.info("train size %d is at least the %d rows of the %s train split: training on the whole split",
             spec.train_size, rows, task.name)
    return None


def data_fingerprint(spec: RunSpec, task: Task, settings: Settings, read: Callable[[Split], Any]) -> str:
    """The train and eval data the run reads: a task from files by its files' hashes, else robench.data.fingerprint
    (rows it needs are read through `read`, once per run)."""
    if spec.task_source is not None:
        return content_hash(spec.task_source)
    return task_fingerprint(task, settings, spec.data_source, read)


def check_spec(spec: RunSpec) -> None:
    """Seeds, subset sizes and the data source (the training hyperparameters check themselves)."""
    for flag, seed in (("--seed", spec.seed), ("--eval-seed", spec.eval_seed)):
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
            raise RobenchError(f"{flag} must be an integer from 0 to {MAX_SEED}, got {seed!r}")
    for flag, size in (("--train-size", spec.train_size), ("--eval-size", spec.eval_size)):
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise RobenchError(f"{flag} must be a positive integer, or full for the whole split, got {size!r}")
    if spec.data_source not in ("local", "hub"):
        raise RobenchError(f"--data-source must be 'local' or 'hub', got {spec.data_source!r}")


def resolve_task(spec: RunSpec, splits: dict[str, Any] | None = None) -> Task:
    """A registered task, or the task read from the files in `spec.task_source` (read and validated now: the
    user's files are small, and their errors should come before any model is loaded; `splits` keeps them)."""
    if spec.task_source is None:
        return TASKS.get(spec.task)
    task = task_from_definition(spec.task_source)
    splits = {} if splits is None else splits
    for split in ("train", "eval") if spec.trains else ("eval",):
        splits[split] = load_split(task, split, None, spec.data_source)
    return task
