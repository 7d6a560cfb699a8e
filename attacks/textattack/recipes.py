"""The TextAttack recipes robench registers, and building them on robench's offline resources.

`build_attack` calls `textattack.attack_recipes.<Recipe>.build(wrapper)` unchanged,
with robench's substitutes handed in where the recipe would download something:

* counter-fitted PARAGRAM-SL999 -> robench's synonym table as a `WordEmbedding`
  (`adapters.table_embedding`), through TextAttack's own shared-embedding slot
  (`utils.GLOBAL_OBJECTS`) during the build;
* `bert-base-uncased` masked LM -> `robench.engine.resources.masked_lm`, through the
  recipe module's `WordSwapMaskedLM` name during the build;
* Universal Sentence Encoder -> robench's sentence encoder
  (`adapters.RobenchSentenceEncoder`), threshold mapped by `threshold_for`, same
  metric, window and comparison target, replaced before the first query;
* `WordSwapHomoglyphSwap` -> `adapters.HomoglyphSwap` (TextBugger).

So TextAttack's USE, BERT and embedding downloads are never attempted. The
substitutes are loaded once (`load_resources`), used for the build, and
described for the run record (`describe`).
"""
from __future__ import annotations

import contextlib
import functools
import importlib
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from robench.attacks.textattack.compat import installed_version, load_textattack, nltk_dir, offline_nltk
from robench.core.errors import RobenchError
from robench.core.params import bounded
from robench.core.paths import Settings

EMBEDDING_KEY = "textattack_counterfitted_GLOVE_embedding"  # TextAttack's shared-embedding slot


@dataclass(frozen=True)
class TextAttackSpec:
    """One TextAttack recipe and the offline resources its build needs."""

    name: str  # registered as textattack:<name>
    recipe: str  # class in textattack.attack_recipes
    paper: str
    needs: frozenset[str]  # of: embedding, encoder, pos, mlm, wordnet, homoglyph
    use: tuple[str, float] | None = None  # the recipe's USE constraint: (metric, threshold)


SPECS: tuple[TextAttackSpec, ...] = (
    TextAttackSpec("textfooler", "TextFoolerJin2019", "Jin et al., AAAI 2020",
                   frozenset({"embedding", "encoder", "pos"}), ("angular", 0.840845057)),
    TextAttackSpec("bert-attack", "BERTAttackLi2020", "Li et al., EMNLP 2020", frozenset({"mlm", "encoder"}),
                   ("cosine", 0.2)),
    TextAttackSpec("bae", "BAEGarg2019", "Garg and Ramakrishnan, EMNLP 2020", frozenset({"mlm", "encoder", "pos"}),
                   ("cosine", 0.936338023)),
    TextAttackSpec("pwws", "PWWSRen2019", "Ren et al., ACL 2019", frozenset({"wordnet"})),
    TextAttackSpec("textbugger", "TextBuggerLi2018", "Li et al., NDSS 2019",
                   frozenset({"embedding", "encoder", "homoglyph"}),
                   ("angular", 0.8)),
    TextAttackSpec("deepwordbug", "DeepWordBugGao2018", "Gao et al., IEEE S&P Workshops 2018", frozenset()),
    TextAttackSpec("pruthi", "Pruthi2019", "Pruthi et al., ACL 2019", frozenset()),
    TextAttackSpec("iga", "IGAWang2019", "Wang et al., 2019 (arXiv 1909.06723)", frozenset({"embedding"})),
    TextAttackSpec("input-reduction", "InputReductionFeng2018", "Feng et al., EMNLP 2018", frozenset()),
)


@dataclass(frozen=True)
class TextAttackParams:
    """Knobs on top of the unchanged recipe; None keeps the recipe's own value.

    Names match robench's `textfooler` parameters, so one set configures both.
    """

    synonym_source: str = "lexicon"  # robench synonym_table source for embedding-based swaps (or counterfitted-glove)
    query_budget: int | None = bounded(None, 1, 10**9)  # per example; TextAttack stops the search when it is spent
    k: int | None = bounded(None, 1, 1000)  # max_candidates of WordSwapEmbedding / WordSwapMaskedLM
    # the share of an input's words that may change: TextAttack's MaxWordsPerturbed(max_percent), i.e. at most
    # ceil(rate x words); tightens a recipe's own MaxWordsPerturbed or adds one (TextDefender's budget: 0.3)
    max_modification_rate: float | None = bounded(None, 0, 1, low_open=True)
    min_cos: float | None = bounded(None, -1, 1)  # WordEmbeddingDistance(min_cos_sim)
    similarity_threshold: float | None = bounded(None, -1, 1)  # on the paper's (USE) scale, mapped to the encoder
    encoder_threshold: float | None = bounded(None, -1, 1)  # on the encoder's own scale, as is (no mapping)
    sentence_encoder: str = "minilm"  # robench encoder replacing USE: minilm (calibrated) or use-m3
    mlm: str = "built"  # masked LM for bert-attack/bae: robench's built MLM, or a hub id when online
    # "victim": queries go through the robench Victim (cache, counter, budget; dynamic padding);
    # "huggingface": TextAttack as shipped, its HuggingFaceModelWrapper on the same model (pads every
    # batch to the tokenizer's maximum length, no robench cache or budget), for speed references only
    model_wrapper: str = "victim"
    # robench's budget settings (robench.engine.budgets) are not applied to TextAttack's recipes: a value is refused
    # with the reason (its knobs map to k, max_modification_rate, min_cos and similarity_threshold above; the
    # `natural` setting's filters have no TextAttack counterpart)
    budget: str | None = None

    def __post_init__(self) -> None:
        if self.budget is not None:
            raise ValueError(budget_refusal(self.budget))
        if self.model_wrapper not in ("victim", "huggingface"):
            raise ValueError(f"model_wrapper must be 'victim' or 'huggingface', got {self.model_wrapper!r}")
        for name in ("query_budget", "k"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")


def budget_refusal(budget: str) -> str:
    """Why a textattack:* recipe does not take `budget` (the knobs that do map, or why `natural` cannot)."""
    if budget == "natural":
        return ("textattack:* recipes cannot run the natural setting: its fixed-phrase, inflection, sense and "
                "Harper grammar filters are robench constraints with no TextAttack counterpart; use textfooler, "
                "gradient-swap or bert-attack with budget=natural (docs/guide/natural.md)")
    return (f"textattack:* recipes take no budget setting ({budget!r}); set its knobs directly: k, "
            "max_modification_rate, min_cos, similarity_threshold (robench.engine.budgets lists each setting's)")


# --------------------------------------------------------------------------- the substitutes, loaded once


@dataclass(frozen=True)
class OfflineResources:
    """robench's substitutes for what a recipe would download; None where its spec does not need one."""

    synonyms: Any = None  # robench.engine.resources.SynonymTable (words, vectors, nn, info)
    encoder: Any = None  # robench.engine.resources.SentenceEncoder (embed, threshold_for, info)
    mlm: Any = None  # robench.engine.resources.MaskedLM (model, tokenizer, info)


def load_resources(spec: TextAttackSpec, params: TextAttackParams, settings: Settings, device) -> OfflineResources:
    from robench.engine.resources import masked_lm, sentence_encoder, synonym_table

    return OfflineResources(
        synonyms=synonym_table(settings, params.synonym_source) if "embedding" in spec.needs else None,
        encoder=sentence_encoder(settings, device, params.sentence_encoder) if "encoder" in spec.needs else None,
        mlm=masked_lm(settings, device, params.mlm) if "mlm" in spec.needs else None,
    )


def mapped_threshold(encoder: Any, metric: str, recipe_threshold: float, params: TextAttackParams) -> float:
    """The threshold on `encoder`'s scale: `encoder_threshold` as is, else the paper's (or given) one mapped."""
    if params.encoder_threshold is not None:
        return float(params.encoder_threshold)
    paper = params.similarity_threshold if params.similarity_threshold is not None else recipe_threshold
    return float(encoder.threshold_for(paper, metric))


def describe(spec: TextAttackSpec, params: TextAttackParams, res: OfflineResources,
             settings: Settings) -> dict[str, Any]:
    """The run record's `resources.attack`: every resource the recipe used, with what it substitutes."""
    route = ("the robench victim" if params.model_wrapper == "victim" else "TextAttack's HuggingFaceModelWrapper "
             "(as shipped: pads to the maximum length; no robench cache or budget)")
    out: dict[str, Any] = {"backend": f"textattack {installed_version()}, {spec.recipe}.build(), queries through "
                                      f"{route}"}
    if res.synonyms is not None:
        out["synonyms"] = {"substitutes": "counter-fitted PARAGRAM-SL999 (TextAttack paragramcf)",
                           "used": res.synonyms.info,
                           "vocabulary": "words TextAttack tokenises as one word (words_from_text(w) == [w])"}
    if res.encoder is not None:
        metric, recipe_threshold = spec.use
        out["sentence_encoder"] = {"substitutes": "Universal Sentence Encoder (TF Hub)", "used": res.encoder.info,
                                   "metric": metric, "recipe_threshold": recipe_threshold,
                                   "threshold": mapped_threshold(res.encoder, metric, recipe_threshold, params)}
    if res.mlm is not None:
        out["masked_lm"] = {"substitutes": "bert-base-uncased", "used": res.mlm.info}
    if "homoglyph" in spec.needs:
        out["homoglyphs"] = ("WordSwapHomoglyphSwap's built-in map; shared/intentional_homoglyphs.txt (missing from "
                             "the 0.3.11 wheel, used only by the bad-characters attack) left empty")
    nltk_parts = ["stopwords"] + [p for p, need in (("averaged perceptron POS tagger, universal tagset", "pos"),
                                                    ("WordNet 3.0", "wordnet")) if need in spec.needs]
    out["nltk"] = {"data": str(nltk_dir(settings)), "used": nltk_parts, "downloads": "disabled"}
    return out


# --------------------------------------------------------------------------- build


@dataclass
class Built:
    attack: Any  # textattack.Attack
    wrapper: Any  # the adapters.VictimModelWrapper its goal function queries


def build_attack(spec: TextAttackSpec, victim, params: TextAttackParams, settings: Settings,
                 res: OfflineResources) -> Built:
    """`<Recipe>.build(wrapper)` with robench's offline resources, then the adjustments."""
    textattack = load_textattack(settings)
    from textattack.shared import utils as ta_utils

    from robench.attacks.textattack import adapters

    wrapper = adapters.VictimModelWrapper(victim, stock=params.model_wrapper == "huggingface")
    recipe = getattr(textattack.attack_recipes, spec.recipe)
    with contextlib.ExitStack() as stack:
        stack.enter_context(offline_nltk(settings))
        if res.synonyms is not None:
            embedding = adapters.table_embedding(list(res.synonyms.words), res.synonyms.vectors, res.synonyms.nn)
            stack.enter_context(_shared_embedding(ta_utils.GLOBAL_OBJECTS, embedding))
        if res.mlm is not None:
            stack.enter_context(_replaced(recipe, "WordSwapMaskedLM", lambda cls: functools.partial(
                cls, masked_language_model=res.mlm.model, tokenizer=res.mlm.tokenizer)))
        if "homoglyph" in spec.needs:
            stack.enter_context(_replaced(recipe, "WordSwapHomoglyphSwap", lambda cls: adapters.HomoglyphSwap))
        try:
            attack = recipe.build(wrapper)
        except LookupError as exc:
            raise RobenchError(f"textattack:{spec.name} needs NLTK data missing from {nltk_dir(settings)}: "
                               f"{str(exc).strip().splitlines()[0]}") from exc
    return Built(_adjust(attack, params, res.encoder), wrapper)


@contextlib.contextmanager
def _shared_embedding(slots: dict, embedding) -> Iterator[None]:
    """Hand `embedding` to every component that would load TextAttack's counter-fitted PARAGRAM."""
    previous = slots.get(EMBEDDING_KEY)
    slots[EMBEDDING_KEY] = embedding
    try:
        yield
    finally:
        if previous is None:
            slots.pop(EMBEDDING_KEY, None)
        else:
            slots[EMBEDDING_KEY] = previous


@contextlib.contextmanager
def _replaced(recipe, name: str, make: Callable[[Any], Any]) -> Iterator[None]:
    """While the recipe builds, its module's `name` is `make(original)` (e.g. an MLM already loaded)."""
    module = importlib.import_module(recipe.__module__)
    original = getattr(module, name)
    setattr(module, name, make(original))
    try:
        yield
    finally:
        setattr(module, name, original)


def _adjust(attack, params: TextAttackParams, encoder: Any):
    """Replace USE constraints by `encoder`, apply parameter overrides, and rebuild the Attack."""
    from textattack.constraints.overlap import MaxWordsPerturbed
    from textattack.constraints.semantics import WordEmbeddingDistance
    from textattack.constraints.semantics.sentence_encoders import SentenceEncoder, UniversalSentenceEncoder
    from textattack.transformations import CompositeTransformation, WordSwapEmbedding, WordSwapMaskedLM

    constraints = []
    for c in attack.pre_transformation_constraints + attack.constraints:
        if isinstance(c, UniversalSentenceEncoder):
            c = encoder_constraint(c, params, encoder)
        elif isinstance(c, SentenceEncoder):
            raise RobenchError(f"{type(c).__name__} needs a download; no offline substitute is wired up")
        elif isinstance(c, WordEmbeddingDistance) and params.min_cos is not None:
            if c.min_cos_sim is None:
                raise RobenchError("min_cos applies only to recipes that bound the embedding cosine")
            c.min_cos_sim = params.min_cos
        elif isinstance(c, MaxWordsPerturbed) and params.max_modification_rate is not None:
            c = MaxWordsPerturbed(c.max_num_words, min(params.max_modification_rate, c.max_percent or 1.0))
        constraints.append(c)
    if params.max_modification_rate is not None and not any(isinstance(c, MaxWordsPerturbed) for c in constraints):
        constraints.append(MaxWordsPerturbed(max_percent=params.max_modification_rate))
    transformation = attack.transformation
    parts = transformation.transformations if isinstance(transformation, CompositeTransformation) else [transformation]
    if params.k is not None:
        swaps = [t for t in parts if isinstance(t, (WordSwapEmbedding, WordSwapMaskedLM))]
        if not swaps:
            raise RobenchError("k applies only to recipes with embedding or masked-LM word swaps")
        for t in swaps:
            t.max_candidates = params.k
    for t in parts:  # TextAttack pads MLM inputs to 512 tokens: cap at the MLM's own position limit
        if isinstance(t, WordSwapMaskedLM):
            t.max_length = min(t.max_length, t._language_model.config.max_position_embeddings)
    goal = attack.goal_function
    if params.query_budget is not None:
        goal.query_budget = params.query_budget
    return type(attack)(goal, constraints, transformation, attack.search_method)


def encoder_constraint(use, params: TextAttackParams, encoder: Any):
    """`encoder` in place of the USE constraint `use`: same metric, window and target, threshold mapped."""
    from robench.attacks.textattack.adapters import RobenchSentenceEncoder

    if encoder is None:
        raise RobenchError("this recipe checks sentence similarity: its spec must list 'encoder' in `needs`")
    window = None if use.window_size == float("inf") else use.window_size
    return RobenchSentenceEncoder(encoder, threshold=mapped_threshold(encoder, use.metric, use.threshold, params),
                                  metric=use.metric, compare_against_original=use.compare_against_original,
                                  window_size=window, skip_text_shorter_than_window=use.skip_text_shorter_than_window)
