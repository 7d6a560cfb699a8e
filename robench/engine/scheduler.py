"""The attack engine: many examples attacked at once, model calls batched across them.

An attack's per-example search is a generator. Whenever it needs something
expensive it yields a `Request` (a kind and a list of items) and receives the
answers, aligned with the items:

    probs = yield Request("predict", [text_a, text_b])   # the victim, shape (2, labels)
    vecs = yield Request("embed", ["a window", ...])     # any service the recipe supplies

`attack_examples` keeps a window of `concurrency` searches in flight. Each round
it collects their pending requests, answers all requests of one kind with a
single batched call (victim requests through `Victim.predict_many`, so every
example is charged to its own query counter and budget), and resumes each search
with its share. Each example ends as a TextAttack-style `ExampleResult`:

* skipped    - the clean prediction is already wrong (not attacked);
* successful - the search found a text the victim misclassifies;
* failed     - it did not, or its query budget ran out (`error` then says so);
* error      - the search raised, or the query budget did not allow even the clean prediction (neither
               clean-correct nor robust); the message is recorded and the run goes on.

A failure of the model itself (`ModelFailure`: it raised, or returned non-finite or ill-shaped logits) is
not an example's result: it stops the attack, and the run with it.

Finished examples are persisted at once with `ctx.record`, and examples already
in `ctx.done` are not attacked again, so an interrupted run resumes.

Where the time goes is kept in `ctx.profile` (exclusive seconds): "search" (the
recipes' own code between requests), "victim forward" (the model, from the victim's
`forward_seconds`), "victim bookkeeping" (its cache, counters and budgets), one part
per service ("embed", "mlm", ...), whatever the recipe times inside its search
("candidates", "pos tagging"), and "engine" (this loop and persisting results);
"attack" is the loop's whole wall time, the sum of them all.

The engine knows nothing of words or constraints: the word view of a text is
`robench.engine.words`, and the greedy word-substitution search the recipes share is
`robench.engine.search`.
"""
from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Generator, Mapping, Sequence

import numpy as np

from robench.classifier.victim import ModelFailure, QueryBudgetExceeded, QueryCounter, Text
from robench.core.progress import AttackTally, progress_bar
from robench.core.types import ExampleResult
from robench.data.loading import column, texts_of
from robench.engine.attack import AttackContext
from robench.engine.words import count_words, join_fields


@dataclass(frozen=True)
class Request:
    """What a search asks the engine for: `kind` names a service, `items` its inputs."""

    kind: str
    items: list


@dataclass(frozen=True)
class Outcome:
    """What a search returns: the final text, the victim's probabilities for it, and why it stopped."""

    text: Text
    probs: np.ndarray
    words_perturbed: int
    note: str = ""  # e.g. the query budget ran out


Search = Generator[Request, Any, Outcome]
SearchFactory = Callable[[Text, int, np.ndarray], Search]  # (clean text, gold label, clean probs) -> search
Service = Callable[[list], Sequence[Any]]  # items -> one answer per item


@dataclass(frozen=True)
class EngineConfig:
    concurrency: int = 32  # examples in flight; their requests share forward passes
    query_budget: int | None = None  # victim queries per example (TextAttack's count), None: unlimited
    description: str = "attack"
    queries_per_word: int | None = None  # also at most this x the input's words (TextDefender's K x words)

    def budget_for(self, text: "Text") -> int | None:
        """The query budget of one example: the fixed one and the per-word one, whichever is smaller."""
        budgets = [b for b in (self.query_budget,
                               None if self.queries_per_word is None else self.queries_per_word * count_words(text))
                   if b is not None]
        return max(1, min(budgets)) if budgets else None


@dataclass
class _Job:
    index: int
    text: Text
    label: int
    counter: QueryCounter
    gen: Generator[Request, Any, Any]
    pending: Request | None = None
    result: ExampleResult | None = None


def attack_examples(ctx: AttackContext, search: SearchFactory, services: Mapping[str, Service],
                    config: EngineConfig) -> list[ExampleResult]:
    """Attack every example of `ctx.eval_data` not in `ctx.done`; return the new results by index."""
    before = _victim_counters(ctx.victim)
    began = time.perf_counter()
    with ctx.profile.part("engine"):
        results = _attack_all(ctx, search, services, config)
    ctx.profile.add("attack", time.perf_counter() - began)
    forwards, batches, seconds = (after - b for after, b in zip(_victim_counters(ctx.victim), before))
    ctx.profile.add("victim forward", seconds)
    ctx.profile.add("victim bookkeeping", -seconds)  # the forward ran inside the victim's part
    ctx.profile.count("victim forwards", forwards)
    ctx.profile.count("victim batches", batches)
    return results


def _victim_counters(victim: Any) -> tuple[int, int, float]:
    """(inputs run through the model, batches, seconds in its forward); victims without them report zero."""
    return (getattr(victim, "model_evaluations", 0), getattr(victim, "forward_calls", 0),
            getattr(victim, "forward_seconds", 0.0))


def _attack_all(ctx: AttackContext, search: SearchFactory, services: Mapping[str, Service],
                config: EngineConfig) -> list[ExampleResult]:
    texts, labels = texts_of(ctx.eval_data, ctx.task), [int(y) for y in column(ctx.eval_data, "label")]
    todo = iter([i for i in range(len(texts)) if i not in ctx.done])
    active: list[_Job] = []
    results: list[ExampleResult] = []
    with progress_bar(ctx.console) as bar:
        tally = AttackTally(config.description, (r.status for r in ctx.done.values()))
        task = bar.add_task(tally.description(), total=len(texts), completed=len(ctx.done))

        def finish(job: _Job) -> None:
            assert job.result is not None
            ctx.record(job.result)
            results.append(job.result)
            bar.update(task, advance=1, description=tally.add(job.result.status))

        while True:
            while len(active) < config.concurrency and (i := next(todo, None)) is not None:
                job = _Job(i, texts[i], labels[i], QueryCounter(config.budget_for(texts[i])),
                           _attack_one(texts[i], labels[i], search))
                with ctx.profile.part("search"):
                    _advance(job, None)
                if job.result:
                    finish(job)
                else:
                    active.append(job)
            if not active:
                break
            by_kind: dict[str, list[_Job]] = defaultdict(list)
            for job in active:
                by_kind[job.pending.kind].append(job)
            for kind, jobs in by_kind.items():
                with ctx.profile.part("victim bookkeeping" if kind == "predict" else kind):
                    replies = _serve(ctx, services, kind, jobs)
                with ctx.profile.part("search"):
                    for job, reply in zip(jobs, replies):
                        _advance(job, reply)
            for job in [j for j in active if j.result]:
                finish(job)
            active = [j for j in active if not j.result]
    return sorted(results, key=lambda r: r.index)


def _attack_one(text: Text, label: int, search: SearchFactory) -> Generator[Request, Any, tuple]:
    """The clean prediction (one query), the skip rule, then the recipe's search."""
    try:
        clean = (yield Request("predict", [text]))[0]
    except QueryBudgetExceeded as exc:
        return None, Outcome(text, np.full(1, np.nan), 0, str(exc))
    if int(clean.argmax()) != label:
        return clean, None
    try:
        outcome = yield from search(text, label, clean)
    except QueryBudgetExceeded as exc:  # a search that does not keep its own best-so-far
        outcome = Outcome(text, clean, 0, str(exc))
    return clean, outcome


def _advance(job: _Job, reply: Any) -> None:
    try:
        job.pending = job.gen.throw(reply) if isinstance(reply, BaseException) else job.gen.send(reply)
    except StopIteration as stop:
        job.result = _result(job, *stop.value)
    except ModelFailure:  # the model itself fails: not an example's result, the run stops
        raise
    except Exception as exc:  # one broken example must not stop the run
        job.result = _error(job, f"{type(exc).__name__}: {exc}")


def _serve(ctx: AttackContext, services: Mapping[str, Service], kind: str, jobs: list[_Job]) -> list[Any]:
    """Answer all `kind` requests of `jobs` in one call; on failure, one job at a time to isolate it."""
    if kind != "predict" and kind not in services:
        return [LookupError(f"the search asked for unknown service {kind!r}")] * len(jobs)
    charged = [job.counter.queries for job in jobs]
    try:
        if kind == "predict":
            return ctx.victim.predict_many([(job.pending.items, job.counter) for job in jobs])
        items = [item for job in jobs for item in job.pending.items]
        answers = services[kind](items)
        if len(answers) != len(items):
            raise RuntimeError(f"service {kind!r} answered {len(answers)} of {len(items)} items")
        bounds = np.cumsum([0] + [len(job.pending.items) for job in jobs])
        return [answers[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    except ModelFailure:
        raise
    except Exception as exc:
        for job, n in zip(jobs, charged):
            job.counter.queries = n  # not charged for a call that failed
        if len(jobs) == 1:
            return [exc]
        return [_serve(ctx, services, kind, [job])[0] for job in jobs]


def _result(job: _Job, clean: np.ndarray | None, outcome: Outcome | None) -> ExampleResult:
    original = join_fields(job.text)
    num_words = count_words(job.text)
    if clean is None:  # the budget did not even allow the clean prediction: neither clean-correct nor robust
        note = outcome.note if outcome else "no query budget"
        return ExampleResult(job.index, job.label, original, original, -1, -1, "error", job.counter.queries,
                             num_words, 0, f"no clean prediction: {note}")
    pred = int(clean.argmax())
    if outcome is None:
        return ExampleResult(job.index, job.label, original, original, pred, pred, "skipped", job.counter.queries,
                             num_words)
    adv = int(outcome.probs.argmax())
    return ExampleResult(job.index, job.label, original, join_fields(outcome.text), pred, adv,
                         "successful" if adv != job.label else "failed", job.counter.queries, num_words,
                         outcome.words_perturbed, outcome.note)


def _error(job: _Job, message: str) -> ExampleResult:
    original = join_fields(job.text)
    return ExampleResult(job.index, job.label, original, original, -1, -1, "error", job.counter.queries,
                         count_words(job.text), 0, message)
