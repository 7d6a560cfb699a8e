"""`robench bench attack`: robench's `textfooler` vs TextAttack's (`textattack:textfooler`), side by side.

Both attacks run in this one process, one after the other, through `robench.run`
with the same victim checkpoint (fine-tuned once, then reused from the cache), the
same eval examples, and the same resources and thresholds: candidate table
(`synonym_source`, K, minimum cosine), sentence encoder and its mapped threshold
(`similarity_threshold` on the USE scale), window, POS rule and stopwords. Each
starts with a cold victim cache. Before timing, the checkpoint, the candidate table
and the `textattack` import are warmed, so neither run pays one-off setup.

Printed and written to `<results_dir>/bench/attack-<task>-<n>.{csv,md}`: accuracy
under attack, attack success rate, average queries (each counted as that attack
counts them; robench's lazy similarity check queries the victim more, see
`attacks/textfooler.py`), wall time of the attack stage and the speed ratio, the
process CPU time of each run (steadier than wall time on a busy shared machine),
the accuracy-under-attack difference, and per-example agreement of the outcomes.
"""
from __future__ import annotations

import argparse
import csv
import io
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

USE_THRESHOLD = 0.840845057  # TextFooler's USE threshold (angular), as in TextAttack's recipe
ROBENCH, TEXTATTACK = "textfooler", "textattack:textfooler"


@dataclass
class Side:
    """One attack's record and per-example rows (by eval index)."""

    name: str
    record: Any  # robench.results.RunRecord
    rows: dict[int, dict[str, str]]
    cpu_seconds: float  # process CPU time of the whole run() call (robust to a busy shared machine)

    @property
    def seconds(self) -> float:
        return float(self.record.timings["attack_seconds"])


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="robench bench attack", description=__doc__.splitlines()[0])
    p.add_argument("--examples", type=int, default=200, help="eval examples attacked (default: 200)")
    p.add_argument("--task", default="sst2")
    p.add_argument("--model", default="bert")
    p.add_argument("--backbone", default="minilm")
    p.add_argument("--train-size", type=int, default=2000)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--synonym-source", default="counterfitted-glove", help="counterfitted-glove or neighbors")
    p.add_argument("--sentence-encoder", default="minilm", help="minilm (calibrated thresholds) or use-m3")
    p.add_argument("--query-budget", type=int, default=None, help="per example, both attacks (default: none)")
    p.add_argument("--robench-param", action="append", default=[], metavar="KEY=VALUE",
                   help="extra robench textfooler parameter (e.g. concurrency=64)")
    p.add_argument("--data-dir")
    p.add_argument("--cache-dir")
    p.add_argument("--results-dir")
    p.add_argument("--device", default="auto")
    p.add_argument("--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    if args.examples <= 0:
        p.error("--examples must be positive")
    return args


def specs(args: argparse.Namespace, data_source: str) -> dict[str, Any]:
    """The two RunSpecs: identical but for the attack name and robench-only speed knobs."""
    from robench.params import parse_assignments
    from robench.spec import RunSpec, TrainConfig

    shared = {"synonym_source": args.synonym_source, "sentence_encoder": args.sentence_encoder, "k": 50, "min_cos": 0.5,
              "similarity_threshold": USE_THRESHOLD, "query_budget": args.query_budget}
    robench_only = {"similarity_metric": "angular", "window": 15, "skip_shorter_than_window": True,
                    "allow_verb_noun_swap": True, **parse_assignments(args.robench_param)}
    base = dict(task=args.task, model=args.model, backbone=args.backbone, seed=args.seed, train_size=args.train_size,
                eval_size=args.examples, data_source=data_source, train=TrainConfig(epochs=args.epochs))
    return {ROBENCH: RunSpec(attack=ROBENCH, attack_params={**shared, **robench_only}, **base),
            TEXTATTACK: RunSpec(attack=TEXTATTACK, attack_params=shared, **base)}


def warm_up(spec, settings, device: str, console: Console | None) -> None:
    """One-off setup outside the timed region: checkpoint, candidate table, textattack import."""
    from robench.attacks.textattack_backend import load_textattack
    from robench.resources import synonym_table
    from robench.runner import train

    train(spec, settings, device, console)
    synonym_table(settings, spec.attack_params["synonym_source"], console=console)
    load_textattack(settings)


def attack(spec, settings, device: str, console: Console | None) -> Side:
    from robench.results import RunStore
    from robench.runner import run

    cpu = time.process_time()
    record = run(spec, settings, device=device, console=console, force=True)
    cpu = time.process_time() - cpu
    text = RunStore(settings.runs_dir, spec.run_id).csv_path.read_text(encoding="utf-8")
    return Side(spec.attack, record, {int(r["index"]): r for r in csv.DictReader(io.StringIO(text))}, cpu)


def compare(ours: Side, ref: Side) -> list[tuple[str, str, str, str]]:
    """(metric, robench, textattack, comparison) rows."""
    m, r = ours.record.metrics, ref.record.metrics
    pct = lambda v: "-" if v is None else f"{100 * v:.2f}%"  # noqa: E731
    num = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    common = sorted(set(ours.rows) & set(ref.rows))
    same_status = sum(ours.rows[i]["status"] == ref.rows[i]["status"] for i in common)
    same_text = sum(ours.rows[i]["perturbed_text"] == ref.rows[i]["perturbed_text"] for i in common)
    n = m["examples"]
    diff = 100 * (m["robust_accuracy"] - r["robust_accuracy"])
    return [
        ("examples (errors)", f"{n} ({m['errors']})", f"{r['examples']} ({r['errors']})", ""),
        ("clean accuracy", pct(m["clean_accuracy"]), pct(r["clean_accuracy"]), ""),
        ("accuracy under attack", pct(m["robust_accuracy"]), pct(r["robust_accuracy"]),
         f"{diff:+.2f} points (target: within 2)"),
        ("attack success rate", pct(m["attack_success_rate"]), pct(r["attack_success_rate"]), ""),
        ("avg perturbed words %", num(m["avg_perturbed_word_pct"]), num(r["avg_perturbed_word_pct"]), ""),
        ("avg queries", num(m["avg_queries"]), num(r["avg_queries"]), "each as that attack counts"),
        ("attack wall time (s)", f"{ours.seconds:.1f}", f"{ref.seconds:.1f}",
         f"{ref.seconds / ours.seconds:.2f}x faster (target: 5x)"),
        ("seconds per example", f"{ours.seconds / n:.3f}", f"{ref.seconds / r['examples']:.3f}", ""),
        ("CPU time of the run (s)", f"{ours.cpu_seconds:.1f}", f"{ref.cpu_seconds:.1f}",
         f"{ref.cpu_seconds / ours.cpu_seconds:.2f}x less CPU"),
        ("same outcome per example", "", "", f"{same_status}/{len(common)}"),
        ("same adversarial text", "", "", f"{same_text}/{len(common)}"),
    ]


def write(rows: list[tuple[str, str, str, str]], title: str, target: Path) -> tuple[Path, Path]:
    from robench.results import atomic_write

    header = ("metric", ROBENCH, TEXTATTACK, "comparison")
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(header)
    writer.writerows(rows)
    md = [f"### {title}", "", "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(row) + " |" for row in rows]
    csv_path, md_path = target.with_suffix(".csv"), target.with_suffix(".md")
    atomic_write(csv_path, buf.getvalue())
    atomic_write(md_path, "\n".join(md) + "\n")
    return csv_path, md_path


def main(argv: list[str]) -> None:
    from robench.device import pick_device
    from robench.settings import resolve_settings

    args = parse_args(argv)
    settings = resolve_settings(args.data_dir, args.cache_dir, args.results_dir)
    device = str(pick_device(args.device))
    console = None if args.quiet else Console(stderr=True)
    both = specs(args, "local" if settings.data_dir is not None else "hub")
    warm_up(both[ROBENCH], settings, device, console)
    ours = attack(both[ROBENCH], settings, device, console)
    ref = attack(both[TEXTATTACK], settings, device, console)
    title = (f"TextFooler on {args.task}: robench vs TextAttack 0.3.11 ({args.model}/{args.backbone}, "
             f"train {args.train_size}×{args.epochs} ep, {args.examples} examples, seed {args.seed}, {device}, "
             f"synonyms {args.synonym_source}, encoder {args.sentence_encoder})")
    rows = compare(ours, ref)
    table = Table(title=title)
    for col in ("metric", ROBENCH, TEXTATTACK, "comparison"):
        table.add_column(col, justify="left" if col in ("metric", "comparison") else "right")
    for row in rows:
        table.add_row(*row)
    Console(width=max(Console().width, 132)).print(table)
    csv_path, md_path = write(rows, title, settings.results_dir / "bench" / f"attack-{args.task}-{args.examples}")
    print(f"wrote {csv_path} and {md_path}; run records in {settings.runs_dir}")
