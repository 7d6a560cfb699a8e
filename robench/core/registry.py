"""Typed, lazy registries with entry-point plugins and "did you mean" errors.

Built-in entries register themselves with a decorator when their module is imported. The first lookup imports
the kind's built-in package (`robench.models`, `robench.attacks`, `robench.data.tasks`), which registers what it
defines and declares the rest in `LAZY` (name -> module) and `FAMILIES` (modules of `prefix:ARG` factories): a
declared module is imported only when one of its names is asked for, so that naming, listing and "did you mean"
import no torch. Third-party entries come from the entry-point group `robench.<kind>`, also imported only when
asked for by name.
"""
from __future__ import annotations

import difflib
import fnmatch
import importlib
import logging
import re
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Callable, Generic, TypeVar

from robench.core.errors import RobenchError

T = TypeVar("T")
log = logging.getLogger(__name__)
# Names end up in file names (run ids, records) and in markup: letters, digits and - _ : + . only,
# starting with a letter or digit (so never "..", "/x" or "[b]").
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_:+.-]*")


def check_name(kind: str, name: str) -> str:
    """`name` if it is a safe registry name, else a RobenchError."""
    if not isinstance(name, str) or NAME.fullmatch(name) is None:
        raise RobenchError(f"{kind} name {name!r} is not allowed: use letters, digits, '-', '_', ':', '+' and '.', "
                           "starting with a letter or digit")
    return name


@dataclass
class Entry(Generic[T]):
    name: str
    source: str  # "robench" or "plugin <distribution>"
    obj: T | None = None
    entry_point: EntryPoint | None = None
    module: str | None = None  # a built-in declared in LAZY: the module whose import registers it

    def load(self) -> T:
        if self.obj is None and self.module is not None:
            importlib.import_module(self.module)  # its decorator fills `obj`; an import error propagates each time
            if self.obj is None:
                raise RobenchError(f"built-in {self.name!r}: {self.module} does not register it")
        if self.obj is None:
            assert self.entry_point is not None
            try:
                self.obj = self.entry_point.load()
            except Exception as exc:  # a broken plugin must not take robench down
                raise RobenchError(f"plugin {self.name!r} ({self.source}) failed to load: {exc}") from exc
        return self.obj


class Registry(Generic[T]):
    """Name -> object registry for one kind ("models", "attacks", "tasks")."""

    def __init__(self, kind: str, builtin_package: str) -> None:
        self.kind = kind
        self.group = f"robench.{kind}"
        self._builtin_package = builtin_package
        self._entries: dict[str, Entry[T]] = {}
        self._families: dict[str, Callable[[str], T]] = {}  # "transfer" -> factory of `transfer:ARG`
        self._family_args: dict[str, str] = {}  # "transfer" -> "RUN_ID": what ARG is, for `robench list`
        self._family_modules: tuple[str, ...] = ()  # declared in the built-in package's FAMILIES
        self._discovered = False

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: `@MODELS.register("bert")`."""

        check_name(self.kind[:-1], name)

        def decorator(obj: T) -> T:
            entry = self._entries.setdefault(name, Entry(name, "robench"))
            if entry.obj is not None and entry.obj is not obj or entry.entry_point is not None:
                raise RobenchError(f"{self.kind} entry {name!r} is registered twice")
            entry.obj = obj  # fills a LAZY entry in place
            return obj

        return decorator

    def register_family(self, prefix: str, arg: str = "ARG") -> Callable[[Callable[[str], T]], Callable[[str], T]]:
        """Decorator: names `prefix:ARG` resolve to `factory(ARG)` (e.g. `transfer:RUN_ID`)."""

        def decorator(factory: Callable[[str], T]) -> Callable[[str], T]:
            self._families[prefix], self._family_args[prefix] = factory, arg
            return factory

        return decorator

    def _discover(self) -> None:
        """Declare the built-ins and the plugins. Marked done only once it has succeeded: a failed import raises
        again at the next lookup rather than leaving an empty registry that reads as "unknown name"."""
        if self._discovered:
            return
        package = importlib.import_module(self._builtin_package)
        for name, module in getattr(package, "LAZY", {}).items():
            self._entries.setdefault(check_name(self.kind[:-1], name), Entry(name, "robench", module=module))
        self._family_modules = tuple(getattr(package, "FAMILIES", ()))
        for ep in entry_points(group=self.group):
            if NAME.fullmatch(ep.name) is None:
                log.warning("ignoring the %s plugin %r: its name is not allowed (letters, digits, - _ : + . only)",
                            self.kind[:-1], ep.name)
                continue
            if ep.name not in self._entries:
                dist = ep.dist.name if ep.dist is not None else "unknown distribution"
                self._entries[ep.name] = Entry(ep.name, f"plugin {dist}", entry_point=ep)
        self._discovered = True

    def _load_families(self) -> None:
        for module in self._family_modules:
            importlib.import_module(module)  # registers its factories

    def get(self, name: str) -> T:
        self._discover()
        entry = self._entries.get(name)
        prefix, _, arg = name.partition(":")
        if entry is None and arg:
            self._load_families()
        if entry is None and arg and prefix in self._families:
            return self._families[prefix](check_name(self.kind[:-1], name).partition(":")[2])  # ARG names a file
        if entry is None:
            raise self._unknown(name)
        return entry.load()

    def require(self, name: str) -> None:
        """A RobenchError ("did you mean ...") unless `name` is registered (a family's `prefix:ARG` aside, which
        only loading can check); imports nothing but the declarations."""
        self._discover()
        if name not in self._entries and ":" not in name:
            raise self._unknown(name)

    def _unknown(self, name: str) -> RobenchError:
        close = difflib.get_close_matches(name, self._entries, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        return RobenchError(f"unknown {self.kind[:-1]} {name!r}{hint} (known: {', '.join(sorted(self._entries))}; "
                            "see `robench list`)")

    def families(self) -> dict[str, T]:
        """One example entry per family, keyed by its pattern (`transfer:RUN_ID`), built with ARG as the argument."""
        self._discover()
        self._load_families()
        return {f"{prefix}:{arg}": self._families[prefix](arg) for prefix, arg in sorted(self._family_args.items())}

    def names(self, pattern: str = "*") -> list[str]:
        self._discover()
        return sorted(n for n in self._entries if fnmatch.fnmatch(n, pattern))

    def entries(self) -> list[Entry[T]]:
        self._discover()
        return [self._entries[n] for n in sorted(self._entries)]

    def __contains__(self, name: str) -> bool:
        self._discover()
        return name in self._entries
