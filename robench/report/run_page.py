"""A static page per run (`robench/templates/run.html.j2`): the attacked examples, original and adversarial
text side by side with the changed words marked, labels, predictions and queries, filterable by outcome.

`robench leaderboard --html` writes one beside the leaderboard page for every run it links to;
`robench show RUN_ID --html PATH` writes one on its own. Self-contained: no network at view time.
"""
from __future__ import annotations

import os
from functools import cache
from pathlib import Path

import jinja2

from robench.core.files import atomic_write
from robench.core.records import examples_path, record_path
from robench.report.examples import RunExamples, load_run, word_diff
from robench.report.identity import budget_of
from robench.report.readings import reading_facts
from robench.report.validity import lexicon_settings, marked, swap_marks, validity_facts

METRICS = [("clean accuracy", "clean_accuracy", "%"), ("accuracy under attack", "robust_accuracy", "%"),
           ("attack success rate", "attack_success_rate", "%"), ("average queries", "avg_queries", "f")]


@cache
def _templates() -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.PackageLoader("robench.report", "templates"), autoescape=True,
                              undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def render(run: RunExamples, record_href: str, back: str | None = None,
           readings: list[tuple[str, str]] | None = None) -> str:
    """The run's page; `readings`: its blind reading's lines (robench.report.readings.reading_facts)."""
    spec, metrics = run.record.spec, run.record.metrics
    shown = [(label, f"{100 * v:.1f}%" if kind == "%" else f"{v:.1f}") for label, key, kind in METRICS
             if (v := metrics.get(key)) is not None]
    shown += validity_facts(metrics) + (readings or [])
    lexicon = lexicon_settings() if "validity" in metrics else None
    examples = []
    for e in sorted(run.examples, key=lambda e: e.index):
        original, adversarial = word_diff(e.original_text, e.perturbed_text)
        if lexicon is not None and e.status == "successful":
            adversarial = marked(adversarial, swap_marks(e.original_text, e.perturbed_text, lexicon))
        examples.append({"index": e.index, "status": e.status, "label": run.label(e.label),
                         "before": run.label(e.original_prediction), "after": run.label(e.perturbed_prediction),
                         "queries": e.queries, "original": original, "adversarial": adversarial, "error": e.error})
    budget = budget_of(spec, run.record.hyperparameters)
    attack = f"{spec.get('attack')}" + (f" (budget={budget})" if budget else "")
    facts = f"{spec.get('model')} attacked by {attack} on {spec.get('task')}, seed {spec.get('seed')}, " \
            f"{len(examples)} examples"
    return _templates().get_template("run.html.j2").render(
        title=f"{spec.get('model')} × {attack} on {spec.get('task')}", run_id=run.record.run_id,
        facts=facts, metrics=shown, counts=[(o, c) for o, c in run.counts().items()], examples=examples,
        record_href=record_href, back=back)


def write_run_page(runs_dir: Path, run_id: str, path: Path, back: Path | None = None) -> Path:
    """Write the page of run `run_id` to `path`; links (record, leaderboard `back`) are relative to it."""
    run = load_run(runs_dir, run_id)
    path = Path(path).resolve()
    record = record_path(runs_dir.resolve(), run.record.run_id)
    atomic_write(path, render(run, _relative(record, path.parent), _relative(back, path.parent) if back else None,
                              reading_facts(runs_dir, run.record.run_id)))
    return path


def write_run_pages(runs_dir: Path, run_ids: list[str], out_dir: Path, back: Path | None = None) -> dict[str, Path]:
    """One page per run with a per-example file, as `<out_dir>/<run_id>.html`."""
    return {run_id: write_run_page(runs_dir, run_id, out_dir / f"{run_id}.html", back) for run_id in run_ids
            if examples_path(runs_dir, run_id).is_file()}


def _relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(Path(target).resolve(), start)).as_posix()

