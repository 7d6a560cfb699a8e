"""The blind reading of the `natural` setting (issue 43; docs/studies/natural.md): per attack, how many sentences
were attacked, how many broke, and what blind readers said of the successful examples (label kept, meaning kept,
fluent, valid: all three; the originals labelled as gold as the readers' control), with Wilson 95% intervals.

The records: results/natural-reading (packed): the reference's bert checkpoints under `budget=natural` on the
whole SST-2 dev split (seeds 0-1 for TextFooler and gradient-swap, 0-4 for BERT-Attack, whose success rate is a
third of theirs) and on the 1,821 labelled SST-2 test sentences (seed 0; BERT-Attack seeds 0-4). The readings:
results/natural-reading/readings/<study>.json, one `robench annotate` study per attack (sheet and key in
results/natural-reading/studies/).

    python studies/natural_reading.py     # writes results/natural-reading/reading.md and prints it

The second reading (issue 57): results/natural-lm-reading, the frontier's best setting with the language model
(`python studies/natural_reading.py results/natural-lm-reading`): bert seed 0 on the whole SST-2 dev split and
the 1,821 labelled test sentences; BERT-Attack, whose success rate there is a quarter of the others', also on
8,286 MR sentences outside SST-2's dev, test and training rows (results/preregistration/
natural-lm-reading-bert-attack.md).
"""
import json
import sys
from collections import defaultdict
from pathlib import Path

from robench.core.packed import runs_to_read
from robench.report.readings import load_readings, summarize

RESULTS = Path(__file__).resolve().parents[1] / "results" / "natural-reading"
ATTACKS = ("textfooler", "gradient-swap", "bert-attack")
NOTE = ("Readers: helper sessions (language-model agents) that did not build or tune the filters, two per attack "
        "(one labelled every text blind, originals and adversarial texts shuffled together; one rated the pairs for "
        "meaning and fluency), each seeing only its half of the sheet. Each original is read once per attack "
        "(`robench annotate export` draws distinct originals). Written by studies/natural_reading.py.")


def records_by_run(results: Path) -> dict[str, dict]:
    runs = runs_to_read(results)
    return {path.stem: json.loads(path.read_text()) for path in sorted(runs.glob("*.json"))}


def row(attack: str, records: list[dict], readings: list) -> str:
    metrics = [r["metrics"] for r in records]
    successful = sum(m["successful"] for m in metrics)
    attacked = successful + sum(m["failed"] for m in metrics)
    summary = summarize(readings)
    rates = (summary.label_kept, summary.meaning_kept, summary.fluent, summary.valid, summary.originals_as_gold)
    return (f"| {attack} | {len(records)} | {attacked} | {successful / attacked:.1%} ({successful}) | {summary.n} | "
            + " | ".join(rate.text() for rate in rates) + " |")


def setting(records: list[dict]) -> str:
    """The attack setting the records share: the budget, then any knob it moves (`natural min_cos=0.7 ...`)."""
    def value(v: object) -> str:  # 0 (from the command line) and 0.0 (from Python) are one value
        return f"{float(v):g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)

    labels = {" ".join([r["spec"]["attack_params"]["budget"]]
                       + [f"{k}={value(v)}" for k, v in sorted(r["spec"]["attack_params"].items()) if k != "budget"])
              for r in records}
    return " / ".join(sorted(labels))


def main(out: Path = RESULTS, results: Path = RESULTS) -> str:
    records = records_by_run(results)
    by_attack: dict[str, list] = defaultdict(list)
    for reading in load_readings(results):
        by_attack[records[reading.run_id]["spec"]["attack"]].append(reading)
    lines = [f"| attack (`{setting(list(records.values()))}`) | runs | attacked | success rate (successful) | read | "
             "label kept | meaning kept (>= 3 of 4) | fluent | valid (all three) | originals read as gold |",
             "|---" * 10 + "|"]
    for attack in ATTACKS:
        runs = [r for r in records.values() if r["spec"]["attack"] == attack]
        if runs:
            lines.append(row(attack, runs, by_attack[attack]))
    text = "\n".join(lines) + "\n\n" + NOTE + "\n"
    (out / "reading.md").write_text(text)
    return text


if __name__ == "__main__":
    where = Path(sys.argv[1]).resolve() if len(sys.argv) > 1 else RESULTS
    print(main(where, where))
