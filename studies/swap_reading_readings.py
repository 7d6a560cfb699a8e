"""The hand readings of successful TextFooler swaps, summarised (docs/studies/attacks.md, "Reading the swaps"). Writes
readings.json; needs no data dir.

    python studies/swap_reading_readings.py

Each .tsv row is one swap in its sentence, read by one reader (the lead engineer) as `keeps` (same meaning,
grammatical), `grammar` (same meaning, ungrammatical: "as we journey" -> "as we trips") or `changes` (another
meaning, or none: "a witty script" -> "a spiritual script"):

* swaps.tsv: 160 distinct pairs from all 12 attack-validity TextFooler records (4 defences x 3 seeds; the
  `lexicon` source under the textdefender budget, before `wordnet_pos`), read before any signal was computed;
* reading2.tsv: 70 + 70 swaps from bert's three checkpoints under the default (`wordnet_pos`, seeds 0-2,
  results/evidence-cpu/pos-in-context) and the default plus `min_context_cos=0.6` (seeds 0-1,
  results/evidence-cpu/context-filter), distinct per attack, shuffled together and read blind to the attack;
* reading3.tsv: all 53 swaps of bert's three TextFooler records under `morris2020`
  (results/evidence-cpu/attack-validity), read after reading 2.

Shares with 95% Wilson intervals (swaps as independent draws; several come from one sentence).
"""
import csv
import json
from collections import Counter, defaultdict
from pathlib import Path

from robench.report.stats import wilson_interval

HERE = Path(__file__).resolve().parents[1] / "results" / "evidence-cpu" / "swap-reading"
LABELS = ("keeps", "grammar", "changes")


def summary(path: Path, default_attack: str) -> dict:
    groups = defaultdict(list)
    for row in csv.DictReader(path.open(encoding="utf-8"), delimiter="\t"):
        groups[row.get("attack", default_attack)].append(row["label"])
    out = {}
    for attack, labels in groups.items():
        n, counts = len(labels), Counter(labels)
        shares = {k: counts[k] / n for k in LABELS}
        low, high = wilson_interval(counts["keeps"] + counts["grammar"], n)
        out[attack] = {"swaps": n, **shares, "meaning_kept": (counts["keeps"] + counts["grammar"]) / n,
                       "meaning_kept_ci": [low, high]}
    return out


def main() -> None:
    out = {"reading1 (swaps.tsv)": summary(HERE / "swaps.tsv", "textdefender, before wordnet_pos, 12 models"),
           "reading2 (reading2.tsv)": summary(HERE / "reading2.tsv", ""),
           "reading3 (reading3.tsv)": summary(HERE / "reading3.tsv", "")}
    (HERE / "readings.json").write_text(json.dumps(out, indent=1))
    for reading, attacks in out.items():
        for attack, s in attacks.items():
            print(f"| {reading} | {attack} | {s['swaps']} | {100 * s['keeps']:.0f} | {100 * s['grammar']:.0f} | "
                  f"{100 * s['changes']:.0f} | {100 * s['meaning_kept']:.0f} [{100 * s['meaning_kept_ci'][0]:.0f}, "
                  f"{100 * s['meaning_kept_ci'][1]:.0f}] |")


if __name__ == "__main__":
    main()
