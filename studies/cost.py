"""The measured cost per cell kind of the v3 reference (docs/studies/reference.md, "v3: measured cost"): from every
record of results/reference, per model the training seconds of its checkpoints (3,000 sentences x 2
epochs; each checkpoint counted once) and per model and attack the attack seconds per example, as min-max over
the records. One thread each (SAFER's seed 4: two, alone), on the 2-core machine shared with other work, so the
spread is mostly load.

    python studies/cost.py        # writes results/reference/cost.md and prints it; needs no data dir
"""
import json
from collections import defaultdict
from pathlib import Path

from robench.core.packed import runs_to_read

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference"
ORDER = ("bert", "a2t", "imbert", "freelb", "smart", "pgd", "ascc", "safer")  # the grid's
ATTACKS = ("advglue", "textfooler", "bert-attack", "gradient-swap")
NOTE = ("One thread per cell, min-max over the records (timings.train_seconds, timings.attack_seconds); the machine "
        "ran 2-4 such processes on its 2 cores, so the upper ends are load. SAFER's seed 4 ran alone with two "
        "threads (SAFER's lower ends). Written by studies/cost.py.")


def span(values: list[float], digits: int) -> str:
    if not values:
        return "–"
    lo, hi = min(values), max(values)
    return f"{lo:.{digits}f}" if round(lo, digits) == round(hi, digits) else f"{lo:.{digits}f}-{hi:.{digits}f}"


def main(out: Path = REFERENCE) -> None:
    train: dict[str, dict[str, float]] = defaultdict(dict)  # model -> checkpoint -> seconds
    attack: dict[tuple[str, str], list[float]] = defaultdict(list)
    for path in sorted(runs_to_read(REFERENCE).glob("*.json")):
        record = json.loads(path.read_text())
        spec, timings = record["spec"], record["timings"]
        if spec.get("train_size") != 3000:
            continue  # the low-resource and QNLI grids are sized apart
        train[spec["model"]][record["checkpoint"]] = timings["train_seconds"]
        examples = record["metrics"].get("examples") or spec["eval_size"] or 148
        attack[(spec["model"], spec["attack"])].append(timings["attack_seconds"] / examples)
    models = sorted(train, key=lambda m: ORDER.index(m) if m in ORDER else len(ORDER))
    lines = ["| cell | " + " | ".join(models) + " |", "|---|" + "---|" * len(models),
             "| checkpoints trained | " + " | ".join(str(len(train[m])) for m in models) + " |",
             "| train 3,000 x 2 epochs, s | " + " | ".join(span(list(train[m].values()), 0) for m in models) + " |"]
    lines += [f"| {a}, s per example | " + " | ".join(span(attack[(m, a)], 2) for m in models) + " |"
              for a in ATTACKS]
    text = "\n".join(lines + ["", NOTE]) + "\n"
    (out / "cost.md").write_text(text)
    print(text, end="")


if __name__ == "__main__":
    main()
