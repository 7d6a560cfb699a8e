"""Text from data, records and users made safe for where robench writes it: a terminal, a Markdown table, an
error message.

* `terminal_safe`: C0 and C1 control characters (escape sequences, OSC-8 hyperlinks, carriage returns, bells),
  DEL and the Unicode bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E, U+200F, U+061C) are
  shown as visible escapes (`\\x1b`, `\\u202e`), so a text can neither drive the terminal nor reorder what
  is printed around it.
* `markdown_cell`: the same, plus HTML special characters as entities, `|` escaped and link and image markup
  (`](`, `][`, `![`, `]:`) broken by a backslash, so a name can neither inject markup or links nor shift a
  table's columns.
* `spreadsheet_cell`: a CSV cell that a spreadsheet reads as text, never as a formula (OWASP's rule: a cell
  starting with `=`, `+`, `-`, `@`, a tab or a carriage return, and longer than that one character, gets a
  leading `'`; so does one that starts with `'`s before such a start, which makes the escape reversible:
  `from_spreadsheet_cell` undoes it). `csv_name`: a name as a CSV cell, controls made visible first, so a
  carriage return can neither split a row nor start one with a formula.
* `excerpt`: a short, escaped excerpt of a value for an error message; no message echoes more of a file.
"""
from __future__ import annotations

import html
import re

BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{BIDI}]")
_LINE_UNSAFE = re.compile(f"[\x00-\x09\x0b-\x1f\x7f-\x9f{BIDI}]")  # as _UNSAFE, but newlines kept
EXCERPT = 20  # characters of a value an error message may quote


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: object, keep_newlines: bool = False) -> str:
    """`text` with every control and bidirectional-control character shown as a visible escape."""
    return (_LINE_UNSAFE if keep_newlines else _UNSAFE).sub(_visible, str(text))


_MARKUP = re.compile(r"\]\(|\]\[|!\[|\]:")  # inline link or image, reference link, link definition


def markdown_cell(text: object) -> str:
    """`text` safe inside one cell of a Markdown table: controls visible, HTML escaped, `|` and newlines too,
    link and image markup broken (`[x](javascript:...)`, `![x](https://...)` stay text)."""
    cell = html.escape(terminal_safe(text), quote=False).replace("|", "\\|")
    return _MARKUP.sub(lambda m: m.group()[0] + "\\" + m.group()[1], cell)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_cell(value: object) -> object:
    """`value` safe as a CSV cell: a string a spreadsheet would run as a formula is prefixed with `'` (a lone
    character is no formula: `-`, a callable's backbone, stays as it is), and so is one whose leading `'`s come
    before such a start, so that `from_spreadsheet_cell` gives every string back exactly."""
    return "'" + value if isinstance(value, str) and _formula(value.lstrip("'")) else value


def from_spreadsheet_cell(cell: str) -> str:
    """The string `spreadsheet_cell` escaped as `cell` (a cell it did not escape is returned as it is)."""
    return cell[1:] if cell.startswith("'") and _formula(cell.lstrip("'")) else cell


def _formula(text: str) -> bool:
    return len(text) > 1 and text.startswith(FORMULA_STARTS)


def csv_name(value: object) -> object:
    """A name (from a user, a record) as a CSV cell: controls shown as visible escapes, then `spreadsheet_cell`."""
    return spreadsheet_cell(terminal_safe(value)) if isinstance(value, str) else value


def excerpt(value: object, limit: int = EXCERPT, quote: bool = True) -> str:
    """An excerpt of `value` (quoted unless `quote` is False): at most `limit` characters of it, controls escaped."""
    text = str(value)
    short = terminal_safe(text if len(text) <= limit else text[:limit] + "…")
    return f"'{short}'" if quote else short


def excerpts(values, most: int = 6) -> str:
    """A list of values for an error message, as `['a', 'b', …]`: at most `most` of them, each an `excerpt`."""
    values = list(values)
    return "[" + ", ".join(excerpt(v) for v in values[:most]) + (", …" if len(values) > most else "") + "]"
