"""`transfer:RUN_ID`: replay another run's successful adversarial texts against this model.

A transfer attack (Papernot, McDaniel and Goodfellow, 2016, "Transferability in
Machine Learning", arXiv 1605.07277; for defences with gradient masking,
Athalye, Carlini and Wagner, ICML 2018, section 5): the adversarial texts a
search found against a source model (e.g. `textfooler` against `bert`) are
evaluated, unchanged, against this model on the same eval examples.

Examples are matched by their eval-split row AND their text. Each side's eval
subset is mapped to eval-split rows by walking the whole eval split in order
(subsets keep the split's order), so the match holds whichever seed drew either
subset; identical texts with identical labels are interchangeable.

Per example, in TextAttack's terms (as AdvGLUE replay, one static text per
example): skipped if this model already misclassifies the clean text; else
successful if the source attack succeeded and its adversarial text fools this
model, failed otherwise (a source attack that failed transfers nothing); error
if the source run did not evaluate the example. Queries: 1 (clean) + 1 (replay).
Metrics: TextAttack's, plus `accuracy_drop` (clean - under attack) and
`replayed` (source successes replayed on examples this model got right: the
results whose text is the source's adversarial text, not the original).

Deviation: only texts that fooled the source model are replayed (not the last
text of a failed search), so the number is a transfer rate of successes.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from robench.core.errors import RobenchError
from robench.core.paths import Settings
from robench.core.records import RunRecord, examples_path, read_examples, read_record, record_path, record_problem
from robench.core.types import ExampleResult, Task
from robench.data.loading import split_rows, texts_of
from robench.engine.attack import ATTACKS, AttackContext, AttackOutput, AttackRecipe
from robench.engine.metrics import textattack_metrics
from robench.engine.words import FIELD_SEPARATOR, join_fields, split_words


@dataclass(frozen=True)
class TransferParams:
    pass


def _source(settings: Settings, run_id: str, task: Task) -> RunRecord:
    path = record_path(settings.runs_dir, run_id)
    if not path.is_file():
        raise RobenchError(f"transfer source run {run_id!r} not found: no {path}")
    record = read_record(path)
    if record.spec.get("task") != task.name:
        raise RobenchError(f"transfer source run {run_id!r} is on task {record.spec.get('task')!r}, not {task.name!r}")
    if _replays(str(record.spec.get("attack", ""))):
        raise RobenchError(f"transfer source run {run_id!r} is a replay ({record.spec['attack']}); "
                           f"use a run of a search attack such as textfooler")
    if not examples_path(settings.runs_dir, run_id).is_file():
        raise RobenchError(f"transfer source run {run_id!r} has no per-example CSV in {settings.runs_dir}")
    if (problem := record_problem(path, record)) is not None:
        raise RobenchError(f"transfer source run {run_id!r} does not verify ({problem}); re-run it")
    return record


def _replays(attack: str) -> bool:
    """Whether the recipe `attack` replays fixed texts (`AttackRecipe.replay`); one not installed here is taken for
    a search."""
    try:
        return ATTACKS.get(attack).replay
    except RobenchError:
        return False


def _check(run_id: str, task: Task, params: TransferParams, settings: Settings) -> None:
    _source(settings, run_id, task)


def source_adversarials(ctx: AttackContext, run_id: str, source: RunRecord, split: list[str]
                        ) -> dict[tuple[int, str], ExampleResult]:
    """The results of `source` (the record of run `run_id`) keyed by (eval-split row, original text); `split`:
    the eval split's texts."""
    if source.spec.get("data_source") != ctx.spec.data_source:
        raise RobenchError(f"transfer source run {run_id!r} read {source.spec.get('data_source')!r} data, this run "
                           f"reads {ctx.spec.data_source!r}")
    results = read_examples(ctx.settings.runs_dir, run_id)
    rows = split_rows(split, [r.original_text for r in sorted(results, key=lambda r: r.index)])
    return {(row, r.original_text): r for row, r in zip(rows, sorted(results, key=lambda r: r.index))
            if row is not None}


def _attack(run_id: str, ctx: AttackContext, params: TransferParams) -> AttackOutput:
    if ctx.split is None:
        raise RobenchError("transfer matches examples by their eval-split row: its context needs the whole split")
    split = [join_fields(t) for t in texts_of(ctx.split, ctx.task)]
    record = _source(ctx.settings, run_id, ctx.task)
    source = source_adversarials(ctx, run_id, record, split)
    texts, labels = texts_of(ctx.eval_data, ctx.task), [int(y) for y in ctx.eval_data["label"]]
    rows = split_rows(split, [join_fields(t) for t in texts])
    todo = [i for i in range(len(texts)) if i not in ctx.done]
    replays = {i: _replay_text(texts[i], source.get((rows[i], join_fields(texts[i])))) for i in todo}
    clean = ctx.victim.predict([texts[i] for i in todo])
    adv = dict(zip([i for i in todo if replays[i]], ctx.victim.predict([replays[i] for i in todo if replays[i]])))
    out = []
    for i, pred in zip(todo, clean):
        result = _result(i, texts[i], labels[i], int(pred), replays[i], adv.get(i),
                         source.get((rows[i], join_fields(texts[i]))), run_id)
        ctx.record(result)
        out.append(result)
    return AttackOutput(out, _resources(run_id, record))


def _replay_text(text: tuple[str, ...], src: ExampleResult | None) -> tuple[str, ...] | None:
    if src is None or src.status != "successful":
        return None
    return tuple(src.perturbed_text.split(FIELD_SEPARATOR, len(text) - 1))


def _result(i: int, text: tuple[str, ...], label: int, pred: int, replay: tuple[str, ...] | None,
            adv: int | None, src: ExampleResult | None, run_id: str) -> ExampleResult:
    original = join_fields(text)
    words = sum(len(split_words(t)) for t in text)  # as the engine counts them
    if src is None:
        return ExampleResult(i, label, original, original, pred, -1, "error", 1, words, 0,
                             f"example not in the source run {run_id}")
    if pred != label:
        return ExampleResult(i, label, original, original, pred, pred, "skipped", 1, words)
    if replay is None:
        return ExampleResult(i, label, original, original, pred, pred, "failed", 1, words, 0,
                             f"source attack {src.status}: nothing to transfer")
    status = "successful" if adv != label else "failed"
    return ExampleResult(i, label, original, join_fields(replay), pred, int(adv), status, 2, words, src.words_perturbed)


def _summarize(results: list[ExampleResult], ctx: AttackContext, params: TransferParams) -> dict[str, Any]:
    out = dataclasses.asdict(textattack_metrics(results))
    out.update(out.pop("extra"))
    out["accuracy_drop"] = out["clean_accuracy"] - out["robust_accuracy"]
    out["replayed"] = sum(r.perturbed_text != r.original_text for r in results if r.status in ("failed", "successful"))
    return out


def _resources(run_id: str, record: RunRecord) -> dict[str, Any]:
    return {"source_run": run_id, "source_model": record.spec.get("model"),
            "source_attack": record.spec.get("attack"), "source_attack_params": record.spec.get("attack_params"),
            "source_seed": record.spec.get("seed"), "source_git_commit": record.git_commit}


@ATTACKS.register_family("transfer", arg="RUN_ID")
def transfer(run_id: str) -> AttackRecipe:
    """The recipe `transfer:<run_id>`."""
    return AttackRecipe(
        name=f"transfer:{run_id}",
        summary=f"Replay the successful adversarial texts of run {run_id} (transfer attack)",
        attack=lambda ctx, params: _attack(run_id, ctx, params), params=TransferParams,
        check=lambda task, params, settings: _check(run_id, task, params, settings),
        summarize=_summarize, replay=True,
    )
