"""`textattack:<recipe>`: the real TextAttack 0.3.11 recipes against a robench victim.

This backend is the reference for robench's own recipes (parity and speed, see
`robench bench attack`). Each entry calls `textattack.attack_recipes.<Recipe>.build`
unchanged, then swaps in robench's offline resources where the recipe would
download something, and attacks the examples one by one with `Attack.attack`.
Every model query goes through a `textattack.models.wrappers.ModelWrapper` that
calls the robench `Victim` (its prediction cache, query counter and budget).

Offline substitutions (each is named in the run record's resources):

* counter-fitted PARAGRAM-SL999 (`WordSwapEmbedding`, `WordEmbeddingDistance`)
  -> robench's candidate table (`robench.resources.synonym_table`, counter-fitted
  GloVe by default) as a `textattack.shared.WordEmbedding` with a precomputed
  `nn_matrix`;
* Universal Sentence Encoder -> the packaged MiniLM sentence encoder
  (`robench.resources.sentence_encoder`), threshold mapped by its documented
  calibration (`threshold_for`), same metric, window and comparison target;
* `bert-base-uncased` masked LM (BERT-Attack, BAE) -> `robench.resources.masked_lm`;
* NLTK stopwords, POS tagger and WordNet -> `<data_dir>/nltk_data`.

TextAttack 0.3.11 fails offline in three ways, each handled here:

1. `import textattack` runs `nltk.download(...)` once per install (a post-install
   hook) and reads NLTK stopwords at import. `_offline_textattack` points NLTK at
   `<data_dir>/nltk_data`, turns `nltk.download` into a logged no-op for the
   duration of the import and of recipe builds, keeps TextAttack's marker files in
   robench's cache dir and restores every environment variable it changes.
2. `WordEmbedding.nearest_neighbours` without an `nn_matrix` slices the result of
   `torch.topk` (a (values, indices) tuple) and calls `.tolist()` on the slice:
   AttributeError. `table_embedding` always supplies the matrix.
3. A vocabulary entry that is not exactly one TextAttack word breaks the
   sentence-encoder window: `SentenceEncoder._score_list` takes
   `next(iter(newly_modified_indices))`, and swapping a word for a pure-punctuation
   "synonym" (",", "--", "...") deletes it, leaving that set empty: StopIteration.
   Entries such as "e.g." turn a swap into an insertion. `table_embedding` keeps
   only words `w` with `words_from_text(w) == [w]`, and neighbours among them.

A fourth, packaging, failure: the 0.3.11 wheel lacks `shared/intentional_homoglyphs.txt`,
which `WordSwapHomoglyphSwap.__init__` opens (FileNotFoundError), so TextBugger cannot
be built. TextBugger's swaps use only the class's built-in homoglyph map; the file
feeds the bad-characters attack's table, left empty here (`HomoglyphSwap`).

TextAttack's USE, BERT and embedding downloads are never attempted: the embedding
is handed to the recipe before it is built, masked-LM transformations get the
built MLM, and every USE constraint is replaced before the first query.
"""
from __future__ import annotations

import contextlib
import functools
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable, Iterator

import numpy as np

from robench.data import texts_of
from robench.errors import RobenchError
from robench.progress import progress_bar
from robench.registries import ATTACKS
from robench.settings import Settings
from robench.types import AttackContext, AttackRecipe, ExampleResult, Task

log = logging.getLogger(__name__)

TEXTATTACK_VERSION = "0.3.11"  # the version whose offline failures are handled here (see the docstring)
EMBEDDING_KEY = "textattack_counterfitted_GLOVE_embedding"  # TextAttack's shared-embedding slot


@dataclass(frozen=True)
class TextAttackSpec:
    """One TextAttack recipe and the offline resources its build needs."""

    name: str  # registered as textattack:<name>
    recipe: str  # class in textattack.attack_recipes
    paper: str
    needs: frozenset[str]  # of: embedding, encoder, pos, mlm, wordnet, homoglyph
    use: tuple[str, float] | None = None  # the recipe's USE constraint: (metric, threshold)


@dataclass(frozen=True)
class TextAttackParams:
    """Knobs on top of the unchanged recipe; None keeps the recipe's own value.

    Names match robench's `textfooler` parameters, so one set configures both.
    """

    synonym_source: str = "counterfitted-glove"  # robench synonym_table source for embedding-based swaps
    query_budget: int | None = None  # per example; TextAttack stops the search when it is spent
    k: int | None = None  # max_candidates of WordSwapEmbedding / WordSwapMaskedLM
    min_cos: float | None = None  # WordEmbeddingDistance(min_cos_sim)
    similarity_threshold: float | None = None  # USE threshold on the paper's (USE) scale, mapped to the encoder
    encoder_threshold: float | None = None  # threshold on the encoder's own scale, used as is (no mapping)
    sentence_encoder: str = "minilm"  # robench encoder replacing USE: minilm (calibrated) or use-m3
    mlm: str = "built"  # masked LM for bert-attack/bae: robench's built MLM, or a hub id when online
    # "victim": queries go through the robench Victim (cache, counter, budget; dynamic padding);
    # "huggingface": TextAttack as shipped, its HuggingFaceModelWrapper on the same model (pads every
    # batch to the tokenizer's maximum length, no robench cache or budget), for speed references only
    model_wrapper: str = "victim"

    def __post_init__(self) -> None:
        if self.model_wrapper not in ("victim", "huggingface"):
            raise ValueError(f"model_wrapper must be 'victim' or 'huggingface', got {self.model_wrapper!r}")
        for name in ("query_budget", "k"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be positive, got {value}")


# --------------------------------------------------------------------------- offline import


def nltk_dir(settings: Settings) -> Path:
    """`<data_dir>/nltk_data`, first on NLTK's path (a RobenchError naming the fix when missing)."""
    from robench.resources import nltk_data_dir

    return nltk_data_dir(settings)


@contextlib.contextmanager
def offline_nltk(settings: Settings) -> Iterator[list[str]]:
    """NLTK reads `<data_dir>/nltk_data`; `nltk.download` is a no-op that records what was asked."""
    import nltk

    path = str(nltk_dir(settings))
    skipped: list[str] = []

    def no_download(info_or_id: Any = None, *args: Any, **kwargs: Any) -> bool:
        skipped.append(str(info_or_id))
        log.info("skipped nltk.download(%r): robench is offline; NLTK data comes from %s", info_or_id, path)
        return False

    original = nltk.download
    nltk.download = no_download
    try:
        yield skipped
    finally:
        nltk.download = original


def load_textattack(settings: Settings):
    """Import textattack without network (failure 1). Imported only when a recipe runs."""
    import sys

    nltk_dir(settings)  # fail fast, before any heavy import
    if "textattack" in sys.modules:
        with offline_nltk(settings):  # still point NLTK at the data dir
            return sys.modules["textattack"]
    import transformers  # noqa: F401 - fixes its cache paths before TextAttack rewrites HF_HOME

    saved = dict(os.environ)
    os.environ["TA_CACHE_DIR"] = str(settings.cache_dir / "textattack")  # post-install marker lives here
    try:
        with offline_nltk(settings):
            import textattack
    except LookupError as exc:
        raise RobenchError(f"TextAttack could not find NLTK data under {nltk_dir(settings)}: "
                           f"{str(exc).strip().splitlines()[0]}") from exc
    finally:
        os.environ.clear()  # TextAttack's cache setup rewrites HF_HOME, XDG_CACHE_HOME, TOKENIZERS_PARALLELISM
        os.environ.update(saved)
    return textattack


# --------------------------------------------------------------------------- resources as TextAttack objects


@functools.cache
def _classes():
    """TextAttack subclasses, defined on first use so that textattack stays a lazy import."""
    import torch
    from textattack.constraints.semantics.sentence_encoders import SentenceEncoder
    from textattack.models.wrappers import HuggingFaceModelWrapper, ModelWrapper
    from textattack.shared import WordEmbedding

    class VictimModelWrapper(ModelWrapper):
        """TextAttack's view of a robench Victim: inputs are str (one field) or tuples of str."""

        def __init__(self, victim, stock: bool = False) -> None:
            self.victim = victim
            self.model = victim.model  # read by TextAttack's goal-function validator
            self.tokenizer = victim.tokenizer
            self.counter = None  # the current example's robench QueryCounter
            self.stock = HuggingFaceModelWrapper(victim.model, _capped(victim)) if stock else None

        def __call__(self, text_input_list, **kwargs):
            if self.stock is not None:  # TextAttack as shipped (speed reference): bypasses the victim
                return self.stock(text_input_list)
            inputs = [x if isinstance(x, tuple) else (x,) for x in text_input_list]
            if self.counter is None:
                return self.victim.predict_proba(inputs)
            return self.victim.predict_proba(inputs, self.counter)

    class TableEmbedding(WordEmbedding):
        """WordEmbedding whose nn_matrix rows are [self, neighbours..., -1 padding].

        Without vectors (robench's "neighbors" source) a listed neighbour has cosine
        1.0 and any other pair 0.0, as in robench's own table.
        """

        def nearest_neighbours(self, index, topn):
            return [int(i) for i in super().nearest_neighbours(index, topn) if i >= 0]

        def get_cos_sim(self, a, b):
            if self.embedding_matrix is not None:
                return super().get_cos_sim(a, b)
            a, b = (self._word2index[x] if isinstance(x, str) else x for x in (a, b))
            return 1.0 if a == b or b in self.nn_matrix[a] or a in self.nn_matrix[b] else 0.0

        def get_mse_dist(self, a, b):
            if self.embedding_matrix is None:
                raise RobenchError("this recipe bounds embedding distances, which the 'neighbors' synonym source "
                                   "cannot give (it has no vectors): use synonym_source=counterfitted-glove")
            return super().get_mse_dist(a, b)

    class RobenchSentenceEncoder(SentenceEncoder):
        """robench's sentence encoder in place of a TextAttack sentence-encoder constraint."""

        def __init__(self, encoder, **kwargs) -> None:
            super().__init__(**kwargs)
            self.encoder = encoder
            self.model = self  # SentenceEncoder._sim_score calls self.model.encode

        def encode(self, sentences):
            return torch.as_tensor(np.asarray(self.encoder.embed(list(sentences)), dtype=np.float32))

        def extra_repr_keys(self):
            return ["encoder_name"] + super().extra_repr_keys()

        @property
        def encoder_name(self) -> str:
            return str(getattr(self.encoder, "info", {}).get("name", "minilm"))

    from textattack.transformations import WordSwapHomoglyphSwap

    class HomoglyphSwap(WordSwapHomoglyphSwap):
        """WordSwapHomoglyphSwap without `shared/intentional_homoglyphs.txt`, which the 0.3.11 wheel lacks.

        The constructor fills `self.homos` (what TextBugger's swaps use) and then
        reads that file for `homos_intentional`, used only by the differential-
        evolution search of the bad-characters attack; here that table stays empty.
        """

        def __init__(self, **kwargs) -> None:
            try:
                super().__init__(**kwargs)
            except FileNotFoundError:
                self.homos_intentional = {}

    return SimpleNamespace(wrapper=VictimModelWrapper, embedding=TableEmbedding, encoder=RobenchSentenceEncoder,
                           homoglyph=HomoglyphSwap)


def _capped(victim):
    """The victim's tokenizer with model_max_length at most the model's positions (the padding length of
    TextAttack's HuggingFaceModelWrapper; unchanged for MiniLM/BERT, 512 both)."""
    import copy

    tokenizer = copy.copy(victim.tokenizer)
    tokenizer.model_max_length = min(tokenizer.model_max_length, victim.model.config.max_position_embeddings)
    return tokenizer


def table_embedding(words: list[str], vectors: np.ndarray | None, nn: np.ndarray):
    """A TextAttack WordEmbedding over robench's candidate table (failures 2 and 3).

    Keeps only words that TextAttack tokenises as exactly themselves; neighbour
    lists keep their order, lose the dropped words, and start with the word itself
    (TextAttack's nn_matrix convention: column 0 is skipped).
    """
    from textattack.shared.utils import words_from_text

    keep = np.array([words_from_text(w) == [w] for w in words], dtype=bool)
    new_id = np.full(len(words), -1, dtype=np.int64)
    new_id[keep] = np.arange(int(keep.sum()))
    old_rows = np.flatnonzero(keep)
    nn = np.asarray(nn, dtype=np.int64)
    mapped = np.where(nn >= 0, new_id[np.clip(nn, 0, None)], -1)[old_rows]
    matrix = np.full((len(old_rows), nn.shape[1] + 1), -1, dtype=np.int64)
    matrix[:, 0] = np.arange(len(old_rows))
    for row, ids in enumerate(mapped):
        ids = ids[ids >= 0]
        matrix[row, 1:1 + len(ids)] = ids
    kept_words = [words[i] for i in old_rows]
    word2index = {w: i for i, w in enumerate(kept_words)}
    kept_vectors = None if vectors is None else np.asarray(vectors, dtype=np.float32)[old_rows]
    return _classes().embedding(kept_vectors, word2index, dict(enumerate(kept_words)), nn_matrix=matrix)


# --------------------------------------------------------------------------- build


@dataclass
class Built:
    attack: Any  # textattack.Attack
    wrapper: Any  # the VictimModelWrapper its goal function queries


def build_attack(spec: TextAttackSpec, victim, params: TextAttackParams, settings: Settings) -> Built:
    """`<Recipe>.build(wrapper)` with robench's offline resources, then the adjustments."""
    textattack = load_textattack(settings)
    from textattack.shared import utils as ta_utils

    from robench.resources import masked_lm

    wrapper = _classes().wrapper(victim, stock=params.model_wrapper == "huggingface")
    recipe = getattr(textattack.attack_recipes, spec.recipe)
    with contextlib.ExitStack() as stack:
        stack.enter_context(offline_nltk(settings))
        if "embedding" in spec.needs:
            stack.enter_context(_shared_embedding(ta_utils.GLOBAL_OBJECTS, _embedding(settings, params)))
        if "mlm" in spec.needs:
            mlm = masked_lm(settings, victim.device, params.mlm)
            stack.enter_context(_replaced(recipe, "WordSwapMaskedLM", lambda cls: functools.partial(
                cls, masked_language_model=mlm.model, tokenizer=mlm.tokenizer)))
        if "homoglyph" in spec.needs:
            stack.enter_context(_replaced(recipe, "WordSwapHomoglyphSwap", lambda cls: _classes().homoglyph))
        try:
            attack = recipe.build(wrapper)
        except LookupError as exc:
            raise RobenchError(f"textattack:{spec.name} needs NLTK data missing from {nltk_dir(settings)}: "
                               f"{str(exc).strip().splitlines()[0]}") from exc
    return Built(_adjust(attack, params, settings, victim.device), wrapper)


def _embedding(settings: Settings, params: TextAttackParams):
    from robench.resources import synonym_table

    table = synonym_table(settings, params.synonym_source)
    return table_embedding(list(table.words), table.vectors, table.nn)


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
    import importlib

    module = importlib.import_module(recipe.__module__)
    original = getattr(module, name)
    setattr(module, name, make(original))
    try:
        yield
    finally:
        setattr(module, name, original)


def _adjust(attack, params: TextAttackParams, settings: Settings, device):
    """Replace USE constraints, apply parameter overrides, and rebuild the Attack."""
    from textattack.constraints.semantics import WordEmbeddingDistance
    from textattack.constraints.semantics.sentence_encoders import SentenceEncoder, UniversalSentenceEncoder
    from textattack.transformations import CompositeTransformation, WordSwapEmbedding, WordSwapMaskedLM

    constraints = []
    for c in attack.pre_transformation_constraints + attack.constraints:
        if isinstance(c, UniversalSentenceEncoder):
            c = _encoder_constraint(c, params, settings, device)
        elif isinstance(c, SentenceEncoder):
            raise RobenchError(f"{type(c).__name__} needs a download; no offline substitute is wired up")
        elif isinstance(c, WordEmbeddingDistance) and params.min_cos is not None:
            if c.min_cos_sim is None:
                raise RobenchError("min_cos applies only to recipes that bound the embedding cosine")
            c.min_cos_sim = params.min_cos
        constraints.append(c)
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


def _threshold(encoder, metric: str, recipe_threshold: float, params: TextAttackParams) -> float:
    if params.encoder_threshold is not None:
        return float(params.encoder_threshold)
    paper = params.similarity_threshold if params.similarity_threshold is not None else recipe_threshold
    return float(encoder.threshold_for(paper, metric))


def _encoder_constraint(use, params: TextAttackParams, settings: Settings, device):
    from robench.resources import sentence_encoder

    encoder = sentence_encoder(settings, device, params.sentence_encoder)
    window = None if use.window_size == float("inf") else use.window_size
    threshold = _threshold(encoder, use.metric, use.threshold, params)
    return _classes().encoder(encoder, threshold=threshold, metric=use.metric,
                       compare_against_original=use.compare_against_original, window_size=window,
                       skip_text_shorter_than_window=use.skip_text_shorter_than_window)


# --------------------------------------------------------------------------- attack and result mapping


def to_example_result(index: int, label: int, result) -> ExampleResult:
    """Map a TextAttack AttackResult onto robench's ExampleResult.

    Skipped/Failed/Successful map by name. A MaximizedAttackResult (goal functions
    with no success criterion, e.g. input reduction) counts as successful when the
    final prediction differs from the gold label, else as failed.
    """
    from textattack.attack_results import (
        FailedAttackResult,
        MaximizedAttackResult,
        SkippedAttackResult,
        SuccessfulAttackResult,
    )

    original, perturbed = result.original_result, result.perturbed_result
    if isinstance(result, SkippedAttackResult):
        status = "skipped"
    elif isinstance(result, SuccessfulAttackResult):
        status = "successful"
    elif isinstance(result, FailedAttackResult):
        status = "failed"
    elif isinstance(result, MaximizedAttackResult):
        status = "successful" if int(perturbed.output) != label else "failed"
    else:
        raise TypeError(f"unknown TextAttack result type {type(result).__name__}")
    before, after = original.attacked_text, perturbed.attacked_text
    return ExampleResult(
        index=index, label=label, original_text=_joined(before), perturbed_text=_joined(after),
        original_prediction=int(original.output), perturbed_prediction=int(perturbed.output), status=status,
        queries=int(result.num_queries), num_words=len(before.words),
        words_perturbed=0 if status == "skipped" else len(before.all_words_diff(after)),
    )


def _joined(attacked_text) -> str:
    return " [SEP] ".join(attacked_text._text_input.values())


def _attack(spec: TextAttackSpec, ctx: AttackContext, params: TextAttackParams) -> list[ExampleResult]:
    from robench.victim import QueryBudgetExceeded, QueryCounter

    todo = [i for i in range(len(ctx.eval_data)) if i not in ctx.done]
    if not todo:
        return []
    built = build_attack(spec, ctx.victim, params, ctx.settings)  # imports textattack offline
    from textattack.shared.utils import set_seed
    texts, labels = texts_of(ctx.eval_data, ctx.task), [int(y) for y in ctx.eval_data["label"]]
    results = []
    with progress_bar(ctx.console) as bar:
        task_id = bar.add_task(f"textattack:{spec.name}", total=len(todo))
        for i in todo:
            set_seed(ctx.spec.seed * 1_000_003 + i)  # per example: resumed runs draw the same numbers
            built.wrapper.counter = QueryCounter(params.query_budget)
            example = OrderedDict(zip(ctx.task.text_fields, texts[i]))
            try:
                result = to_example_result(i, labels[i], built.attack.attack(example, labels[i]))
            except QueryBudgetExceeded as exc:  # backstop: TextAttack's own budget stops first
                result = _error_result(i, labels[i], texts[i], "failed", exc, built.wrapper.counter.used)
            except Exception as exc:  # noqa: BLE001 - one bad example must not stop the run
                log.warning("textattack:%s failed on example %d: %s", spec.name, i, exc)
                result = _error_result(i, labels[i], texts[i], "error", exc, built.wrapper.counter.used)
            ctx.record(result)
            results.append(result)
            bar.advance(task_id)
    return results


def _error_result(index: int, label: int, text: tuple[str, ...], status: str, exc: BaseException,
                  queries: int) -> ExampleResult:
    joined = " [SEP] ".join(text)
    return ExampleResult(index=index, label=label, original_text=joined, perturbed_text=joined,
                         original_prediction=-1, perturbed_prediction=-1, status=status, queries=queries,
                         num_words=len(joined.split()), error=f"{type(exc).__name__}: {exc}")


def _check(spec: TextAttackSpec, task: Task, params: TextAttackParams, settings: Settings) -> None:
    from robench import resources

    if "encoder" in spec.needs and params.sentence_encoder not in resources.ENCODERS:
        raise RobenchError(f"unknown sentence_encoder {params.sentence_encoder!r} "
                           f"(known: {', '.join(resources.ENCODERS)})")
    if "embedding" in spec.needs:
        resources.require_synonym_source(settings, params.synonym_source)
    if "mlm" in spec.needs and params.mlm == resources.BUILT_MLM:
        resources.require_built_mlm(settings)



def _resources(spec: TextAttackSpec, params: TextAttackParams, settings: Settings) -> dict[str, Any]:
    """Every resource the recipe used, with the substitutes for TextAttack's downloads."""
    import torch

    route = ("the robench victim" if params.model_wrapper == "victim" else "TextAttack's HuggingFaceModelWrapper "
             "(as shipped: pads to the maximum length; no robench cache or budget)")
    from importlib.metadata import version

    out: dict[str, Any] = {"backend": f"textattack {version('textattack')}, {spec.recipe}.build(), queries through "
                                      f"{route}"}
    device = torch.device("cpu")
    if "embedding" in spec.needs:
        from robench.resources import synonym_table

        out["synonyms"] = {"substitutes": "counter-fitted PARAGRAM-SL999 (TextAttack paragramcf)",
                           "used": synonym_table(settings, params.synonym_source).info,
                           "vocabulary": "words TextAttack tokenises as one word (words_from_text(w) == [w])"}
    if "encoder" in spec.needs:
        from robench.resources import sentence_encoder

        encoder = sentence_encoder(settings, device, params.sentence_encoder)
        metric, recipe_threshold = spec.use
        out["sentence_encoder"] = {"substitutes": "Universal Sentence Encoder (TF Hub)", "used": encoder.info,
                                   "metric": metric, "recipe_threshold": recipe_threshold,
                                   "threshold": _threshold(encoder, metric, recipe_threshold, params)}
    if "mlm" in spec.needs:
        from robench.resources import masked_lm

        out["masked_lm"] = {"substitutes": "bert-base-uncased", "used": masked_lm(settings, device, params.mlm).info}
    if "homoglyph" in spec.needs:
        out["homoglyphs"] = ("WordSwapHomoglyphSwap's built-in map; shared/intentional_homoglyphs.txt (missing from "
                             "the 0.3.11 wheel, used only by the bad-characters attack) left empty")
    nltk_parts = ["stopwords"] + [p for p, need in (("averaged perceptron POS tagger, universal tagset", "pos"),
                                                    ("WordNet 3.0", "wordnet")) if need in spec.needs]
    out["nltk"] = {"data": str(nltk_dir(settings)), "used": nltk_parts, "downloads": "disabled"}
    return out


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


def _entry(spec: TextAttackSpec) -> AttackRecipe:
    return AttackRecipe(
        name=f"textattack:{spec.name}",
        summary=f"TextAttack {TEXTATTACK_VERSION} {spec.recipe} ({spec.paper}) on offline resources; reference backend",
        attack=functools.partial(_attack, spec), params=TextAttackParams, check=functools.partial(_check, spec),
        resources=functools.partial(_resources, spec),
    )


for _spec in SPECS:
    ATTACKS.register(f"textattack:{_spec.name}")(_entry(_spec))
