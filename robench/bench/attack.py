"""`robench bench attack`: robench's `textfooler` vs TextAttack's (`textattack:textfooler`), side by side.

The attacks run in this one process, one after the other, through `robench.run`
with the same victim checkpoint (fine-tuned once, then reused from the cache), the
same eval examples, and the same resources and thresholds: candidate table
(`synonym_source`, K, minimum cosine), sentence encoder and its mapped threshold
(`similarity_threshold` on the USE scale), window, POS rule and stopwords. Each
starts with a cold victim cache. Before timing, the checkpoint, the candidate table
and the `textattack` import are warmed, so no run pays one-off setup.

Columns: robench's textfooler; TextAttack's recipe querying the robench victim
(the `textattack:textfooler` entry: same batching, cache and dynamic padding, so
the difference is the attack algorithm); and, unless `--no-stock`, TextAttack as
shipped, through its `HuggingFaceModelWrapper` (pads every batch to the
tokenizer's maximum length, 512 for MiniLM), the way users run it.

Printed and written to `<results_dir>/bench/attack-<task>-<n>.{csv,md}`: accuracy
under attack and its difference to robench, attack success rate, average queries
(each counted as that attack counts them; robench's lazy similarity check queries
the victim more, see `attacks/textfooler.py`), wall time of the attack stage and
robench's speed-up, the process CPU time of each run (steadier than wall time on a
busy shared machine), and per-example agreement with robench's outcomes and texts.
"""
from __future__ import annotations

import csv
import io
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from robench.core.errors import RobenchError
from robench.core.paths import Settings

USE_THRESHOLD = 0.840845057  # TextFooler's USE threshold (angular), as in TextAttack's recipe
ROBENCH, TEXTATTACK = "textfooler", "textattack:textfooler"
STOCK = "textattack:textfooler (stock wrapper)"  # TextAttack as shipped: HuggingFaceModelWrapper, max-length padding


@dataclass
class Side:
    """One attack's record and per-example rows (by eval index)."""

    record: Any  # robench.runs.store.RunRecord
    rows: dict[int, dict[str, str]]
    cpu_seconds: float  # process CPU time of the whole run() call (robust to a busy shared machine)

    @property
    def seconds(self) -> float:
        return float(self.record.timings["attack_seconds"])


@dataclass(frozen=True)
class AttackBenchOptions:
    """The victim, the examples and the shared resources (`robench bench attack` flags of the same names)."""

    examples: int = 200  # eval examples attacked
    task: str = "sst2"  # a registered task, a task file (my_task.toml) or csv:FILE (tsv:, jsonl:, parquet:)
    text_column: str | None = None  # with --task FORMAT:FILE (two comma-separated for sentence pairs)
    label_column: str | None = None
    labels: str | None = None  # with --task FORMAT:FILE: the label names, comma-separated
    model: str = "bert"
    backbone: str = "minilm"
    train_size: int = 2000
    epochs: int = 2
    seed: int = 0
    synonym_source: str = "counterfitted-glove"  # or neighbors
    sentence_encoder: str = "minilm"  # minilm (calibrated thresholds) or use-m3
    query_budget: int | None = None  # per example, both attacks
    stock: bool = True  # also run TextAttack with its stock HuggingFaceModelWrapper (the slowest)
    robench_params: dict[str, Any] = field(default_factory=dict)  # extra robench textfooler parameters
    device: str = "auto"

    def __post_init__(self) -> None:
        if self.examples <= 0:
            raise RobenchError("--examples must be positive")


def specs(options: AttackBenchOptions, data_source: str, settings: Settings | None = None) -> dict[str, Any]:
    """RunSpecs by column label: identical but for the attack, robench-only speed knobs and TextAttack's wrapper.
    The task is any `--task` form (`robench.runs.options.task_spec`; a file task needs `settings`)."""
    from robench.runs.options import task_spec
    from robench.runs.spec import RunSpec, TrainConfig

    shared = {"synonym_source": options.synonym_source, "sentence_encoder": options.sentence_encoder, "k": 50,
              "min_cos": 0.5, "similarity_threshold": USE_THRESHOLD, "query_budget": options.query_budget}
    robench_only = {"similarity_metric": "angular", "window": 15, "skip_shorter_than_window": True,
                    "allow_verb_noun_swap": True, **options.robench_params}
    task = {"task": options.task} if settings is None else task_spec(
        options.task, settings, _split(options.text_column), options.label_column, _split(options.labels))
    base = dict(model=options.model, backbone=options.backbone, seed=options.seed, train_size=options.train_size,
                eval_size=options.examples, data_source=data_source, train=TrainConfig(epochs=options.epochs))
    base.update(task)  # a file task: its name, definition and the local data source
    out = {ROBENCH: RunSpec(attack=ROBENCH, attack_params={**shared, **robench_only}, **base),
           TEXTATTACK: RunSpec(attack=TEXTATTACK, attack_params=shared, **base)}
    if options.stock:
        out[STOCK] = RunSpec(attack=TEXTATTACK, attack_params={**shared, "model_wrapper": "huggingface"}, **base)
    return out


def _split(text: str | None) -> list[str] | None:
    return [part.strip() for part in text.split(",") if part.strip()] if text else None


def warm_up(spec, settings, device: str, console: Console | None) -> None:
    """One-off setup outside the timed region: checkpoint, candidate table, textattack import."""
    from robench.attacks.textattack.compat import load_textattack
    from robench.engine.resources import synonym_table
    from robench.runs.runner import train

    train(spec, settings, device, console)
    synonym_table(settings, spec.attack_params["synonym_source"], console=console)
    load_textattack(settings)


def attack(spec, settings, device: str, console: Console | None) -> Side:
    from robench.runs.runner import run
    from robench.runs.store import RunStore

    cpu = time.process_time()
    record = run(spec, settings, device=device, console=console, force=True)
    cpu = time.process_time() - cpu
    text = RunStore(settings.runs_dir, record.run_id).csv_path.read_text(encoding="utf-8")
    return Side(record, {int(r["index"]): r for r in csv.DictReader(io.StringIO(text))}, cpu)


def compare(sides: list[Side]) -> list[list[str]]:
    """One row per metric, one column per side; ratios and agreement are relative to the first (robench)."""
    ours = sides[0]
    pct = lambda v: "-" if v is None else f"{100 * v:.2f}%"  # noqa: E731
    num = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731

    def agree(side: Side, column: str) -> str:
        common = sorted(set(ours.rows) & set(side.rows))
        return f"{sum(ours.rows[i][column] == side.rows[i][column] for i in common)}/{len(common)}"

    metrics = [s.record.metrics for s in sides]
    rows = [
        ["examples (errors)"] + [f"{m['examples']} ({m['errors']})" for m in metrics],
        ["clean accuracy"] + [pct(m["clean_accuracy"]) for m in metrics],
        ["accuracy under attack"] + [pct(m["robust_accuracy"]) for m in metrics],
        ["  difference to robench (points; target: within 2)"] + [
            f"{100 * (m['robust_accuracy'] - metrics[0]['robust_accuracy']):+.2f}" for m in metrics],
        ["attack success rate"] + [pct(m["attack_success_rate"]) for m in metrics],
        ["avg perturbed words %"] + [num(m["avg_perturbed_word_pct"]) for m in metrics],
        ["avg queries (as each attack counts)"] + [num(m["avg_queries"]) for m in metrics],
        ["attack wall time (s)"] + [f"{s.seconds:.1f}" for s in sides],
        ["seconds per example"] + [f"{s.seconds / max(m['examples'], 1):.3f}" for s, m in zip(sides, metrics)],
        ["  robench speed-up, wall (target: 5x)"] + [f"{s.seconds / ours.seconds:.2f}x" for s in sides],
        ["CPU time of the run (s)"] + [f"{s.cpu_seconds:.1f}" for s in sides],
        ["  robench speed-up, CPU"] + [f"{s.cpu_seconds / ours.cpu_seconds:.2f}x" for s in sides],
        ["same outcome as robench"] + [agree(s, "status") for s in sides],
        ["same adversarial text as robench"] + [agree(s, "perturbed_text") for s in sides],
    ]
    return rows


def write(rows: list[list[str]], header: list[str], title: str, target: Path) -> tuple[Path, Path]:
    from robench.core.files import atomic_write

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


def compare_attacks(options: AttackBenchOptions, settings: Settings, console: Console | None) -> list[list[str]]:
    """Run the attacks one after the other; print the comparison, write it as CSV and Markdown; return its rows."""
    from robench.core.device import pick_device

    device = str(pick_device(options.device))
    runs = specs(options, "local" if settings.data_dir is not None else "hub", settings)
    task = runs[ROBENCH].task
    warm_up(runs[ROBENCH], settings, device, console)
    sides = [attack(spec, settings, device, console) for spec in runs.values()]
    title = (f"TextFooler on {task}: robench vs TextAttack 0.3.11 ({options.model}/{options.backbone}, "
             f"train {options.train_size}×{options.epochs} ep, {options.examples} examples, seed {options.seed}, "
             f"{device}, synonyms {options.synonym_source}, encoder {options.sentence_encoder})")
    header, rows = ["metric", *runs], compare(sides)
    table = Table(title=title)
    for col in header:
        table.add_column(col, justify="left" if col == "metric" else "right")
    for row in rows:
        table.add_row(*row)
    Console(width=max(Console().width, 132)).print(table)
    csv_path, md_path = write(rows, header, title,
                              settings.results_dir / "bench" / f"attack-{task}-{options.examples}")
    print(f"wrote {csv_path} and {md_path}; run records in {settings.runs_dir}")
    return rows
