"""`robench annotate`: a blind human reading of adversarial examples, exported as a rating sheet and imported
into readings stored beside the records (`robench.report.readings`).

Export samples successful adversarial examples (with an original: replayed sets such as AdvGLUE have none) from
the current run records of one or more results directories, at most `n` per attack setting (task, attack and
its settings; models and seeds pooled), never two with the same original text (a reader would see it twice).
It writes, under `--out DIR`:

* `rater/sheet.csv` and `rater/form.html`, what the reader sees. Part 1 ("1 label"): every original and every
  adversarial text alone, shuffled together, to label blind (a label name or "unclear"). Part 2 ("2 pair"):
  each original with its adversarial text, in random order as A and B, to rate for meaning (1-4: 4 the same,
  3 mostly, 2 partly, 1 not) and fluency (yes: the two read equally fluently; no: one has a grammar error or
  odd word the other lacks). Items are numbered in shuffled order; nothing in them names a run, an attack, a
  model or which text is the original. The form is one self-contained page (inline script, no network) that
  shows part 2 only once part 1 is complete (then part 1 is locked) and saves the same CSV;
* `key.json`, which item is which run, example and role: for whoever imports, never for the reader.

Import validates a filled sheet against its key (every item once, the texts unchanged, labels from the item's
list, meaning 1-4, fluent yes/no) and writes each runs directory's readings; its summary is per task, attack,
setting and model, and pooled over the models of each attack setting.
"""
from __future__ import annotations

import csv
import io
import json
import random
import re
from collections import defaultdict
from dataclasses import asdict, dataclass, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from robench.core.errors import RobenchError
from robench.core.files import atomic_write, read_bounded
from robench.core.hashing import content_hash
from robench.core.records import RunRecord, read_examples
from robench.core.text import excerpt, from_spreadsheet_cell, spreadsheet_cell
from robench.report.examples import label_names
from robench.report.readings import UNCLEAR, Reading, Summary, summarize, write_readings

KEY_FORMAT = 1
COLUMNS = ("item", "part", "text", "text_b", "labels", "label", "meaning", "fluent")
LABEL_PART, PAIR_PART = "1 label", "2 pair"
ORIGINAL, ADVERSARIAL = "original", "adversarial"
MEANINGS = ("1", "2", "3", "4")
FLUENT = {"yes": True, "no": False}
MAX_N = 10_000
ALL_MODELS = "all models"  # the pooled reading of an attack setting read on several models


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


@dataclass(frozen=True)
class Exported:
    study: str
    sheet: Path
    form: Path
    key: Path
    per_group: dict[tuple[str, str, str], int]  # examples sampled per attack setting
    short: list[tuple[str, str, str]]  # attack settings with fewer than n distinct examples available


# ---------------------------------------------------------------- export

def export_study(results_dirs: Iterable[Path], out: Path, n: int, seed: int) -> Exported:
    """Sample, shuffle and write the reader's sheet and form and the key (see the module docstring)."""
    if not 1 <= n <= MAX_N:
        raise RobenchError(f"--n {n}: the examples per attack setting must be 1-{MAX_N}")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise RobenchError(f"--out {out} is a file; name a folder (it gets rater/ and key.json)")
    if (out / "key.json").exists():
        raise RobenchError(f"{out / 'key.json'} exists: {out} already holds a study (its sheet may be with a "
                           "reader); choose another --out")
    rng = random.Random(seed)
    pool = [e for d in results_dirs for e in candidates(Path(d))]
    if not pool:
        raise RobenchError("no successful adversarial examples with an original text in "
                           f"{', '.join(str(d) for d in results_dirs)} (replayed attacks such as AdvGLUE have none)")
    chosen = sample(pool, n, rng)
    study = content_hash({"seed": seed, "examples": [asdict(e) for e in chosen]})
    rows, items = sheet_rows(chosen, rng)
    key = {"format": KEY_FORMAT, "study": study, "seed": seed, "n": n,
           "examples": [asdict(e) for e in chosen], "items": items}
    sheet, form = out / "rater" / "sheet.csv", out / "rater" / "form.html"
    atomic_write(sheet, sheet_csv(rows))
    atomic_write(form, form_html(rows))
    atomic_write(out / "key.json", json.dumps(key, indent=1, ensure_ascii=False) + "\n")
    per_group: dict[tuple[str, str, str], int] = defaultdict(int)
    for e in chosen:
        per_group[e.group] += 1
    short = sorted(g for g in {e.group for e in pool} if per_group[g] < n)
    return Exported(study, sheet, form, out / "key.json", dict(per_group), short)


def candidates(results_dir: Path) -> list[Example]:
    """The successful adversarial examples with an original text of the current records of `results_dir`."""
    from robench.core.packed import is_packed, runs_to_read
    from robench.report.identity import attack_label, model_label
    from robench.report.leaderboard import load_records

    if results_dir.exists() and not results_dir.is_dir():
        raise RobenchError(f"{results_dir} is a file, not a folder: name results folders (each holds a runs/ folder "
                           "or a pack)")
    if not (results_dir / "runs").is_dir() and not is_packed(results_dir):
        raise RobenchError(f"no runs directory {results_dir / 'runs'} and no pack in {results_dir}: name folders "
                           "that hold a runs/ folder or a pack")
    home = str((results_dir / "runs").resolve())  # the key names the results' runs/, packed or not
    runs_dir = runs_to_read(results_dir)
    out = []
    for rec in load_records(runs_dir).current:
        names, setting, model = label_names(rec), attack_label(rec) or "default", _model_name(rec, model_label(rec))
        for e in read_examples(runs_dir, rec.run_id):
            if e.status != "successful" or not e.original_text or e.original_text == e.perturbed_text:
                continue
            labels = names if names and e.label < len(names) else tuple(str(i) for i in range(max(2, e.label + 1)))
            out.append(Example(home, rec.run_id, e.index, str(rec.spec.get("task", "")),
                               str(rec.spec.get("attack", "")), setting, model, tuple(labels), labels[e.label],
                               e.original_text, e.perturbed_text))
    return out


def _model_name(rec: RunRecord, label: str) -> str:
    model = str(rec.spec.get("model", ""))
    return label if label.startswith(model) else f"{model} {label}".strip()


def sample(pool: list[Example], n: int, rng: random.Random) -> list[Example]:
    """At most `n` examples per attack setting, at random, no original text (of a task) twice: the settings take
    turns, so that a shared original goes to each setting alike."""
    groups: dict[tuple[str, str, str], list[Example]] = defaultdict(list)
    for e in sorted(pool, key=lambda e: (e.group, e.runs_dir, e.run_id, e.index)):
        groups[e.group].append(e)
    for members in groups.values():
        rng.shuffle(members)
    chosen: list[Example] = []
    used: set[tuple[str, str]] = set()
    taken = dict.fromkeys(groups, 0)
    queues = {g: iter(members) for g, members in groups.items()}
    while queues:
        for g in list(queues):
            pick = next((e for e in queues[g] if (e.task, e.original_text) not in used), None)
            if pick is None:
                del queues[g]
                continue
            chosen.append(pick)
            used.add((pick.task, pick.original_text))
            taken[g] += 1
            if taken[g] == n:
                del queues[g]
    return chosen


def sheet_rows(examples: list[Example], rng: random.Random) -> tuple[list[dict[str, str]], dict[str, dict]]:
    """The sheet's rows (part 1 shuffled, then part 2 shuffled) and the key's items (item id -> what it is)."""
    singles = [(i, role) for i in range(len(examples)) for role in (ORIGINAL, ADVERSARIAL)]
    rng.shuffle(singles)
    pairs = [(i, rng.random() < 0.5) for i in range(len(examples))]
    rng.shuffle(pairs)
    rows, items = [], {}
    width = len(str(max(len(singles), len(pairs))))
    for number, (i, role) in enumerate(singles, 1):
        e, item = examples[i], f"T{number:0{width}d}"
        text = e.original_text if role == ORIGINAL else e.perturbed_text
        rows.append(_row(item, LABEL_PART, text, "", "|".join((*e.labels, UNCLEAR))))
        items[item] = {"example": i, "role": role}
    for number, (i, adversarial_first) in enumerate(pairs, 1):
        e, item = examples[i], f"P{number:0{width}d}"
        a, b = (e.perturbed_text, e.original_text) if adversarial_first else (e.original_text, e.perturbed_text)
        rows.append(_row(item, PAIR_PART, a, b, ""))
        items[item] = {"example": i, "adversarial_first": adversarial_first}
    return rows, items


def _row(item: str, part: str, text: str, text_b: str, labels: str) -> dict[str, str]:
    return {"item": item, "part": part, "text": text, "text_b": text_b, "labels": labels, "label": "",
            "meaning": "", "fluent": ""}


def sheet_csv(rows: list[dict[str, str]]) -> str:
    """The sheet as CSV, every cell escaped against spreadsheet formulas (`robench.core.text.spreadsheet_cell`;
    `read_sheet` undoes it), as the form's script writes it."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS, lineterminator="\n")
    writer.writeheader()
    writer.writerows({k: spreadsheet_cell(v) for k, v in row.items()} for row in rows)
    return buf.getvalue()


def form_html(rows: list[dict[str, str]]) -> str:
    """The self-contained form: the sheet's rows inline (as JSON a script cannot be closed by), no network."""
    import jinja2

    env = jinja2.Environment(loader=jinja2.PackageLoader("robench.report", "templates"), autoescape=True,
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    data = json.dumps({"columns": COLUMNS, "rows": rows, "unclear": UNCLEAR}, ensure_ascii=True)
    data = data.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    from markupsafe import Markup

    return env.get_template("annotate.html.j2").render(data=Markup(data), n=len(rows))


# ---------------------------------------------------------------- import

@dataclass(frozen=True)
class Imported:
    study: str
    summaries: dict[tuple[str, str, str, str], Summary]  # (task, attack, setting, model) -> its reading
    written: list[Path]


def import_sheet(sheet: Path, key_path: Path) -> Imported:
    """Validate the filled `sheet` against `key_path`, store each runs directory's readings, summarise them."""
    key = read_key(key_path)
    examples = [Example(**{**e, "labels": tuple(e["labels"])}) for e in key["examples"]]
    rows = read_sheet(sheet)
    problems = check_sheet(rows, key, examples)
    if problems:
        more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        raise RobenchError(f"{sheet}: {len(problems)} problem(s): {'; '.join(problems[:5])}{more}; nothing "
                           "was imported")
    readings = _readings(rows, key, examples)
    homes = {d: _readings_home(Path(d)) for d in sorted({e.runs_dir for e in examples})}
    imported = datetime.now(timezone.utc).isoformat(timespec="seconds")
    by_dir: dict[str, list[Reading]] = defaultdict(list)
    for e, r in zip(examples, readings):
        by_dir[e.runs_dir].append(r)
    written = [_write(homes[d], key["study"], rs, imported) for d, rs in sorted(by_dir.items())]
    return Imported(key["study"], summaries(examples, readings), written)


def _readings_home(runs_dir: Path) -> Path:
    """Where the readings of the key's `runs_dir` (`<results_dir>/runs`) go: where every reader of that results
    directory looks (`robench.core.packed.readings_home`); a moved or missing folder is refused first."""
    from robench.core.packed import readings_home

    results = runs_dir.parent
    if not results.is_dir():
        what = "is not a folder" if results.exists() else "does not exist (moved?)"
        raise RobenchError(f"the key's results directory {results} {what}; nothing was imported: put it back where "
                           "the study was exported from")
    return readings_home(results)


def _write(home: Path, study: str, readings: list[Reading], imported: str) -> Path:
    try:
        return write_readings(home, study, readings, imported)
    except OSError as exc:  # a DiskFull's advice names flags import lacks: only its reason is kept
        reason = getattr(exc.__cause__, "strerror", None) or exc.strerror or "the write failed"
        raise RobenchError(f"cannot write the readings into {home} ({reason}); nothing more was "
                           f"imported: make {home} writable (or free space there) and import the sheet again"
                           ) from exc


def summaries(examples: list[Example], readings: list[Reading]) -> dict[tuple[str, str, str, str], Summary]:
    """Per task, attack, setting and model; and per attack setting read on several models, the pooled reading
    as model ALL_MODELS (after its models)."""
    groups: dict[tuple[str, str, str, str], list[Reading]] = defaultdict(list)
    for e, r in zip(examples, readings):
        groups[e.report_group].append(r)
    pooled: dict[tuple[str, str, str], list[tuple[str, list[Reading]]]] = defaultdict(list)
    for (task, attack, setting, model), rs in sorted(groups.items()):
        pooled[(task, attack, setting)].append((model, rs))
    out = {}
    for (task, attack, setting), models in pooled.items():
        out.update({(task, attack, setting, model): summarize(rs) for model, rs in models})
        if len(models) > 1:
            out[(task, attack, setting, ALL_MODELS)] = summarize(r for _, rs in models for r in rs)
    return out


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
        if _label(row["label"], e) is None:
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


def _readings(rows: list[dict[str, str]], key: dict[str, Any], examples: list[Example]) -> list[Reading]:
    """One reading per example, in the key's order."""
    answers: list[dict[str, Any]] = [{} for _ in examples]
    for row in rows:
        item = key["items"][row["item"]]
        mine = answers[item["example"]]
        if "role" in item:
            mine[item["role"]] = _label(row["label"], examples[item["example"]])
        else:
            mine["meaning"], mine["fluent"] = int(row["meaning"]), FLUENT[row["fluent"].lower()]
    return [Reading(key["study"], e.run_id, e.index, e.original_text, e.perturbed_text, e.gold, a[ORIGINAL],
                    a[ADVERSARIAL], a["meaning"], a["fluent"]) for e, a in zip(examples, answers)]


def _label(answer: str, example: Example) -> str | None:
    """The label name (or UNCLEAR) `answer` is, in any case; None if it is none of them."""
    return next((name for name in (*example.labels, UNCLEAR) if name.lower() == answer.lower()), None)
