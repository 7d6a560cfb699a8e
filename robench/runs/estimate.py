"""An upfront estimate of a run's cost, from a few seconds of timing the real model on the real device.

* start-up  = this process's seconds from its start to the estimate, less the time spent measuring speeds (the CLI
  adds it: imports and reading the data, which a new process for the run does again);
* builds    = each attack resource the run builds on first use and that is not in the cache yet (the lexicon's
  relations, the synonym lexicon), at its known cost (the seconds its phase line names);
* training  = optimisation steps x the measured seconds per step of this defense's objective at this batch
  size (so IM-BERT's solver, FreeLB's ascent steps and SMART's regulariser are all in the measurement)
  + one evaluation of the dev split (after the last epoch) at the measured inference rate + loading the model;
* attack    = the recipe's fixed `load_seconds` (loading its resources, auditing the swaps) + the eval examples'
  model queries, each as long as its text (`query_length`), / the measured inference rate in words per second,
  where a search attack makes `recipe.query_cost_per_word` queries per word of its input (measured on SST-2,
  docs/guide/presets.md) and a replay attack one per example, times `SEARCH_OVERHEAD` for the work outside the
  victim (candidates, POS tags, sentence encoder: 10% of TextFooler's time when profiled, docs/studies/results.md).

Speed measurements (`ModelSpeed`) are cached under `<cache_dir>/estimates/`, keyed by the defence and its
cost-relevant parameters (a parameter declared `bounded(..., cost=False)`, a step size, is left out), backbone,
device, torch threads, task and the content fingerprint of its train and eval data (`ResolvedRun.train_data`: two
task files of one name but other texts never share a measurement), batch size, maximum length and the code version
(`code_version`: robench's version, torch's, and the source of the training loop, the victim and the defences),
with the checksum of their values: one measurement serves every seed and eval size of a setting. Staleness: a
measurement older than SPEED_MAX_AGE is taken again (the machine's load changes), and so is a cache
file that is damaged, edited or holds a value that is not a positive finite number (with a warning).
`robench bench estimate` compares the estimate with real runs.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import logging
import math
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable

import torch

from robench.core.hashing import content_hash
from robench.core.manifest import content_digest, digest_problem
from robench.data.loading import subset, texts_of
from robench.runs.resolve import ResolvedRun

SEARCH_OVERHEAD = 1.15  # attack time outside the victim's forward passes (profiled: ~10% for TextFooler)
SPEED_FORMAT = 9  # 2: attack-shaped queries; 3: more of them; 4: checksummed; 5: dated, code-versioned;
# 6: keyed by the data's content; 7: two timed steps and 8 timed texts; 8: a small warm-up, timing bounded;
# 9: predictions warmed up on WARMUP_QUERIES, no step or call started that would end past the budget, the
# inference rate in words of query text (`query_length`), not queries: the timed texts' lengths no longer set it
SPEED_MAX_AGE = 7 * 24 * 3600.0  # seconds: an older measurement is taken again
WARMUP_EXAMPLES = 2  # the warm-up step's batch
WARMUP_QUERIES = 8  # at most: the warm-up predictions (one text's leave-one-word-out variants)
TIMED_STEPS = 2  # at most: optimisation steps timed after the warm-up step
TIMED_TEXTS = 8  # at most: texts whose leave-one-word-out variants are timed, one text per call, after the warm-up
TIMING_BUDGET = 2.0  # seconds: past the first step (MIN_QUERIES queries), none starts that would end after this
MIN_QUERIES = 24
COST_SOURCES = ("robench/training", "robench/classifier/victim.py", "models")  # code whose change changes the cost
log = logging.getLogger(__name__)
CPU_HOUR_ADVICE = 3600.0
Say = Callable[[str], None]  # hears progress lines (the CLI prints them on stderr)


@dataclass(frozen=True)
class ModelSpeed:
    """How fast one model trains and predicts on this machine, at one batch size (measured, then cached)."""

    seconds_per_step: float  # one optimisation step (forward, backward, optimiser) at the run's batch size
    words_per_second: float  # inference rate on attack-shaped queries (leave-one-word-out variants), in their
    # `query_length`s per second: a query's cost grows with its text, and the texts timed are few
    load_seconds: float  # building the model from the backbone


@dataclass(frozen=True)
class Build:
    """An attack resource a run builds on first use, and what building it costs."""

    what: str
    seconds: float


@dataclass(frozen=True)
class CostEstimate:
    train_seconds: float | None  # None: the checkpoint is cached, nothing to train
    attack_seconds: float | None  # None: training only
    train_examples: int
    attack_examples: int
    device: str
    attack_queries: float = 0.0  # the model queries the attack estimate assumes
    builds: tuple[Build, ...] = ()  # resources the run builds (not in the cache yet)
    startup_seconds: float | None = None  # a new process's imports and data reading (None: not counted)
    measuring_seconds: float = 0.0  # what making this estimate spent timing the model (no part of the run)

    @property
    def total_seconds(self) -> float:
        return ((self.train_seconds or 0.0) + (self.attack_seconds or 0.0) + (self.startup_seconds or 0.0)
                + sum(b.seconds for b in self.builds))

    def with_startup(self, seconds: float | None) -> CostEstimate:
        return dataclasses.replace(self, startup_seconds=None if seconds is None else max(seconds, 0.0))

    def lines(self) -> list[str]:
        """The total, then one indented line per part: start-up, each build, training, attack."""
        parts = []
        if self.startup_seconds is not None:
            parts.append(f"start-up ~{duration(self.startup_seconds)} (imports and reading the data, as measured "
                         "in this process)")
        parts += [f"build {b.what} ~{duration(b.seconds)} (first use; cached after)" for b in self.builds]
        parts.append("train: cached checkpoint" if self.train_seconds is None else
                     f"train ~{duration(self.train_seconds)} ({self.train_examples} examples)")
        if self.attack_seconds is not None:
            parts.append(f"attack ~{duration(self.attack_seconds)} ({self.attack_examples} examples)")
        return [f"estimate on {self.device}: total ~{duration(self.total_seconds)}", *(f"  {p}" for p in parts)]

    def advice(self, grid: bool = False) -> str | None:
        """How to bring a long CPU run (or grid) down, or None."""
        if not self.device.startswith("cpu") or self.total_seconds <= CPU_HOUR_ADVICE:
            return None
        if grid:
            return ("over an hour on a CPU: lower train_size, epochs or eval_size in the grid config, drop cells, "
                    "add workers (a Ray cluster: --address), or run on a GPU (--device cuda)")
        return ("over an hour on a CPU: lower --train-size, --epochs or --eval-size, run on a GPU (--device cuda), "
                "or, with --preset paper, use --preset quick (the default; on a GPU the paper preset takes minutes)")


def total_estimate(estimates: list[CostEstimate], device: torch.device) -> CostEstimate:
    """Several runs' estimates added up (a grid: the sum of its jobs' work, before parallel workers divide it)."""
    trains = [e.train_seconds for e in estimates if e.train_seconds is not None]
    attacks = [e.attack_seconds for e in estimates if e.attack_seconds is not None]
    builds = tuple(dict.fromkeys(b for e in estimates for b in e.builds))  # each resource is built once
    return CostEstimate(sum(trains) if trains else None, sum(attacks) if attacks else None,
                        sum(e.train_examples for e in estimates if e.train_seconds is not None),
                        sum(e.attack_examples for e in estimates), str(device), builds=builds,
                        measuring_seconds=sum(e.measuring_seconds for e in estimates))


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate(run: ResolvedRun, device: torch.device, train_cached: bool, persist: bool = True,
             memo: dict[Path, ModelSpeed] | None = None, say: Say | None = None) -> CostEstimate:
    """The estimated cost of `run` on `device` (timing the model first unless its speed is cached), without the
    start-up (`CostEstimate.with_startup`: the CLI knows its process's).

    `persist=False` caches no new measurement; `memo` keeps measurements across calls in one process; `say` hears
    when it has to time the model, and how long that took."""
    spec, task = run.spec, run.task
    train, dev = subset(run.split("train"), spec.train_size, spec.seed), run.split("eval")
    start = time.perf_counter()
    speed = model_speed(run, device, train, dev, persist, {} if memo is None else memo, say)
    measuring = time.perf_counter() - start
    attacked, eval_data = 0, None
    if run.recipe is not None:
        eval_data = subset(run.attacked_split(), spec.eval_size, spec.eval_seed)
        attacked = len(eval_data)
    # the defence's own work: a2t's training attack, SAFER's certificate (in model queries at the measured rate)
    train_texts = texts_of(train, task)
    extra = run.defense.extra_cost(run.model_params, [len(t[-1].split()) for t in train_texts],
                                   spec.train.epochs, attacked)
    train_seconds = None
    if not train_cached:
        sizes = run.defense.epoch_sizes(run.model_params, len(train), spec.train.epochs)  # a2t adds examples
        steps = sum(math.ceil(n / spec.train.batch_size) for n in sizes)
        train_seconds = (speed.load_seconds + steps * speed.seconds_per_step
                         + sum(map(query_length, texts_of(dev, task))) / speed.words_per_second
                         + SEARCH_OVERHEAD * extra.get("train", 0.0) * _mean_length(train_texts)
                         / speed.words_per_second)
    attack_seconds, queries = None, 0.0
    if eval_data is not None:
        attacked_texts = texts_of(eval_data, task)
        queries, length = _queries(run, attacked_texts)
        overhead = SEARCH_OVERHEAD if run.recipe.query_cost_per_word else 1.0
        attack_seconds = (speed.load_seconds + run.recipe.load_seconds + overhead * length / speed.words_per_second
                          + extra.get("attack", 0.0) * _mean_length(attacked_texts) / speed.words_per_second)
    return CostEstimate(train_seconds, attack_seconds, len(train), attacked, str(device), queries,
                        builds=resource_builds(run), measuring_seconds=measuring)


def resource_builds(run: ResolvedRun) -> tuple[Build, ...]:
    """The resources `run` will build, each absent from the cache: the lexicon's relations (every word-swap
    attack's validity audit reads them) and the synonym lexicon (any recipe or defence whose `synonym_source` is
    "lexicon"). A built copy is recognised as `robench resources list` does: by its folder in the cache."""
    from robench.engine.resources.files import resources_dir
    from robench.engine.resources.lexicon import RELATIONS_BUILD_SECONDS
    from robench.engine.resources.lexicon_table import LEXICON_BUILD_SECONDS

    built = resources_dir(run.settings)
    builds = []
    if _builds_relations(run) and not any(built.glob("relations-*/relations.json")):
        builds.append(Build("the lexicon's relations", float(RELATIONS_BUILD_SECONDS)))
    if _uses_lexicon(run) and not any(built.glob("lexicon-*/info.json")):
        builds.append(Build("the synonym lexicon", float(LEXICON_BUILD_SECONDS)))
    return tuple(builds)


def _builds_relations(run: ResolvedRun) -> bool:
    return (run.recipe is not None and run.recipe.word_swaps) or _uses_lexicon(run)


def _uses_lexicon(run: ResolvedRun) -> bool:
    """Whether the attack's or the defence's parameters name the synonym lexicon as their synonym source."""
    return any((params or {}).get("synonym_source") == "lexicon" for params in run.hyperparameters().values())


def process_seconds() -> float | None:
    """Wall seconds since this process started (None where the system does not say: /proc is Linux's)."""
    import os

    try:
        started_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(uptime - started_ticks / os.sysconf("SC_CLK_TCK"), 0.0)


def query_length(text: tuple[str, ...]) -> int:
    """The unit of inference cost: a query's words, plus one per field (its separator token)."""
    return sum(len(field.split()) + 1 for field in text)


def _mean_length(texts: list[tuple[str, ...]]) -> float:
    return sum(map(query_length, texts)) / len(texts) if texts else 0.0


def _queries(run: ResolvedRun, texts: list[tuple[str, ...]]) -> tuple[float, float]:
    """The attack's model queries on `texts`, and their total `query_length` (a variant is about as long as its
    text: word attacks swap words; the importance step's deletions are one word shorter)."""
    per_word = run.recipe.query_cost_per_word if run.recipe is not None else 0.0
    counts = [1 + per_word * len(text[-1].split()) for text in texts]  # word attacks perturb the last field
    return sum(counts), sum(n * query_length(text) for n, text in zip(counts, texts))


def model_speed(run: ResolvedRun, device: torch.device, train, dev, persist: bool,
                memo: dict[Path, ModelSpeed], say: Say | None = None) -> ModelSpeed:
    """The cached speed of `run`'s model on `device`, or a new measurement (cached when `persist`); `say` hears
    that it times the model and how long that took."""
    path = _cache_path(run, device)
    if path in memo:
        return memo[path]
    cached = _cached_speed(path)
    if isinstance(cached, ModelSpeed):
        memo[path] = cached
        return cached
    if cached is not None and not cached.startswith("measured "):
        log.warning("cached speed measurement %s is invalid (%s); measuring again", path, cached)
    if say is not None:
        why = "no speed measurement cached for this setting" if cached is None else cached
        say(f"timing {run.spec.model} on {device} ({why}): a training step or two and attack-shaped predictions "
            "of the real model...")
    start = time.perf_counter()
    speed = memo[path] = measure_speed(run, device, train, dev)
    if say is not None:
        say(f"timed in {time.perf_counter() - start:.1f} s" + (f"; cached in {path}" if persist else ""))
    if persist:
        from robench.core.files import atomic_write

        atomic_write(path, json.dumps({"speed": asdict(speed), "sha256": content_digest(asdict(speed)),
                                       "measured": time.time()}))
    return speed


def _cached_speed(path: Path) -> ModelSpeed | str | None:
    """The speed measurement cached at `path`; None when there is none; why it cannot be used when it is damaged,
    edited (it must match the checksum written with it) or holds a value that is not a positive finite number."""
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        values = saved["speed"]
        if set(values) != {f.name for f in fields(ModelSpeed)}:
            return f"its fields are {sorted(values)}"
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        return f"unreadable ({type(exc).__name__})"
    if problem := digest_problem(values, saved.get("sha256")):
        return problem
    measured = saved.get("measured")
    if not isinstance(measured, (int, float)) or not 0 <= time.time() - measured <= SPEED_MAX_AGE:
        return f"measured {'at an unknown time' if not isinstance(measured, (int, float)) else 'over a week ago'}"
    for name, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            return f"{name} is {value!r}, not a positive finite number"
    return ModelSpeed(**{k: float(v) for k, v in values.items()})


def _cache_path(run: ResolvedRun, device: torch.device) -> Path:
    spec = run.spec
    key = content_hash({"format": SPEED_FORMAT, "model": spec.model, "params": cost_params(run),
                        "backbone": run.backbone.fingerprint, "device": str(device), "task": spec.task,
                        "data": run.train_data,  # the texts timed: a task name says nothing of their length
                        "threads": torch.get_num_threads(), "batch_size": spec.train.batch_size,
                        "max_length": spec.train.max_length, "code": code_version()})
    return run.settings.cache_dir / "estimates" / f"{key}.json"


def cost_params(run: ResolvedRun) -> dict:
    """The defence's parameters that can change its cost: all but those declared `bounded(..., cost=False)`."""
    free = {f.name for part in run.defense.parts for f in fields(part.params) if f.metadata.get("cost") is False}
    return {k: v for k, v in run.model_params.items() if k not in free}


@functools.cache
def code_version() -> str:
    """robench's and torch's versions and a digest of the code that sets a step's or a prediction's cost."""
    from importlib.metadata import version

    root = Path(__file__).resolve().parents[1]  # the robench package
    digest = hashlib.sha256(f"{version('robench')} {torch.__version__}".encode())
    for rel in COST_SOURCES:
        base = root.parent / rel if (root.parent / rel).exists() else root / rel.removeprefix("robench/")
        for path in sorted(base.rglob("*.py")) if base.is_dir() else [base] if base.is_file() else []:
            digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def measure_speed(run: ResolvedRun, device: torch.device, train, dev) -> ModelSpeed:
    """Time model loading, optimisation steps and attack-shaped predictions on real examples, each after a
    small warm-up: at most TIMED_STEPS steps and TIMED_TEXTS texts, starting none (past the first step and
    MIN_QUERIES queries) that would end after TIMING_BUDGET seconds at the rate so far (so a slow model, IM-BERT, is
    timed on one step and about MIN_QUERIES queries)."""
    from robench.classifier.backbone import load_tokenizer
    from robench.classifier.victim import Victim, defended
    from robench.training.loop import make_optimizer, training_context

    spec, task = run.spec, run.task
    start = time.perf_counter()
    tokenizer = load_tokenizer(run.backbone.location)
    model = run.defense.build(run.backbone.location, task.num_labels, run.model_params).to(device)
    load_seconds = time.perf_counter() - start

    sample = subset(train, min(len(train), spec.train.batch_size), 0)
    objective = run.defense.objective(model, run.model_params)
    objective.prepare(training_context(model, tokenizer, task, sample, run.settings, device, spec.seed, spec.train))
    optimizer, scheduler = make_optimizer(model, spec.train, total_steps=TIMED_STEPS + 1)
    model.train()
    step = functools.partial(_timed_step, run, tokenizer, objective, optimizer, scheduler, device)
    step(subset(sample, min(len(sample), WARMUP_EXAMPLES), 0))  # warm-up
    times = [step(sample)]
    while len(times) < TIMED_STEPS and _within_budget(sum(times), sum(times) / len(times)):
        times.append(step(sample))

    victim = Victim(model, tokenizer, device, max_length=spec.train.max_length)
    texts = texts_of(subset(dev, min(len(dev), 1 + TIMED_TEXTS), 0), task)
    victim.predict(leave_one_out(texts[0])[:WARMUP_QUERIES])  # warm-up
    queries, length, seconds = 0, 0, 0.0
    for text in texts[1:]:  # one text's variants per call, as an attack asks them
        variants = leave_one_out(text)
        call_length = sum(map(query_length, variants))
        if queries >= MIN_QUERIES and not _within_budget(seconds, call_length * seconds / length):
            break
        start = time.perf_counter()
        victim.predict(variants)
        seconds += time.perf_counter() - start
        queries, length = queries + len(variants), length + call_length
    # a defence that answers each query with several forward passes (SAFER's vote): its rate per query
    rate = length / seconds / getattr(defended(victim, run.settings), "forwards_per_query", 1)
    return ModelSpeed(seconds_per_step=sum(times) / len(times), words_per_second=rate, load_seconds=load_seconds)


def _within_budget(spent: float, next_one: float) -> bool:
    """Whether a step or call expected to take `next_one` seconds, started after `spent`, ends within the budget."""
    return spent + next_one <= TIMING_BUDGET


def _timed_step(run: ResolvedRun, tokenizer, objective, optimizer, scheduler, device: torch.device, sample) -> float:
    """The seconds of one optimisation step on `sample`."""
    from transformers import DataCollatorWithPadding

    from robench.training.loop import encode, train_step

    batch = DataCollatorWithPadding(tokenizer)(encode(tokenizer, run.task, sample, run.spec.train.max_length))
    start = time.perf_counter()
    train_step(objective, optimizer, scheduler, {k: v.to(device) for k, v in batch.items()}, device,
               run.spec.train.max_grad_norm)
    return time.perf_counter() - start


def leave_one_out(text: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The text with each word of its last field deleted in turn: queries shaped like a word-level attack's
    (near-equal lengths, so little padding in a batch), as TextFooler's word-importance step makes them."""
    words = text[-1].split()
    return [(*text[:-1], " ".join(words[:i] + words[i + 1:])) for i in range(len(words))] or [text]
