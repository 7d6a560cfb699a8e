"""One vocabulary of verdicts (docs/guide/statistics.md, "The words"; robench.report.stats): every generated
output, the README and the guides say "more robust" / "less robust", "inconclusive: differences up to D points
cannot be ruled out" with its D, "overlapping" for the page's ranks, a claim's "smaller / larger than claimed",
or why there is no verdict; and none of the words that meant something else in each place."""
import html
import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from robench.report.stats import INCONCLUSIVE, LESS_ROBUST, MORE_ROBUST, NO_VERDICT, OVERLAPPING, inconclusive_text

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
PROTOCOLS = ("reference", "reference-lowres", "reference-qnli")
# words that said one of these things before, each with another meaning somewhere (issue 58)
RETIRED = re.compile(r"distinguishable|no difference found|\bconfirmed\b|\brefuted\b|undetermined", re.IGNORECASE)
D = r"differences up to \d+\.\d points cannot be ruled out"
CLAIMED = r"(smaller|larger) than claimed( \(borderline: Holm p 0\.04\d+\))?"
VERDICT = re.compile("|".join([re.escape(MORE_ROBUST) + r"( \(borderline: Holm p 0\.04\d+\))?",
                               re.escape(LESS_ROBUST) + r"( \(borderline: Holm p 0\.04\d+\))?",
                               f"{INCONCLUSIVE}: {D}", CLAIMED, *map(re.escape, NO_VERDICT)]))


def generated_texts() -> dict[str, str]:
    """Every committed generated output that prints verdicts, and the README and guides."""
    paths = [RESULTS / name / f for name in PROTOCOLS for f in ("compare.txt", "leaderboard.md", "settings.md")]
    paths += [RESULTS / "reference" / "claims.md", RESULTS / "natural" / "compare.txt", REPO / "README.md",
              *sorted((REPO / "docs" / "guide").glob("*.md")),
              REPO / "robench" / "report" / "templates" / "_section.html.j2"]
    return {str(p.relative_to(REPO)): p.read_text(encoding="utf-8") for p in paths if p.is_file()}


@pytest.mark.parametrize("name", sorted(generated_texts()))
def test_no_retired_verdict_words(name):
    found = RETIRED.findall(generated_texts()[name])
    assert not found, f"{name} says {sorted(set(found))}"


@pytest.mark.parametrize("name", [n for n in sorted(generated_texts()) if n.startswith("results/")])
def test_every_inconclusive_verdict_prints_its_d(name):
    text = " ".join(generated_texts()[name].split())  # table cells wrap; the words do not depend on it
    verdicts = re.findall(rf"{INCONCLUSIVE}\S*(?: [^|│]*)?", text)
    bare = [v for v in verdicts if not re.match(rf"{INCONCLUSIVE}: {D}", v) and "its D" not in v
            and not v.startswith(f"{INCONCLUSIVE}: not,")]  # the notes' definition of the word
    assert not bare, f"{name}: {bare[:3]}"


@pytest.mark.parametrize("name", PROTOCOLS)
def test_the_leaderboard_csv_verdicts_are_in_the_vocabulary(name):
    table = pd.read_csv(RESULTS / name / "leaderboard.csv")
    said = [v for c in table.columns if c.endswith(".robust_accuracy_diff_verdict") for v in table[c].dropna()]
    assert said and all(VERDICT.fullmatch(v) for v in said), [v for v in said if not VERDICT.fullmatch(v)]
    for column in (c for c in table.columns if c.endswith(".robust_accuracy_diff_family_name")):
        assert set(table[column].dropna()) <= {"exploratory", "claims"}


def test_the_claims_verdicts_are_in_the_vocabulary():
    said = [row["verdict"] for row in json.loads((RESULTS / "reference" / "claims.json").read_text())]
    assert said and all(VERDICT.fullmatch(v) for v in said), said


def test_the_words_come_from_one_place():
    assert inconclusive_text(0.0834) == "inconclusive: differences up to 8.3 points cannot be ruled out"
    assert inconclusive_text(float("nan")) == INCONCLUSIVE


def test_the_leaderboard_page_uses_the_words(tmp_path, shared_data, monkeypatch):
    """The page of a published protocol (QNLI: the smallest): its rank legend says "overlapping", each cell's
    tooltip its family and the verdict's words, and no retired word anywhere."""
    from robench.core.packed import EXAMPLES, RECORDS
    from robench.report.leaderboard import write_leaderboard
    from robench.report.leaderboard_page import write_html

    monkeypatch.setenv("ROBENCH_DATA_DIR", str(shared_data))
    for name in (RECORDS, EXAMPLES):
        shutil.copy(RESULTS / "reference-qnli" / name, tmp_path / name)
    table, *_ = write_leaderboard(tmp_path, baseline="bert", cache_dir=tmp_path / "cache")
    page = write_html(tmp_path, tmp_path / "board.html", baseline="bert", table=table,
                      cache_dir=tmp_path / "cache").read_text(encoding="utf-8")
    text = html.unescape(page)
    assert f"overlap are {OVERLAPPING}" in text and "≈ inconclusive" in text
    assert "(claims, 10): insufficient seeds" in text  # the claim's row, in its family, as claims.md says
    assert not RETIRED.findall(text), sorted(set(RETIRED.findall(text)))
