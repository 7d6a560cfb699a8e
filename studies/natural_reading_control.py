"""The reader control of issue 57's reading (docs/studies/natural.md): is the low fluent share of the language
model's selections the readers' strictness, or the selection?

One fresh reader (a helper session, the same part-2 brief as the reading) rated 68 pairs, shuffled, A and B in
random order: the 28 pairs of the earlier readings whose LM score is at least 0 (read then as 93% fluent: the
calibration's top band) and 40 distinct pairs drawn (seed 7) from issue 57's reading, all at least 0 by the
constraint. results/natural-lm-reading/studies/control/: the filled sheet and the key (each item's source).

    python studies/natural_reading_control.py     # writes results/natural-lm-reading/control.md and prints it
"""
import csv
import json
from pathlib import Path

from robench.report.stats import wilson_interval

STUDY = Path(__file__).resolve().parents[1] / "results" / "natural-lm-reading" / "studies" / "control"


def share(k: int, n: int) -> str:
    low, high = wilson_interval(k, n)
    return f"{k / n:.0%} [{low:.0%}, {high:.0%}] ({k}/{n})"


def main(out: Path = STUDY.parents[1]) -> str:
    with open(STUDY / "filled.csv", newline="") as fh:
        filled = {row["item"]: row for row in csv.DictReader(fh)}
    key = json.loads((STUDY / "key.json").read_text())
    lines = []
    for source, name in (("old", "earlier readings, LM score >= 0"), ("new", "issue 57's reading (LM 0 nats)")):
        items = [filled[k["item"]] for k in key if k["source"] == source]
        fluent = sum(row["fluent"].strip().lower() == "yes" for row in items)
        meaning = sum(int(row["meaning"]) >= 3 for row in items)
        lines.append(f"{name}: fluent {share(fluent, len(items))}, meaning kept {share(meaning, len(items))}")
    text = "\n".join(lines) + "\n"
    (out / "control.md").write_text(text)
    return text


if __name__ == "__main__":
    print(main())
