"""Candidate-synonym tables: "lexicon" (the default: listed synonyms ranked in a counter-fitted space, see
`lexicon_table`), GloVe counter-fitted here ("counterfitted-glove", nearest neighbours; kept for comparison) or the
Alzantot et al. neighbour lists ("neighbors")."""
from __future__ import annotations

import functools
import json
import time

import numpy as np

from robench.core.errors import RobenchError
from robench.core.paths import Settings
from robench.core.progress import phase
from robench.engine.resources.cut import cut_dir, load_cut_table
from robench.engine.resources.files import FORMAT, cached_build, data_file, inputs_digest, resources_dir
from robench.engine.resources.lexicon import read_pairs
from robench.engine.resources.lexicon_table import build_lexicon_table
from robench.engine.resources.tables import SynonymTable, _glove_vocabulary, _load_table, _save_table

__all__ = ["DEFAULT_SOURCE", "SOURCES", "SOURCE_LISTS", "SynonymTable", "build_synonyms", "require_synonym_source",
           "synonym_table"]

NEIGHBOURS_FILE = "counterfitted/counterfitted_neighbors.json"
CONSTRAINTS = {"antonyms": ("counterfitted/mrksic_ppdb_antonyms.txt", "counterfitted/mrksic_wordnet_antonyms.txt"),
               "synonyms": ("counterfitted/mrksic_ppdb_synonyms.txt",)}
SOURCES = ("lexicon", "counterfitted-glove", "neighbors")
DEFAULT_SOURCE = "lexicon"  # measured against the others in docs/studies/resources.md
# the synonym lists each source is built from (robench.engine.audit reports rates on the other lists)
SOURCE_LISTS = {"lexicon": ("alzantot", "ppdb", "wordnet"), "counterfitted-glove": ("ppdb",),
                "neighbors": ("alzantot",)}


def build_synonyms(settings: Settings, vocab_size: int = 50_000, k: int = 50, config=None,
                   console=None) -> SynonymTable:
    """Counter-fit GloVe 6B 50d (Mrkšić et al. 2016, see engine/resources/counterfit.py) and cache the top-k table."""
    from robench.engine.resources.counterfit import CounterFitConfig  # imports torch: only a build needs it

    config = config or CounterFitConfig()
    files = {kind: [data_file(settings, rel, "Mrkšić counter-fitting constraints") for rel in rels]
             for kind, rels in CONSTRAINTS.items()}
    key = glove_table_key(settings, vocab_size, k, config)
    words, vectors, origin = _glove_vocabulary(vocab_size)
    target = resources_dir(settings) / f"counterfitted-glove-{key}"
    if (cached := cached_build(target, _load_table)) is not None:
        return cached
    with phase("building the counterfitted-glove synonym table (first use; no idle time measured for it yet)"):
        return _build(settings, target, key, words, vectors, origin, k, config, files, console)


def _build(settings: Settings, target, key: str, words, vectors, origin: str, k: int, config, files,
           console) -> SynonymTable:
    from robench.engine.resources.counterfit import counter_fit, normalise, pair_ids, top_neighbours

    say = console.print if console is not None else (lambda *a, **kw: None)
    started = time.perf_counter()
    index = {w: i for i, w in enumerate(words)}
    ant = pair_ids([p for path in files["antonyms"] for p in read_pairs(path)], index)
    syn = pair_ids([p for path in files["synonyms"] for p in read_pairs(path)], index)
    say(f"counter-fitting {len(words)} GloVe words: {len(ant)} antonym and {len(syn)} synonym ordered pairs")
    fitted, summary = counter_fit(vectors, ant, syn, config)
    say("computing the nearest-neighbour table")
    nn, nn_cos = top_neighbours(fitted, k)
    seconds = time.perf_counter() - started
    before = normalise(vectors)
    probes = {f"{a}/{b}": {"before": float(before[index[a]] @ before[index[b]]),
                           "after": float(fitted[index[a]] @ fitted[index[b]])}
              for a, b in (("good", "bad"), ("terrible", "horrible"), ("cheap", "expensive"), ("movie", "film"))
              if a in index and b in index}
    info = {"name": "counterfitted-glove", "origin": f"{origin} counter-fitted by robench (Mrkšić et al. 2016) "
            "with the Mrkšić PPDB/WordNet constraint lists", "substitute": "for counter-fitted PARAGRAM-SL999 "
            "vectors (Jin et al. 2020 / TextAttack)", "vocabulary": f"{len(words)} most frequent lower-case "
            "alphabetic GloVe 6B words", "dim": int(vectors.shape[1]), "k": int(nn.shape[1]),
            "counter_fitting": {**config.to_dict(), **summary}, "probe_cos": probes,
            "build_seconds": round(seconds, 1), "format": FORMAT, "key": key}
    _save_table(target, words, fitted, nn, nn_cos, info)
    say(f"saved {target} ({seconds:.0f} s)")
    return _load_table(target)


def glove_table_key(settings: Settings, vocab_size: int = 50_000, k: int = 50, config=None) -> str:
    """The cache key of a counter-fitted GloVe table: its inputs' checksums, configuration and format."""
    from robench.core.hashing import content_hash
    from robench.engine.resources.counterfit import CounterFitConfig
    from robench.engine.resources.tables import glove_origin

    config = config or CounterFitConfig()
    files = [data_file(settings, rel, "Mrkšić counter-fitting constraints") for rels in CONSTRAINTS.values()
             for rel in rels]
    return content_hash({"format": FORMAT, "glove": glove_origin(), "vocab": vocab_size, "k": k,
                         "config": config.to_dict(), "constraints": inputs_digest(settings, files)}, 10)


def synonym_table_key(settings: Settings, source: str) -> str:
    """Which table `synonym_table(settings, source)` reads, by content, without reading or building it (the
    cache key of a built one; the checksum of the neighbour lists or of a lexicon cut)."""
    if source == "lexicon":
        from robench.engine.resources.lexicon_table import lexicon_table_key

        cut = cut_dir()
        return f"cut-{inputs_digest(settings, [cut])}" if cut is not None else lexicon_table_key(settings)
    if source == "counterfitted-glove":
        return glove_table_key(settings)
    if source == "neighbors":
        return inputs_digest(settings, [data_file(settings, NEIGHBOURS_FILE, "neighbour lists")])
    raise RobenchError(f"unknown synonym source {source!r}; choose one of {', '.join(SOURCES)}")


def _neighbour_list_table(settings: Settings) -> SynonymTable:
    path = data_file(settings, NEIGHBOURS_FILE, "counter-fitted neighbour lists")
    lists: dict[str, list[str]] = json.loads(path.read_text(encoding="utf-8"))
    words = list(lists)
    index = {w: i for i, w in enumerate(words)}
    for neighbours in lists.values():
        for n in neighbours:
            if n not in index:
                index[n] = len(words)
                words.append(n)
    k = max((len(v) for v in lists.values()), default=0)
    nn = np.full((len(words), max(k, 1)), -1, dtype=np.int32)
    nn_cos = np.full(nn.shape, -1.0, dtype=np.float32)
    for w, neighbours in lists.items():
        ids = [index[n] for n in neighbours if n != w]
        nn[index[w], :len(ids)] = ids
        nn_cos[index[w], :len(ids)] = 1.0
    info = {"name": "counterfitted-neighbors", "origin": f"{path} (Alzantot et al. 2018 neighbour sets from "
            "counter-fitted vectors, via robinjia/certified-word-sub)", "substitute": "for TextFooler's top-50 "
            "counter-fitted PARAGRAM neighbours (at most 8 per word; cosines unknown, reported as 1.0)",
            "vocabulary": f"{len(lists)} IMDB words with lists, {int((nn[:, 0] >= 0).sum())} non-empty",
            "k": int(nn.shape[1]), "path": str(path)}
    return SynonymTable(words, None, nn, nn_cos, info)


def require_synonym_source(settings: Settings, source: str) -> None:
    """Fail before training when `source`'s input files are missing (cheap: file checks only); the "lexicon"
    source under `ROBENCH_LEXICON_CUT` needs only the cut (robench.engine.resources.cut)."""
    if source == "lexicon" and cut_dir() is not None:
        return
    if source in ("counterfitted-glove", "lexicon"):
        for rels in CONSTRAINTS.values():
            for rel in rels:
                data_file(settings, rel, "Mrkšić counter-fitting constraints")
        if source == "lexicon":
            data_file(settings, NEIGHBOURS_FILE, "counter-fitted neighbour lists")
            data_file(settings, "nltk_data/corpora/wordnet", "WordNet 3.0 (nltk_data)")
    elif source == "neighbors":
        data_file(settings, NEIGHBOURS_FILE, "counter-fitted neighbour lists")
    else:
        raise RobenchError(f"unknown synonym source {source!r}; choose one of {', '.join(SOURCES)}")


@functools.lru_cache(maxsize=8)  # loaded once per process: a run describes what its attack used
def synonym_table(settings: Settings, source: str = DEFAULT_SOURCE, console=None) -> SynonymTable:
    """The candidate-synonym table: "lexicon" (default) or "counterfitted-glove" (each built and cached on first
    use, a few minutes on CPU; "lexicon" is read from `ROBENCH_LEXICON_CUT` when set), or "neighbors" (the
    counter-fitted neighbour lists in the data dir)."""
    if source == "lexicon":
        cut = cut_dir()
        table = load_cut_table(cut) if cut is not None else build_lexicon_table(settings, console=console)
    elif source == "counterfitted-glove":
        table = build_synonyms(settings, console=console)
    elif source == "neighbors":
        table = _neighbour_list_table(settings)
    else:
        raise RobenchError(f"unknown synonym source {source!r}; choose one of {', '.join(SOURCES)}")
    table.info["synonym_lists"] = list(SOURCE_LISTS[source])
    return table
