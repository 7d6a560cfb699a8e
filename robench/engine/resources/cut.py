"""TextFooler's word resources cut to the words of given texts, so that they travel where the whole do not (a lent
GPU machine: docs/studies/gpu.md).

The "lexicon" synonym table (60 MB, and GloVe to find it), WordNet and the lists its relations are read from are
too large to send. For a known set of texts an attack only ever asks about the words of those texts and their
candidates, so `write_cut` keeps exactly that:

* `table/`: the lexicon table's rows of the texts' words (lower-cased, as `SynonymSwap` asks), their candidate
  lists as they are, and the vectors of those words and candidates (`cos` between any two of them is the whole
  table's);
* `relations.json`: the lexicon's relations whole (synonyms, antonyms, morphology: the swap audit);
* `pos.json`: WordNet's parts of speech of every word of the cut table (the `wordnet_pos` check).

`ROBENCH_LEXICON_CUT=DIR` makes `synonym_table(settings, "lexicon")` and `lexicon(settings)` read DIR instead
of the data dir and the cache. A word outside the cut is refused with a RobenchError, never answered as unknown:
the cut gives the whole resources' answers for its texts and no answer for anything else. Every record's
`resources.attack.synonyms.cut` names the cut (its words' SHA-256 and count) and the whole table's key.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from robench.core.errors import RobenchError
from robench.core.manifest import folder_problem, write_manifest
from robench.engine.resources.tables import SynonymTable, _load_table, _save_table
from robench.engine.words import split_words

CUT_ENV = "ROBENCH_LEXICON_CUT"
TABLE, RELATIONS, POS, COVERED = "table", "relations.json", "pos.json", "covered.json"


def cut_dir() -> Path | None:
    """The cut named by `ROBENCH_LEXICON_CUT` (verified against its manifest), or None when it is unset."""
    value = os.environ.get(CUT_ENV)
    if not value:
        return None
    return _verified(Path(value))


@functools.lru_cache(maxsize=4)
def _verified(folder: Path) -> Path:
    problem = folder_problem(folder) if folder.is_dir() else f"{folder} is not a folder"
    if problem is not None:
        raise RobenchError(f"{CUT_ENV}={folder} is no usable cut ({problem}): write it again with "
                           "robench.engine.resources.cut.write_cut")
    return folder


def text_words(texts: Iterable[str]) -> list[str]:
    """The lower-cased words of `texts` as the attacks split them (sorted, once each)."""
    return sorted({w.lower() for text in texts for w in split_words(text)})


class CutTable(SynonymTable):
    """A synonym table that answers for the words it was cut to (`covered`) and their candidates, and refuses
    any other word."""

    covered: frozenset[str]

    def _refuse(self, word: str) -> RobenchError:
        return RobenchError(f"{word!r} is outside the synonym table cut to {len(self.covered)} words "
                            f"({self.info['cut']['words_sha256'][:12]}): unset {CUT_ENV} to use the whole table")

    def neighbours(self, word: str, k: int = 50, min_cos: float = 0.5) -> list[tuple[str, float]]:
        if word not in self.covered:  # a candidate's own row was not kept
            raise self._refuse(word)
        return super().neighbours(word, k, min_cos)

    def cos(self, a: str, b: str) -> float | None:
        for word in (a, b):
            if word not in self.covered and word not in self.index:
                raise self._refuse(word)
        return super().cos(a, b)


def cut_table(table: SynonymTable, words: list[str]) -> tuple[SynonymTable, list[str]]:
    """`table` restricted to the rows of `words` (those it knows) and their candidates; returns it and the
    covered words (all of `words`: a word the table does not know is covered as unknown)."""
    rows = [table.index[w] for w in words if w in table.index]
    candidates = {int(j) for i in rows for j in table.nn[i] if j >= 0}
    keep = sorted(set(rows) | candidates)
    new_id = np.full(len(table.words), -1, dtype=np.int32)
    new_id[keep] = np.arange(len(keep), dtype=np.int32)
    nn = np.full((len(keep), table.nn.shape[1]), -1, dtype=np.int32)
    nn_cos = np.full(nn.shape, -np.inf, dtype=np.float32)
    for i in rows:
        nn[new_id[i]] = np.where(table.nn[i] >= 0, new_id[np.clip(table.nn[i], 0, None)], -1)
        nn_cos[new_id[i]] = table.nn_cos[i]
    vectors = None if table.vectors is None else np.asarray(table.vectors)[keep]
    return SynonymTable([table.words[i] for i in keep], vectors, nn, nn_cos, dict(table.info)), list(words)


def write_cut(table: SynonymTable, relations: Path, wordnet: Any, texts: Iterable[str], target: Path,
              describe: dict[str, Any]) -> dict[str, Any]:
    """Write the cut of `table` (the lexicon table), the relations file `relations` (copied whole) and the parts
    of speech `wordnet.synsets` gives each word of the cut table, for `texts`, into `target` (replaced whole);
    `describe` (what the texts are) goes into the cut's description, which is returned."""
    words = text_words(texts)
    small, covered = cut_table(table, words)
    digest = hashlib.sha256("\n".join(covered).encode()).hexdigest()
    cut = {**describe, "words": len(covered), "words_sha256": digest, "rows": int((small.nn[:, 0] >= 0).sum()),
           "table_words": len(small.words), "of": {k: table.info.get(k) for k in ("key", "format", "vocabulary")}}
    small.info = {**{k: v for k, v in table.info.items() if k != "path"}, "cut": cut}
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    _save_table(target / TABLE, small.words, small.vectors, small.nn, small.nn_cos, small.info)
    (target / TABLE / COVERED).write_text(json.dumps(covered), encoding="utf-8")
    write_manifest(target / TABLE)
    shutil.copyfile(relations, target / RELATIONS)
    pos = {w: sorted({s.pos() for s in wordnet.synsets(w)}) for w in small.words}
    (target / POS).write_text(json.dumps(pos, sort_keys=True), encoding="utf-8")
    write_manifest(target)
    return cut


def load_cut_table(folder: Path) -> CutTable:
    loaded = _load_table(folder / TABLE)
    table = CutTable(loaded.words, loaded.vectors, loaded.nn, loaded.nn_cos, loaded.info)
    table.covered = frozenset(json.loads((folder / TABLE / COVERED).read_text(encoding="utf-8")))
    return table


def load_cut_relations(folder: Path) -> dict[str, Any]:
    return json.loads((folder / RELATIONS).read_text(encoding="utf-8"))


class PartOfSpeech:
    """What `WordNetPos` reads of a synset: its part of speech."""

    def __init__(self, pos: str) -> None:
        self._pos = pos

    def pos(self) -> str:
        return self._pos


class CutWordNet:
    """The cut's WordNet: `_morphy` from the relations' morphology (as `lexicon.CachedWordNet`), `synsets(word)`
    only for the words of the cut table (one stand-in per part of speech: what `WordNetPos` asks)."""

    def __init__(self, morphy: Any, folder: Path) -> None:
        self._morphy = morphy
        self._pos: dict[str, list[str]] = json.loads((folder / POS).read_text(encoding="utf-8"))

    def synsets(self, word: str, pos: str | None = None) -> list[PartOfSpeech]:
        if pos is not None or word not in self._pos:
            raise RobenchError(f"WordNet in the cut {os.environ.get(CUT_ENV)} knows the parts of speech of its "
                               f"words only, not {word!r}" + (f" as {pos!r}" if pos else ""))
        return [PartOfSpeech(p) for p in self._pos[word]]
