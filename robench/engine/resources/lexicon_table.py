"""The default candidate-synonym table, "lexicon": listed synonyms only, ranked in a counter-fitted space.

Why (measured in docs/studies/resources.md): the nearest neighbours of a 50-dimensional space are topical relatives, not
synonyms (counter-fitted GloVe-50d: SimLex-999 rho 0.383; its top-50 at cos >= 0.5 propose 17.6% of SimLex's
dissimilar pairs), and the real counter-fitted PARAGRAM-SL999 vectors (rho 0.74) are not offline. So the
candidates of a word w are its listed synonyms, and the vector space only ranks and bounds them:

1. candidates: the synonyms of w in the Alzantot et al. neighbour sets (from the real counter-fitted vectors,
   cos >= 0.875), Mrkšić et al.'s PPDB synonym list and WordNet 3.0 synsets (`lexicon.Lexicon`), both
   directions, lower-case alphabetic words;
2. minus antonyms: any pair listed as antonyms in any inflection, either direction, in the Mrkšić PPDB/WordNet
   lists or WordNet (indirect adjective antonyms included: "awful" ~ "bad" <-> "good");
3. part-of-speech agreement: when both words are in WordNet they must share a part of speech (satellite
   adjectives count as adjectives); the attacks' contextual POS check comes on top;
4. ranking and cosine: GloVe 6B 50d (the `vocab_size` most frequent lower-case alphabetic words) counter-fitted
   (Mrkšić et al. 2016, `counterfit.py`, the paper's hyperparameters) with the kept synonym pairs as attract
   constraints and every antonym pair as repel constraints; each word's candidates are sorted by that cosine,
   most similar first, at most `k`; words outside that vocabulary have no candidates.

A recipe's `k` and `min_cos` then act on this table as on TextFooler's (K nearest with cos >= min_cos). The
build takes a few minutes on a CPU and is cached under `<cache_dir>/resources/lexicon-<key>`.
"""
from __future__ import annotations

import time

import numpy as np

from robench.core.paths import Settings
from robench.core.progress import expected_seconds, phase
from robench.engine.resources.files import FORMAT, cached_build, resources_dir
from robench.engine.resources.lexicon import ALZANTOT_FILE, ANTONYM_FILES, PPDB_SYNONYMS, Lexicon, lexicon

VOCAB_SIZE = 100_000
K = 50
WORDNET_DIR = "nltk_data/corpora/wordnet"  # an input of the lexicon (hashed into its cache key)
LEXICON_BUILD_SECONDS = 49  # building the table on the reference machine idle, measured (49 s, 2026-12-05,
# docs/studies/presets.md); the estimate and the phase line scale it to this machine now
# (robench.core.progress.expected_seconds)
MAX_SENSE = 3  # a WordNet-only pair must share one of the 3 most frequent senses of both words


def pos_agree(lex: Lexicon, a: str, b: str) -> bool:
    """True unless both words are in WordNet and share no part of speech (satellite adjectives as adjectives)."""
    pa = {s.pos().replace("s", "a") for s in lex.wordnet.synsets(a)}
    pb = {s.pos().replace("s", "a") for s in lex.wordnet.synsets(b)}
    return not pa or not pb or bool(pa & pb)


def candidate_pairs(lex: Lexicon, words: list[str], max_sense: int | None = MAX_SENSE
                    ) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """The kept (word, candidate) pairs within `words` (both directions) and how many each filter removed.

    A pair only WordNet lists is kept when the synset the two words share is among the `max_sense` most frequent
    senses of both (WordNet's sense order; None: any sense): "love" ~ "know" share only love's 4th verb sense.
    """
    index = set(words)
    kept, dropped = [], {"antonym": 0, "pos": 0, "rare_wordnet_sense": 0, "outside_vocabulary": 0}
    for w in words:
        listed = lex.synonyms_of(w, ("alzantot", "ppdb"))
        for c in sorted(lex.synonyms_of(w)):
            if c not in index:
                dropped["outside_vocabulary"] += 1
            elif lex.is_antonym(w, c, indirect=True):
                dropped["antonym"] += 1
            elif not pos_agree(lex, w, c):
                dropped["pos"] += 1
            elif c not in listed and max_sense is not None and lex.sense_rank.get((w, c), 10**6) > max_sense:
                dropped["rare_wordnet_sense"] += 1
            else:
                kept.append((w, c))
    return kept, dropped


def antonym_pairs(lex: Lexicon) -> list[tuple[str, str]]:
    """Every listed antonym pair (direct and indirect), as words (for the repel constraints)."""
    return [(a, b) for rel in (lex.antonyms, lex.indirect_antonyms) for a, others in rel.items() for b in others]


def lexicon_table_key(settings: Settings, vocab_size: int = VOCAB_SIZE, k: int = K,
                      max_sense: int | None = MAX_SENSE) -> str:
    """The cache key of the "lexicon" table: its inputs' checksums, configuration and format (nothing is read
    but the inputs' cached checksums)."""
    from robench.core.hashing import content_hash
    from robench.engine.resources.counterfit import CounterFitConfig
    from robench.engine.resources.files import data_file, inputs_digest
    from robench.engine.resources.tables import glove_origin

    inputs = [data_file(settings, rel, "lexicon input") for rel in (ALZANTOT_FILE, PPDB_SYNONYMS, *ANTONYM_FILES)]
    return content_hash({"format": FORMAT, "kind": "lexicon", "glove": glove_origin(), "vocab": vocab_size, "k": k,
                         "config": CounterFitConfig().to_dict(), "inputs": inputs_digest(settings, inputs),
                         "wordnet": inputs_digest(settings, [data_file(settings, WORDNET_DIR, "WordNet 3.0")]),
                         "filters": ["antonym-indirect", "pos-wordnet"], "max_sense": max_sense}, 10)


def build_lexicon_table(settings: Settings, vocab_size: int = VOCAB_SIZE, k: int = K, max_sense: int | None = MAX_SENSE,
                        console=None):
    """Build (or load the cached) "lexicon" table; see the module docstring."""
    from robench.engine.resources.tables import _glove_vocabulary, _load_table

    key = lexicon_table_key(settings, vocab_size, k, max_sense)
    words, vectors, origin = _glove_vocabulary(vocab_size)
    target = resources_dir(settings) / f"lexicon-{key}"
    if (cached := cached_build(target, _load_table)) is not None:
        return cached
    with phase("building the synonym lexicon (first use)", expected_seconds(LEXICON_BUILD_SECONDS)):
        return _build_table(settings, target, key, words, vectors, origin, k, max_sense, console)


def _build_table(settings: Settings, target, key: str, words: list[str], vectors: np.ndarray, origin: str, k: int,
                 max_sense: int | None, console):
    from robench.engine.resources.counterfit import CounterFitConfig, counter_fit, normalise, pair_ids
    from robench.engine.resources.tables import SynonymTable, _load_table, _save_table

    config = CounterFitConfig()
    say = console.print if console is not None else (lambda *a, **kw: None)
    started = time.perf_counter()
    lex = lexicon(settings)
    index = {w: i for i, w in enumerate(words)}
    kept, dropped = candidate_pairs(lex, words, max_sense)
    say(f"lexicon: {len(kept)} ordered candidate pairs over {len(words)} GloVe words; dropped {dropped}")
    syn = pair_ids(kept, index)
    ant = pair_ids(antonym_pairs(lex), index)
    fitted, summary = counter_fit(vectors, ant, syn, config)
    nn, nn_cos = _ranked(kept, index, fitted, k)
    before = normalise(vectors)
    probes = {f"{a}/{b}": {"before": float(before[index[a]] @ before[index[b]]),
                           "after": float(fitted[index[a]] @ fitted[index[b]])}
              for a, b in (("good", "bad"), ("terrible", "horrible"), ("awful", "awesome"), ("movie", "film"))
              if a in index and b in index}
    per_word = (nn >= 0).sum(axis=1)
    info = {"name": "lexicon", "origin": "listed synonyms (Alzantot et al. 2018 neighbour sets, Mrkšić PPDB "
            "synonyms, WordNet 3.0 synsets) minus listed antonyms (Mrkšić PPDB/WordNet lists, WordNet direct and "
            "indirect) with WordNet POS agreement, ranked by cosine in GloVe 6B-50d counter-fitted by robench "
            f"to those lists ({origin})", "substitute": "for TextFooler's top-50 counter-fitted PARAGRAM-SL999 "
            "neighbours (Jin et al. 2020): listed synonyms instead of nearest neighbours",
            "vocabulary": f"{len(words)} most frequent lower-case alphabetic GloVe 6B words",
            "dim": int(vectors.shape[1]), "k": int(nn.shape[1]), "max_wordnet_sense": max_sense, "pairs": len(kept),
            "dropped": dropped,
            "words_with_candidates": int((per_word > 0).sum()),
            "mean_candidates_of_words_with_any": round(float(per_word[per_word > 0].mean()), 3),
            "lexicon": lex.info, "counter_fitting": {**config.to_dict(), **summary}, "probe_cos": probes,
            "build_seconds": round(time.perf_counter() - started, 1), "format": FORMAT, "key": key}
    _save_table(target, words, fitted, nn, nn_cos, info)
    say(f"saved {target} ({info['build_seconds']:.0f} s)")
    table: SynonymTable = _load_table(target)
    return table


def _ranked(pairs: list[tuple[str, str]], index: dict[str, int], vectors: np.ndarray, k: int
            ) -> tuple[np.ndarray, np.ndarray]:
    """Per word, its candidates' ids and cosines in `vectors`, most similar first (-1 / -inf padding), at most k."""
    by_word: dict[int, list[int]] = {}
    for a, b in pairs:
        by_word.setdefault(index[a], []).append(index[b])
    nn = np.full((len(index), k), -1, dtype=np.int32)
    nn_cos = np.full((len(index), k), -np.inf, dtype=np.float32)
    for i, ids in by_word.items():
        ids_arr = np.array(ids)
        cos = vectors[ids_arr] @ vectors[i]
        order = np.argsort(-cos, kind="stable")[:k]
        nn[i, :len(order)], nn_cos[i, :len(order)] = ids_arr[order], cos[order]
    return nn, nn_cos
