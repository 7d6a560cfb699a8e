"""Stopwords and POS tags. NLTK reads `<data_dir>/nltk_data` and never downloads; stopwords come from
TextAttack's TextFooler list when textattack is installed."""
from __future__ import annotations

import ast
import functools
import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from robench.core.errors import RobenchError
from robench.core.paths import Settings
from robench.engine.resources.files import data_file


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


TAGGER = "nltk_data/taggers/averaged_perceptron_tagger_eng"
TAGSET = "nltk_data/taggers/universal_tagset.zip"


def check_pos_tagger(settings: Settings) -> None:
    """The tagger's files are there and whole (its three JSON files parse, the tagset zip's checksums hold), read
    without importing NLTK (5 s): the check a run makes before training; `pos_tagger` loads it."""
    _check_tagger_files(*_tagger_paths(settings))


def _tagger_paths(settings: Settings) -> tuple[Path, Path]:
    return (data_file(settings, TAGGER, "NLTK perceptron tagger"),
            data_file(settings, TAGSET, "NLTK universal tagset mapping"))


def _check_tagger_files(tagger: Path, tagset: Path) -> None:
    import json
    import zipfile

    for part, kind in (("classes", list), ("tagdict", dict), ("weights", dict)):
        path = tagger / f"averaged_perceptron_tagger_eng.{part}.json"
        try:
            value = json.loads(path.read_bytes())
        except (OSError, ValueError) as exc:
            raise RobenchError(f"NLTK perceptron tagger: {path} is missing or damaged ({type(exc).__name__}); "
                               "restore it from the nltk_data package (averaged_perceptron_tagger_eng)") from exc
        if not isinstance(value, kind) or not value:
            raise RobenchError(f"NLTK perceptron tagger: {path} holds no {kind.__name__} of {part}")
    try:
        with zipfile.ZipFile(tagset) as archive:
            damaged = archive.testzip()
            names = set(archive.namelist())
    except (OSError, zipfile.BadZipFile) as exc:
        raise RobenchError(f"NLTK universal tagset mapping: {tagset} is not a readable zip ({exc})") from exc
    if damaged is not None or "universal_tagset/en-ptb.map" not in names:
        raise RobenchError(f"NLTK universal tagset mapping: {tagset} is damaged "
                           f"({damaged or 'no universal_tagset/en-ptb.map'})")


def pos_tagger(settings: Settings) -> PosTagger:
    """The tagger of `<data_dir>/nltk_data`, checked and loaded from that folder once per process while its files
    keep their size and modification time (a run asks per settings, `robench.engine.inflection` per sentence;
    loading it takes 0.6 s)."""
    tagger, tagset = _tagger_paths(settings)
    nltk_data_dir(settings)  # the tagset's mapping is read through NLTK's path
    stamps = tuple(_stamp(f) for f in (*sorted(tagger.glob("*.json")), tagset))
    return _pos_tagger(tagger, tagset, stamps)


def tagger_digest(settings: Settings) -> str:
    """The tagger's files by their checksums (cached per file version): which tagger is in place."""
    from robench.core.hashing import content_hash, file_sha256

    tagger, tagset = _tagger_paths(settings)
    return content_hash({f.name: file_sha256(f, settings.cache_dir) for f in (*sorted(tagger.glob("*.json")), tagset)},
                        length=16)


def _stamp(path: Path) -> tuple[str, int, int]:
    stat = path.stat()
    return (path.name, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _pos_tagger(tagger_dir: Path, tagset: Path, stamps: tuple) -> PosTagger:
    _check_tagger_files(tagger_dir, tagset)
    from nltk.tag.perceptron import PerceptronTagger

    root = tagger_dir.parent
    try:
        tagger = PerceptronTagger(lang="eng", loc=tagger_dir)  # this folder's, whatever else is on NLTK's path
    except (LookupError, OSError, ValueError) as exc:
        raise RobenchError(f"could not load the NLTK perceptron tagger from {root}: {exc}") from exc
    return PosTagger(tagger, {"name": "nltk-averaged-perceptron", "origin": f"{root} (PTB tags mapped to "
                              "the universal tagset)", "substitute": False, "tagset": "universal"})
