"""What the `natural` setting costs against the field's `textdefender` (docs/studies/natural.md): the same checkpoints
(bert and a2t, 3,000 SST-2 sentences x 2 epochs, seeds 0-4) and the same 300 SST-2 dev sentences, attacked by
TextFooler and gradient-swap under both settings. `textdefender` from results/reference, `natural` from
results/natural (both packed). Per model, attack and setting: the seeds, clean accuracy, the success rate (pooled
over the seeds: successful / attacked), accuracy under attack (mean over seeds, min-max), victim queries and attack
seconds per example, and the victim's share of the attack's time (the rest: search, candidates and filters).

    python studies/natural_cost.py     # writes results/natural/cost.md and prints it
"""
import json
from collections import defaultdict
from pathlib import Path

from robench.core.packed import runs_to_read

RESULTS = Path(__file__).resolve().parents[1] / "results"
MODELS, ATTACKS, SETTINGS = ("bert", "a2t"), ("textfooler", "gradient-swap"), ("textdefender", "natural")
NOTE = ("One thread per run on the 2-core machine shared with other work (the natural runs at load 8-15), so seconds "
        "are upper bounds; the queries and the victim's share do not depend on load. Written by "
        "studies/natural_cost.py.")


def setting_of(record: dict) -> str:
    return (record["spec"].get("attack_params") or {}).get("budget", "textdefender")


def collect() -> dict[tuple[str, str, str], list[dict]]:
    cells: dict[tuple[str, str, str], list[dict]] = defaultdict(list)
    for folder in ("reference", "natural"):
        for path in sorted(runs_to_read(RESULTS / folder).glob("*.json")):
            record = json.loads(path.read_text())
            spec = record["spec"]
            if spec["model"] in MODELS and spec["attack"] in ATTACKS and spec.get("train_size") == 3000:
                cells[(spec["model"], spec["attack"], setting_of(record))].append(record)
    return cells


def row(model: str, attack: str, setting: str, records: list[dict]) -> str:
    metrics = [r["metrics"] for r in records]
    timings = [r["timings"] for r in records]
    successful = sum(m["successful"] for m in metrics)
    attacked = successful + sum(m["failed"] for m in metrics)
    robust = [m["robust_accuracy"] for m in metrics]
    examples = sum(m["examples"] for m in metrics)
    queries = sum(t["victim_queries"] for t in timings) / examples
    seconds = sum(t["attack_seconds"] for t in timings) / examples
    share = sum(t["victim_forward_seconds"] for t in timings) / sum(t["attack_seconds"] for t in timings)
    clean = sum(m["clean_accuracy"] for m in metrics) / len(metrics)
    seeds = ",".join(str(r["spec"]["seed"]) for r in sorted(records, key=lambda r: r["spec"]["seed"]))
    return (f"| {model} | {attack} | {setting} | {seeds} | {clean:.1%} | {successful / attacked:.1%} "
            f"({successful}/{attacked}) | {sum(robust) / len(robust):.1%} ({min(robust):.1%}-{max(robust):.1%}) | "
            f"{queries:.1f} | {seconds:.2f} | {share:.0%} |")


def main(out: Path = RESULTS / "natural") -> str:
    cells = collect()
    lines = ["| model | attack | setting | seeds | clean | success rate | accuracy under attack | queries / example | "
             "attack s / example | victim share |", "|---|---|---|---|---|---|---|---|---|---|"]
    lines += [row(m, a, s, cells[(m, a, s)]) for a in ATTACKS for m in MODELS for s in SETTINGS if cells[(m, a, s)]]
    text = "\n".join(lines) + "\n\n" + NOTE + "\n"
    (out / "cost.md").write_text(text)
    return text


if __name__ == "__main__":
    print(main())
