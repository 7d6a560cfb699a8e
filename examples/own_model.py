"""Benchmark your own model on your own data, three ways, and compare them in one table.

    python examples/own_model.py --data-dir ../shared/data      # the attack's offline resources live there

1. A task file: robench fine-tunes `--backbone` on examples/reviews.toml (40 reviews from
   tests/data/reviews.csv) and attacks it with TextFooler (`robench.run`, like `robench run --task FILE`).
2. The checkpoint that wrote, attacked again by path (`robench.evaluate(path)`, like `robench run
   --checkpoint PATH`), then the same weights loaded in memory (`robench.evaluate(model, tokenizer)`):
   all three give the same numbers, and the last two are one run (one identity per set of weights).
3. A plain function `list[str] -> logits` (keyword rules), named because robench cannot hash a function.

Records go to `--results-dir` (default results/example); `robench show RUN_ID --results-dir ...` prints a
run's adversarial examples.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

import robench
from robench.core.paths import resolve_settings
from robench.core.records import RunRecord
from robench.data.file_tasks import file_task_definition

HERE = Path(__file__).resolve().parent
ATTACK = {"synonym_source": "neighbors"}  # counter-fitted neighbour lists from the data dir: no vectors to build
NEGATIVE = ("dull", "boring", "awful", "worst", "lazy", "tedious", "slow", "flat", "ugly", "cheap", "mess")


def keyword_model(texts: list[str]) -> np.ndarray:
    """Logits (neg, pos): negative when a review uses a word from a short list."""
    return np.array([[1.0, 0.0] if any(w in t.lower() for w in NEGATIVE) else [0.0, 1.0] for t in texts])


def main(argv: list[str] | None = None) -> list[RunRecord]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backbone", default="minilm", help="what to fine-tune in step 1 (default: minilm)")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--eval-size", type=int, default=20, help="reviews to attack (default: 20)")
    parser.add_argument("--data-dir", help="default: $ROBENCH_DATA_DIR")
    parser.add_argument("--cache-dir", help="default: $ROBENCH_CACHE_DIR or ~/.cache/robench")
    parser.add_argument("--results-dir", default="results/example")
    args = parser.parse_args(argv)
    settings = resolve_settings(args.data_dir, args.cache_dir, args.results_dir)
    common = dict(attack="textfooler", eval_size=args.eval_size, attack_params=ATTACK)

    task = file_task_definition(str(HERE / "reviews.toml"), cache_dir=settings.cache_dir)
    spec = robench.RunSpec(task=task["name"], task_source=task, model="bert", backbone=args.backbone,
                           train=robench.TrainConfig(epochs=args.epochs, batch_size=8, lr=1e-4, max_length=64),
                           **common)
    trained = robench.run(spec, settings)
    checkpoint = robench.evaluate(trained.checkpoint, task=str(HERE / "reviews.toml"), max_length=64,
                                  settings=settings, **common)

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    model = AutoModelForSequenceClassification.from_pretrained(trained.checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(trained.checkpoint)
    in_memory = robench.evaluate(model, tokenizer, task=str(HERE / "reviews.toml"), max_length=64,
                                 settings=settings, **common)
    function = robench.evaluate(keyword_model, name="keywords", task=str(HERE / "reviews.toml"), settings=settings,
                                **common)

    records = [trained, checkpoint, in_memory, function]
    table = Table(title=f"TextFooler on {args.eval_size} reviews (tests/data/reviews.csv)")
    for column in ("model", "clean acc.", "acc. under attack", "success rate", "queries", "run id"):
        table.add_column(column)
    for r in records:
        m = r.metrics
        success = "–" if m["attack_success_rate"] is None else f"{100 * m['attack_success_rate']:.1f}%"
        table.add_row(r.spec["model"], f"{100 * m['clean_accuracy']:.1f}%", f"{100 * m['robust_accuracy']:.1f}%",
                      success, f"{m['avg_queries'] or 0:.1f}", r.run_id)
    Console().print(table)
    return records


if __name__ == "__main__":
    main()
