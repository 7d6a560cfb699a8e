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
* error      - the search raised; the message is recorded and the run goes on.

Finished examples are persisted at once with `ctx.record`, and examples already
in `ctx.done` are not attacked again, so an interrupted run resumes.

This module also holds what the word-substitution recipes share: `Words` (the
word view of a text, tokenised like TextAttack's `AttackedText.words`), the
sentence-similarity constraint, and the greedy word-importance-ranked search
(TextAttack's `GreedyWordSwapWIR`), with an exact lazy variant of its selection.
"""
from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Generator, Literal, Mapping, Sequence

import numpy as np

from robench.data import texts_of
from robench.progress import progress_bar
from robench.types import AttackContext, ExampleResult
from robench.victim import QueryBudgetExceeded, QueryCounter, Text


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
    texts, labels = texts_of(ctx.eval_data, ctx.task), [int(y) for y in ctx.eval_data["label"]]
    todo = iter([i for i in range(len(texts)) if i not in ctx.done])
    active: list[_Job] = []
    results: list[ExampleResult] = []
    with progress_bar(ctx.console) as bar:
        task = bar.add_task(config.description, total=len(texts), completed=len(ctx.done))

        def finish(job: _Job) -> None:
            assert job.result is not None
            ctx.record(job.result)
            results.append(job.result)
            bar.advance(task)

        while True:
            while len(active) < config.concurrency and (i := next(todo, None)) is not None:
                job = _Job(i, texts[i], labels[i], QueryCounter(config.query_budget),
                           _attack_one(texts[i], labels[i], search))
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
                for job, reply in zip(jobs, _serve(ctx, services, kind, jobs)):
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
    except Exception as exc:  # one broken example must not stop the run
        job.result = _error(job, f"{type(exc).__name__}: {exc}")


def _serve(ctx: AttackContext, services: Mapping[str, Service], kind: str, jobs: list[_Job]) -> list[Any]:
    """Answer all `kind` requests of `jobs` in one call; on failure, one job at a time to isolate it."""
    if kind != "predict" and kind not in services:
        return [LookupError(f"the search asked for unknown service {kind!r}")] * len(jobs)
    used = [job.counter.used for job in jobs]
    try:
        if kind == "predict":
            return ctx.victim.predict_many([(job.pending.items, job.counter) for job in jobs])
        items = [item for job in jobs for item in job.pending.items]
        answers = services[kind](items)
        if len(answers) != len(items):
            raise RuntimeError(f"service {kind!r} answered {len(answers)} of {len(items)} items")
        bounds = np.cumsum([0] + [len(job.pending.items) for job in jobs])
        return [answers[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    except Exception as exc:
        for job, n in zip(jobs, used):
            job.counter.used = n  # not charged for a call that failed
        if len(jobs) == 1:
            return [exc]
        return [_serve(ctx, services, kind, [job])[0] for job in jobs]


def _result(job: _Job, clean: np.ndarray | None, outcome: Outcome | None) -> ExampleResult:
    original = " [SEP] ".join(job.text)
    num_words = sum(len(split_words(t)) for t in job.text)
    if clean is None:  # the budget did not even allow the clean prediction
        return ExampleResult(job.index, job.label, original, original, -1, -1, "failed", job.counter.used,
                             num_words, 0, outcome.note if outcome else "")
    pred = int(clean.argmax())
    if outcome is None:
        return ExampleResult(job.index, job.label, original, original, pred, pred, "skipped", job.counter.used,
                             num_words)
    adv = int(outcome.probs.argmax())
    return ExampleResult(job.index, job.label, original, " [SEP] ".join(outcome.text), pred, adv,
                         "successful" if adv != job.label else "failed", job.counter.used, num_words,
                         outcome.words_perturbed, outcome.note)


def _error(job: _Job, message: str) -> ExampleResult:
    original = " [SEP] ".join(job.text)
    return ExampleResult(job.index, job.label, original, original, -1, -1, "error", job.counter.used,
                         sum(len(split_words(t)) for t in job.text), 0, message)


class CachedEmbedder:
    """A `Service` over a sentence encoder: `embed` in batches, each distinct text once."""

    def __init__(self, encoder: Any, batch_size: int = 128) -> None:
        self.encoder, self.batch_size = encoder, batch_size
        self.calls = 0  # texts actually encoded
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, texts: list[str]) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if t not in self._cache))
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start:start + self.batch_size]
            self.calls += len(chunk)
            for text, vec in zip(chunk, np.asarray(self.encoder.embed(chunk), dtype=np.float32)):
                self._cache[text] = vec
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 0), np.float32)


# --- words -----------------------------------------------------------------------

_EDGE = "'-_*@"
# TextAttack also keeps these look-alike characters inside words (its visual-attack homoglyphs)
_HOMOGLYPHS = "˗৭Ȣ𝟕бƼᏎƷᒿlO`ɑЬϲԁе𝚏ɡհіϳ𝒌ⅼｍոорԛⲅѕ𝚝սѵԝ×уᴢ"
_WORD = re.compile("[\\w" + re.escape(_HOMOGLYPHS) + r"'\-_*@]+")


def split_words(text: str) -> list[str]:
    """Words as TextAttack's `words_from_text` finds them (punctuation dropped, inner ' - kept)."""
    words = []
    for token in text.split():
        for piece in _WORD.findall(token.strip(_EDGE)):
            if piece := piece.strip(_EDGE):
                words.append(piece)
    return words


def is_one_word(word: str) -> bool:
    return split_words(word) == [word]


def recover_case(word: str, like: str) -> str:
    """`word` cased like `like`: lower, UPPER or Capitalised (as TextAttack's recover_word_case)."""
    if like.islower():
        return word.lower()
    if like.isupper() and len(like) > 1:
        return word.upper()
    if like[:1].isupper() and like[1:].islower():
        return word.capitalize()
    return word


@dataclass(frozen=True)
class Words:
    """A task input seen as the words of its last text field, the only field attacks perturb.

    `seps` holds the len(words)+1 strings around the words, so the exact text is
    seps[0] + words[0] + seps[1] + ... + words[-1] + seps[-1].
    """

    context: tuple[str, ...]  # the fields before the perturbed one (premise, question, ...)
    words: tuple[str, ...]
    seps: tuple[str, ...]
    field: str = ""

    @classmethod
    def of(cls, text: Text) -> "Words":
        last = text[-1]
        words, seps, pos = split_words(last), [], 0
        for word in words:
            start = last.index(word, pos)
            seps.append(last[pos:start])
            pos = start + len(word)
        seps.append(last[pos:])
        return cls(tuple(text[:-1]), tuple(words), tuple(seps), last)

    @classmethod
    def _build(cls, context: tuple[str, ...], words: tuple[str, ...], seps: tuple[str, ...]) -> "Words":
        parts = [seps[0]]
        for word, sep in zip(words, seps[1:]):
            parts += [word, sep]
        return cls(context, words, seps, "".join(parts))

    @property
    def text(self) -> Text:
        return (*self.context, self.field)

    def replace(self, i: int, word: str) -> "Words":
        return self._build(self.context, self.words[:i] + (word,) + self.words[i + 1:], self.seps)

    def delete(self, i: int) -> "Words":
        joined = re.sub(r"\s+", " ", self.seps[i] + self.seps[i + 1])
        if i == 0:
            joined = joined.lstrip()
        seps = self.seps[:i] + (joined,) + self.seps[i + 2:]
        return self._build(self.context, self.words[:i] + self.words[i + 1:], seps)

    def window(self, i: int, size: int) -> str:
        """The `size` words around word `i` (TextAttack's `text_window_around_index`)."""
        n, half = len(self.words), (size - 1) / 2
        if i - half < 0:
            start, end = 0, min(size - 1, n - 1)
        elif i + half >= n:
            start, end = max(0, n - size), n - 1
        else:
            start, end = i - math.ceil(half), i + math.floor(half)
        parts = [self.words[start]]
        for j in range(start + 1, end + 1):
            parts += [self.seps[j], self.words[j]]
        return "".join(parts)

    def diff(self, other: "Words") -> int:
        """Word positions that differ (same length: word swaps only)."""
        return sum(a != b for a, b in zip(self.words, other.words))


# --- sentence similarity ---------------------------------------------------------

@dataclass(frozen=True)
class Similarity:
    """TextAttack's `SentenceEncoder` constraint: sim(reference, candidate) >= threshold.

    The reference is the original text (`against_original`) or the text being
    modified; with a `window`, both are cut to `window` words around the swapped
    word. With `skip_shorter_than_window`, candidates shorter than the window pass
    with similarity 1 and are not encoded (TextAttack's skip_text_shorter_than_window).
    """

    threshold: float
    metric: Literal["cosine", "angular"]
    window: int | None
    against_original: bool
    skip_shorter_than_window: bool = False

    def pair(self, current: Words, original: Words, candidate: Words, i: int) -> tuple[str, str] | None:
        reference = original if self.against_original else current
        if self.window is None:
            return reference.field, candidate.field
        if self.skip_shorter_than_window and len(candidate.words) < self.window:
            return None
        return reference.window(i, self.window), candidate.window(i, self.window)

    def score(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        cos = np.clip(np.sum(a * b, axis=-1), -1.0, 1.0)
        return cos if self.metric == "cosine" else 1.0 - np.arccos(cos) / np.pi


def similarities(sim: Similarity | None, pairs: Sequence[tuple[str, str] | None]
                 ) -> Generator[Request, Any, np.ndarray]:
    """Similarity of each pair (1.0 for None); one "embed" request for all texts needed."""
    out = np.ones(len(pairs), dtype=np.float64)
    texts = list(dict.fromkeys(t for p in pairs if p is not None for t in p))
    if sim is None or not texts:
        return out
    vecs = yield Request("embed", texts)
    row = {t: v for t, v in zip(texts, vecs)}
    for j, p in enumerate(pairs):
        if p is not None:
            out[j] = sim.score(row[p[0]], row[p[1]])
    return out


# --- greedy search with word-importance ranking ------------------------------------

def goal_scores(probs: np.ndarray, label: int) -> np.ndarray:
    """TextAttack's untargeted-classification score: 1 - p(gold)."""
    return 1.0 - probs[:, label]


def select_eager(scores: np.ndarray, succeeded: np.ndarray, sims: np.ndarray, current: float) -> int | None:
    """GreedyWordSwapWIR's choice among candidates that passed every constraint.

    Sort by score (stable); take the best if it beats `current`; if it flips the
    label, take instead the most similar of the leading run of label-flipping
    candidates (first one on ties).
    """
    if len(scores) == 0:
        return None
    order = np.argsort(-scores, kind="stable")
    if scores[order[0]] <= current:
        return None
    if not succeeded[order[0]]:
        return int(order[0])
    chosen, best = int(order[0]), -np.inf
    for j in order:
        if not succeeded[j]:
            break
        if sims[j] > best:
            chosen, best = int(j), sims[j]
    return chosen


def select_lazy(scores: np.ndarray, succeeded: np.ndarray, threshold: float, current: float
                ) -> Generator[list[int], Sequence[float], int | None]:
    """The same choice as `select_eager` over {j : sim_j >= threshold}, asking only for needed sims.

    Candidates are visited in score order; the generator yields the indices whose
    similarity it needs and receives them. It stops as soon as the choice is
    settled: at the first passing candidate that does not flip the label, once the
    next score cannot beat `current`, or when no label-flipping candidate is left.
    First it asks for 1, 2, 4, ... candidates at a time (usually the first passes),
    then, once it holds a label flip, for the rest of the flipping run at once.
    """
    order = [int(j) for j in np.argsort(-scores, kind="stable")]
    flips = [r for r, j in enumerate(order) if succeeded[j]]
    last_flip = flips[-1] if flips else -1
    sims: dict[int, float] = {}
    chosen, best, chunk = None, -np.inf, 1
    for rank, j in enumerate(order):
        if chosen is None and scores[j] <= current:
            return None
        if chosen is not None and rank > last_flip:
            return chosen
        if j not in sims:
            if chosen is None:
                want, chunk = order[rank:rank + chunk], chunk * 2
            else:
                want = order[rank:last_flip + 1]
            want = [w for w in want if w not in sims]
            sims.update(zip(want, (yield want)))
        if sims[j] < threshold:
            continue
        if chosen is None:
            chosen, best = j, sims[j]
            if not succeeded[j]:
                return j
        elif not succeeded[j]:
            return chosen
        elif sims[j] > best:
            chosen, best = j, sims[j]
    return chosen


@dataclass
class WordSwapSearch:
    """Greedy word substitution in word-importance order (TextAttack's GreedyWordSwapWIR).

    `indices(original)`: the words that may change (stopwords excluded), ranked by
    importance: 1 - p(gold) of `importance_text(original, i)` (the word deleted or
    masked), highest first, ties in text order. `candidates(current, original, i)`: the substitutions for word i that
    pass every cheap constraint. `similarity`: the sentence-encoder constraint,
    checked last; `lazy` evaluates it only where the choice depends on it (the
    victim then also scores candidates the encoder would reject; the chosen texts
    are identical, see `select_lazy`).
    """

    indices: Callable[[Words], list[int]]
    importance_text: Callable[[Words, int], Words]
    candidates: Callable[[Words, Words, int], list[Words]]
    similarity: Similarity | None
    lazy: bool = True

    def __call__(self, text: Text, label: int, clean: np.ndarray) -> Search:
        original = current = Words.of(text)
        probs = clean
        score = float(goal_scores(clean[None], label)[0])
        try:
            indices = self.indices(original)
            if indices:
                deleted = yield Request("predict", [self.importance_text(original, i).text for i in indices])
                ranked = np.argsort(-goal_scores(deleted, label), kind="stable")
                for i in (indices[r] for r in ranked):
                    options = self.candidates(current, original, i)
                    if not options:
                        continue
                    pick = yield from self._pick(options, current, original, i, label, score)
                    if pick is None:
                        continue
                    current, probs = pick
                    score = float(goal_scores(probs[None], label)[0])
                    if int(probs.argmax()) != label:
                        break
        except QueryBudgetExceeded as exc:
            return Outcome(current.text, probs, current.diff(original), str(exc))
        return Outcome(current.text, probs, current.diff(original))

    def _pick(self, options: list[Words], current: Words, original: Words, i: int, label: int,
              score: float) -> Generator[Request, Any, tuple[Words, np.ndarray] | None]:
        pairs = [self.similarity.pair(current, original, o, i) if self.similarity else None for o in options]
        threshold = self.similarity.threshold if self.similarity else -np.inf
        if self.lazy:
            probs = yield Request("predict", [o.text for o in options])
            scores, flips = goal_scores(probs, label), probs.argmax(axis=1) != label
            select = select_lazy(scores, flips, threshold, score)
            try:
                want = next(select)
                while True:
                    want = select.send((yield from similarities(self.similarity, [pairs[j] for j in want])))
            except StopIteration as stop:
                choice = stop.value
            return None if choice is None else (options[choice], probs[choice])
        sims = yield from similarities(self.similarity, pairs)
        keep = [j for j in range(len(options)) if sims[j] >= threshold]
        if not keep:
            return None
        probs = yield Request("predict", [options[j].text for j in keep])
        choice = select_eager(goal_scores(probs, label), probs.argmax(axis=1) != label, sims[keep], score)
        return None if choice is None else (options[keep[choice]], probs[choice])
