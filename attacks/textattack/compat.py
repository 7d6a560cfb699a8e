"""Importing TextAttack 0.3.11 offline, and checking that 0.3.11 is what is installed.

`import textattack` runs `nltk.download(...)` once per install (a post-install
hook), reads NLTK stopwords at import, and rewrites cache environment variables.
`load_textattack` points NLTK at `<data_dir>/nltk_data`, turns `nltk.download`
into a logged no-op for the duration of the import (`offline_nltk`, also used
around recipe builds), keeps TextAttack's marker files in robench's cache dir and
restores every environment variable it changes (`environ_restored`), and only those.

This module and the rest of the backend patch TextAttack 0.3.11 as it is;
`check_version` refuses any other installed version with a clear error.
"""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any, Iterator

from robench.core.errors import RobenchError
from robench.core.paths import Settings

log = logging.getLogger(__name__)

SUPPORTED_VERSION = "0.3.11"  # the TextAttack release whose offline failures this backend handles


def installed_version() -> str | None:
    """The installed TextAttack distribution's version (None: not installed); does not import it."""
    try:
        return version("textattack")
    except PackageNotFoundError:
        return None


def check_version() -> None:
    """A RobenchError naming both versions unless TextAttack `SUPPORTED_VERSION` is installed."""
    installed = installed_version()
    if installed != SUPPORTED_VERSION:
        found = f"textattack {installed} is installed" if installed else "textattack is not installed"
        raise RobenchError(f"the textattack:* recipes patch TextAttack {SUPPORTED_VERSION}, but {found}: "
                           f"pip install textattack=={SUPPORTED_VERSION}")


def nltk_dir(settings: Settings) -> Path:
    """`<data_dir>/nltk_data`, first on NLTK's path (a RobenchError naming the fix when missing)."""
    from robench.engine.resources import nltk_data_dir

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
    """Import textattack without network. Imported only when a recipe runs."""
    check_version()
    nltk_dir(settings)  # fail fast, before any heavy import
    if "textattack" in sys.modules:
        with offline_nltk(settings):  # still point NLTK at the data dir
            return sys.modules["textattack"]
    import transformers  # noqa: F401 - fixes its cache paths before TextAttack rewrites HF_HOME

    # TextAttack's cache setup rewrites HF_HOME, XDG_CACHE_HOME, TOKENIZERS_PARALLELISM; its post-install marker
    # lives in robench's cache
    try:
        with environ_restored(), offline_nltk(settings):
            os.environ["TA_CACHE_DIR"] = str(settings.cache_dir / "textattack")
            import textattack
    except LookupError as exc:
        raise RobenchError(f"TextAttack could not find NLTK data under {nltk_dir(settings)}: "
                           f"{str(exc).strip().splitlines()[0]}") from exc
    return textattack


@contextlib.contextmanager
def environ_restored() -> Iterator[None]:
    """On exit, every environment variable the block set, changed or removed is as it was before; the others are
    never touched (no moment without an environment, for other threads or the C library)."""
    saved = dict(os.environ)
    try:
        yield
    finally:
        for key in [k for k in os.environ if k not in saved]:
            del os.environ[key]
        for key, value in saved.items():
            if os.environ.get(key) != value:
                os.environ[key] = value
