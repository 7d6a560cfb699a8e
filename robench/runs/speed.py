"""A model's measured speed, for the cost estimate (`robench.runs.estimate`): one optimisation step and attack-shaped
predictions timed on this device (`measure_speed`; training times its own steps), cached under
`<cache_dir>/estimates/` with the load it was taken under, and taken again when stale (`model_speed`).
"""
from __future__ import annotations

import functools
import hashlib
import json
import logging
import math
import random
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Callable

import torch

from robench.core.hashing import content_hash
from robench.core.machine import Load, load, load_differs
from robench.core.manifest import content_digest, digest_problem
from robench.core.progress import heartbeat
from robench.data.loading import RunTexts
from robench.runs.resolve import ResolvedRun

log = logging.getLogger(__name__)
SPEED_FORMAT = 10  # 2: attack-shaped queries; 3: more of them; 4: checksummed; 5: dated, code-versioned;
# 6: keyed by the data's content; 7: two timed steps and 8 timed texts; 8: a small warm-up, timing bounded;
# 9: predictions warmed up on WARMUP_QUERIES, no step or call started that would end past the budget, the
# inference rate in words of query text (`query_length`), not queries: the timed texts' lengths no longer set it;
# 10: the load it was taken under, and given checkpoints (no step timed)
SPEED_MAX_AGE = 7 * 24 * 3600.0  # seconds: an older measurement is taken again
WARMUP_EXAMPLES = 2  # the warm-up step's batch
WARMUP_QUERIES = 8  # at most: the warm-up predictions (one text's leave-one-word-out variants)
TIMED_STEPS = 2  # at most: optimisation steps timed after the warm-up step
TIMED_TEXTS = 8  # at most: texts whose leave-one-word-out variants are timed, one text per call, after the warm-up
TIMING_BUDGET = 2.0  # seconds: past the first step (MIN_QUERIES queries), none starts that would end after this
MIN_QUERIES = 24
COST_SOURCES = ("robench/training", "robench/classifier/victim.py", "models")  # code whose change changes the cost


Say = Callable[[str], None]  # hears progress lines (the CLI prints them on stderr)


@dataclass(frozen=True)
class ModelSpeed:
    """How fast one model trains and predicts on this machine, at one batch size (measured, then cached)."""

    seconds_per_step: float | None  # one optimisation step (forward, backward, optimiser) at the run's batch size
    # (None: a given checkpoint, which robench does not train)
    words_per_second: float  # inference rate on attack-shaped queries (leave-one-word-out variants), in their
    # `query_length`s per second: a query's cost grows with its text, and the texts timed are few
    load_seconds: float  # building the model from the backbone, or loading the given checkpoint


@dataclass(frozen=True)
class Measured:
    """A speed measurement, and when and under what load it was taken."""

    speed: ModelSpeed
    when: float  # time.time() at the measurement
    load: Load  # the machine's load then
    fresh: bool = False  # taken by this estimate (False: read from the cache)

    def describe(self, now: Load) -> str:
        """`speed measured 12 min ago under load 4.1 on 2 CPUs (now 4.5)`, and when it is taken again."""
        age = "just now" if self.fresh else f"{duration(max(time.time() - self.when, 0.0))} ago"
        then = f"speed measured {age} under {self.load.describe()}"
        return then + ("" if self.fresh else f" (now {now.average:.1f}; measured again when the load differs "
                                              "materially, or with --remeasure)")


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def query_length(text: tuple[str, ...]) -> int:
    """The unit of inference cost: a query's words, plus one per field (its separator token)."""
    return sum(len(field.split()) + 1 for field in text)


def model_speed(run: ResolvedRun, device: torch.device, texts: RunTexts, persist: bool,
                memo: dict[Path, Measured], say: Say | None = None, remeasure: bool = False) -> Measured:
    """The cached speed of `run`'s model on `device`, or a new measurement (cached when `persist`): new when none
    is cached, the cached one is invalid or stale, was taken under a materially different load, or `remeasure`;
    `say` hears that it times the model, why, and how long that took."""
    path = _cache_path(run, device)
    if path in memo:
        return memo[path]
    now = load()
    cached = None if remeasure else _cached_speed(path)
    if isinstance(cached, Measured) and (cached.speed.seconds_per_step is None) == run.spec.trains:
        cached = "its step time does not fit the model (edited)"
    if isinstance(cached, Measured) and not load_differs(cached.load, now):
        memo[path] = cached
        return cached
    if isinstance(cached, str) and not cached.startswith("measured "):
        log.warning("cached speed measurement %s is invalid (%s); measuring again", path, cached)
    if say is not None:
        why = ("--remeasure" if remeasure else "no speed measurement cached for this setting" if cached is None else
               f"measured under {cached.load.describe()}, {now.describe()} now" if isinstance(cached, Measured)
               else cached)
        say(f"timing {run.spec.model} on {device} ({why}): "
            + ("a training step or two and " if run.spec.trains else "loading it and ")
            + "attack-shaped predictions of the real model...")
    start = time.perf_counter()
    with heartbeat(f"timing {run.spec.model}"):
        measured = memo[path] = Measured(measure_speed(run, device, texts), time.time(), now, fresh=True)
    if say is not None:
        say(f"timed in {time.perf_counter() - start:.1f} s" + (f"; cached in {path}" if persist else ""))
    if persist:
        from robench.core.files import atomic_write

        speed = asdict(measured.speed)
        atomic_write(path, json.dumps({"speed": speed, "sha256": content_digest(speed), "measured": measured.when,
                                       "load": now.to_dict()}))
    return measured


def _cached_speed(path: Path) -> Measured | str | None:
    """The speed measurement cached at `path`; None when there is none; why it cannot be used when it is damaged,
    edited (it must match the checksum written with it), holds a value that is not a positive finite number, or
    does not say when and under what load it was taken."""
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
        if name == "seconds_per_step" and value is None:  # a given checkpoint
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
            return f"{name} is {value!r}, not a positive finite number"
    if (then := _saved_load(saved.get("load"))) is None:
        return "measured under an unknown load"
    speed = ModelSpeed(**{k: None if v is None else float(v) for k, v in values.items()})
    return Measured(speed, float(measured), then)


def _saved_load(saved: object) -> Load | None:
    try:
        average, cpus = float(saved["average"]), int(saved["cpus"])  # type: ignore[index]
    except (TypeError, KeyError, ValueError):
        return None
    return Load(average, cpus) if math.isfinite(average) and average >= 0 and cpus > 0 else None


def _cache_path(run: ResolvedRun, device: torch.device) -> Path:
    spec = run.spec
    common = {"format": SPEED_FORMAT, "device": str(device), "task": spec.task, "threads": torch.get_num_threads(),
              "data": run.train_data,  # the texts timed: a task name says nothing of their length
              "max_length": spec.train.max_length, "code": code_version()}
    if spec.trains:
        key = {**common, "model": spec.model, "params": cost_params(run), "backbone": run.backbone.fingerprint,
               "batch_size": spec.train.batch_size}
    else:  # a given checkpoint: its weights' identity (a SAFER checkpoint's votes are in its config)
        key = {**common, "checkpoint": spec.checkpoint.get("weights_sha256") or spec.checkpoint.get("location")}
    return run.settings.cache_dir / "estimates" / f"{content_hash(key)}.json"


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


def measure_speed(run: ResolvedRun, device: torch.device, texts: RunTexts) -> ModelSpeed:
    """Time the model: a robench-trained one's building from its backbone, then its optimisation steps, which
    training times itself (`robench.training.loop.time_steps`: a warm-up step on WARMUP_EXAMPLES examples, then at
    most TIMED_STEPS steps on one batch of its training data, starting none past the first that would end after
    TIMING_BUDGET seconds); or the loading of a given checkpoint; then attack-shaped predictions
    (`inference_rate`)."""
    from robench.classifier.backbone import load_tokenizer
    from robench.classifier.victim import Victim, defended
    from robench.runs.given import load_victim
    from robench.training.loop import time_steps

    spec, start = run.spec, time.perf_counter()
    if not spec.trains:
        victim = load_victim(spec.checkpoint["location"], device, label_order=run.label_order, settings=run.settings,
                             max_length=spec.train.max_length)
        loaded = time.perf_counter() - start
        return ModelSpeed(None, inference_rate(victim, texts.dev), loaded)
    tokenizer = load_tokenizer(run.backbone.location)
    model = run.defense.build(run.backbone.location, run.task.num_labels, run.model_params).to(device)
    loaded, objective = time.perf_counter() - start, run.defense.objective(model, run.model_params)
    rows = _sample(len(texts.train), spec.train.batch_size)
    timing = time_steps(run, objective, tokenizer, device, [texts.train[i] for i in rows],
                        [texts.train_labels[i] for i in rows], TIMED_STEPS, TIMING_BUDGET, WARMUP_EXAMPLES)
    victim = Victim(model, tokenizer, device, max_length=spec.train.max_length)
    # a defence that answers each query with several forward passes (SAFER's vote): its rate per query
    votes = getattr(defended(victim, run.settings), "forwards_per_query", 1)
    return ModelSpeed(timing.seconds_per_step, inference_rate(victim, texts.dev) / votes, loaded)


def inference_rate(victim, dev: list[tuple[str, ...]]) -> float:
    """Words of query text (`query_length`) per second of `victim` on attack-shaped queries: each of up to
    TIMED_TEXTS texts of `dev`, one call per text with its leave-one-word-out variants, as an attack asks them, after
    a warm-up of at most WARMUP_QUERIES predictions; past MIN_QUERIES queries, no call starts that would end after
    TIMING_BUDGET seconds at the pace so far (a slow model, IM-BERT, is timed on about MIN_QUERIES queries)."""
    texts = [dev[i] for i in _sample(len(dev), 1 + TIMED_TEXTS)]
    victim.predict(leave_one_out(texts[0])[:WARMUP_QUERIES])  # warm-up
    queries, length, seconds = 0, 0, 0.0
    for text in texts[1:] or texts:
        variants = leave_one_out(text)
        call_length = sum(map(query_length, variants))
        if queries >= MIN_QUERIES and not _within_budget(seconds, call_length * seconds / length):
            break
        start = time.perf_counter()
        victim.predict(variants)
        seconds += time.perf_counter() - start
        queries, length = queries + len(variants), length + call_length
    victim.reset()
    return length / seconds


def _sample(n: int, size: int) -> list[int]:
    """`size` of `n` rows (all when fewer) drawn at random, always the same ones, in order."""
    return sorted(random.Random(0).sample(range(n), min(n, size)))


def _within_budget(spent: float, next_one: float) -> bool:
    """Whether a step or call expected to take `next_one` seconds, started after `spent`, ends within the budget."""
    return spent + next_one <= TIMING_BUDGET


def leave_one_out(text: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The text with each word of its last field deleted in turn: queries shaped like a word-level attack's
    (near-equal lengths, so little padding in a batch), as TextFooler's word-importance step makes them."""
    words = text[-1].split()
    return [(*text[:-1], " ".join(words[:i] + words[i + 1:])) for i in range(len(words))] or [text]
