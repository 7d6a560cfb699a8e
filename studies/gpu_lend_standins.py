"""studies/gpu_lend.py's stand-ins: what `import textattack` imports but its TextFooler path never calls, and the
lent machine lacks, as modules that fail on use (the textattack step fails if one was used)."""
from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import types
from typing import Any, Iterator

from gpu_lend_plan import LendError

# What `import textattack` (0.3.11) imports but its TextFooler path through robench never calls, and the H200 image
# lacks (so the pack leaves them out, docs/studies/gpu.md): flair (its POS tagger and tokenizer; TextFooler tags
# with NLTK) and what flair pulls in, jieba and pinyin/OpenHowNet (Chinese text and swaps), the other recipes'
# constraints and swaps, and the loggers. In the textattack step's process each is a stand-in (`StandIns`).
NOT_CARRIED = ("flair", "jieba", "pinyin", "OpenHowNet", "Levenshtein", "editdistance", "bert_score",
               "language_tool_python", "lemminflect", "more_itertools", "num2words", "word2number", "langdetect",
               "terminaltables")


class StandIns(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Importing a module under one of `roots` (installed or not) gives a stand-in: any attribute is a class that
    can be subclassed, and calling or instantiating it raises and is recorded in `used`, so that a use that the
    caller swallows is still found."""

    def __init__(self, roots: tuple[str, ...]) -> None:
        self.roots = frozenset(roots)
        self.used: list[str] = []

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name.partition(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _StandInModule(spec.name, self)

    def exec_module(self, module: types.ModuleType) -> None:
        pass

    def stand_in(self, name: str) -> type:
        used = self.used

        class _StandIn(type):
            def __call__(cls, *args: Any, **kwargs: Any) -> Any:
                used.append(cls.__qualname__)
                raise LendError(f"{cls.__qualname__} was called, but its package was not carried to the GPU "
                                "machine (studies/gpu_lend.py, NOT_CARRIED)")

            def __getattr__(cls, attr: str) -> Any:
                if attr.startswith("__"):
                    raise AttributeError(attr)
                return _StandIn(attr, (), {"__qualname__": f"{cls.__qualname__}.{attr}"})

        return _StandIn(name.rpartition(".")[2], (), {"__qualname__": name})


class _StandInModule(types.ModuleType):
    def __init__(self, name: str, finder: StandIns) -> None:
        super().__init__(name)
        self._finder = finder

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        value = self._finder.stand_in(f"{self.__name__}.{attr}")
        setattr(self, attr, value)
        return value


@contextlib.contextmanager
def standing_in(roots: tuple[str, ...]) -> Iterator[StandIns]:
    """Stand-ins for `roots` while the block runs (first on the import path); LendError after it when one was
    used."""
    finder = StandIns(roots)
    sys.meta_path.insert(0, finder)
    try:
        yield finder
    finally:
        sys.meta_path.remove(finder)
    if finder.used:
        raise LendError(f"the step used packages that were not carried: {', '.join(sorted(set(finder.used)))}")
