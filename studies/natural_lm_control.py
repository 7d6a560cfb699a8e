"""TextFooler's success rate on 5 seeds, and what the attack leaves the positive control, under issue 57's read
setting (registered in results/preregistration/natural-lm-control.md; docs/studies/natural.md).

Records: results/natural-lm-control (packed): TextFooler on the whole SST-2 dev split (872 sentences), bert and
a2t (the reference's spec), seeds 0-4. Per model: each seed's success rate (successful / attacked), the rate
pooled over the seeds, the mean over seeds with its t interval (S - 1 df), clean accuracy, accuracy under attack
and the points the attack removes (means over seeds), and whether every training beat chance (`metrics.chance`).
The control itself, a2t minus bert paired over seeds and sentences, is `robench compare --results-dir
results/natural-lm-control --baseline bert`.

    python studies/natural_lm_control.py     # writes results/natural-lm-control/success.md and prints it
"""
import json
import statistics
from collections import defaultdict
from pathlib import Path

from scipy import special

from robench.core.packed import runs_to_read

RESULTS = Path(__file__).resolve().parents[1] / "results" / "natural-lm-control"
HEADER = ("| model | seeds | success rate per seed | pooled | mean over seeds [95% t interval] | clean | under attack "
          "| points removed | trained (beat chance) |\n|---|---|---|---|---|---|---|---|---|")


def by_model(results: Path) -> dict[str, list[dict]]:
    records: dict[str, list[dict]] = defaultdict(list)
    for path in sorted(runs_to_read(results).glob("*.json")):
        record = json.loads(path.read_text())
        records[record["spec"]["model"]].append(record)
    return {model: sorted(rs, key=lambda r: r["spec"]["seed"]) for model, rs in records.items()}


def row(model: str, records: list[dict]) -> str:
    metrics = [r["metrics"] for r in records]
    rates = [m["successful"] / (m["successful"] + m["failed"]) for m in metrics]
    pooled = sum(m["successful"] for m in metrics), sum(m["successful"] + m["failed"] for m in metrics)
    mean, sd = statistics.mean(rates), statistics.stdev(rates) if len(rates) > 1 else float("nan")
    half = float(special.stdtrit(len(rates) - 1, 0.975)) * sd / len(rates) ** 0.5
    clean = statistics.mean(m["clean_accuracy"] for m in metrics)
    robust = statistics.mean(m["robust_accuracy"] for m in metrics)
    trained = sum(all(c["trained"] for c in m["chance"]) for m in metrics)
    seeds = ",".join(str(r["spec"]["seed"]) for r in records)
    return (f"| {model} | {seeds} | {', '.join(f'{x:.1%}' for x in rates)} | {pooled[0] / pooled[1]:.1%} "
            f"({pooled[0]}/{pooled[1]}) | {mean:.1%} [{mean - half:.1%}, {mean + half:.1%}] | {clean:.1%} "
            f"| {robust:.1%} | {100 * (clean - robust):.1f} | {trained} of {len(records)} |")


def main(out: Path = RESULTS, results: Path = RESULTS) -> str:
    models = by_model(results)
    text = "\n".join([HEADER, *(row(m, models[m]) for m in ("bert", "a2t") if m in models)]) + (
        "\n\nTextFooler, `budget=natural min_cos=0.7 encoder_threshold=0.9 sense_min_cos=0.6 fluency_max_drop=0`, "
        "the whole SST-2 dev split; attacked = correctly classified. Written by studies/natural_lm_control.py.\n")
    (out / "success.md").write_text(text)
    return text


if __name__ == "__main__":
    print(main(), end="")
