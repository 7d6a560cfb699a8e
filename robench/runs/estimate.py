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
with the checksum of their values: one measurement serves every seed and eval size of a setting. A checkpoint robench
did not train is timed too (loading it and its inference rate: seconds), keyed by its weights' identity instead of the
defence and backbone; its estimate has no training, and its dev pass only until that is cached
(`robench.runs.devpass`). A measurement records when and under what load (`robench.core.machine.load`) it was
taken, and the estimate says both. Staleness: a measurement is taken again when the machine's CPU share now differs
materially from the one it was taken under (`robench.core.machine.load_differs`), when it is older than
SPEED_MAX_AGE, on `--remeasure`, and when its cache file is damaged, edited or holds a value that is not a positive
finite number (with a warning). A first-use build's expected seconds are its seconds on the reference machine idle
scaled by a short probe of this machine as it is now (`robench.core.progress.expected_seconds`).
`robench bench estimate` compares the estimate with real runs.
"""
from __future__ import annotations

import dataclasses
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

SEARCH_OVERHEAD = 1.15  # attack time outside the victim's forward passes (profiled: ~10% for TextFooler)
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
log = logging.getLogger(__name__)
CPU_HOUR_ADVICE = 3600.0
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


@dataclass(frozen=True)
class Build:
    """An attack resource a run builds on first use, and what building it costs."""

    what: str
    seconds: float


@dataclass(frozen=True)
class CostEstimate:
    train_seconds: float | None  # None: the checkpoint is cached, or given (`given`): nothing to train
    attack_seconds: float | None  # None: training only
    train_examples: int
    attack_examples: int
    device: str
    attack_queries: float = 0.0  # the model queries the attack estimate assumes
    builds: tuple[Build, ...] = ()  # resources the run builds (not in the cache yet)
    startup_seconds: float | None = None  # a new process's imports and data reading (None: not counted)
    measuring_seconds: float = 0.0  # what making this estimate spent timing the model (no part of the run)
    given: bool = False  # the run attacks a checkpoint robench did not train
    dev_seconds: float | None = None  # a given checkpoint's dev pass (None: cached, or none)
    dev_examples: int = 0
    speed: str | None = None  # when and under what load the speed behind it was measured (`Measured.describe`)

    @property
    def total_seconds(self) -> float:
        return ((self.train_seconds or 0.0) + (self.attack_seconds or 0.0) + (self.startup_seconds or 0.0)
                + (self.dev_seconds or 0.0) + sum(b.seconds for b in self.builds))

    def with_startup(self, seconds: float | None) -> CostEstimate:
        return dataclasses.replace(self, startup_seconds=None if seconds is None else max(seconds, 0.0))

    def lines(self) -> list[str]:
        """The total, then one indented line per part: start-up, each build, training (or the given checkpoint's
        dev pass), attack; last, when the speed behind it was measured."""
        parts = []
        if self.startup_seconds is not None:
            parts.append(f"start-up ~{duration(self.startup_seconds)} (imports and reading the data, as measured "
                         "in this process)")
        parts += [f"build {b.what} ~{duration(b.seconds)} (first use, expected on this machine now; cached after)"
                  for b in self.builds]
        if self.given:
            parts.append("train: none (a given checkpoint)")
            parts.append("dev pass: cached (measured before for this checkpoint and data)" if self.dev_seconds is None
                         else f"dev pass ~{duration(self.dev_seconds)} (the whole eval split, {self.dev_examples} "
                              "examples; once per checkpoint and data)")
        else:
            parts.append("train: cached checkpoint" if self.train_seconds is None else
                         f"train ~{duration(self.train_seconds)} ({self.train_examples} examples)")
        if self.attack_seconds is not None:
            parts.append(f"attack ~{duration(self.attack_seconds)} ({self.attack_examples} examples)")
        if self.speed is not None:
            parts.append(self.speed)
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
    """Several runs' estimates added up (a grid, a protocol: the sum of its jobs' work, before parallel workers
    divide it); a given checkpoint's dev pass is counted once (its later runs find it cached)."""
    trains = [e.train_seconds for e in estimates if e.train_seconds is not None]
    attacks = [e.attack_seconds for e in estimates if e.attack_seconds is not None]
    builds = tuple(dict.fromkeys(b for e in estimates for b in e.builds))  # each resource is built once
    dev = next((e for e in estimates if e.dev_seconds is not None), None)
    return CostEstimate(sum(trains) if trains else None, sum(attacks) if attacks else None,
                        sum(e.train_examples for e in estimates if e.train_seconds is not None),
                        sum(e.attack_examples for e in estimates), str(device), builds=builds,
                        measuring_seconds=sum(e.measuring_seconds for e in estimates),
                        given=bool(estimates) and all(e.given for e in estimates),
                        dev_seconds=dev.dev_seconds if dev is not None else None,
                        dev_examples=dev.dev_examples if dev is not None else 0,
                        speed=next((e.speed for e in estimates if e.speed is not None), None))


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate(run: ResolvedRun, device: torch.device, train_cached: bool, persist: bool = True,
             memo: dict[Path, Measured] | None = None, say: Say | None = None,
             remeasure: bool = False) -> CostEstimate:
    """The estimated cost of `run` on `device` (timing the model first unless a measurement of its speed is cached
    and was taken under a load like this one's), without the start-up (`CostEstimate.with_startup`: the CLI knows
    its process's).

    `persist=False` caches no new measurement; `memo` keeps measurements across calls in one process; `say` hears
    when it has to time the model, and how long that took; `remeasure` times it even when a measurement is
    cached."""
    from robench.runs import devpass

    spec = run.spec
    texts = run.texts()  # the data, read once: everything below works on these texts
    start = time.perf_counter()
    measured = model_speed(run, device, texts, persist, {} if memo is None else memo, say, remeasure)
    measuring = time.perf_counter() - start
    speed, rate = measured.speed, measured.speed.words_per_second
    attacked = len(texts.attacked) if texts.attacked is not None else 0
    # the defence's own work: a2t's training attack, SAFER's certificate (in model queries at the measured rate)
    extra = run.defense.extra_cost(run.model_params, [len(t[-1].split()) for t in texts.train], spec.train.epochs,
                                   attacked) if spec.trains else {}
    dev_seconds = sum(map(query_length, texts.dev)) / rate
    train_seconds = None
    if spec.trains and not train_cached:
        sizes = run.defense.epoch_sizes(run.model_params, len(texts.train), spec.train.epochs)  # a2t adds examples
        steps = sum(math.ceil(n / spec.train.batch_size) for n in sizes)
        train_seconds = (speed.load_seconds + steps * speed.seconds_per_step + dev_seconds
                         + SEARCH_OVERHEAD * extra.get("train", 0.0) * _mean_length(texts.train) / rate)
    attack_seconds, queries = None, 0.0
    if texts.attacked is not None:
        queries, length = _queries(run, texts.attacked)
        overhead = SEARCH_OVERHEAD if run.recipe.query_cost_per_word else 1.0
        attack_seconds = (speed.load_seconds + run.recipe.load_seconds + overhead * length / rate
                          + extra.get("attack", 0.0) * _mean_length(texts.attacked) / rate)
    given_dev = None if spec.trains or devpass.cached(run) is not None else dev_seconds
    return CostEstimate(train_seconds, attack_seconds, len(texts.train), attacked, str(device), queries,
                        builds=resource_builds(run), measuring_seconds=measuring, given=not spec.trains,
                        dev_seconds=given_dev, dev_examples=len(texts.dev), speed=measured.describe(load()))


def resource_builds(run: ResolvedRun) -> tuple[Build, ...]:
    """The resources `run` will build, each absent from the cache: the lexicon's relations (every word-swap
    attack's validity audit reads them) and the synonym lexicon (any recipe or defence whose `synonym_source` is
    "lexicon"), each at its expected seconds on this machine now. A built copy is recognised as `robench resources
    list` does: by its folder in the cache."""
    from robench.core.progress import expected_seconds
    from robench.engine.resources.files import resources_dir
    from robench.engine.resources.lexicon import RELATIONS_BUILD_SECONDS
    from robench.engine.resources.lexicon_table import LEXICON_BUILD_SECONDS

    built = resources_dir(run.settings)
    builds = []
    if _builds_relations(run) and not any(built.glob("relations-*/relations.json")):
        builds.append(("the lexicon's relations", RELATIONS_BUILD_SECONDS))
    if _uses_lexicon(run) and not any(built.glob("lexicon-*/info.json")):
        builds.append(("the synonym lexicon", LEXICON_BUILD_SECONDS))
    if not builds:
        return ()
    scale = expected_seconds(1.0)  # one probe for all of them
    return tuple(Build(what, float(seconds) * scale) for what, seconds in builds)


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
