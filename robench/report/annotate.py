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
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from robench.core.errors import RobenchError
from robench.core.files import atomic_write
from robench.core.hashing import content_hash
from robench.core.records import RunRecord, read_examples
from robench.core.text import spreadsheet_cell
from robench.report.annotate_sheet import (
    ADVERSARIAL,
    COLUMNS,
    FLUENT,
    KEY_FORMAT,
    LABEL_PART,
    ORIGINAL,
    PAIR_PART,
    Example,
    answer_label,
    check_sheet,
    read_key,
    read_sheet,
)
from robench.report.examples import label_names
from robench.report.readings import UNCLEAR, Reading, Summary, summarize, write_readings

MAX_N = 10_000
ALL_MODELS = "all models"  # the pooled reading of an attack setting read on several models


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


def _readings(rows: list[dict[str, str]], key: dict[str, Any], examples: list[Example]) -> list[Reading]:
    """One reading per example, in the key's order."""
    answers: list[dict[str, Any]] = [{} for _ in examples]
    for row in rows:
        item = key["items"][row["item"]]
        mine = answers[item["example"]]
        if "role" in item:
            mine[item["role"]] = answer_label(row["label"], examples[item["example"]])
        else:
            mine["meaning"], mine["fluent"] = int(row["meaning"]), FLUENT[row["fluent"].lower()]
    return [Reading(key["study"], e.run_id, e.index, e.original_text, e.perturbed_text, e.gold, a[ORIGINAL],
                    a[ADVERSARIAL], a["meaning"], a["fluent"]) for e, a in zip(examples, answers)]


