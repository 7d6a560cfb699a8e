"""`run(spec)`: train (or reuse, or load a given checkpoint) -> attack -> results. The CLI is a thin layer over this."""
from __future__ import annotations

import dataclasses
import logging
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from rich.console import Console

from robench.classifier.device import pick_device
from robench.classifier.victim import BaseVictim, ModelFailure, accuracy
from robench.core.errors import RobenchError
from robench.core.hashing import content_hash
from robench.core.locks import file_lock
from robench.core.paths import Settings, resolve_settings
from robench.core.progress import PHASES, phase
from robench.core.records import RunRecord, record_path
from robench.core.text import excerpt
from robench.core.types import ExampleResult, Task
from robench.data.loading import column, subset_indices, texts_of
from robench.engine.attack import AttackContext
from robench.engine.fluency import run_fluency
from robench.engine.metrics import textattack_metrics
from robench.engine.resources.identity import identity_digest
from robench.engine.words import join_fields
from robench.runs import chance
from robench.runs.estimate import CostEstimate, estimate
from robench.runs.given import load_victim
from robench.runs.resolve import ResolvedRun, resolve_run
from robench.runs.spec import RunSpec
from robench.runs.store import RunStore, git_commit, hyperparameters_hash, now, package_versions
from robench.training.loop import TrainedModel, checkpoint_key, fine_tune, is_cached

OnEstimate = Callable[[CostEstimate], None]
log = logging.getLogger(__name__)


def _say(line: str) -> None:
    """The lines of timing the model for the estimate (`estimate`, on first use) as phase lines."""
    PHASES.info("%s", line)


@dataclass
class PreparedModel:
    """The model under attack, ready to query, and what its run record says about it."""

    victim: BaseVictim
    dev_accuracy: float  # accuracy on the task's whole eval split
    checkpoint: str  # where its weights are (or what the in-memory model is)
    backbone: dict[str, Any] | None = None  # the fine-tuned backbone (robench-trained models)
    timings: dict[str, Any] = field(default_factory=dict)
    train_examples: int | None = None  # the examples it was fine-tuned on (robench-trained models)
    label_order: tuple[int, ...] | None = None  # an in-memory model's output for each task label (else resolved's)


@dataclass(frozen=True)
class RunPlan:
    """What `run` or `train` would do, without doing it (`--dry-run`)."""

    spec: RunSpec
    checkpoint: Path
    checkpoint_cached: bool
    record: Path | None  # None: training only
    record_finished: bool
    estimate: CostEstimate | None  # None: nothing left to do, a given checkpoint (no estimate), or not asked for
    resolved: ResolvedRun | None = None
    speed_cache: Path | None = None  # the cached speed measurement the estimate came from


def plan(spec: RunSpec, settings: Settings | None = None, device: str = "auto", attack: bool = True,
         cost: bool = True, say: Callable[[str], None] | None = None) -> RunPlan:
    """Validate `spec` and say where its checkpoint and record go, whether they exist, and what the rest costs
    (`cost=False`: no estimate, so no timing of the model).

    Trains nothing and writes nothing but the speed measurement's cache: without a cached one, this times the model
    (`say` hears that it does, and how long it took) and caches it, so that the next dry run answers at once."""
    return plan_resolved(resolve_run(spec, settings or resolve_settings(), attack=attack), device, cost, say)


def plan_resolved(resolved: ResolvedRun, device: str = "auto", cost: bool = True,
                  say: Callable[[str], None] | None = None, remeasure: bool = False) -> RunPlan:
    """`plan` of a resolved run (an attack plan when it was resolved with its attack); `remeasure`: time the model
    even when a measurement of its speed is cached."""
    from robench.runs.speed import _cache_path

    spec, settings, attack = resolved.spec, resolved.settings, resolved.recipe is not None
    given = not spec.trains  # a given checkpoint: nothing to train; its inference rate is measured
    checkpoint = Path(spec.checkpoint.get("location", "")) if given else \
        settings.checkpoints_dir / checkpoint_key(resolved)
    cached = given or is_cached(checkpoint)
    record = record_path(settings.runs_dir, spec.run_id) if attack else None
    finished = attack and RunStore(settings.runs_dir, spec.run_id).finished(
        resolved.hyperparameters(), resolved.resource_identity()) is not None
    loadable = spec.trains or spec.checkpoint.get("kind") == "checkpoint"  # not an in-memory model (`evaluate`)
    todo = cost and loadable and not finished and (attack or not cached)
    torch_device = pick_device(device)
    estimated = estimate(resolved, torch_device, cached, persist=True, say=say, remeasure=remeasure) if todo else None
    return RunPlan(spec, checkpoint, cached, record, finished, estimated, resolved,
                   _cache_path(resolved, torch_device) if todo else None)


def train(spec: RunSpec, settings: Settings | None = None, device: str = "auto",
          console: Console | None = None, on_estimate: OnEstimate | None = None) -> TrainedModel:
    """Fine-tune (or reuse the cached checkpoint of) `spec.model` on `spec.task`.

    `on_estimate` receives the cost estimate before any training starts (none when the checkpoint is cached)."""
    if not spec.trains:
        raise RobenchError("the spec names a checkpoint: it is already trained (use run to attack it)")
    resolved = resolve_run(spec, settings or resolve_settings(), attack=False)
    return train_checkpoint(resolved, pick_device(device), console, on_estimate)


def run(spec: RunSpec, settings: Settings | None = None, device: str = "auto", console: Console | None = None,
        force: bool = False, on_estimate: OnEstimate | None = None, batch_size: int | None = None) -> RunRecord:
    """Run `spec` end to end and write its record; return the finished record if there is one.

    The run id is that of the resolved spec (with its data fingerprint). A second process running the same
    spec waits for the first, then returns its record. `on_estimate` receives the cost estimate of the
    remaining stages before any of them starts (a given checkpoint's too: its inference rate is timed in
    seconds). `batch_size`: inputs per forward pass of a given checkpoint (default 64)."""
    with phase("reading the task data and resolving the run"):
        resolved = resolve_run(spec, settings or resolve_settings())
    return run_resolved(resolved, device, console, force, on_estimate, batch_size)


# ---------------------------------------------------------------- the stages: resolve, train or load, attack, write

Prepare = Callable[[ResolvedRun, Any], PreparedModel]  # (resolved run, torch device) -> the model to attack


@dataclass
class Attacked:
    """What the attack stage made: the run record and its per-example results, not written yet (`write`)."""

    record: RunRecord
    results: list[ExampleResult] | None  # None: a finished record found on disk (written before)


def run_resolved(resolved: ResolvedRun, device: str = "auto", console: Console | None = None, force: bool = False,
                 on_estimate: OnEstimate | None = None, batch_size: int | None = None,
                 prepare: Prepare | None = None) -> RunRecord:
    """The stages after `resolve_run`, under the run's lock: the finished record if there is one (unless `force`),
    else the model trained or loaded (`prepare_model`; `prepare`: another source, as `robench.evaluate`'s
    in-memory models), attacked, and the record written."""
    return run_stages(resolved, device, console, force, on_estimate, batch_size, prepare).record


def run_stages(resolved: ResolvedRun, device: str = "auto", console: Console | None = None, force: bool = False,
               on_estimate: OnEstimate | None = None, batch_size: int | None = None,
               prepare: Prepare | None = None) -> Attacked:
    """`run_resolved`, returning the per-example results with the record (a grid worker sends both)."""
    spec = resolved.spec
    if prepare is None and not spec.trains and spec.checkpoint.get("kind") != "checkpoint":
        raise RobenchError(f"run {spec.run_id} attacks an in-memory model: run it with robench.evaluate")
    with run_lock(resolved) as store:
        if not force and (finished := store.finished(resolved.hyperparameters(),
                                                     resolved.resource_identity())) is not None:
            return Attacked(finished, None)
        torch_device = pick_device(device)
        model = prepare(resolved, torch_device) if prepare is not None else \
            prepare_model(resolved, torch_device, console, on_estimate, batch_size)
        attacked = attack(resolved, model, store, str(torch_device), console, force)
        write(store, attacked)
        return attacked


@contextmanager
def run_lock(resolved: ResolvedRun) -> Iterator[RunStore]:
    """The run's store, held against another process running the same run (that one waits, then finds the
    record)."""
    run_id = resolved.spec.run_id
    store = RunStore(resolved.settings.runs_dir, run_id)
    with file_lock(store.lock_path, f"waiting for another process running {run_id}"):
        yield store


def train_checkpoint(resolved: ResolvedRun, torch_device, console: Console | None = None,
                     on_estimate: OnEstimate | None = None) -> TrainedModel:
    """The train stage: fine-tune `resolved`'s model, or reuse its cached checkpoint (`on_estimate`: as in `run`)."""
    _say_estimate(resolved, torch_device, on_estimate)
    PHASES.info("fine-tuning %s, or reusing its cached checkpoint (the backbone and the training data load first)",
                resolved.spec.model)
    return fine_tune(resolved, torch_device, console)


def _say_estimate(resolved: ResolvedRun, torch_device, on_estimate: OnEstimate | None) -> None:
    """The cost estimate of the stages left, to `on_estimate`; none for a cached checkpoint that is only trained."""
    if on_estimate is None:
        return
    cached = not resolved.spec.trains or is_cached(resolved.settings.checkpoints_dir / checkpoint_key(resolved))
    if resolved.recipe is not None or not cached:
        on_estimate(estimate(resolved, torch_device, cached, say=_say))


def prepare_model(resolved: ResolvedRun, torch_device, console: Console | None = None,
                  on_estimate: OnEstimate | None = None, batch_size: int | None = None) -> PreparedModel:
    """The train-or-load stage: the model `resolved` attacks, ready to query: fine-tuned (or its cached
    checkpoint) or the given one."""
    spec, settings = resolved.spec, resolved.settings
    if spec.trains:
        _say_estimate(resolved, torch_device, on_estimate)
        start = time.perf_counter()  # the stage's time, after the estimate
        trained = train_checkpoint(resolved, torch_device, console)
        victim = load_victim(trained.checkpoint, torch_device, max_length=spec.train.max_length, settings=settings)
        model = PreparedModel(victim, trained.record["dev_accuracy"], str(trained.checkpoint),
                              trained.record["backbone"],
                              {"train_seconds": trained.record["train_seconds"], "train_cached": trained.cached,
                               "train_examples_per_second": trained.record["train_examples_per_second"]},
                              trained.record.get("train_examples"))
    else:
        _say_estimate(resolved, torch_device, on_estimate)
        start = time.perf_counter()
        sized = {"batch_size": batch_size} if batch_size is not None else {}
        with phase(f"loading the checkpoint {spec.checkpoint['location']}"):
            victim = load_victim(spec.checkpoint["location"], torch_device, label_order=resolved.label_order,
                                 max_length=spec.train.max_length, settings=settings, **sized)
        model = PreparedModel(victim, dev_accuracy(resolved, victim), spec.checkpoint["location"])
    model.timings["train_stage_seconds"] = time.perf_counter() - start
    return model


def dev_accuracy(resolved: ResolvedRun, victim: BaseVictim) -> float:
    """Accuracy on the task's whole eval split, as training reports it (`robench.runs.devpass`: measured once per
    checkpoint and data, then cached); leaves the victim's cache empty."""
    from robench.runs import devpass

    if (value := devpass.cached(resolved)) is not None:
        PHASES.info("the model's accuracy on the whole eval split: %.4f, measured before (cached)", value)
        return value
    dev = resolved.split("eval")
    with phase(f"measuring the model's accuracy on the whole eval split ({len(dev)} examples; {devpass.WHY})"):
        value = accuracy(victim, texts_of(dev, resolved.task), column(dev, "label"))
    victim.reset()  # the attack starts from a fresh cache and counters, as on a freshly trained model
    devpass.store(resolved, value)
    return value


def attack(resolved: ResolvedRun, model: PreparedModel, store: RunStore, device: str,
           console: Console | None = None, force: bool = False) -> Attacked:
    """The attack stage: attack `model` on the eval subset of `resolved`'s spec (each finished example appended to
    `store`'s partial file, for a resume) and make the run record (`write` writes it). The identities of the
    resources the attack reads (`resolved.resource_identity()`) are recorded and carried on each partial line."""
    spec, settings, task, recipe = resolved.spec, resolved.settings, resolved.task, resolved.recipe
    start = time.perf_counter()
    split = resolved.attacked_split()
    rows = subset_indices(len(split), spec.eval_size, spec.eval_seed)  # never the training seed: paired runs
    eval_data = split if len(rows) == len(split) else split.select(rows)
    if force:
        store.partial_path.unlink(missing_ok=True)
    made_with = hyperparameters_hash(resolved.hyperparameters())
    identity = resolved.resource_identity()
    resources_made_with = identity_digest(identity)
    done = store.load_partial(_matches(eval_data, task), made_with, resources_made_with)

    def record_progress(result: ExampleResult) -> None:  # the cost so far travels with each result
        if result.status == "error":  # an error is not a result: a resumed attack tries the example again
            return
        store.append(result, {"attack_seconds": done.attack_seconds + time.perf_counter() - start,
                              "victim_queries": done.victim_queries + model.victim.model_evaluations,
                              "made_with": made_with, "resources": resources_made_with})

    ctx = AttackContext(spec, task, model.victim, settings, eval_data, model.dev_accuracy, done, record_progress,
                        console, split=split)
    PHASES.info("attacking %d examples with %s (its resources load first)", len(rows), spec.attack)
    try:
        output = recipe.attack(ctx, resolved.attack_params)
    except ModelFailure as exc:
        raise ModelFailure(f"{exc}; the run stopped and no record was written (the examples finished before "
                           "are kept: a re-run resumes after them)") from exc
    results = sorted({**done, **{r.index: r for r in output.results}}.values(), key=lambda r: r.index)
    _require_results(results)
    metrics = (recipe.summarize or _default_summary)(results, ctx, resolved.attack_params)
    metrics["dev_accuracy"] = model.dev_accuracy
    metrics["chance"] = chance_checks(resolved, results, metrics)
    certify = getattr(model.victim, "certify", None)
    if callable(certify):  # a certified defence (SAFER): its certified-robust accuracy on the attacked examples
        metrics.update(certify(texts_of(eval_data, task), [int(y) for y in column(eval_data, "label")]))
    if recipe.word_swaps:
        with phase("auditing the swaps against the lexicon"):
            metrics["validity"] = validity_audit(results, settings, output.resources)
    with phase("scoring the successful examples' fluency with the language model"):
        metrics["fluency"] = run_fluency(results, settings, device,
                                         selected_by_lm=bool((output.resources or {}).get("fluency")))
    seconds = time.perf_counter() - start
    data = {"source": spec.data_source, "data_dir": str(settings.data_dir) if settings.data_dir else None,
            "task_note": task.note or None, "fingerprint": spec.data_fingerprint,
            "train_fingerprint": resolved.train_data,  # the checkpoint's data, without the recipe's own files
            "eval_examples": len(rows),
            "eval_indices_hash": content_hash(rows), "train_examples": model.train_examples}
    if spec.task_source is not None:
        data.update(source="files", data_dir=None, sha256=spec.task_source["sha256"])
    resources = {"backbone": model.backbone, "data": data, "attack": output.resources, "device": device,
                 "identity": identity}
    if not spec.trains:
        order = model.label_order if model.label_order is not None else resolved.label_order
        resources["model"] = {**spec.checkpoint, "label_order": order, **_architecture(spec.checkpoint)}
    seconds += done.attack_seconds  # a resumed attack's earlier processes count too
    timings = {"train_seconds": None, **model.timings, "attack_seconds": seconds,
               "total_seconds": model.timings.get("train_stage_seconds", 0.0) + seconds,
               "victim_queries": done.victim_queries + model.victim.model_evaluations, "resumed_examples": len(done)}
    if hasattr(model.victim, "inner_forwards"):  # a voting victim (SAFER): every base-classifier forward pass
        timings["inner_forwards"] = model.victim.inner_forwards
    timings["victim_forward_seconds"] = getattr(model.victim, "forward_seconds", None)  # this process's
    if ctx.profile.seconds:  # the engine's time split (robench.engine.attack.Profile); TextAttack's runs have none
        timings["profile"] = ctx.profile.to_dict()
    record = RunRecord(
        run_id=spec.run_id, spec=spec.to_dict(), hyperparameters=resolved.hyperparameters(), resources=resources,
        metrics=metrics, timings=timings, checkpoint=model.checkpoint, versions=package_versions(),
        git_commit=git_commit(), created=now(),
    )
    return Attacked(record, results)


def _architecture(given: dict[str, Any]) -> dict[str, str]:
    """A saved checkpoint's backbone as its config.json names it (`robench.runs.checkpoint_info.architecture`)."""
    from robench.runs.checkpoint_info import architecture, read_config
    from robench.runs.given import checkpoint_dir

    if given.get("kind") != "checkpoint":
        return {}
    return {"architecture": architecture(read_config(checkpoint_dir(given["location"])))}


def write(store: RunStore, attacked: Attacked) -> RunRecord:
    """The write stage: the per-example CSV and the record with its manifest; the partial file goes."""
    store.finish(attacked.record, attacked.results)
    return attacked.record


def chance_checks(resolved: ResolvedRun, results: list[ExampleResult], metrics: dict[str, Any]) -> list[dict]:
    """The record's `metrics.chance`: dev and clean accuracy against their majority-class rates
    (`robench.runs.chance`)."""
    dev = resolved.split("eval")
    checks = [chance.check("dev", metrics["dev_accuracy"], [int(y) for y in column(dev, "label")])]
    if metrics.get("clean_accuracy") is not None:
        labels = [r.label for r in results if r.status != "error"]
        checks.append(chance.check("clean", metrics["clean_accuracy"], labels))
    return [c.to_dict() for c in checks if c is not None]


def validity_audit(results: list[ExampleResult], settings: Settings, attack_resources: dict[str, Any]
                   ) -> dict[str, Any]:
    """The swap audit of a word-substitution run (robench.engine.audit): a measurement, never a filter."""
    from robench.engine.audit import audit, source_lists_of
    from robench.engine.resources.lexicon import lexicon

    return audit(results, lexicon(settings), source_lists_of(attack_resources)).to_dict()


def reaudit(runs_dir: Path, settings: Settings, commit: str | None) -> list[str]:
    """Re-audit, from their per-example CSVs, the word-level records in `runs_dir` whose validity audit has an
    older format (robench.engine.audit.AUDIT_FORMAT); each is rewritten atomically with its new manifest and
    `validity.reaudited` (the format it replaced and `commit`, the code that re-audits: taken before the first
    record is rewritten, which would make the tree dirty). Returns their run ids."""
    from robench.core.records import iter_records, read_examples
    from robench.engine.audit import AUDIT_FORMAT, is_stale
    from robench.runs.store import write_record

    stale = [rec for rec in iter_records(runs_dir) if is_stale(rec.metrics.get("validity"))]
    for rec in stale:
        old = rec.metrics["validity"].get("format", 1)
        new = validity_audit(read_examples(runs_dir, rec.run_id), settings, rec.resources.get("attack") or {})
        new["reaudited"] = {"from_format": old, "to_format": AUDIT_FORMAT, "git_commit": commit}
        write_record(runs_dir, dataclasses.replace(rec, metrics={**rec.metrics, "validity": new}))
    return [rec.run_id for rec in stale]


def _require_results(results: list[ExampleResult]) -> None:
    """A run whose every example ended in an error has no numbers: it is an error, not a record (0% clean and
    0% robust would enter the leaderboard). Some errors are reported in the record and logged."""
    errors = [r for r in results if r.status == "error"]
    if errors and len(errors) == len(results):
        raise RobenchError(f"every one of the {len(results)} attacked examples ended in an error (first: "
                           f"{excerpt(errors[0].error, 200, quote=False)}); no record was written: fix the cause "
                           "and re-run")
    if errors:
        log.warning("%d of %d examples ended in an error (first: %s); they are left out of every ratio",
                    len(errors), len(results), excerpt(errors[0].error, 200, quote=False))


def _matches(examples, task: Task):
    """A check that a resumed result belongs to `examples`: index in range, same label and text."""
    texts, labels = texts_of(examples, task), column(examples, "label")

    def check(result: ExampleResult) -> str | None:
        if result.index >= len(texts):
            return f"index {result.index} is outside the {len(texts)} examples of this run"
        if result.label != labels[result.index]:
            return f"example {result.index} has label {result.label}, the data says {labels[result.index]}"
        if (result.original_text or result.perturbed_text) != join_fields(texts[result.index]):
            return f"the text of example {result.index} is not the data's"
        return None

    return check


def _default_summary(results: list[ExampleResult], ctx: AttackContext, params: Any) -> dict[str, Any]:
    metrics = textattack_metrics(results)
    out = dataclasses.asdict(metrics)
    out.update(out.pop("extra"))
    return out
