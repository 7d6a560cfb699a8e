"""`bert-attack`: BERT-Attack (Li et al., 2020), run by robench's concurrent engine.

Li, Ma, Guo, Xue and Qiu, "BERT-ATTACK: Adversarial Attack Against BERT Using
BERT", EMNLP 2020. https://arxiv.org/abs/2004.09984

* word importance: I_w = o_y(S) - o_y(S with w replaced by [MASK]); words are
  attacked from the most important down;
* candidates: the original text (unmasked) goes once through a masked LM; a word
  that is one sub-word gets the K = 48 most likely tokens at its position (pieces
  starting with "##" dropped); a word of t > 1 sub-words gets the K combinations
  of the per-position top-K sub-words with the lowest perplexity under the MLM's
  output at those positions, exp(-mean log p), joined and "##"-stripped. The
  top-K of the K^t combinations is found exactly by a beam of width K over the
  positions (a combination in the top K has its prefix in the top K of its
  length, since the scores add up), so the cost is O(t K^2) and never K^t;
* filters: stopwords (the paper's `filter_words`, the same list as TextFooler's),
  the word itself, candidates that are not one word, and, on sentiment tasks,
  antonyms: the paper filters them with the counter-fitted synonym dictionary
  because an MLM proposes antonyms as readily as synonyms; robench drops every
  candidate that is a listed antonym of the word in any inflection, either
  direction (Mrkšić PPDB and WordNet lists, WordNet lemma antonyms and WordNet's
  indirect adjective antonyms; `filter_antonyms`, on by default for every task);
* valid synonyms (`valid_synonyms`, default on; not in the paper): an MLM candidate
  is kept only if TextFooler's valid-synonym test accepts it at the same budget:
  it is one of the word's K listed synonyms in the `lexicon` table (the K and
  word-cosine bound of the setting), its part of speech in context matches the
  word's (the tagger, nouns and verbs may swap) and it has a WordNet sense in
  that part of speech (`wordnet_pos`). The MLM still proposes and orders the
  candidates, so a swap must be both fluent in context and a synonym. Without it
  (`valid_synonyms=false`, the paper's), the offline MLM's top K are mostly fluent
  words of another meaning: 4% of the v3 reference's BERT-Attack swaps were listed
  synonyms and every model fell to 1-2% (docs/studies/attacks.md, "Valid attacks");
* at most 40% of the words change (the `paper` budget): the text may differ from
  the original in at most ceil(0.4 * words) words (TextAttack's MaxWordsPerturbed;
  `max_modification_rate`);
* sentence similarity of the whole candidate text to the original >= 0.2
  (cosine), as TextAttack's recipe (UniversalSentenceEncoder(threshold=0.2,
  metric="cosine", compare_against_original=True, window_size=None));
* budget (`budget`, robench.engine.budgets): the default is TextDefender's
  setting, which replaces the three values above by K = 50, at most 30% of the
  words, USE 0.840845057 (angular) on 15-word windows against the text before the
  swap, and at most 50 x words queries (TextDefender adds that constraint to every
  attack; its 30% is tighter than the paper's 40%); `budget=morris2020` adds a
  word cosine >= 0.9 in the lexicon table's counter-fitted space (MLM candidates
  outside its vocabulary fail) and sentence cosine >= 0.98 (mapped to MiniLM);
  `budget=natural` adds to those the filters of robench.engine.natural (docs/guide/natural.md),
  after the candidate filter; `budget=paper` is the paper's;
* greedy: at each word, take the candidate with the lowest gold probability if
  it lowers it; stop when the label flips (then the most similar flipping candidate).

Deviations (all recorded in the run record):

* masked LM: offline no `bert-base-uncased` MLM exists, so robench builds one
  from the packaged MiniLM (`robench resources build-mlm`); its held-out
  masked-token accuracy is recorded beside every result (a real BERT-base MLM
  reaches about 0.6, the offline build less), so candidates are weaker than the
  paper's;
* sentence similarity: the packaged MiniLM instead of the Universal Sentence
  Encoder, threshold mapped by `robench.engine.resources` (`threshold_for(0.2, "cosine")`);
* importance uses probabilities, 1 - p(gold), not raw logits o_y (the victim
  returns probabilities; TextAttack does the same), and only non-stopword
  words are ranked (they are the only ones that can change);
* search: the paper accepts the first candidate (in MLM order) that flips the
  label, else the best; robench, like TextAttack's recipe, scores all K
  candidates of the word (one batch) and takes the best, and among
  label-flipping candidates the most similar one;
* multi-sub-word perplexity is read from the single MLM pass over the original
  text (as TextAttack); the authors' code re-scores each combination with a
  second MLM pass over the sub-words alone. TextAttack enumerates all K^t
  combinations and (a bug) never sorts them; robench takes the exact top K;
* candidates come from the original text once per example (as the paper's
  code); TextAttack re-runs the MLM on the current text at every step;
* the MLM sees at most `mlm_max_length` sub-words; words past that get no
  candidates; pair tasks perturb only their last text field;
* candidates are cased like the word they replace (the MLM is uncased);
* K = 48 as in the paper (TextAttack's recipe lowered it to 8 for speed);
* search (`beam_width`, default 1: the paper's greedy search): above 1, the beam search in word-importance
  order of Yoo et al. (BlackboxNLP 2020; `robench.engine.beam`, its deviations listed there); with
  `population_size` above 0 (`population_search`, `generations`, `lm_top_k`), the genetic search of Alzantot et
  al. (EMNLP 2018) or the particle swarm of Zang et al. (ACL 2020) (`robench.engine.population`, their
  deviations listed there);
* query budget (`query_budget`, default none): a request over it is refused
  whole and the example is a failed attack.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Generator

import numpy as np

from robench.attacks.common import (
    SearchParams,
    apply_budget,
    check_fluency,
    check_threshold,
    describe_encoder,
    describe_fluency,
    describe_stopwords,
    info_of,
    load_fluency,
    load_wordnet_pos,
    search_knobs,
    setting_constraints,
    validate_encoder_params,
    validate_search_params,
)
from robench.core.params import bounded
from robench.core.paths import Settings
from robench.engine import resources
from robench.engine.attack import ATTACKS, Profile
from robench.engine.budgets import DEFAULT_BUDGET, budget_setting
from robench.engine.constraints import (
    ContextTags,
    ListedSynonym,
    NotAntonym,
    PartOfSpeech,
    RepeatModification,
    Stopwords,
    Swap,
    WordNetPartOfSpeech,
    WordNetPos,
)
from robench.engine.fluency import Fluency
from robench.engine.natural import (
    NaturalFilters,
    check_natural,
    load_natural,
    natural_constraints,
    natural_resources,
)
from robench.engine.natural import describe as describe_natural
from robench.engine.recipe import Composition, Greedy, SwapsOf, Transformation, WordSwapRecipe
from robench.engine.resources.lexicon import lexicon
from robench.engine.scheduler import Request
from robench.engine.search import Importance
from robench.engine.words import Words, is_one_word, recover_case, split_words

# The paper's own values (the `paper` budget setting): K = 48, 40% of the words, whole-text cosine 0.2 against
# the original (TextAttack's recipe; window 0 = the whole text), no word-cosine bound, no query budget.
PAPER_VALUES = {"k": 48, "max_modification_rate": 0.4, "min_cos": -1.0, "similarity_metric": "cosine",
                "similarity_threshold": 0.2, "window": 0, "skip_shorter_than_window": False}


@dataclass(frozen=True)
class BertAttackParams(SearchParams):
    """Knobs left at None take the `budget` setting's value (robench.engine.budgets), else the paper's; the
    search's own knobs (concurrency, query budget, ...) come from `SearchParams`."""

    budget: str = DEFAULT_BUDGET  # textdefender (default), morris2020, natural or paper (robench.engine.budgets)
    k: int | None = bounded(None, 1, 1000)  # MLM candidates per word (paper: 48)
    masked_lm: str = "built"  # the MLM built by `robench resources build-mlm`, or a hub id (bert-base-uncased)
    sentence_encoder: str = "minilm"  # or "use-m3" (USE multilingual v3, paper thresholds unchanged)
    max_modification_rate: float | None = bounded(None, 0, 1, low_open=True)  # share of words: ceil(this * words)
    filter_antonyms: bool = True  # the paper's antonym filter (Mrkšić lists + WordNet, any inflection)
    valid_synonyms: bool = True  # keep only MLM candidates TextFooler's synonym test accepts (False: the paper's)
    min_cos: float | None = bounded(None, -1, 1)  # word cosine in the lexicon table's counter-fitted space
    similarity_threshold: float | None = bounded(None, -1, 1)  # the paper's (USE) value; mapped to the encoder
    similarity_metric: str | None = None
    window: int | None = bounded(None, 0, 1000)  # 0: whole text against the original; n: n-word windows
    skip_shorter_than_window: bool | None = None
    encoder_threshold: float | None = bounded(None, -1, 1)  # on the encoder used; None: mapped from the above
    importance_token: str = "[MASK]"  # replaces a word to measure its importance
    mlm_max_length: int = bounded(256, 3, 512)  # sub-words the MLM sees (incl. [CLS]/[SEP])
    mlm_batch_size: int = bounded(8, 1, 4096)

    def __post_init__(self) -> None:
        apply_budget(self, PAPER_VALUES)
        validate_encoder_params(self)
        validate_search_params(self)
        if self.k < 1 or self.mlm_max_length < 3 or self.mlm_batch_size < 1 or self.concurrency < 1:
            raise ValueError("k, mlm_batch_size and concurrency must be positive, mlm_max_length >= 3")


@dataclass
class BertAttackResources:
    """The loaded resources (tests pass small fakes with the same methods)."""

    stopwords: frozenset[str]
    mlm: Any  # .model (BertForMaskedLM), .tokenizer, .info
    encoder: Any  # .embed(texts) -> L2-normalised rows; .threshold_for(paper_threshold, metric)
    antonyms: Any = None  # .is_antonym(a, b, indirect) (robench.engine.resources.lexicon); None: no filter
    word_space: Any = None  # the lexicon table: .cos(a, b) (min_cos > -1), .neighbours(word, k, min_cos)
    tagger: Any = None  # .tag(words) -> universal tags (valid_synonyms)
    senses: WordNetPos | None = None  # the WordNet part-of-speech check (valid_synonyms)
    natural: NaturalFilters | None = None  # the `natural` setting's filters; None: another setting
    fluency: Fluency | None = None  # the language model's constraint (`fluency_max_drop`); None: off


def uses(params: BertAttackParams) -> dict[str, str]:
    """The resources (robench.engine.resources.identity) whose version can change what the attack finds."""
    out = {"stopwords": "default", "masked-lm": params.masked_lm, "sentence-encoder": params.sentence_encoder}
    if params.filter_antonyms or params.valid_synonyms:
        out["lexicon"] = "default"
    if params.min_cos > -1 or params.valid_synonyms:
        out["synonyms"] = "lexicon"
    if params.valid_synonyms:
        out["pos-tagger"] = "default"
    if params.fluency_max_drop is not None:
        out["causal-lm"] = "default"
    return {**out, **(natural_resources() if budget_setting(params.budget).natural_filters else {})}


def load_resources(params: BertAttackParams, settings: Settings, device) -> BertAttackResources:
    needs_table = params.min_cos > -1 or params.valid_synonyms
    return BertAttackResources(resources.stopwords(settings),
                               resources.masked_lm(settings, device, params.masked_lm),
                               resources.sentence_encoder(settings, device, params.sentence_encoder),
                               lexicon(settings) if params.filter_antonyms else None,
                               resources.synonym_table(settings, "lexicon") if needs_table else None,
                               resources.pos_tagger(settings) if params.valid_synonyms else None,
                               load_wordnet_pos(settings) if params.valid_synonyms else None,
                               load_natural(settings, device) if budget_setting(params.budget).natural_filters
                               else None, load_fluency(params, settings, device))


@dataclass(frozen=True)
class MaskedLMSwap(Transformation):
    """BERT-Attack's candidates: the original text goes once through the masked LM (the engine's "mlm" service,
    `MlmCandidates`), and word i's candidates are its row of that table."""

    def start(self, original: Words) -> Generator[Request, Any, SwapsOf]:
        table: list[list[str]] = (yield Request("mlm", [original.field_text]))[0]
        return lambda current, original, i: [Swap(i, word) for word in table[i]]


def top_combinations(logp: np.ndarray, ids: np.ndarray, k: int) -> list[tuple[tuple[int, ...], float]]:
    """The k most likely sub-word combinations, one token per position, best first.

    `logp[p, j]` is the log-probability of token `ids[p, j]` at position p (each
    row sorted best first). A combination scores the sum of its log-probabilities
    (lowest perplexity first). Exact, by a beam of width k: O(positions * k * width).
    """
    beam_ids = np.zeros((1, 0), dtype=np.int64)
    beam_scores = np.zeros(1)
    for pos in range(logp.shape[0]):
        total = (beam_scores[:, None] + logp[pos][None, :]).ravel()
        keep = np.argsort(-total, kind="stable")[:k]
        rows, cols = np.divmod(keep, logp.shape[1])
        beam_ids = np.concatenate([beam_ids[rows], ids[pos][cols][:, None]], axis=1)
        beam_scores = total[keep]
    return [(tuple(int(t) for t in row), float(s)) for row, s in zip(beam_ids, beam_scores)]


class MlmCandidates:
    """A `Service`: for each text, the BERT-Attack candidate words of each of its words."""

    def __init__(self, mlm: Any, params: BertAttackParams, stopwords: frozenset[str]) -> None:
        self.model, self.tokenizer = mlm.model.eval(), mlm.tokenizer
        self.params, self.stopwords = params, stopwords
        self.device = next(self.model.parameters()).device

    def __call__(self, fields: list[str]) -> list[list[list[str]]]:
        out: list[list[list[str]]] = []
        for start in range(0, len(fields), self.params.mlm_batch_size):
            out += self._batch(fields[start:start + self.params.mlm_batch_size])
        return out

    def _layout(self, text: str) -> tuple[list[int], list[tuple[int, int] | None]]:
        """Input ids ([CLS] sub-words [SEP]) and each word's sub-word span (None: cut off)."""
        ids, spans, limit = [self.tokenizer.cls_token_id], [], self.params.mlm_max_length - 1
        for word in split_words(text):
            pieces = self.tokenizer.convert_tokens_to_ids(self.tokenizer.tokenize(word))
            if not pieces or len(ids) + len(pieces) > limit:
                spans.append(None)
                continue
            spans.append((len(ids), len(ids) + len(pieces)))
            ids += pieces
        return ids + [self.tokenizer.sep_token_id], spans

    def _batch(self, fields: list[str]) -> list[list[list[str]]]:
        import torch  # here, not at the top: naming the recipe (labels, `robench list`) needs no torch

        layouts = [self._layout(text) for text in fields]
        width = max(len(ids) for ids, _ in layouts)
        input_ids = torch.full((len(fields), width), self.tokenizer.pad_token_id, dtype=torch.long)
        mask = torch.zeros_like(input_ids)
        for row, (ids, _) in enumerate(layouts):
            input_ids[row, :len(ids)], mask[row, :len(ids)] = torch.tensor(ids), 1
        with torch.inference_mode():
            logits = self.model(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device)).logits
            logp = torch.log_softmax(logits.float(), dim=-1)
            top_logp, top_ids = logp.topk(self.params.k, dim=-1)
        top_logp, top_ids = top_logp.cpu().numpy(), top_ids.cpu().numpy()
        words_of = [split_words(text) for text in fields]
        return [[self._words(word, span, top_logp[row], top_ids[row]) for word, span in zip(words, layout[1])]
                for row, (words, layout) in enumerate(zip(words_of, layouts))]

    def _words(self, word: str, span: tuple[int, int] | None, top_logp: np.ndarray, top_ids: np.ndarray
               ) -> list[str]:
        if span is None:
            return []
        start, end = span
        if end - start == 1:
            tokens = self.tokenizer.convert_ids_to_tokens(top_ids[start].tolist())
            tokens = [t for t in tokens if not t.startswith("##")]
        else:
            combos = top_combinations(top_logp[start:end], top_ids[start:end], self.params.k)
            tokens = ["".join(self.tokenizer.convert_ids_to_tokens(list(c))).replace("##", "") for c, _ in combos]
        out = []
        for token in tokens:
            new = recover_case(token, word)
            if new.lower() != word.lower() and token.lower() not in self.stopwords and is_one_word(new) \
                    and new not in out:
                out.append(new)
        return out


def check(task: Any, params: BertAttackParams, settings: Settings) -> None:
    """Before training: the threshold maps, the stopwords are there and so is the built MLM (if used)."""
    check_threshold(params)
    resources.stopwords(settings)
    resources.require_masked_lm(settings, params.masked_lm)
    if params.valid_synonyms:
        resources.check_pos_tagger(settings)
        resources.require_synonym_source(settings, "lexicon")
        lexicon(settings)
    if budget_setting(params.budget).natural_filters:
        check_natural(settings)
    check_fluency(params, settings)


def compose(params: BertAttackParams, res: BertAttackResources, profile: Profile | None = None, victim=None
            ) -> Composition:
    """BERT-Attack as a declaration; `profile` hears the time spent filtering candidates and POS tagging."""
    profile = profile or Profile()
    tags = ContextTags(res.tagger, profile)
    synonyms = params.valid_synonyms
    return Composition(
        transformation=MaskedLMSwap(),
        constraints=[Stopwords(res.stopwords), RepeatModification(),
                     *setting_constraints(params, res.encoder, res.word_space),
                     NotAntonym(res.antonyms) if res.antonyms is not None else None,  # filter_antonyms
                     ListedSynonym(res.word_space, params.k, params.min_cos) if synonyms else None,
                     WordNetPartOfSpeech(tags, res.senses) if synonyms and res.senses is not None else None,
                     PartOfSpeech(tags, allow_verb_noun_swap=True) if synonyms else None,
                     *natural_constraints(res.natural, profile, params), res.fluency],
        search=Greedy(lambda: Importance(lambda words, i: words.replace(i, params.importance_token)),
                      **search_knobs(params)),
        services={} if res.mlm is None else {"mlm": MlmCandidates(res.mlm, params, res.stopwords)},
        profile=profile)


def describe(params: BertAttackParams, res: BertAttackResources) -> dict[str, Any]:
    """The run record's `resources.attack`: the MLM (and its held-out accuracy), encoder, stopwords, and the
    antonym lexicon and word space of the candidate filter (None when off)."""
    mlm = dict(info_of(res.mlm, {}))
    return {"masked_lm": mlm, "masked_lm_heldout_accuracy": mlm.get("heldout_masked_accuracy"),
            "sentence_encoder": describe_encoder(params, res.encoder),
            "stopwords": describe_stopwords(res.stopwords),
            "antonym_filter": None if res.antonyms is None else info_of(res.antonyms, {"name": "antonym lists"}),
            "word_space": None if res.word_space is None else info_of(res.word_space, {"name": "word space"}),
            "pos_tagger": None if res.tagger is None else info_of(res.tagger, "pos tagger"),
            "wordnet_pos": "WordNet 3.0 synset parts of speech (nltk_data)" if res.senses is not None else None,
            "natural": describe_natural(res.natural), "fluency": describe_fluency(res.fluency)}


RECIPE = ATTACKS.register("bert-attack")(WordSwapRecipe(
    name="bert-attack",
    summary="BERT-Attack (Li et al., 2020): masked-LM candidates (K=48, exact top-K sub-word combinations) that "
            "are valid synonyms, importance by [MASK], <=40% words, greedy; batched across examples",
    params=BertAttackParams, check=check, load_resources=load_resources, describe=describe, compose=compose,
    resources=uses,
    # (queries - examples) / words over the v3 reference's 9,900 attacked SST-2 inputs at the default setting
    query_cost_per_word=0.73,  # (docs/studies/presets.md, "Queries per word")
    load_seconds=5.5,  # (docs/studies/presets.md, "The attack's fixed cost")
))
