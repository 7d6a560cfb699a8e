"""`gradient-swap`: a white-box word-substitution attack through the whole model (HotFlip / A2T style).

Ebrahimi, Rao, Lowd and Dou, "HotFlip: White-Box Adversarial Examples for Text
Classification", ACL 2018 (https://arxiv.org/abs/1712.06751): rank substitutions
by the first-order estimate of the loss change, (e_new - e_old) . grad_e L.
Yoo and Qi, "Towards Improving Adversarial Training of NLP Models", Findings of
EMNLP 2021 (A2T, https://arxiv.org/abs/2109.00544): word importance from the
gradient of the loss w.r.t. the word embeddings, counter-fitted candidates,
greedy search with model queries.

The attack, step by step:

* gradient: the cross-entropy loss of the gold label, differentiated w.r.t. the
  input word-piece embeddings through the whole model (`robench.engine.gradients`); for
  IM-BERT that is the unrolled IM-connection solver (`gradient=unrolled`, the
  default), or, with `gradient=bpda`, the explicit layer in the backward pass
  (BPDA, Athalye, Carlini and Wagner, ICML 2018);
* word importance: the L1 norm of the gradient summed over each word's word
  pieces, on the original text, stopwords excluded; highest first, ties in text
  order (A2T's gradient ranking);
* candidates: exactly `textfooler`'s (same parameters and code): the k = 50
  counter-fitted neighbours with cosine >= 0.5, cased like the word, one word,
  POS match in the original context (nouns and verbs may swap);
* ranking: (e(c) - e(w)) . g_w with g_w the word's summed gradient at the
  *current* text and e(.) the mean input embedding of a word's word pieces; the
  `verify` best-ranked candidates are queried;
* selection among the verified candidates: textfooler's (the best 1 - p(gold)
  if it beats the current one; on a label flip the most similar flipping
  candidate), with its sentence-similarity constraint (15-word windows, the
  paper's USE threshold mapped to the encoder, texts under 15 words unchecked)
  and lazy evaluation; the gradient is recomputed after every accepted swap;
* queries: every gradient costs 2 queries (a forward and a backward pass), every
  verified candidate 1, the clean prediction 1, all charged to the example's
  counter and its `query_budget`.

Deviations (on purpose, recorded in the run record):

* the word importance sums the gradient over word pieces (A2T's TextAttack
  implementation, GreedyWordSwapWIR(wir_method="gradient"), averages them);
  the ranking uses the L1 norm, as A2T;
* every gradient is charged 2 queries (TextAttack charges none for it);
* HotFlip flips characters or one-hot tokens and uses a beam search; here the
  substitutions are whole words from textfooler's candidate set, only the top
  `verify` = 10 by the first-order estimate are queried (A2T queries every
  candidate: `verify` >= k reproduces that), and the choice is verified by the
  model, greedily, one word at a time;
* a word of several word pieces is represented by the mean of their input
  embeddings, so its first-order estimate is an approximation (exact for
  single-piece words);
* A2T computes the importance once and never re-ranks candidates; this attack
  recomputes the gradient at the current text after each accepted swap (HotFlip);
* every resource deviation of `textfooler` applies (counter-fitted GloVe,
  MiniLM for USE, NLTK tagger, only the last text field of pair tasks).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Generator, Literal

import numpy as np

from robench.attacks import textfooler
from robench.classifier.victim import Text, Victim
from robench.core.errors import RobenchError
from robench.core.params import bounded
from robench.core.types import ExampleResult
from robench.data.loading import texts_of
from robench.engine.attack import ATTACKS, AttackContext, AttackOutput, Profile
from robench.engine.metrics import budget_curve, masking_flags_of_run, textattack_metrics
from robench.engine.recipe import Composition, Greedy, WordSwapRecipe
from robench.engine.scheduler import Request
from robench.engine.search import Importance
from robench.engine.words import Words

GRADIENTS = ("unrolled", "bpda")


@dataclass(frozen=True)
class GradientSwapParams(textfooler.TextFoolerParams):
    gradient: Literal["unrolled", "bpda"] = "unrolled"  # IM-BERT: through the solver, or BPDA (explicit layer)
    verify: int = bounded(10, 1, 1000)  # candidates per word queried, best first-order estimate first
    zero_gradient_norm: float = bounded(1e-12, 0, 1)  # an input gradient at or below this L2 norm counts as zero

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.gradient not in GRADIENTS:
            raise ValueError(f"gradient must be one of {GRADIENTS}, got {self.gradient!r}")
        if self.verify < 1:
            raise ValueError(f"verify must be positive, got {self.verify}")
        if self.beam_width != 1:  # the gradient strategy re-ranks on the one current text (robench.engine.beam)
            raise ValueError(f"beam_width must be 1 for gradient-swap, got {self.beam_width}")
        if self.population_size:  # a population search draws words at random: no gradient ranking to use
            raise ValueError(f"population_size must be 0 for gradient-swap (its gradient ranking is its search), "
                             f"got {self.population_size}")


class WordEmbeddings:
    """e(word): the mean input embedding of the word's word pieces (cached)."""

    def __init__(self, victim: Victim) -> None:
        self.tokenizer = victim.tokenizer
        self.matrix = victim.model.get_input_embeddings().weight.detach().float().cpu().numpy()
        self._cache: dict[str, np.ndarray] = {}

    def __call__(self, word: str) -> np.ndarray:
        if word not in self._cache:
            ids = self.tokenizer(word, add_special_tokens=False)["input_ids"]
            self._cache[word] = self.matrix[ids].mean(axis=0) if ids else np.zeros(self.matrix.shape[1])
        return self._cache[word]


def first_order(grad: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """HotFlip's estimate of the loss change of each swap: (e_new - e_old) . grad, rows of `new`."""
    return (new - old[None, :]) @ grad


class GradientImportance(Importance):
    """A2T's gradient word importance and HotFlip's first-order candidate ranking, as `WordSwapSearch`'s strategy:
    words by the L1 norm of their loss gradient, highest first (ties in text order); the `verify` candidates with
    the largest first-order loss increase; the gradient recomputed at the current text after every accepted swap."""

    def __init__(self, embedding: Callable[[str], np.ndarray], verify: int) -> None:
        self.embedding, self.verify = embedding, verify
        self.grads: np.ndarray | None = None  # at the current text; one strategy object per example

    def rank(self, original: Words, indices: list[int], label: int) -> Generator[Request, Any, list[int]]:
        self.grads = yield from self._gradient(original, label)
        importance = np.abs(self.grads[indices]).sum(axis=1)
        return [indices[r] for r in np.argsort(-importance, kind="stable")]

    def order(self, options: list[Words], current: Words, i: int) -> list[Words]:
        """The `verify` options with the largest first-order loss increase (stable: candidate order on ties)."""
        if not options:
            return options
        new = np.stack([self.embedding(o.words[i]) for o in options])
        estimate = first_order(self.grads[i], self.embedding(current.words[i]), new)
        return [options[j] for j in np.argsort(-estimate, kind="stable")[:self.verify]]

    def accepted(self, current: Words, label: int) -> Generator[Request, Any, None]:
        self.grads = yield from self._gradient(current, label)

    @staticmethod
    def _gradient(words: Words, label: int) -> Generator[Request, Any, np.ndarray]:
        from robench.engine.gradients import GradQuery  # torch: imported when attacking, not when reporting

        (answer,) = yield Request("predict", [GradQuery(words.text, label)])
        if not np.all(np.isfinite(answer.grads)):
            raise FloatingPointError("the input gradient is not finite")
        return answer.grads


def compose(params: GradientSwapParams, res: textfooler.TextFoolerResources, profile: Profile, victim: Victim
            ) -> Composition:
    """TextFooler's declaration with the gradient search strategy (a fresh one per example: it holds the current
    gradient), over the victim's input embeddings."""
    embedding = WordEmbeddings(victim)
    return dataclasses.replace(textfooler.compose(params, res, profile),
                               search=Greedy(lambda: GradientImportance(embedding, params.verify),
                                             lazy=params.lazy_similarity))


def describe(params: GradientSwapParams, res: textfooler.TextFoolerResources) -> dict[str, Any]:
    out = textfooler.describe(params, res)
    out["gradient"] = {"mode": params.gradient, "queries_per_gradient": 2,
                       "imbert": "unrolled IM-connection solver" if params.gradient == "unrolled"
                       else "BPDA: solver value forward, explicit layer backward"}
    return out


@dataclass(kw_only=True)
class GradientSwapRecipe(WordSwapRecipe):
    """A word-level recipe that attacks through the victim's input gradients: a fast tokenizer is required, and
    the victim answers gradient queries (`GradientVictim`), whose time the profile reports apart."""

    def run(self, ctx: AttackContext, params: GradientSwapParams) -> AttackOutput:
        if not getattr(ctx.victim.tokenizer, "is_fast", False):
            raise RobenchError("gradient-swap maps word pieces to words with a fast tokenizer's offsets; "
                               f"{type(ctx.victim.tokenizer).__name__} is not a fast tokenizer")
        return super().run(ctx, params)

    def attack_with(self, ctx: AttackContext, params: GradientSwapParams, res: textfooler.TextFoolerResources
                    ) -> list[ExampleResult]:
        from robench.engine.gradients import GradientVictim

        victim = GradientVictim(ctx.victim, params.gradient)
        results = super().attack_with(dataclasses.replace(ctx, victim=victim), params, res)
        ctx.profile.add("victim gradient", victim.gradient_seconds)  # model cost, timed inside the victim's part
        ctx.profile.add("victim bookkeeping", -victim.gradient_seconds)
        ctx.profile.count("victim gradients", victim.gradient_calls)
        return results


def gradient_check(victim: Victim, texts: list[Text], labels: list[int], mode: str, zero_norm: float
                   ) -> dict[str, Any]:
    """AutoAttack's zero-gradient check on the clean inputs: how many gradients are zero or not finite."""
    from robench.engine.gradients import GradQuery, word_gradients

    grads = word_gradients(victim, [GradQuery(t, y) for t, y in zip(texts, labels)], mode)
    norms = np.array([g.norm for g in grads])
    bad = int(np.sum(~np.isfinite(norms) | (norms <= zero_norm)))
    return {"examples": len(norms), "zero_or_nonfinite": bad,
            "zero_or_nonfinite_rate": bad / len(norms) if len(norms) else None,
            "median_norm": float(np.median(norms)) if len(norms) else None,
            "mode": mode, "zero_norm": zero_norm}


def _summarize(results: list[ExampleResult], ctx: AttackContext, params: GradientSwapParams) -> dict[str, Any]:
    out = dataclasses.asdict(textattack_metrics(results))
    out.update(out.pop("extra"))
    texts, labels = texts_of(ctx.eval_data, ctx.task), [int(y) for y in ctx.eval_data["label"]]
    out["gradient_check"] = gradient_check(ctx.victim, texts, labels, params.gradient, params.zero_gradient_norm)
    out["budget_curve"] = budget_curve(results)
    out["masking_flags"] = masking_flags_of_run(out)
    return out


RECIPE = ATTACKS.register("gradient-swap")(GradientSwapRecipe(
    name="gradient-swap",
    summary="White-box word swaps (HotFlip / A2T): gradient word importance through the whole model (IM-BERT: "
            "unrolled solver, or gradient=bpda), first-order candidate ranking, textfooler's constraints",
    params=GradientSwapParams, check=textfooler.check, summarize=_summarize, load_resources=textfooler.load_resources,
    describe=describe, compose=compose, progress_label=lambda params: f"gradient-swap ({params.gradient})",
    resources=textfooler.uses,
    # (queries - examples) / words over the v3 reference's 9,900 attacked SST-2 inputs at the default setting
    query_cost_per_word=1.38,  # (docs/studies/presets.md, "Queries per word")
    load_seconds=6.5,  # (docs/studies/presets.md, "The attack's fixed cost")
))
