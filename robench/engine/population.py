"""The population searches of Alzantot et al. and Zang et al. under robench's constraints (issue 57, item 5).

**Genetic** (`GeneticWordSwapSearch`): Alzantot, Sharma, Elgohary, Ho, Srivastava and Chang, "Generating Natural
Language Adversarial Examples" (EMNLP 2018; TextAttack's `AlzantotGeneticAlgorithm`). A population of
`population_size` texts, each first the original with one swap (`Perturb`); then for at most `generations`
generations: the fittest text (highest goal score, 1 - p(gold)) passes on unchanged (elitism); each other child
takes two parents drawn with probability softmax(score / `temperature`), mixes their words (uniform crossover) and
is perturbed once more. `Perturb` draws a word with probability proportional to its number of candidates in the
original, and takes the candidate with the highest goal score among those that pass every constraint if it raises
the text's score; otherwise it draws another word (TextAttack's `_perturb`). With `lm_top_k` the candidates of the
drawn word are first cut to the `lm_top_k` the language model finds most probable in context: the paper's
language-model filter (it kept the top K = 4 of N = 8 neighbours by the Google 1B LM). The paper's
hyperparameters: population 60, 20 generations, N = 8, K = 4; the knobs' defaults are its 60 and 20, TextAttack's
temperature 0.3, and no LM cut.

**Particle swarm** (`SwarmWordSwapSearch`): Zang, Qi, Yang, Liu, Zhang, Liu and Sun, "Word-level Textual
Adversarial Attacking as Combinatorial Optimization" (ACL 2020; TextAttack's `ParticleSwarmOptimization`).
Particles start as `Perturb`ed originals, each with one velocity per word drawn from U(-3, 3) (v_max 3). In each of
at most `generations` iterations, with inertia omega falling from 0.8 to 0.2 and C1 from 0.8 to 0.2 (C2 = 1 - C1):
each word's velocity becomes omega v + (1 - omega) (e(local) + e(global)), e = -3 where the particle's word equals
the elite's and +3 where it differs; with probability C1 the particle turns towards its own best text, with
probability C2 towards the swarm's best, taking each word of that elite with probability sigmoid(v); then each
particle is perturbed with probability 1 - 2 x its share of changed words, and the elites are updated. The paper's
hyperparameters (on SST): population 60, 20 iterations; the knobs' defaults are the same.

Deviations, both searches:

* candidates are the recipe's (the synonym table and the setting's constraints; Zang et al.'s are HowNet
  sememes), checked as the greedy search checks them (the sentence encoder, the deferred checks and the fluency
  constraint, lazily in score order);
* crossover and turning: a word the other text differs in enters only as a swap that passes every constraint
  where it lands (TextAttack's post-crossover and post-turn checks, per word, instead of up to 20 retries of the
  whole text); a word that would undo a swap enters only where the candidate list offers it; so every text the
  searches hold is one each of whose swaps the constraints accepted;
* the swarm's `Perturb` is the genetic one (TextAttack's samples among every word's best neighbour, which asks the
  victim and every constraint about every candidate of every word);
* the LM cut scores whole texts (robench's `LanguageModel`), not the paper's window around the word;
* a search ends at the first text that changes the label (the papers' at the next generation), and draws from a
  generator seeded by the original text, so a resumed run finds the same texts;
* with a cap on changed words, a text at the cap is perturbed only at words it already changed, and crossover
  and turning take no word that would pass the cap.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Generator

import numpy as np

from robench.classifier.victim import QueryBudgetExceeded, Text
from robench.engine.beam import Kept
from robench.engine.budgets import max_changed_words
from robench.engine.scheduler import Outcome, Request, Search
from robench.engine.search import WordSwapSearch
from robench.engine.words import Words


class Won(Exception):
    """A text that changes the label, found mid-search."""

    def __init__(self, kept: Kept) -> None:
        super().__init__()
        self.kept = kept


@dataclass
class GeneticWordSwapSearch(WordSwapSearch):
    """`WordSwapSearch`'s parts searched by Alzantot et al.'s genetic algorithm (see the module docstring)."""

    population_size: int = 60
    generations: int = 20
    temperature: float = 0.3
    lm_top_k: int | None = None
    best: Kept | None = field(default=None, init=False, repr=False)  # this example's best text so far

    def __call__(self, text: Text, label: int, clean: np.ndarray) -> Search:
        original = Words.of(text)
        rng = np.random.default_rng(int.from_bytes(hashlib.sha256(repr(original.words).encode()).digest()[:8]))
        start = self.best = Kept(original, clean, float(self.goal.scores(clean[None], label)[0]))
        try:
            weights = self._weights(original)
            if weights.any():
                population = []
                for _ in range(self.population_size):
                    population.append((yield from self._perturb(start, original, label, weights, rng)))
                yield from self._evolve(population, original, label, weights, rng)
        except Won as won:
            return self._outcome(won.kept, original)
        except QueryBudgetExceeded as exc:
            return self._outcome(self.best, original, str(exc))
        return self._outcome(self.best, original)

    def _outcome(self, kept: Kept, original: Words, error: str | None = None) -> Outcome:
        return Outcome(kept.words.text, kept.probs, kept.words.diff(original), error)

    def _member(self, words: Words, probs: np.ndarray, label: int) -> Kept:
        """A new text of the population; the best so far is kept, and a label change ends the search."""
        kept = Kept(words, probs, float(self.goal.scores(probs[None], label)[0]))
        if self.goal.reached(probs, label):
            raise Won(kept)
        if kept.score > self.best.score:
            self.best = kept
        return kept

    def _weights(self, original: Words) -> np.ndarray:
        """Each word's number of candidates in the original (0 for words that may not change)."""
        weights = np.zeros(len(original.words))
        for i in self.indices(original):
            weights[i] = len(self.candidates(original, original, i))
        return weights

    def _evolve(self, population: list[Kept], original: Words, label: int, weights: np.ndarray,
                rng: np.random.Generator) -> Generator[Request, Any, None]:
        """The generations: the fittest text kept, each other child a crossover of two parents, perturbed."""
        half = np.full(len(original.words), 0.5)  # uniform crossover
        for _ in range(self.generations):
            scores = np.array([k.score for k in population])
            draw = np.exp((scores - scores.max()) / self.temperature)
            children = [max(population, key=lambda k: k.score)]
            for _ in range(len(population) - 1):
                first, second = rng.choice(len(population), size=2, p=draw / draw.sum())
                child = yield from self._mix(population[first], population[second], half, original, label, rng)
                children.append((yield from self._perturb(child, original, label, weights, rng)))
            population = children

    def _mix(self, base: Kept, donor: Kept, take: np.ndarray, original: Words, label: int, rng: np.random.Generator
             ) -> Generator[Request, Any, Kept]:
        """`base` with each word `donor` differs in taken with probability `take[i]`, where it passes as a swap."""
        current, limit = base.words, max_changed_words(self.max_modification_rate, len(original.words))
        for i in range(len(original.words)):
            if donor.words.words[i] == current.words[i] or rng.random() < 1 - take[i]:
                continue
            option = next((o for o in self.candidates(current, original, i)
                           if o.words[i] == donor.words.words[i]), None)
            if option is None or (limit is not None and option.diff(original) > limit):
                continue
            if (yield from self._passes(current, original, option, i)):
                current = option
        if current is base.words:
            return base
        return self._member(current, (yield Request("predict", [current.text]))[0], label)

    def _passes(self, current: Words, original: Words, option: Words, i: int) -> Generator[Request, Any, bool]:
        """Whether the swap `current` -> `option` at word i passes the encoder and every later constraint."""
        return bool((yield from self._checked(current, original, [option], i))[0] >= self.threshold)

    def _perturb(self, member: Kept, original: Words, label: int, weights: np.ndarray, rng: np.random.Generator
                 ) -> Generator[Request, Any, Kept]:
        """`member` with its best passing swap at a word drawn by `weights`, if one raises its score."""
        limit = max_changed_words(self.max_modification_rate, len(original.words))
        left = weights.copy()
        if limit is not None and member.words.diff(original) >= limit:
            left[[i for i in range(len(left)) if member.words.words[i] == original.words[i]]] = 0
        while left.any():
            i = int(rng.choice(len(left), p=left / left.sum()))
            left[i] = 0
            options = yield from self._lm_cut(self.candidates(member.words, original, i))
            pick = (yield from self._pick(options, member.words, original, i, label, member.score)) if options else None
            if pick is not None:
                return self._member(pick[0], pick[1], label)
        return member

    def _lm_cut(self, options: list[Words]) -> Generator[Request, Any, list[Words]]:
        """The `lm_top_k` options the language model finds most probable (all without a cut)."""
        if self.lm_top_k is None or len(options) <= self.lm_top_k:
            return options
        logp = yield Request("lm", [o.field_text for o in options])
        keep = sorted(np.argsort(-np.asarray(logp), kind="stable")[: self.lm_top_k])
        return [options[j] for j in keep]


V_MAX = 3.0  # Zang et al.'s bound on a word's velocity
OMEGA = (0.8, 0.2)  # the inertia, from the first iteration to the last
C1 = (0.8, 0.2)  # the pull of a particle's own best text, from the first iteration to the last (C2 = 1 - C1)


@dataclass
class SwarmWordSwapSearch(GeneticWordSwapSearch):
    """`WordSwapSearch`'s parts searched by Zang et al.'s particle swarm (see the module docstring)."""

    def _evolve(self, population: list[Kept], original: Words, label: int, weights: np.ndarray,
                rng: np.random.Generator) -> Generator[Request, Any, None]:
        n, steps = len(original.words), self.generations
        velocity = np.repeat(rng.uniform(-V_MAX, V_MAX, len(population))[:, None], n, axis=1)
        local, best = list(population), max(population, key=lambda k: k.score)
        for g in range(steps):
            omega = (OMEGA[0] - OMEGA[1]) * (steps - g) / steps + OMEGA[1]
            c1 = C1[0] - g / steps * (C1[0] - C1[1])
            for k, particle in enumerate(population):
                velocity[k] = omega * velocity[k] + (1 - omega) * (apart(particle, local[k]) + apart(particle, best))
                turn = 1 / (1 + np.exp(-velocity[k]))
                for elite, pull in ((local[k], c1), (best, 1 - c1)):
                    if rng.random() < pull:
                        particle = yield from self._mix(particle, elite, turn, original, label, rng)
                population[k] = particle
            for k, particle in enumerate(population):
                if rng.random() < 1 - 2 * particle.words.diff(original) / n:
                    population[k] = yield from self._perturb(particle, original, label, weights, rng)
            local = [p if p.score > e.score else e for p, e in zip(population, local)]
            best = max([best, *population], key=lambda k: k.score)


def apart(a: Kept, b: Kept) -> np.ndarray:
    """Per word, +V_MAX where the two texts differ and -V_MAX where they agree (Zang et al.'s velocity pull)."""
    return np.where(np.array(a.words.words) == np.array(b.words.words), -V_MAX, V_MAX)
