"""One vocabulary of verdicts (docs/guide/statistics.md, "The words"; robench.report.stats): every generated
output, the README and the guides say "more robust" / "less robust", "inconclusive: differences up to D points
cannot be ruled out" with its D, "overlapping" for the page's ranks, a claim's "smaller / larger than claimed",
or why there is no verdict; and none of the words that meant something else in each place."""
import json
import re
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
    assert OVERLAPPING in (REPO / "robench" / "report" / "leaderboard_page.py").read_text()
