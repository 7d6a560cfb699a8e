"""`safer`: randomised smoothing over synonym substitutions, with a robustness certificate.

Ye, Gong and Liu, "SAFER: A Structure-free Approach for Certified Robustness to Adversarial Word
Substitutions", ACL 2020 (https://arxiv.org/abs/2005.14424; the authors' code: lushleaf/Structure-free-
certified-NLP, `data_process.py`, `data_util.py`, `evaluation.py`; TextDefender's `trainer/safer.py`).

* **Threat model.** The attacker may replace any word x by any of its synonyms T_x: here the candidates robench's
  TextFooler draws, the `safer_k` = 50 best neighbours with cosine >= `safer_min_cos` = 0.5 in robench's
  default (valid) synonym table (`robench.engine.resources.synonym_table`), or the table `safer_synonym_source`
  names.
* **Perturbation sets** (the paper's construction, `get_perturbation_set`): the synonym graph (x - y when
  y is in T_x) is cut into connected components; a word of a component of at most `safer_set_size` = 100
  words gets the whole component as its set S_x (so all its synonyms share one set); a word of a larger
  component gets the `safer_set_size` words of its component nearest to it (itself included); a word with
  no synonym is never changed.
* **Training** (data augmentation): every epoch, every training sentence has each word replaced by a uniform
  draw from its set (TextDefender: one perturbed copy per sentence and epoch, the clean sentence not kept).
* **Prediction**: the majority vote of the base classifier over `safer_samples` = 100 random perturbations
  (TextDefender's 100-vote ensemble, `ensemble_method="votes"`); the victim returns the vote shares as the
  class probabilities.
* **Randomness under attack: fixed per query.** The perturbations of a query are drawn from a generator
  seeded by `safer_seed` and the SHA-256 of the query text, so asking about the same text twice gives the
  same answer (the victim's cache and the query count stay honest), and an attack sees a deterministic
  function; expectation over transformation (EOT) is not used. Every inner forward pass of the base
  classifier is counted (`SmoothedVictim.inner_forwards`, into the run record's timings and the cost
  estimate), while the attack's query count stays one per victim call.
* **Certificate** (Theorem 1 and the authors' `evaluation.py`): with q_x = min_{x' in T_x} |S_x cap S_x'| /
  max(|S_x|, |S_x'|) and Delta_X = 1 - prod_j q_{x_j} over the words of the input, the total variation between
  the smoothing distributions of X and of any attacked X' is at most Delta_X, so the smoothed probability of
  the gold class y cannot fall below g_y(X) - Delta_X. An example is certified when a lower confidence bound
  of g_y(X) minus Delta_X exceeds 1/2 (then y stays the majority for every X'). g_y(X) is estimated from
  `safer_cert_samples` = 2,000 random perturbations (the paper's `num_random_sample`), drawn from a generator
  independent of the prediction's.

Deviations (each on purpose; the hyperparameters and their defaults are `SaferParams`):

* "nearest" in a component larger than safer_set_size is nearest in the synonym graph (breadth first from the
  word; the last, partly taken layer by cosine), not by cosine alone as in the paper's code: in the 50-dimensional
  space of robench's table the cosine-nearest 100 words of a 27,000-word component are frequent words of any
  meaning ("good" -> "to", "but", "i", "will"), the synonym graph's are synonyms and their synonyms;
* the synonym relation is robench's default synonym table at TextFooler's K and cosine (the attack robench runs),
  not the paper's "cosine > 0.8 after removing the top PCA directions of the counter-fitted vectors", and the
  whole table's vocabulary is used (the paper keeps words seen more than once in the dataset);
* the Monte Carlo bound is a one-sided Clopper-Pearson bound at confidence 1 - safer_cert_alpha (rigorous per
  example) instead of the paper's estimate-minus-0.01 rule; the paper's rule is reported beside it
  (`certified_accuracy_paper_rule`);
* q uses max(|S_x|, |S_x'|) in the denominator (the paper's code divides by |S_x|; the two agree when the sets
  have one size, which the construction gives except between a small and a large component, where max is the
  correct total variation of two uniform distributions);
* words are those robench's attacks see (TextAttack's word split of the last text field), cased like the word
  they replace; pair tasks smooth only the last field, the one attacks perturb;
* the vote ties are broken towards the lower label index;
* gradient attacks (`gradient-swap`) get the base classifier's gradient (the vote has none), and BERT-Attack's
  masked-LM candidates are outside the certified threat model (they are not drawn from the synonym table);
* the backbone is MiniLM, not BERT-base, with robench's shared training settings.
"""
from __future__ import annotations

import functools
import hashlib
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, Sequence

import numpy as np
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, BertConfig, BertForSequenceClassification

from robench.classifier.victim import BaseVictim, Text, Victim
from robench.core.errors import RobenchError
from robench.core.params import bounded
from robench.engine import resources
from robench.engine.resources.synonyms import DEFAULT_SOURCE
from robench.engine.words import Words, recover_case
from robench.training.defense import MODELS, Defense
from robench.training.objective import Objective, TrainingContext

MC_ERROR = 0.01  # the authors' evaluation.py: certified when p - Delta >= 0.5 + mc_error (reported beside the bound)


@dataclass(frozen=True)
class SaferParams:
    safer_k: int = bounded(50, 1, 1000)  # the attacker's synonyms per word: the table's k best ...
    safer_min_cos: float = bounded(0.5, -1, 1)  # ... with at least this cosine (TextFooler's defaults)
    safer_set_size: int = bounded(100, 1, 100_000)  # largest perturbation set (the paper's perturbation_constraint)
    safer_samples: int = bounded(100, 1, 100_000)  # votes per prediction
    safer_cert_samples: int = bounded(2000, 1, 10**7)  # Monte Carlo samples per certified example
    safer_cert_alpha: float = bounded(0.01, 0, 1, low_open=True, high_open=True)  # 1 - confidence of the bound
    safer_seed: int = bounded(0, 0, 2**32 - 1)  # salt of the per-query randomness
    safer_synonym_source: str | None = None  # None: the default synonym table of robench's attacks

    def __post_init__(self) -> None:
        if self.safer_synonym_source is not None and self.safer_synonym_source not in resources.SOURCES:
            raise ValueError(f"safer_synonym_source must be one of {resources.SOURCES} or null, got "
                             f"{self.safer_synonym_source!r}")


# ------------------------------------------------------------------------------------------ perturbation sets

class PerturbationSets:
    """The paper's perturbation sets S_x and certificate factors q_x over a synonym table (see the docstring).

    Built once per table and parameters; S_x and q_x are computed on first use for each word (cheap: one
    dot product over the word's component), so a table of 100,000 words needs no precomputation beyond its
    connected components.
    """

    def __init__(self, table: Any, k: int, min_cos: float, cap: int) -> None:
        from scipy.sparse import csr_matrix
        from scipy.sparse.csgraph import connected_components

        self.table, self.cap = table, cap
        nn = np.asarray(table.nn[:, :k])
        cos = np.asarray(table.nn_cos[:, :k])
        self._valid = (nn >= 0) & (cos >= min_cos) & (nn != np.arange(len(nn))[:, None])
        self._nn = nn
        rows, cols = np.nonzero(self._valid)
        n = len(table.words)
        graph = csr_matrix((np.ones(len(rows), dtype=np.int8), (rows, nn[rows, cols])), shape=(n, n))
        self._adj = (graph + graph.T).tocsr()  # the undirected synonym graph
        self.components, self.component = connected_components(graph, directed=False)
        self.sizes = sizes = np.bincount(self.component, minlength=self.components)
        self._order = np.argsort(self.component, kind="stable")
        self._start = np.concatenate([[0], np.cumsum(sizes)])
        self._sets: dict[int, np.ndarray] = {}
        self._q: dict[int, float] = {}
        big = sizes > cap
        self.info = {"k": k, "min_cos": min_cos, "set_size": cap, "components": int(self.components),
                     "words_with_synonyms": int(self._valid.any(axis=1).sum()),
                     "largest_component": int(sizes.max()) if len(sizes) else 0,
                     "words_in_capped_components": int(sizes[big].sum()),
                     "synonyms": {key: table.info.get(key) for key in ("name", "key") if key in table.info}}

    def threat(self, i: int) -> np.ndarray:
        """T_x: the attacker's substitutes of word id i."""
        return self._nn[i][self._valid[i]]

    def set_ids(self, i: int) -> np.ndarray:
        """S_x of word id i (sorted ids)."""
        found = self._sets.get(i)
        if found is None:
            c = self.component[i]
            members = self._order[self._start[c]:self._start[c + 1]]
            if len(members) > self.cap:
                members = self._nearest(i)
            found = self._sets[i] = np.sort(members)
        return found

    def _nearest(self, i: int) -> np.ndarray:
        """The `cap` words of i's component nearest to i in the synonym graph (breadth first: i, its synonyms,
        theirs, ...), a partly taken layer by cosine to i in the table's space (by id without vectors)."""
        vectors = getattr(self.table, "vectors", None)
        indptr, indices = self._adj.indptr, self._adj.indices
        chosen, seen, layer = [i], {i}, [i]
        while layer and len(chosen) < self.cap:
            following = sorted({int(j) for u in layer for j in indices[indptr[u]:indptr[u + 1]]} - seen)
            if vectors is not None and len(following) > self.cap - len(chosen):
                sims = vectors[following] @ vectors[i]
                following = [following[r] for r in np.argsort(-sims, kind="stable")]
            following = following[:self.cap - len(chosen)]
            chosen += following
            seen.update(following)
            layer = following
        return np.asarray(chosen)

    def q(self, i: int) -> float:
        """q_x = min over the attacker's substitutes x' of |S_x cap S_x'| / max(|S_x|, |S_x'|) (1: none)."""
        found = self._q.get(i)
        if found is None:
            own, found = self.set_ids(i), 1.0
            for j in self.threat(i):
                other = self.set_ids(int(j))
                found = min(found, len(np.intersect1d(own, other, assume_unique=True)) / max(len(own), len(other)))
            self._q[i] = found
        return found

    def words_of(self, word: str) -> list[str]:
        """S_x as words for a word as written (lower-cased lookup; a word outside the table: itself only)."""
        i = self.table.index.get(word.lower())
        if i is None:
            return [word.lower()]
        return [self.table.words[j] for j in self.set_ids(i)]

    def q_of(self, word: str) -> float:
        i = self.table.index.get(word.lower())
        return 1.0 if i is None else self.q(i)

    def delta(self, text: Text) -> float:
        """Delta_X = 1 - prod_j q_{x_j} over the words of the perturbed (last) field."""
        return 1.0 - float(np.prod([self.q_of(w) for w in Words.of(text).words]))

    def perturb(self, text: Text, rng: np.random.Generator) -> Text:
        """One draw of the smoothing distribution: every word replaced by a uniform member of its set."""
        words = Words.of(text)
        out = words
        for j, word in enumerate(words.words):
            options = self.words_of(word)
            if len(options) > 1:
                new = recover_case(options[int(rng.integers(len(options)))], word)
                if new != word:
                    out = out.replace(j, new)
        return out.text


def synonyms_of(params: SaferParams, settings) -> Any:
    return resources.synonym_table(settings, params.safer_synonym_source or DEFAULT_SOURCE)


SETS_KEPT = 4  # perturbation sets a process keeps built (a grid over safer_k or safer_set_size builds one each)


@dataclass(frozen=True)
class _Table:
    """A synonym table as a cache key: the same table object, whatever its contents (tables are not hashable)."""

    table: Any

    def __hash__(self) -> int:
        return id(self.table)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Table) and other.table is self.table


@functools.lru_cache(maxsize=SETS_KEPT)
def _built_sets(table: _Table, k: int, min_cos: float, cap: int) -> PerturbationSets:
    return PerturbationSets(table.table, k, min_cos, cap)


def perturbation_sets(params: SaferParams, settings) -> PerturbationSets:
    """The perturbation sets of `params` over their synonym table (built once per process and table; the last
    `SETS_KEPT` kept)."""
    table = synonyms_of(params, settings)
    return _built_sets(_Table(table), params.safer_k, params.safer_min_cos, params.safer_set_size)


def text_seed(salt: int, stream: int, text: Text) -> list[int]:
    """A generator seed from the salt, a stream number (0: votes, 1: certification) and the text's SHA-256."""
    digest = hashlib.sha256("\x1f".join(text).encode("utf-8")).digest()
    return [salt, stream, *np.frombuffer(digest[:16], dtype=np.uint32).tolist()]


def lower_confidence_bound(successes: int, trials: int, alpha: float) -> float:
    """One-sided Clopper-Pearson lower bound of a binomial proportion at confidence 1 - alpha."""
    from scipy.stats import beta

    return 0.0 if successes == 0 else float(beta.ppf(alpha, successes, trials - successes + 1))


def certified(p_lower: float, delta: float) -> bool:
    """SAFER's condition: the gold class keeps more than half of the smoothed mass under every attack."""
    return p_lower - delta > 0.5


# ------------------------------------------------------------------------------------------------- victim

class SmoothedVictim(BaseVictim):
    """The SAFER prediction as a victim: the vote of the base classifier over random perturbations, fixed per
    query text; every inner forward pass counted in `inner_forwards` (distinct perturbations actually run)."""

    def __init__(self, base: Victim, sets: PerturbationSets, params: SaferParams) -> None:
        super().__init__(batch_size=base.batch_size, label_order=base.label_order)
        self.base, self.sets, self.params = base, sets, params
        self.inner_forwards = 0  # base-classifier forward passes (one per distinct perturbed text evaluated)
        self.certify_forwards = 0  # of which for certificates

    # what gradient attacks and analyses read from a victim: the base classifier's
    model = property(lambda self: self.base.model)
    tokenizer = property(lambda self: self.base.tokenizer)
    device = property(lambda self: self.base.device)
    max_length = property(lambda self: self.base.max_length)

    @property
    def num_labels(self) -> int:
        return self.base.num_labels

    @property
    def forwards_per_query(self) -> int:
        """Base-classifier forward passes per victim query, at most (identical perturbations run once)."""
        return self.params.safer_samples

    def reset(self) -> None:
        super().reset()
        self.inner_forwards = self.certify_forwards = 0

    def _labels(self, variants: list[Text]) -> dict[Text, int]:
        """The base classifier's label (model output order) for each distinct variant, shortest first."""
        todo = sorted(set(variants), key=lambda x: sum(len(s) for s in x))
        out: dict[Text, int] = {}
        for start in range(0, len(todo), self.base.batch_size):
            chunk = todo[start:start + self.base.batch_size]
            self.inner_forwards += len(chunk)
            for text, row in zip(chunk, self.base.model_outputs(chunk)):
                out[text] = int(np.argmax(row))
        return out

    def votes(self, texts: Sequence[Text], samples: int, stream: int) -> np.ndarray:
        """(texts, labels) vote counts in the model's output order over `samples` perturbations of each text."""
        draws = [[self.sets.perturb(t, rng) for _ in range(samples)]
                 for t, rng in ((t, np.random.default_rng(text_seed(self.params.safer_seed, stream, t)))
                                for t in texts)]
        labels = self._labels([v for row in draws for v in row])
        counts = np.zeros((len(texts), self.num_labels), dtype=np.int64)
        for i, row in enumerate(draws):
            for v in row:
                counts[i, labels[v]] += 1
        return counts

    def _forward(self, batch: Sequence[Text]) -> np.ndarray:
        n = self.params.safer_samples
        return (self.votes(batch, n, 0) / n).astype(np.float32)

    def certify(self, texts: Sequence[Text], labels: Sequence[int]) -> dict[str, Any]:
        """Certified-robust accuracy on `texts` (SAFER's bound, see the module docstring)."""
        p = self.params
        n, alpha = p.safer_cert_samples, p.safer_cert_alpha
        before, started = self.inner_forwards, time.perf_counter()
        flags, paper, deltas, lows = [], [], [], []
        for start in range(0, len(texts), self.batch_size):
            chunk = [tuple(t) for t in texts[start:start + self.batch_size]]
            counts = self.votes(chunk, n, 1)
            if self.label_order is not None:
                counts = counts[:, self.label_order]
            for text, row, label in zip(chunk, counts, labels[start:start + self.batch_size]):
                delta = self.sets.delta(text)
                low = lower_confidence_bound(int(row[label]), n, alpha)
                flags.append(certified(low, delta))
                paper.append(row[label] / n - delta >= 0.5 + MC_ERROR)
                deltas.append(delta)
                lows.append(low)
        self.certify_forwards += self.inner_forwards - before
        m = len(flags)
        return {"certified_accuracy": float(np.mean(flags)) if m else None,
                "certified_accuracy_paper_rule": float(np.mean(paper)) if m else None,
                "certified_examples": int(np.sum(flags)), "certify_examples": m,
                "certify_mean_delta": float(np.mean(deltas)) if m else None,
                "certify_median_p_lower": float(np.median(lows)) if m else None,
                "certify_samples": n, "certify_alpha": alpha, "certify_forwards": self.inner_forwards - before,
                "certify_seconds": time.perf_counter() - started,
                "certified": [bool(f) for f in flags]}


# -------------------------------------------------------------------------------------- model and training

class SaferConfig(BertConfig):
    """BertConfig plus SAFER's smoothing settings and the identity of its synonym table; `model_type` "safer"."""

    model_type = "safer"

    def __init__(self, safer: dict[str, Any] | None = None, safer_table: dict[str, Any] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.safer = dict(safer or {})
        self.safer_table = dict(safer_table or {})  # the table it was trained with (set by training)


class SaferForSequenceClassification(BertForSequenceClassification):
    """The base classifier (plain BERT); robench queries it through `SmoothedVictim` (`robench_victim`)."""

    config_class = SaferConfig

    def safer_params(self) -> SaferParams:
        saved = self.config.safer  # the fields of SaferParams; a key no field has is ignored
        return SaferParams(**{f.name: saved[f.name] for f in fields(SaferParams) if f.name in saved})

    def robench_victim(self, victim: Victim, settings) -> SmoothedVictim:
        """The hook `robench.classifier.victim.defended` calls: the smoothed victim over this base classifier."""
        if settings is None:
            raise RobenchError("a SAFER model predicts by a vote over synonym substitutions, which needs the "
                               "synonym table: load it with settings (robench.runs.given.load_victim(..., "
                               "settings=...))")
        params = self.safer_params()
        sets = perturbation_sets(params, settings)
        trained, current = self.config.safer_table, sets.info["synonyms"]
        if trained and trained.get("key") != current.get("key"):
            raise RobenchError(f"this SAFER checkpoint was trained with synonym table {trained}, but the table "
                               f"here is {current}: its perturbation sets differ; rebuild that table or retrain")
        return SmoothedVictim(victim, sets, params)


def build_safer(backbone: str, num_labels: int, params: SaferParams) -> SaferForSequenceClassification:
    base = AutoConfig.from_pretrained(backbone)
    if base.model_type not in ("bert", "safer"):
        raise RobenchError(f"safer needs a BERT-architecture backbone; {backbone!r} is {base.model_type!r}")
    settings = {k: v for k, v in base.to_dict().items() if k not in ("safer", "safer_table")}
    for key in ("model_type", "architectures", "transformers_version", "id2label", "label2id"):
        settings.pop(key, None)
    config = SaferConfig(safer=asdict(params), num_labels=num_labels, **settings)
    return SaferForSequenceClassification.from_pretrained(backbone, config=config)


class Safer(Objective):
    """Cross-entropy on a fresh random perturbation of every training sentence each epoch."""

    params: SaferParams

    def __init__(self, model: torch.nn.Module, params: SaferParams) -> None:
        super().__init__(model, params)
        self.context: TrainingContext | None = None
        self.sets: PerturbationSets | None = None
        self._report: dict[str, Any] = {}

    @classmethod
    def fingerprint(cls, params: SaferParams, settings) -> dict[str, Any] | None:
        info = synonyms_of(params, settings).info
        return {"synonyms": info.get("name"), "key": info.get("key") or info.get("origin")}

    @classmethod
    def extra_cost(cls, params: SaferParams, train_words: list[int], epochs: int,
                   eval_examples: int) -> dict[str, float]:
        """The certificate: safer_cert_samples forwards per attacked example, in victim queries (of safer_samples
        forwards each; the vote's own cost is in the victim's measured rate)."""
        return {"attack": eval_examples * params.safer_cert_samples / params.safer_samples}

    @classmethod
    def check(cls, params: SaferParams, train: Any, settings) -> None:
        if settings is not None and getattr(settings, "data_dir", None) is not None:
            resources.require_synonym_source(settings, params.safer_synonym_source or DEFAULT_SOURCE)

    def prepare(self, context: TrainingContext) -> None:
        self.context = context
        self.sets = perturbation_sets(self.params, context.settings)
        if isinstance(getattr(self.model, "config", None), SaferConfig):
            self.model.config.safer_table = dict(self.sets.info["synonyms"])

    def epoch_features(self, epoch: int, features: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        if self.context is None:
            raise RobenchError("safer perturbs its training sentences through the training loop's context: train "
                               "it with robench (robench run / robench.run)")
        ctx = self.context
        rng = np.random.default_rng([ctx.seed, epoch, self.params.safer_seed])
        perturbed = [self.sets.perturb(tuple(t), rng) for t in ctx.texts]
        changed = sum(a != tuple(b) for a, b in zip(perturbed, ctx.texts))
        self._report = {"safer": {"perturbed_sentences": changed, "sentences": len(perturbed)}}
        return ctx.encode(perturbed, ctx.labels)

    def epoch_report(self) -> dict[str, Any]:
        report, self._report = self._report, {}
        return report


AutoConfig.register("safer", SaferConfig)
AutoModelForSequenceClassification.register(SaferConfig, SaferForSequenceClassification)

MODELS.register("safer")(Defense(
    "safer", "SAFER: randomised smoothing over synonym substitutions, 100-vote prediction, certified accuracy "
             "(Ye, Gong and Liu, 2020)",
    architecture=build_safer, objective=Safer, params=SaferParams,
))
