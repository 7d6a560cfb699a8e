"""The rating sheet and its key (`robench annotate`): their columns, parts and answers, the `Example` a key
holds, and reading both back with every field checked (a hand-edited sheet or key is one clear error)."""
from __future__ import annotations

import csv
import io
import json
import re
from collections import defaultdict
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from robench.core.errors import RobenchError
from robench.core.files import read_bounded
from robench.core.text import excerpt, from_spreadsheet_cell
from robench.report.readings import UNCLEAR

KEY_FORMAT = 1
COLUMNS = ("item", "part", "text", "text_b", "labels", "label", "meaning", "fluent")
LABEL_PART, PAIR_PART = "1 label", "2 pair"
ORIGINAL, ADVERSARIAL = "original", "adversarial"
MEANINGS = ("1", "2", "3", "4")
FLUENT = {"yes": True, "no": False}


@dataclass(frozen=True)
class Example:
    """One sampled successful adversarial example, as the key holds it."""

    runs_dir: str
    run_id: str
    index: int
    task: str
    attack: str
    setting: str  # the attack setting's label (robench.report.identity.attack_label; "default": none changed)
    model: str  # the model setting's label
    labels: tuple[str, ...]
    gold: str
    original_text: str
    perturbed_text: str

    @property
    def group(self) -> tuple[str, str, str]:
        """What `--n` counts per: the attack setting (models and seeds pooled)."""
        return self.task, self.attack, self.setting

    @property
    def report_group(self) -> tuple[str, str, str, str]:
        return self.task, self.attack, self.setting, self.model
MAX_FILE = 64_000_000  # bytes: no key or sheet robench writes comes near (60 examples x 200 settings: ~10 MB)
STUDY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")  # a study's name: a plain identifier, never a path
ITEM = re.compile(r"[TP][0-9]{1,9}")


def read_key(path: Path) -> dict[str, Any]:
    """The key `robench annotate export` wrote, every field checked for its type and range (a key is a file
    like any other: `study` names the readings file, so it must be an identifier, never a path)."""
    data = read_bounded(Path(path), "key", MAX_FILE)
    try:
        key = json.loads(data.decode("utf-8"))
        if problem := _key_problem(key):
            raise ValueError(problem)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise RobenchError(f"{path} is not a key of `robench annotate export` ({excerpt(exc, 160, quote=False)}); "
                           "pass the key.json export wrote with the sheet") from exc
    return key


def _key_problem(key: Any) -> str | None:
    """Why `key` is not a well-formed key, or None."""
    if not isinstance(key, dict) or key.get("format") != KEY_FORMAT:
        return f"not a key of format {KEY_FORMAT}"
    if not isinstance(key.get("study"), str) or not STUDY.fullmatch(key["study"]):
        return "'study' must be an identifier (letters, digits, '_', '-'), never a path"
    for name in ("seed", "n"):
        if not _is_int(key.get(name)):
            return f"{name!r} must be an integer"
    examples, items = key.get("examples"), key.get("items")
    if not isinstance(examples, list) or not examples or not isinstance(items, dict):
        return "'examples' must be a non-empty list and 'items' an object"
    for i, e in enumerate(examples):
        if problem := _example_problem(e):
            return f"example {i}: {problem}"
    return _items_problem(items, len(examples))
EXAMPLE_TEXTS = ("task", "attack", "setting", "model", "gold", "original_text", "perturbed_text")


def _example_problem(e: Any) -> str | None:
    from robench.core.records import RUN_ID

    names = {f.name for f in fields(Example)}
    if not isinstance(e, dict) or set(e) != names:
        return f"must have exactly the fields {', '.join(sorted(names))}"
    if not isinstance(e["runs_dir"], str) or not Path(e["runs_dir"]).is_absolute() or \
            Path(e["runs_dir"]).name != "runs":
        return "'runs_dir' must be the absolute path of a results directory's runs/ folder"
    if not isinstance(e["run_id"], str) or not RUN_ID.fullmatch(e["run_id"]) or len(e["run_id"]) > 200:
        return "'run_id' must be a run id (a plain file name)"
    if not _is_int(e["index"]) or e["index"] < 0:
        return "'index' must be a non-negative integer"
    if wrong := [k for k in EXAMPLE_TEXTS if not isinstance(e[k], str)]:
        return f"{wrong[0]!r} must be a string"
    labels = e["labels"]
    if not isinstance(labels, list) or len(labels) < 2 or not all(isinstance(x, str) and x for x in labels) or \
            len(set(labels)) != len(labels):
        return "'labels' must be a list of at least two distinct label names"
    if e["gold"] not in labels:
        return "'gold' must be one of its 'labels'"
    return None


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _items_problem(items: dict[str, Any], examples: int) -> str | None:
    """Why the key's items do not give each example an original, an adversarial text and a pair, or None."""
    seen: dict[int, list[str]] = defaultdict(list)
    for name, item in items.items():
        if not ITEM.fullmatch(name) or not isinstance(item, dict) or not _is_int(item.get("example")) or \
                not 0 <= item["example"] < examples:
            return f"item {excerpt(name)} names no example of the key"
        if set(item) == {"example", "role"} and item["role"] in (ORIGINAL, ADVERSARIAL) and name[0] == "T":
            seen[item["example"]].append(item["role"])
        elif set(item) == {"example", "adversarial_first"} and isinstance(item["adversarial_first"], bool) and \
                name[0] == "P":
            seen[item["example"]].append("pair")
        else:
            return f"item {excerpt(name)} is neither a text to label nor a pair to rate"
    if any(sorted(seen[i]) != [ADVERSARIAL, ORIGINAL, "pair"] for i in range(examples)):
        return "its items do not give each example an original, an adversarial text and a pair"
    return None


def read_sheet(path: Path) -> list[dict[str, str]]:
    """The rows of a filled sheet, its cells unescaped (`sheet_csv`); comma-separated, or semicolon-separated as
    spreadsheets save it in some locales."""
    data = read_bounded(Path(path), "sheet", MAX_FILE)
    try:
        text = data.decode("utf-8-sig")
        first = text.split("\n", 1)[0]
        delimiter = ";" if first.count(";") >= len(COLUMNS) - 1 and "," not in first else ","
        reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
        header = reader.fieldnames or []
        if missing := [c for c in COLUMNS if c not in header]:
            raise RobenchError(f"{path} is not a rating sheet: it lacks the column(s) {', '.join(missing)} (a sheet "
                               f"has {', '.join(COLUMNS)}, separated by commas); save it as CSV with those columns")
        return [{k: _cell(k, v) for k, v in row.items() if k in COLUMNS} for row in reader]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise RobenchError(f"{path} could not be read as a CSV sheet ({exc}); save it as CSV (UTF-8)") from exc


def _cell(column: str, value: Any) -> str:
    """A sheet cell as a string, its formula escape undone; the answer columns also stripped of spaces."""
    text = from_spreadsheet_cell(value if isinstance(value, str) else "")
    return text.strip() if column in ("item", "label", "meaning", "fluent") else text


def check_sheet(rows: list[dict[str, str]], key: dict[str, Any], examples: list[Example]) -> list[str]:
    """Every problem of a filled sheet, one phrase each (empty: it imports)."""
    problems, seen = [], set()
    for line, row in enumerate(rows, 2):
        item = row["item"]
        where = f"line {line} (item {excerpt(item, 20)})"
        if item not in key["items"]:
            problems.append(f"{where}: no such item in this study's key")
            continue
        if item in seen:
            problems.append(f"{where}: the item appears twice")
            continue
        seen.add(item)
        problems += [f"{where}: {p}" for p in _row_problems(row, key["items"][item], examples)]
    if missing := [item for item in key["items"] if item not in seen]:
        problems.append(f"{len(missing)} item(s) of the key missing from the sheet: {', '.join(missing[:8])}"
                        + (" ..." if len(missing) > 8 else ""))
    return problems


def _row_problems(row: dict[str, str], item: dict[str, Any], examples: list[Example]) -> list[str]:
    e = examples[item["example"]]
    if "role" in item:
        text = e.original_text if item["role"] == ORIGINAL else e.perturbed_text
        if row["text"] != text:
            return ["its text is not the key's (a sheet of another study, or an edited text)"]
        if answer_label(row["label"], e) is None:
            return [f"label {excerpt(row['label'], 30)} is not one of {', '.join((*e.labels, UNCLEAR))}"
                    if row["label"] else "no label"]
        return []
    pair = (e.perturbed_text, e.original_text) if item["adversarial_first"] else (e.original_text, e.perturbed_text)
    if (row["text"], row["text_b"]) != pair:
        return ["its texts are not the key's (a sheet of another study, or an edited text)"]
    out = []
    if row["meaning"] not in MEANINGS:
        out.append(f"meaning {excerpt(row['meaning'], 20)} is not 1-4" if row["meaning"] else "no meaning rating")
    if row["fluent"].lower() not in FLUENT:
        out.append(f"fluent {excerpt(row['fluent'], 20)} is not yes or no" if row["fluent"] else
                   "no fluency rating")
    return out


def answer_label(answer: str, example: Example) -> str | None:
    """The label name (or UNCLEAR) `answer` is, in any case; None if it is none of them."""
    return next((name for name in (*example.labels, UNCLEAR) if name.lower() == answer.lower()), None)
