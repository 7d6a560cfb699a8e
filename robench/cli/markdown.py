"""The CLI reference (docs/guide/cli.md, cli-more.md, cli-bench.md) written from robench's real argument parser.

`python -m robench.cli.markdown [DIR]` (or `make cli-doc`) writes the pages; tests/test_cli_markdown.py checks
that the committed pages are what this module writes, so a new or changed flag reaches the docs or fails the test.
Built from the parser's actions, not from `format_help`, so the text does not depend on the terminal's width.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DIR = Path("docs") / "guide"


@dataclass(frozen=True)
class Page:
    name: str  # file name in the guide's folder
    title: str
    commands: tuple[str, ...]  # top-level sub-commands on this page; () = every one no other page takes


PAGES = (
    Page("cli.md", "CLI reference", ()),
    Page("cli-more.md", "CLI reference: analysis, records and reading",
         ("analyze", "syntax-report", "audit", "pack", "unpack", "annotate")),
    Page("cli-bench.md", "CLI reference: `robench resources` and `robench bench`", ("resources", "bench")),
)
INTRO = ("Generated from the argument parser by `make cli-doc` (`python -m robench.cli.markdown`); do not edit by "
         "hand. Runs, settings, records and the Python API: [concepts.md](concepts.md). Bad input gives one "
         "`robench: error: ...` line and exit status 2 before any work.")


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each sub-command of `parser`, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return []


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _anchor(path: str) -> str:
    return path.replace(" ", "-")


def _flag(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    if not action.option_strings:
        return f"`{formatter._metavar_formatter(action, action.dest.upper())(1)[0]}`"
    names = ", ".join(action.option_strings)
    if action.nargs == 0:
        return f"`{names}`"
    return f"`{names} {formatter._format_args(action, action.dest.upper())}`"


def _meaning(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    """The flag's help, with its default when the help does not name one."""
    meaning = _cell(formatter._expand_help(action)) if action.help else ""
    default = action.default
    if (not action.option_strings or action.nargs == 0 or default in (None, argparse.SUPPRESS, [], "")
            or "default" in meaning.lower()):
        return meaning
    value = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else default
    return f"{meaning} (default: `{value}`)" if meaning else f"default: `{value}`"


def _name(action: argparse.Action) -> str:
    return (action.option_strings or [action.dest.upper()])[0]


def _row(formatter: argparse.HelpFormatter, action: argparse.Action) -> str:
    meaning = _meaning(formatter, action)
    return f"- {_flag(formatter, action)}: {meaning}" if meaning else f"- {_flag(formatter, action)}"


def _usage(path: str, parser: argparse.ArgumentParser) -> str:
    formatter = parser._get_formatter()
    words = [path]
    for action in parser._actions:
        if not action.option_strings and not isinstance(action, argparse._SubParsersAction):
            words.append(formatter._format_args(action, action.dest.upper()))
    subs = _subcommands(parser)
    if subs:
        words.append("{" + ",".join(name for name, _, _ in subs) + "} ...")
    if any(a.option_strings and a.help != argparse.SUPPRESS and a.dest != "help" for a in parser._actions):
        words.append("[options]")
    return " ".join(words)


class _Writer:
    """Writes the sections; a flag row already written for an earlier command is named, not repeated."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[str, str]] = {}  # row -> (page, command) that wrote it first
        self.groups: dict[tuple[tuple[str, str], str], list[str]] = {}  # ((page, command), group title) -> flags

    def _link(self, page: str, command: str, here: str) -> str:
        return f"[`{command}`]({'' if page == here else page}#{_anchor(command)})"

    def _tables(self, page: str, path: str, parser: argparse.ArgumentParser) -> list[str]:
        lines: list[str] = []
        for group in parser._action_groups:
            actions = [a for a in group._group_actions if a.help != argparse.SUPPRESS and a.dest != "help"
                       and not isinstance(a, argparse._SubParsersAction)]
            titled = len(parser._action_groups) > 2 or group.title != "options"  # a lone "options" needs no title
            if actions:
                lines += self._group(page, path, parser._get_formatter(), group.title if titled else "", actions)
        return lines

    def _group(self, page: str, path: str, formatter: argparse.HelpFormatter, title: str,
               actions: list[argparse.Action]) -> list[str]:
        """One group's flags: a row each, or where an earlier command wrote them, a link to it."""
        rows, repeated = [], {}
        for action in actions:
            row = _row(formatter, action)
            first = self.seen.setdefault(row, (page, path))
            if first == (page, path):
                rows.append(row)
            else:
                repeated.setdefault(first, []).append(_name(action))
        if not repeated:
            self.groups[((page, path), title)] = [_name(a) for a in actions]
        whole = self._whole_group(title, actions, repeated)
        if whole:  # every flag of the group, as an earlier command has them: name it, not each flag
            return ["", f"{f'*{title}*' if title else 'Flags'}: as in {self._link(*whole, page)}."]
        lines = (["", f"*{title}*"] if title else []) + (["", *rows] if rows else [])
        for (first_page, command), flags in repeated.items():
            names = ", ".join(f"`{flag}`" for flag in flags)
            lines += ["", f"As in {self._link(first_page, command, page)}: {names}."]
        return lines

    def _whole_group(self, title: str, actions: list[argparse.Action],
                     repeated: dict[tuple[str, str], list[str]]) -> tuple[str, str] | None:
        """The (page, command) whose group of this title this group repeats in full, else None."""
        if len(repeated) != 1 or sum(map(len, repeated.values())) != len(actions):
            return None
        (first, flags), = repeated.items()
        return first if self.groups.get((first, title)) == flags else None

    def section(self, page: str, path: str, summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
        lines = ["", f"{'#' * level} `{path}`", ""]
        text = parser.description or summary
        if text:
            lines += [_cell(text)]
        usage = _usage(path, parser)
        if usage != f"{path} [options]":
            lines += ["", f"Usage: `{usage}`"]
        lines += self._tables(page, path, parser)
        for name, help_text, sub in _subcommands(parser):
            lines += self.section(page, f"{path} {name}", help_text, sub, min(level + 1, 4))
        return lines


def cli_markdown(parser: argparse.ArgumentParser) -> dict[str, str]:
    """Each page's text by file name: a title, an index of its commands, one section per command."""
    commands = _subcommands(parser)
    taken = {name for page in PAGES for name in page.commands}
    writer, pages = _Writer(), {}
    for page in PAGES:
        chosen = [c for c in commands if (c[0] in page.commands if page.commands else c[0] not in taken)]
        others = " ".join(f"[{other.name}]({other.name})" for other in PAGES if other is not page)
        index = ", ".join(f"[{name}](#{_anchor('robench ' + name)})" for name, _, _ in chosen)
        lines = [f"# {page.title}", "", INTRO, "", f"Commands: {index}. The other commands: {others}."]
        for name, help_text, sub in chosen:
            lines += writer.section(page.name, f"robench {name}", help_text, sub, 2)
        pages[page.name] = "\n".join(lines) + "\n"
    return pages


def main(argv: list[str] | None = None) -> int:
    from robench.cli import build_parser

    args = sys.argv[1:] if argv is None else argv
    folder = Path(args[0]) if args else DEFAULT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in cli_markdown(build_parser()).items():
        (folder / name).write_text(text, encoding="utf-8")
        print(f"wrote {folder / name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
