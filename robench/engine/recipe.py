"""A word-level recipe as a declaration: transformation, constraints, search, goal (TextAttack's four parts).

* `Transformation`: the candidate swaps of word i (`SynonymSwap`: a synonym table's neighbours);
* constraints: the objects of `robench.engine.constraints`, in order;
* `Greedy`: the search, TextAttack's GreedyWordSwapWIR with a word-importance strategy (or, with a beam width,
  `robench.engine.beam`'s beam search in the same order; with a population, `robench.engine.population`'s);
* goal: `robench.engine.search.UntargetedClassification`.

`Composition` holds the four and is the per-example search the engine runs (`robench.engine.scheduler`).
`WordSwapRecipe` is the registry entry of such a recipe: its `load_resources`, `describe` and `compose` (params and
loaded resources -> `Composition`) are all a recipe module writes; `attack` loads the resources once, runs the
composition over the examples and describes what it used.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Generator, Mapping, Sequence

import numpy as np

from robench.classifier.victim import Text
from robench.core.paths import Settings
from robench.core.types import ExampleResult
from robench.engine.attack import AttackContext, AttackOutput, AttackRecipe, Profile
from robench.engine.beam import BeamWordSwapSearch
from robench.engine.constraints import Constraint, IndexConstraint, Similarity, Swap
from robench.engine.fluency import Fluency, LogProbCache
from robench.engine.population import GeneticWordSwapSearch, SwarmWordSwapSearch
from robench.engine.scheduler import EngineConfig, Request, Search, Service, attack_examples
from robench.engine.search import CachedEmbedder, Importance, UntargetedClassification, WordSwapSearch
from robench.engine.words import Words, is_one_word, recover_case

SwapsOf = Callable[[Words, Words, int], list[Swap]]  # (current, original, i) -> candidate swaps of word i


class Transformation:
    """The candidate swaps of a word. `start(original)` prepares one example (a generator of engine `Request`s,
    so a transformation may ask a service once per example) and returns its `swaps(current, original, i)`."""

    def start(self, original: Words) -> Generator[Request, Any, SwapsOf]:
        return self.swaps
        yield  # a generator that asks nothing

    def swaps(self, current: Words, original: Words, i: int) -> list[Swap]:
        raise NotImplementedError


@dataclass(frozen=True)
class SynonymSwap(Transformation):
    """The `k` nearest neighbours of the word in a synonym table, cased like the word, one word each, never the
    word itself (TextAttack's WordSwapEmbedding(max_candidates=k)); each carries its table cosine for
    `WordCosine`."""

    table: Any  # .neighbours(word, k, min_cos) -> [(word, cos)], most similar first
    k: int

    def swaps(self, current: Words, original: Words, i: int) -> list[Swap]:
        word, out = current.words[i], []
        for neighbour, cos in self.table.neighbours(word.lower(), k=self.k, min_cos=-math.inf):
            new = recover_case(neighbour, word)
            if new != word and is_one_word(new):
                out.append(Swap(i, new, cos))
        return out


@dataclass(frozen=True)
class Greedy:
    """The search: TextAttack's GreedyWordSwapWIR (`robench.engine.search.WordSwapSearch`): words in the order of
    `importance` (a fresh strategy per example), the best candidate of each kept if it raises the goal score.
    `lazy`: ask the sentence encoder only where the choice depends on it (same texts, fewer encoder calls)."""

    importance: Callable[[], Importance]
    lazy: bool = True
    beam_width: int = 1  # above 1: the beam search in word-importance order (`robench.engine.beam`)
    population_size: int = 0  # above 0: a population search instead (`robench.engine.population`)
    population_search: str = "genetic"  # Alzantot et al.'s genetic algorithm, or Zang et al.'s particle "swarm"
    generations: int = 20
    lm_top_k: int | None = None  # the population search's language-model cut of each word's candidates

    def build(self, parts: dict[str, Any]) -> WordSwapSearch:
        """The search over one example's `parts` (`WordSwapSearch`'s fields)."""
        if self.population_size:
            kind = SwarmWordSwapSearch if self.population_search == "swarm" else GeneticWordSwapSearch
            return kind(**parts, population_size=self.population_size, generations=self.generations,
                        lm_top_k=self.lm_top_k)
        return WordSwapSearch(**parts) if self.beam_width == 1 else BeamWordSwapSearch(**parts, width=self.beam_width)


@dataclass(frozen=True)
class Composition:
    """A word-level attack: `transformation`, `constraints` (None entries: left off by the setting), `search`,
    `goal`. Called per example, it is the engine's search. `services`: what the transformation asks the engine
    for, beside the victim; `profile` times candidate generation ("candidates")."""

    transformation: Transformation
    constraints: Sequence[IndexConstraint | Constraint | Similarity | Fluency | None]
    search: Greedy
    goal: UntargetedClassification = field(default_factory=UntargetedClassification)
    services: Mapping[str, Service] = field(default_factory=dict)
    profile: Profile = field(default_factory=Profile)

    def __post_init__(self) -> None:  # a declaration with two encoder or LM constraints fails here, not per example
        for kind, what in ((Similarity, "sentence-encoder"), (Fluency, "language-model")):
            if sum(isinstance(c, kind) for c in self.constraints) > 1:
                raise ValueError(f"a composition takes at most one {what} constraint")

    @property
    def index_constraints(self) -> list[IndexConstraint]:
        return [c for c in self.constraints if isinstance(c, IndexConstraint)]

    @property
    def swap_constraints(self) -> list[Constraint]:
        return [c for c in self.constraints if isinstance(c, Constraint)]

    @property
    def similarity(self) -> Similarity | None:
        return next((c for c in self.constraints if isinstance(c, Similarity)), None)

    @property
    def fluency(self) -> Fluency | None:
        return next((c for c in self.constraints if isinstance(c, Fluency)), None)

    def __call__(self, text: Text, label: int, clean: np.ndarray) -> Search:
        original = Words.of(text)
        swaps_of = yield from self.transformation.start(original)
        indexed, filters = self.index_constraints, self.swap_constraints

        def modifiable(current: Words, i: int) -> bool:
            return all(c.modifiable(current, original, i) for c in indexed)

        eager, deferred = [c for c in filters if not c.deferred], [c for c in filters if c.deferred]
        swap_of: dict[tuple[str, ...], Swap] = {}  # this example's candidates -> their swaps

        def candidates(current: Words, original: Words, i: int) -> list[Words]:
            if not modifiable(current, i):
                return []
            with self.profile.part("candidates"):
                swaps = swaps_of(current, original, i)
                for constraint in eager:
                    if not swaps:
                        break
                    swaps = constraint.filter(current, original, swaps)
                options = [s.apply(current) for s in swaps]
                swap_of.update((o.words, s) for o, s in zip(options, swaps))
                return options

        def checks(current: Words, original: Words, options: list[Words]) -> list[bool]:
            kept = [swap_of[o.words] for o in options]
            for constraint in deferred:
                kept = constraint.filter(current, original, kept) if kept else kept
            passed = {id(s) for s in kept}
            return [id(swap_of[o.words]) in passed for o in options]

        parts = dict(indices=lambda words: [i for i in range(len(words.words)) if modifiable(words, i)],
                     importance=self.search.importance(), candidates=candidates, similarity=self.similarity,
                     lazy=self.search.lazy, goal=self.goal, fluency=self.fluency, checks=checks if deferred else None)
        return (yield from self.search.build(parts)(text, label, clean))


@dataclass(kw_only=True)
class WordSwapRecipe(AttackRecipe):
    """The registry entry of a word-level recipe. A recipe module declares:

    `load_resources(params, settings, device)` -> its resources (an object with at least `.encoder`, the sentence
    encoder); `describe(params, resources)` -> the run record's `resources.attack`; `compose(params, resources,
    profile, victim)` -> the `Composition`. `progress_label(params)` names the attack in progress messages.
    `attack(ctx, params)` (the registry's call) loads, runs and describes; `attack_with(ctx, params, resources)`
    runs on resources already loaded (tests pass fakes).
    """

    attack: Callable[[AttackContext, Any], AttackOutput] | None = None  # None: `run`
    word_swaps: bool = True
    load_resources: Callable[[Any, Settings, Any], Any]
    describe: Callable[[Any, Any], dict[str, Any]]
    compose: Callable[[Any, Any, Profile, Any], Composition]
    progress_label: Callable[[Any], str] | None = None  # None: the recipe's name

    def __post_init__(self) -> None:
        owner = getattr(self.attack, "__self__", None)
        if self.attack is None or (isinstance(owner, WordSwapRecipe) and owner is not self):
            self.attack = self.run  # a copy (dataclasses.replace) runs itself, with its own fields

    def run(self, ctx: AttackContext, params: Any) -> AttackOutput:
        resources = self.load_resources(params, ctx.settings, ctx.victim.device)
        return AttackOutput(self.attack_with(ctx, params, resources), self.describe(params, resources))

    def attack_with(self, ctx: AttackContext, params: Any, resources: Any) -> list[ExampleResult]:
        composition = self.compose(params, resources, ctx.profile, ctx.victim)
        services = {"embed": CachedEmbedder(resources.encoder, params.encoder_batch_size, ctx.profile),
                    **composition.services}
        if composition.fluency is not None:
            services["lm"] = LogProbCache(composition.fluency.lm, ctx.profile)
        label = self.progress_label(params) if self.progress_label else self.name
        config = EngineConfig(params.concurrency, params.query_budget, label, params.queries_per_word)
        return attack_examples(ctx, composition, services, config)
