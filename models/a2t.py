"""`a2t`: adversarial training with a cheap word-substitution attack run on the model while it trains.

Yoo and Qi, "Towards Improving Adversarial Training of NLP Models", Findings of EMNLP 2021
(https://arxiv.org/abs/2109.00544); the authors' code is TextAttack's `Trainer` with the recipe
`A2TYoo2021` (QData/TextAttack-A2T `train.py`, TextAttack 0.3 `trainer.py`, `attack_recipes/a2t_yoo_2021.py`).

The schedule (TextAttack's `Trainer.train`):

* the first `a2t_clean_epochs` epochs (paper: 1 of 4) train on the clean examples only;
* before each later epoch (every `a2t_attack_interval` epochs, paper: 1) the current model, in eval mode,
  attacks the training examples in a seeded random order until ceil(gamma * N) attacks have succeeded
  (`a2t_adv_fraction` gamma = 0.2 of the N training examples, `num_train_adv_examples=0.2`), or every example
  has been tried; an example the model already gets wrong is skipped, a failed attack adds nothing;
* that epoch trains on the clean examples and the adversarial ones together, shuffled, each adversarial
  example's cross-entropy weighted by `a2t_alpha` (TextAttack's `alpha`, default 1.0, which the A2T script
  keeps): loss = mean_i(w_i * CE_i); epochs between two attack epochs are clean (TextAttack's rule);
* the learning-rate schedule counts the adversarial examples of the attack epochs in its length.

The attack, A2T (`A2TYoo2021.build(mlm=False)`), through robench's engine (`robench.engine.scheduler.
attack_examples`: batched across `a2t_concurrency` examples, every model query charged at the victim):

* word importance: the L1 norm of the loss gradient w.r.t. each word's input embeddings, once, on the original
  text (`GreedyWordSwapWIR(wir_method="gradient")`; `robench.engine.substitution.GradientRanking`); stopwords
  are never changed (`StopwordModification`), no word twice (`RepeatModification`);
* candidates: the `a2t_k` = 20 best synonyms with cosine >= `a2t_min_cos` = 0.8 (`WordSwapEmbedding(
  max_candidates=20)`, `WordEmbeddingDistance(min_cos_sim=0.8)`), drawn from the default synonym table of
  robench's attacks (`robench.engine.resources.synonym_table`, the same valid source TextFooler uses) unless
  `a2t_synonym_source` names another; part of speech must match, nouns and verbs may not swap
  (`PartOfSpeech(allow_verb_noun_swap=False)`); at most max(ceil(0.1 * words), 4) words change
  (`MaxModificationRate(max_rate=0.1, min_threshold=4)`; `a2t_max_rate`, `a2t_min_words`);
* sentence similarity: cosine >= `a2t_similarity` = 0.9 between the whole original and perturbed texts
  (`BERT(model_name="stsb-distilbert-base", threshold=0.9, metric="cosine")`, compared against the original);
* search: greedy, each word in importance order, all its candidates queried, the best 1 - p(gold) kept if
  it improves; stop when the label flips (`GreedyWordSwapWIR`); query budget `a2t_query_budget` = 200 per
  example (the A2T script's `query_budget_train=200`).

Every training attack is counted: the epoch's history in the checkpoint's training record holds the examples
attacked, skipped, failed and successful, the adversarial examples used, the model queries charged (TextAttack's
count), the texts actually run through the model, the gradients and sentence encodings, the seconds, and the
validity audit of the adversarial examples (`robench.engine.audit`: synonym / antonym / inflection / unlisted
swaps), with the examples themselves.

Deviations (each on purpose):

* synonyms: robench's default (valid) synonym table instead of the counter-fitted PARAGRAM-SL999 vectors (not
  offline); its cosines are those of that table's counter-fitted space, so the 0.8 threshold acts on another
  space (docs/guide/resources.md);
* sentence encoder: the packaged MiniLM (all-MiniLM-L6-v2, an STS-trained sentence-transformer like
  stsb-distilbert-base) at the paper's cosine 0.9, not re-calibrated (no stsb-distilbert offline);
* POS tags: NLTK's averaged-perceptron tagger (universal tags) from the data dir, as robench's TextFooler;
* the word importance sums the gradient over a word's word pieces (TextAttack averages them; the ranking of
  multi-piece words can differ), and each gradient is charged 2 queries against the budget (TextAttack
  charges none);
* examples are attacked in rounds of `a2t_concurrency` and the first ceil(gamma * N) successes in the shuffled
  order are kept (TextAttack's sequential worker keeps the same ones; it stops attacking at once);
* pair tasks: only the last text field is perturbed (TextAttack's A2T protects a field named "premise");
* `a2t_attack="textfooler"` is not the paper's attack but its baselines' (the A2T paper compares with adversarial
  training on TextFooler's examples): TextFooler's search and constraints in place of A2T's, with the candidate
  budget of the a2t_* parameters (for training against the evaluation attack's own budget, e.g. k 50, no
  cosine floor, 30% of the words: TextDefender's); it keeps TextFooler's paper POS rule, without the evaluation
  attack's part-of-speech-in-context check (`wordnet_pos`, added after the positive control was measured) and
  without its optional contextual filter, so the control's checkpoints stay those it was measured on;
* robench's shared training settings (AdamW, linear warm-up 10%, weight decay 0.01, clipping 1.0) instead of
  the A2T script's (lr 5e-5, 100-500 warm-up steps, batch 8-32, 4 epochs), and the MiniLM backbone; the
  epochs come from the run (`--epochs`), so `--epochs 4` gives the paper's 1 clean + 3 adversarial epochs.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from robench.classifier.victim import Victim
from robench.core.errors import RobenchError
from robench.core.params import bounded
from robench.engine import resources
from robench.engine.attack import AttackContext
from robench.engine.budgets import USE_THRESHOLD
from robench.engine.gradients import GradientVictim
from robench.engine.resources.synonyms import DEFAULT_SOURCE
from robench.engine.scheduler import EngineConfig, attack_examples
from robench.engine.search import CachedEmbedder, Importance, Similarity, WordSwapSearch
from robench.engine.substitution import GradientRanking, synonym_candidates
from robench.engine.words import Words
from robench.training.defense import MODELS, Defense
from robench.training.objective import Objective, TrainingContext

WEIGHT = "robench_weight"  # the per-example loss weight a2t's adversarial epochs add to their features
ATTACKS = ("a2t", "textfooler")  # the training attack: A2T's recipe, or TextFooler's search and constraints
# For cost estimates (`A2T.extra_cost`), per training attack: (successful attacks per sentence tried, forward passes
# per tried sentence = a + b * words). Measured on the positive control's seed 0 (SST-2, 3,000 sentences of 9.42
# words, MiniLM after one clean epoch). A2T: 442 of the 3,000 sentences tried succeeded; 46,042 texts through the
# model, 2,768 gradients (a forward and a backward, counted as 3 forwards) and 24,302 sentence encodings (a MiniLM
# forward each): 26.2 forwards per tried sentence = 3 + 2.46 per word. TextFooler's search at TextDefender's
# budget: 605 of 1,152 tried succeeded; 22,692 texts and 1,998 encodings: 21.4 per tried sentence = 2.27 per word.
ATTACK_COSTS = {"a2t": (0.147, 3.0, 2.46), "textfooler": (0.525, 0.0, 2.27)}


@dataclass(frozen=True)
class A2TParams:
    a2t_clean_epochs: int = bounded(1, 0, 1000)  # epochs on clean examples before the first attack (paper 1)
    a2t_adv_fraction: float = bounded(0.2, 0, 1, low_open=True)  # gamma: successful attacks per attack epoch / N
    a2t_attack_interval: int = bounded(1, 1, 1000)  # attack before every n-th epoch after the clean ones (paper 1)
    a2t_alpha: float = bounded(1.0, 0, 100)  # weight of an adversarial example's loss (TextAttack's alpha)
    a2t_k: int = bounded(20, 1, 1000)  # synonym candidates per word
    a2t_min_cos: float = bounded(0.8, -1, 1)  # word cosine of a candidate in the synonym table's space
    a2t_max_rate: float = bounded(0.1, 0, 1)  # share of the words that may change ...
    a2t_min_words: int = bounded(4, 0, 10_000)  # ... but at least this many (MaxModificationRate's min_threshold)
    a2t_similarity: float = bounded(0.9, -1, 1)  # sentence-encoder cosine with the original text
    a2t_query_budget: int = bounded(200, 1, 10**9)  # model queries per attacked example
    a2t_concurrency: int = bounded(64, 1, 4096)  # examples attacked at once (their queries share batches)
    a2t_synonym_source: str | None = None  # None: the default synonym table of robench's attacks
    a2t_sentence_encoder: str = "minilm"  # or "use-m3"
    a2t_attack: str = "a2t"  # "a2t" (the paper's attack), or "textfooler": TextFooler's ranking and constraints
    a2t_audit: bool = True  # audit the adversarial examples' swaps (robench.engine.audit) into the record

    def __post_init__(self) -> None:
        if self.a2t_synonym_source is not None and self.a2t_synonym_source not in resources.SOURCES:
            raise ValueError(f"a2t_synonym_source must be one of {resources.SOURCES} or null, got "
                             f"{self.a2t_synonym_source!r}")
        if self.a2t_attack not in ATTACKS:
            raise ValueError(f"a2t_attack must be one of {ATTACKS}, got {self.a2t_attack!r}")
        if self.a2t_sentence_encoder not in resources.ENCODERS:
            raise ValueError(f"a2t_sentence_encoder must be one of {resources.ENCODERS}, got "
                             f"{self.a2t_sentence_encoder!r}")

    def attack_epoch(self, epoch: int) -> bool:
        """Whether 1-based `epoch` starts with an attack on the model (TextAttack's schedule)."""
        return epoch > self.a2t_clean_epochs and (epoch - self.a2t_clean_epochs - 1) % self.a2t_attack_interval == 0

    def successes_wanted(self, n_train: int) -> int:
        return math.ceil(self.a2t_adv_fraction * n_train)


@dataclass
class A2TResources:
    """What the training attack loads (tests pass small fakes with the same methods)."""

    stopwords: frozenset[str]
    tagger: Any  # .tag(words) -> universal tags
    synonyms: Any  # .neighbours(word, k, min_cos) -> [(word, cos)]
    encoder: Any  # .embed(texts) -> L2-normalised rows


def synonyms_of(params: A2TParams, settings):
    """The synonym table the training attack draws from: robench's default (that of its attacks), or the one named."""
    return resources.synonym_table(settings, params.a2t_synonym_source or DEFAULT_SOURCE)


def load_resources(params: A2TParams, settings, device) -> A2TResources:
    return A2TResources(resources.stopwords(settings), resources.pos_tagger(settings), synonyms_of(params, settings),
                        resources.sentence_encoder(settings, device, params.a2t_sentence_encoder))


def build_search(params: A2TParams, res: A2TResources) -> WordSwapSearch:
    """The training attack as a `WordSwapSearch`: A2T's (see the module docstring), or with
    a2t_attack="textfooler" TextFooler's word ranking (deletion), POS rule (nouns and verbs may swap) and
    sentence constraint (USE angular 0.840845 mapped to the encoder, 15-word windows against the previous text,
    shorter texts unchecked), with the candidates and modification limit of the a2t_* parameters."""
    stop = res.stopwords
    textfooler = params.a2t_attack == "textfooler"
    candidates = synonym_candidates(res.synonyms, res.tagger, params.a2t_k, params.a2t_min_cos,
                                    allow_verb_noun_swap=textfooler, max_rate=params.a2t_max_rate,
                                    min_threshold=params.a2t_min_words)
    if textfooler:
        similarity = Similarity(res.encoder.threshold_for(USE_THRESHOLD, "angular"), "angular", window=15,
                                against_original=False, skip_shorter_than_window=True)
        importance = Importance(lambda original, i: original.delete(i))
    else:
        similarity = Similarity(params.a2t_similarity, "cosine", window=None, against_original=True)
        importance = GradientRanking()
    return WordSwapSearch(lambda words: [i for i, w in enumerate(words.words) if w.lower() not in stop],
                          importance, candidates, similarity, lazy=True)


class A2T(Objective):
    """Clean epochs, then epochs on clean + A2T adversarial examples of the current model (weighted loss)."""

    params: A2TParams

    def __init__(self, model: torch.nn.Module, params: A2TParams) -> None:
        super().__init__(model, params)
        self.context: TrainingContext | None = None
        self.resources: A2TResources | None = None
        self._report: dict[str, Any] = {}

    @classmethod
    def check(cls, params: A2TParams, train: Any, settings) -> None:
        epochs = getattr(train, "epochs", None)
        if epochs is not None and not any(params.attack_epoch(e) for e in range(1, epochs + 1)):
            raise RobenchError(f"a2t with a2t_clean_epochs={params.a2t_clean_epochs} and {epochs} epoch(s) never "
                               "attacks the model (it would be plain fine-tuning): train for more epochs than "
                               "a2t_clean_epochs (the paper: --epochs 4 with 1 clean epoch; --epochs 2 gives 1 "
                               "clean + 1 adversarial), or set --param a2t_clean_epochs=0")
        if settings is not None and getattr(settings, "data_dir", None) is not None:
            resources.stopwords(settings)
            resources.pos_tagger(settings)
            resources.require_synonym_source(settings, params.a2t_synonym_source or DEFAULT_SOURCE)

    @classmethod
    def fingerprint(cls, params: A2TParams, settings) -> dict[str, Any] | None:
        info = synonyms_of(params, settings).info
        return {"synonyms": info.get("name"), "key": info.get("key") or info.get("origin")}

    @classmethod
    def extra_cost(cls, params: A2TParams, train_words: list[int], epochs: int,
                   eval_examples: int) -> dict[str, float]:
        """The training attack in model forward passes: per attack epoch, ceil(gamma N) / success rate sentences
        tried (at most N), each min(budget, a + b * words) forwards (`ATTACK_COSTS`, measured on the positive
        control)."""
        if not train_words:
            return {}
        success, base, per_word = ATTACK_COSTS[params.a2t_attack]
        attacks = sum(params.attack_epoch(e) for e in range(1, epochs + 1))
        tried = min(len(train_words), params.successes_wanted(len(train_words)) / success)
        per_example = min(float(params.a2t_query_budget), base + per_word * float(np.mean(train_words)))
        return {"train": attacks * tried * per_example}

    def prepare(self, context: TrainingContext) -> None:
        self.context = context

    @classmethod
    def planned_examples(cls, params: A2TParams, epoch: int, n_train: int) -> int:
        return n_train + (params.successes_wanted(n_train) if params.attack_epoch(epoch) else 0)

    def epoch_report(self) -> dict[str, Any]:
        report, self._report = self._report, {}
        return report

    def epoch_features(self, epoch: int, features: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        if not self.params.attack_epoch(epoch):
            return None
        if self.context is None:
            raise RobenchError("a2t attacks its model through the training loop's context: train it with "
                               "robench (robench run / robench.run), which calls Objective.prepare first")
        adversarial = self.generate(epoch)
        ctx = self.context
        adv_features = ctx.encode([a["perturbed"] for a in adversarial], [a["label"] for a in adversarial])
        clean = [{**f, WEIGHT: 1.0} for f in features]
        return clean + [{**f, WEIGHT: float(self.params.a2t_alpha)} for f in adv_features]

    def generate(self, epoch: int) -> list[dict[str, Any]]:
        """Attack the current model on the training examples in a seeded order until ceil(gamma * N) successes
        (or every example tried); return the adversarial examples (original, perturbed texts, label), in order."""
        from datasets import Dataset

        p, ctx = self.params, self.context
        started = time.perf_counter()
        if self.resources is None:
            self.resources = load_resources(p, ctx.settings, ctx.device)
        res = self.resources
        wanted = p.successes_wanted(len(ctx.texts))
        order = np.random.default_rng([ctx.seed, epoch]).permutation(len(ctx.texts))
        inner = Victim(self.model, ctx.tokenizer, ctx.device, max_length=ctx.max_length)  # eval mode
        victim = GradientVictim(inner, "unrolled")
        search = build_search(p, res)
        adversarial_texts: dict[tuple[str, ...], tuple[str, ...]] = {}

        def tracked(text, label, clean):
            outcome = yield from search(text, label, clean)
            adversarial_texts[tuple(text)] = tuple(outcome.text)
            return outcome

        embedder = CachedEmbedder(res.encoder)
        config = EngineConfig(p.a2t_concurrency, p.a2t_query_budget, f"a2t attack (epoch {epoch})")
        fields = ctx.task.text_fields
        results, successes = [], []
        try:
            for start in range(0, len(order), p.a2t_concurrency):
                rows = order[start:start + p.a2t_concurrency]
                chunk = Dataset.from_dict({**{f: [ctx.texts[i][j] for i in rows] for j, f in enumerate(fields)},
                                           "label": [ctx.labels[i] for i in rows]})
                attack_ctx = AttackContext(None, ctx.task, victim, ctx.settings, chunk, float("nan"), {},
                                           lambda result: None, ctx.console)
                for result in attack_examples(attack_ctx, tracked, {"embed": embedder}, config):
                    row = int(rows[result.index])
                    results.append(result)
                    if result.status == "successful" and len(successes) < wanted:
                        successes.append({"index": row, "original": ctx.texts[row], "label": ctx.labels[row],
                                          "perturbed": adversarial_texts[tuple(ctx.texts[row])],
                                          "words_perturbed": result.words_perturbed, "words": result.num_words,
                                          "queries": result.queries})
                if len(successes) >= wanted:
                    break
        finally:
            self.model.train()
        self._report = {"a2t": self._describe(epoch, wanted, results, successes, inner, victim, embedder,
                                               time.perf_counter() - started)}
        return successes

    def _describe(self, epoch, wanted, results, successes, inner, victim, embedder, seconds) -> dict[str, Any]:
        from robench.engine.words import join_fields

        status = {s: sum(r.status == s for r in results) for s in ("successful", "failed", "skipped", "error")}
        attacked = status["successful"] + status["failed"]
        report = {
            "epoch": epoch, "wanted": wanted, "examples_tried": len(results), **status,
            "attack_success_rate": status["successful"] / attacked if attacked else None,
            "adversarial_examples": len(successes), "queries": int(sum(r.queries for r in results)),
            "queries_per_example": float(np.mean([r.queries for r in results])) if results else None,
            "model_evaluations": inner.model_evaluations, "forward_calls": inner.forward_calls,
            "gradients": victim.gradient_calls, "encoder_texts": embedder.calls, "attack_seconds": round(seconds, 2),
            "perturbed_word_rate": (float(np.mean([s["words_perturbed"] / max(s["words"], 1) for s in successes]))
                                    if successes else None),
            "max_words_perturbed": max((s["words_perturbed"] for s in successes), default=0),
            "params": {k: v for k, v in asdict(self.params).items() if k != "a2t_audit"},
            "examples": [[join_fields(s["original"]), join_fields(s["perturbed"]), s["label"]] for s in successes],
        }
        if self.params.a2t_audit and successes:
            report["audit"] = audit_examples(self.context.settings, successes)
        return report

    def step(self, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        if WEIGHT not in batch:
            return super().step(batch)
        weights = batch[WEIGHT].float()
        inputs = {k: v for k, v in batch.items() if k not in (WEIGHT, "labels")}
        logits = self.model(**inputs).logits.float()
        loss = (F.cross_entropy(logits, batch["labels"], reduction="none") * weights).mean()
        loss.backward()
        return loss.detach()


def audit_examples(settings, examples: list[dict[str, Any]]) -> dict[str, Any]:
    """The validity audit (`robench.engine.audit`) of a2t's adversarial examples: the class of every swap."""
    from robench.core.types import ExampleResult
    from robench.engine.audit import audit
    from robench.engine.resources.lexicon import lexicon
    from robench.engine.words import join_fields

    results = [ExampleResult(s["index"], s["label"], join_fields(s["original"]), join_fields(s["perturbed"]),
                             s["label"], 1 - s["label"], "successful", s["queries"], s["words"],
                             s["words_perturbed"]) for s in examples]
    out = audit(results, lexicon(settings)).to_dict()
    out.pop("lexicon", None)
    return out


def changed_words(original: tuple[str, ...], perturbed: tuple[str, ...]) -> list[tuple[str, str]]:
    """The (old, new) word pairs of a word-substitution example (same word count)."""
    a, b = Words.of(original), Words.of(perturbed)
    return [(x, y) for x, y in zip(a.words, b.words) if x != y]


MODELS.register("a2t")(Defense(
    "a2t", "Adversarial training with the A2T word-substitution attack run during training (Yoo and Qi, 2021): "
           "1 clean epoch, then clean + 20% adversarial examples per epoch",
    objective=A2T, params=A2TParams,
))
