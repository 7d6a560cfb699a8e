"""robench's victim and offline resources as TextAttack objects.

Imports textattack at module level: import this module only after
`compat.load_textattack(settings)` has imported textattack offline (as
`recipes.build_attack` does), never from the package's `__init__`.

* `VictimModelWrapper`: the ModelWrapper every query goes through (the robench
  Victim's cache, per-example counter and budget), or TextAttack's stock
  HuggingFaceModelWrapper for speed references;
* `table_embedding` / `TableEmbedding`: robench's synonym table as a
  `WordEmbedding`. TextAttack 0.3.11 fails on it in two ways, both fixed here:
  `WordEmbedding.nearest_neighbours` without an `nn_matrix` slices the result of
  `torch.topk` (a (values, indices) tuple) and crashes, so the matrix is always
  supplied; and a vocabulary entry that is not exactly one TextAttack word breaks
  the sentence-encoder window (`SentenceEncoder._score_list` takes
  `next(iter(newly_modified_indices))`; a pure-punctuation "synonym" turns a swap
  into a deletion, leaving that set empty: StopIteration; "e.g." turns it into an
  insertion), so only words `w` with `words_from_text(w) == [w]` are kept;
* `RobenchSentenceEncoder`: robench's sentence encoder in place of USE;
* `HomoglyphSwap`: TextBugger's homoglyph swap without the data file the 0.3.11
  wheel lacks (`shared/intentional_homoglyphs.txt`).
"""
from __future__ import annotations

import copy

import numpy as np
import torch
from textattack.constraints.semantics.sentence_encoders import SentenceEncoder
from textattack.models.wrappers import HuggingFaceModelWrapper, ModelWrapper
from textattack.shared import WordEmbedding
from textattack.shared.utils import words_from_text
from textattack.transformations import WordSwapHomoglyphSwap

from robench.classifier.victim import QueryCounter, Victim
from robench.core.errors import RobenchError


class VictimModelWrapper(ModelWrapper):
    """TextAttack's view of a robench Victim: inputs are str (one field) or tuples of str."""

    def __init__(self, victim: Victim, stock: bool = False) -> None:
        self.victim = victim
        self.model = victim.model  # read by TextAttack's goal-function validator
        self.tokenizer = victim.tokenizer
        self.counter: QueryCounter | None = None  # the current example's queries and budget
        self.stock = HuggingFaceModelWrapper(victim.model, capped_tokenizer(victim)) if stock else None

    def __call__(self, text_input_list, **kwargs):
        if self.stock is not None:  # TextAttack as shipped (speed reference): bypasses the victim
            return self.stock(text_input_list)
        inputs = [x if isinstance(x, tuple) else (x,) for x in text_input_list]
        return self.victim.predict_proba(inputs, self.counter)


def capped_tokenizer(victim: Victim):
    """The victim's tokenizer with model_max_length at most the model's positions (the padding length of
    TextAttack's HuggingFaceModelWrapper; unchanged for MiniLM/BERT, 512 both)."""
    tokenizer = copy.copy(victim.tokenizer)
    tokenizer.model_max_length = min(tokenizer.model_max_length, victim.model.config.max_position_embeddings)
    return tokenizer


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
                               "cannot give (it has no vectors): use synonym_source=lexicon")
        return super().get_mse_dist(a, b)


def table_embedding(words: list[str], vectors: np.ndarray | None, nn: np.ndarray) -> TableEmbedding:
    """A TextAttack WordEmbedding over robench's candidate table.

    Keeps only words that TextAttack tokenises as exactly themselves; neighbour
    lists keep their order, lose the dropped words, and start with the word itself
    (TextAttack's nn_matrix convention: column 0 is skipped).
    """
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
    return TableEmbedding(kept_vectors, word2index, dict(enumerate(kept_words)), nn_matrix=matrix)


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
