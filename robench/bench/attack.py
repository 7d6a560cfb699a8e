"""`robench bench attack`: robench's `textfooler` vs TextAttack's (`textattack:textfooler`), side by side, and
how close each attack runs to the raw forward rate of its victim.

The attacks run in this one process, one after the other, through `robench.run`
with the same victim checkpoint (fine-tuned once, then reused from the cache), the
same eval examples, and the same resources and thresholds: candidate table
(`synonym_source`, K, minimum cosine), sentence encoder and its mapped threshold
(`similarity_threshold` on the USE scale), window, POS rule and stopwords, and the
recipe's own budget (robench's `budget=paper`: no 30% cap, no per-word query budget, as TextAttack's). Each
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

The limit (issue 30): right after each attack, the same victim runs the very inputs that attack ran through
the model once more, twice, a batch of each in turn so that a shared machine's changing load falls on both
alike (`replay_forwards`): in the attack's own batches, and as one plain pass sorted by length at the victim's
batch size (`Victim.sorted_batches`, `inference_mode`, no cache or counting), the raw forward rate. The
*fraction of the raw rate* is the attack's victim forwards per second over the raw rate at the load the attack
ran under: (victim forward time / attack stage time, both timed inside the run) x (raw pass / the attack's
batches, replayed). 100% would be an attack that does nothing but forward passes in perfectly sorted batches.
A second table, the profile, splits robench's attack time (`robench.engine.attack.Profile`, timed by the engine
and the recipe): victim forward, masked LM (BERT-Attack's candidates) and input gradients (gradient-swap), the
two further model costs, reported apart; sentence encoder, POS tagging, candidate generation, the search's own
bookkeeping, the victim's cache and counters, the engine loop, and what lies outside the engine (resources,
metrics, the audit). For a TextAttack column only the victim forward is known; the rest is TextAttack's code.

`--attack bert-attack` or `--attack gradient-swap` benches that robench recipe alone (TextAttack has no
equivalent run through the same candidates) with the same fraction and profile, and without the rows relative to
robench (difference, speed-ups, agreement), which would compare it with itself. Each table's title names the
machine's load average when the bench ended (`os.getloadavg`): on a shared machine, read ratios, not times.
"""
from __future__ import annotations

import csv
import io
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from robench.bench.options import ROBENCH, TEXTATTACK, AttackBenchOptions
from robench.core.paths import Settings

USE_THRESHOLD = 0.840845057  # TextFooler's USE threshold (angular), as in TextAttack's recipe
STOCK = "textattack:textfooler (stock wrapper)"  # TextAttack as shipped: HuggingFaceModelWrapper, max-length padding
# The profile's rows: (label, parts of robench.engine.attack.Profile summed into it); model costs first.
PROFILE_ROWS = (("victim forward", ("victim forward",)), ("masked LM (candidates)", ("mlm",)),
                ("victim input gradients", ("victim gradient",)), ("sentence encoder", ("embed",)),
                ("POS tagging", ("pos tagging",)), ("candidate generation", ("candidates",)),
                ("sense filter", ("context similarity",)), ("grammar check", ("grammar check",)),
                ("language model (fluency)", ("lm",)),
                ("search bookkeeping", ("search",)), ("victim cache, counters, budgets", ("victim bookkeeping",)),
                ("engine loop, progress, results", ("engine",)))
MODEL_PARTS = ("victim forward", "mlm", "victim gradient")


@dataclass
class Side:
    """One attack's record and per-example rows (by eval index)."""

    record: Any  # robench.runs.store.RunRecord
    rows: dict[int, dict[str, str]]
    cpu_seconds: float  # process CPU time of the attack stage (steadier than wall time on a busy shared machine)
    raw_seconds: float | None = None  # the victim's inputs again as one plain sorted pass; None: none to time
    replay_seconds: float | None = None  # the same inputs again in the attack's own batches (timed alternately)
    load: tuple[float, ...] = ()  # the machine's load average (1, 5, 15 min) right after the raw pass

    @property
    def seconds(self) -> float:
        return float(self.record.timings["attack_seconds"])

    @property
    def forwards(self) -> int:
        """Inputs run through the victim model (cache misses), the texts the raw pass times again."""
        return int(self.record.timings["victim_queries"])

    @property
    def model_share(self) -> float | None:
        """Share of the attack stage spent in the victim's forward passes, timed inside the run."""
        forward = self.part(("victim forward",))
        return None if not forward or not self.seconds else forward / self.seconds

    @property
    def batch_efficiency(self) -> float | None:
        """The raw sorted pass over the attack's own batches, on the same inputs, both timed alternately under the
        same load: what the attack's batch fill and padding cost (100%: as good as one globally sorted pass)."""
        return None if not self.raw_seconds or not self.replay_seconds else self.raw_seconds / self.replay_seconds

    @property
    def fraction(self) -> float | None:
        """The attack's forwards per second over the raw forward rate at the load the attack ran under:
        forwards / attack time over forwards / (in-run forward time x batch efficiency)."""
        share, efficiency = self.model_share, self.batch_efficiency
        return None if share is None or efficiency is None else share * efficiency

    @property
    def raw_rate(self) -> float | None:
        """The raw forward rate (inputs per second) of these inputs, at the load of the attack's own forwards."""
        fraction = self.fraction
        return None if not fraction else self.forwards / self.seconds / fraction

    def part(self, names: tuple[str, ...]) -> float | None:
        """Seconds of these profile parts; None for a run without a profile (TextAttack's)."""
        profile = self.record.timings.get("profile")
        if not profile:
            return self.record.timings.get("victim_forward_seconds") if names == ("victim forward",) else None
        if not any(n in profile["seconds"] for n in names):
            return None  # a part this attack has not got (no MLM, no gradients)
        return sum(profile["seconds"].get(n, 0.0) for n in names)


def specs(options: AttackBenchOptions, data_source: str, settings: Settings | None = None) -> dict[str, Any]:
    """RunSpecs by column label: identical but for the attack, robench-only speed knobs and TextAttack's wrapper.
    The task is any `--task` form (`robench.runs.options.task_spec`; a file task needs `settings`). With
    `--attack bert-attack` or `gradient-swap`, that recipe alone (its own budget, the shared encoder)."""
    from robench.runs.options import RunOptions, build_specs, comma_list, task_spec
    from robench.runs.spec import TrainConfig

    shared = {"synonym_source": options.synonym_source, "sentence_encoder": options.sentence_encoder, "k": 50,
              "min_cos": 0.5, "similarity_threshold": USE_THRESHOLD, "query_budget": options.query_budget}
    # budget=paper: TextAttack's recipe has neither TextDefender's 30% cap nor its K x words query budget
    robench_only = {"budget": "paper", "similarity_metric": "angular", "window": 15, "skip_shorter_than_window": True,
                    "allow_verb_noun_swap": True, "wordnet_pos": False, **options.robench_params}
    task = {"task": options.task} if settings is None else task_spec(
        options.task, settings, comma_list(options.text_column), options.label_column, comma_list(options.labels))
    read = {"data_source": data_source, **task}  # a file task: its name, definition and the local data source
    default = TrainConfig()

    def spec(attack: str, params: dict[str, Any]):
        (made,) = build_specs(RunOptions(
            model=options.model, attack=attack, backbone=options.backbone, seeds=(options.seed,),
            train_size=options.train_size, eval_size=options.examples, epochs=options.epochs, lr=default.lr,
            batch_size=default.batch_size, attack_params=params), read)
        return made

    if options.attack != ROBENCH:  # the recipe alone, at its default budget, with the shared resources
        params = {"sentence_encoder": options.sentence_encoder, "query_budget": options.query_budget}
        if options.attack == "gradient-swap":
            params["synonym_source"] = options.synonym_source
        return {options.attack: spec(options.attack, {**params, **options.robench_params})}
    out = {ROBENCH: spec(ROBENCH, {**shared, **robench_only}), TEXTATTACK: spec(TEXTATTACK, shared)}
    if options.stock:
        out[STOCK] = spec(TEXTATTACK, {**shared, "model_wrapper": "huggingface"})
    return out


def warm_up(resolved, device: str, console: Console | None) -> None:
    """One-off setup outside the timed region: the checkpoint, the recipe's resources through its own loader
    (candidate table, encoder, tagger, MLM: each loader caches per process), the audit's lexicon and the
    textattack import."""
    from robench.attacks.textattack.compat import load_textattack
    from robench.classifier.device import pick_device
    from robench.engine.resources.lexicon import lexicon
    from robench.runs.runner import train_checkpoint

    settings = resolved.settings
    train_checkpoint(resolved, pick_device(device), console)
    resolved.recipe.load_resources(resolved.attack_params, settings, pick_device(device))  # a WordSwapRecipe
    lexicon(settings)
    if resolved.spec.attack == ROBENCH:
        load_textattack(settings)


def attack(resolved, device: str, console: Console | None) -> Side:
    """Run the resolved run's stages (forced: a fresh attack) under its lock, then time the raw pass over the
    inputs its victim evaluated."""
    from robench.classifier.device import pick_device
    from robench.engine import resources
    from robench.runs import runner

    encoder = resolved.spec.attack_params.get("sentence_encoder", "minilm")
    resources.sentence_encoder(resolved.settings, pick_device(device), encoder).clear_cache()  # no run reads another's
    with runner.run_lock(resolved) as store:
        model = runner.prepare_model(resolved, pick_device(device), console)
        cpu = time.process_time()
        record = runner.write(store, runner.attack(resolved, model, store, device, console, force=True))
        cpu = time.process_time() - cpu
    text = store.csv_path.read_text(encoding="utf-8")
    replay, raw = replay_forwards(model.victim) if getattr(model.victim, "evaluated_inputs", None) else (None, None)
    return Side(record, {int(r["index"]): r for r in csv.DictReader(io.StringIO(text))}, cpu, raw, replay,
                os.getloadavg())


def replay_forwards(victim: Any) -> tuple[float, float]:
    """(seconds, seconds): the inputs the victim evaluated, run again in the attack's own batches and as one
    plain sorted pass (`Victim.sorted_batches`), a batch of each in turn (whichever has covered fewer inputs
    goes next), so that a shared machine's changing load falls on both alike."""
    streams = [victim.evaluated_batches, victim.sorted_batches(victim.evaluated_inputs)]
    seconds, done, at = [0.0, 0.0], [0, 0], [0, 0]
    while any(at[k] < len(streams[k]) for k in (0, 1)):
        k = 0 if at[1] == len(streams[1]) or (at[0] < len(streams[0]) and done[0] <= done[1]) else 1
        batch = streams[k][at[k]]
        seconds[k] += victim.time_batch(batch)
        done[k], at[k] = done[k] + len(batch), at[k] + 1
    return seconds[0], seconds[1]


def raw_rate_target(side: Side) -> str:
    """The target for the fraction of the raw rate: 85% (docs/studies/attacks.md), or 50% where the language
    model's fluency constraint runs too (issue 57, item 7: `budget=natural`)."""
    fluency = (side.record.hyperparameters.get("attack") or {}).get("fluency_max_drop")
    return "85%" if fluency is None else "50%, the language model included"


def compare(sides: list[Side]) -> list[list[str]]:
    """One row per metric, one column per side; ratios and agreement are relative to the first (robench), and
    left out when robench runs alone (a side compared with itself says nothing)."""
    ours = sides[0]
    pct = lambda v: "-" if v is None else f"{100 * v:.2f}%"  # noqa: E731
    num = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731

    def agree(side: Side, column: str) -> str:
        common = sorted(set(ours.rows) & set(side.rows))
        return f"{sum(ours.rows[i][column] == side.rows[i][column] for i in common)}/{len(common)}"

    metrics = [s.record.metrics for s in sides]
    alone = len(sides) == 1  # robench's recipe alone: no row compares it with itself
    rows = [
        ["examples (errors)"] + [f"{m['examples']} ({m['errors']})" for m in metrics],
        ["clean accuracy"] + [pct(m["clean_accuracy"]) for m in metrics],
        ["accuracy under attack"] + [pct(m["robust_accuracy"]) for m in metrics],
        *([] if alone else [["  difference to robench (points; target: within 2)"] + [
            f"{100 * (m['robust_accuracy'] - metrics[0]['robust_accuracy']):+.2f}" for m in metrics]]),
        ["attack success rate"] + [pct(m["attack_success_rate"]) for m in metrics],
        ["avg perturbed words %"] + [num(m["avg_perturbed_word_pct"]) for m in metrics],
        ["avg queries (as each attack counts)"] + [num(m["avg_queries"]) for m in metrics],
        ["attack wall time (s)"] + [f"{s.seconds:.1f}" for s in sides],
        ["seconds per example"] + [f"{s.seconds / max(m['examples'], 1):.3f}" for s, m in zip(sides, metrics)],
        *([] if alone else [["  robench speed-up, wall (target: 5x)"] + [f"{s.seconds / ours.seconds:.2f}x"
                                                                           for s in sides]]),
        ["CPU time of the attack stage (s)"] + [f"{s.cpu_seconds:.1f}" for s in sides],
        *([] if alone else [["  robench speed-up, CPU"] + [f"{s.cpu_seconds / ours.cpu_seconds:.2f}x" for s in sides],
                            ["same outcome as robench"] + [agree(s, "status") for s in sides],
                            ["same adversarial text as robench"] + [agree(s, "perturbed_text") for s in sides]]),
        ["victim forwards (inputs run through the model)"] + [str(s.forwards) for s in sides],
        ["attack forwards per second"] + [f"{s.forwards / s.seconds:.1f}" if s.seconds else "-" for s in sides],
        ["raw forward rate, same inputs, at the attack's load (per second)"] + [
            "-" if s.raw_rate is None else f"{s.raw_rate:.1f}" for s in sides],
        [f"  fraction of the raw rate (target: {raw_rate_target(ours)})"] + [pct(s.fraction) for s in sides],
        ["    = victim forward share of the attack stage"] + [pct(s.model_share) for s in sides],
        ["    x batch efficiency (raw sorted pass / the attack's batches)"] + [
            pct(s.batch_efficiency) for s in sides],
        ["load average after the run (1/5/15 min)"] + ["/".join(f"{x:.2f}" for x in s.load) for s in sides],
    ]
    return rows


def profile_rows(sides: list[Side]) -> list[list[str]]:
    """The time split of each side's attack stage: seconds and share, one row per part (parts nobody spent
    time in are left out), then the model share and the total."""
    def cell(seconds: float | None, total: float) -> str:
        return "-" if seconds is None else f"{seconds:.2f} s ({100 * seconds / max(total, 1e-9):.1f}%)"

    rows = []
    for label, names in PROFILE_ROWS:
        values = [s.part(names) for s in sides]
        if all(v is None for v in values):
            continue
        rows.append([label] + [cell(v, s.seconds) for v, s in zip(values, sides)])
    inside = [s.part(("attack",)) for s in sides]  # the engine loop; None: TextAttack, only its forward timed
    inside = [v if v is not None else s.part(("victim forward",)) or 0.0 for v, s in zip(inside, sides)]
    rows.append(["outside the engine (TextAttack: all but the forward)"] + [
        cell(s.seconds - v, s.seconds) for v, s in zip(inside, sides)])
    model = [s.part(MODEL_PARTS) if s.part(("attack",)) is not None else s.part(("victim forward",))
             for s in sides]
    rows.append(["  model share (victim forward + masked LM + gradients)"] + [
        cell(v, s.seconds) for v, s in zip(model, sides)])
    rows.append(["attack stage wall time"] + [f"{s.seconds:.2f} s" for s in sides])
    return rows


def machine() -> str:
    """The machine and its load average now (1, 5, 15 minutes), for the tables' titles."""
    import torch

    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{platform.machine()}, {os.cpu_count()} cores, {torch.get_num_threads()} torch threads, "
            f"load average {load}")


def write(rows: list[list[str]], header: list[str], title: str, target: Path) -> tuple[Path, Path]:
    from robench.core.files import atomic_write
    from robench.core.text import csv_name, markdown_cell

    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow([csv_name(cell) for cell in header])
    writer.writerows([csv_name(cell) for cell in row] for row in rows)
    md = [f"### {title}", "", "| " + " | ".join(map(markdown_cell, header)) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(map(markdown_cell, row)) + " |" for row in rows]
    csv_path, md_path = target.with_suffix(".csv"), target.with_suffix(".md")
    atomic_write(csv_path, buf.getvalue())
    atomic_write(md_path, "\n".join(md) + "\n")
    return csv_path, md_path


def compare_attacks(options: AttackBenchOptions, settings: Settings, console: Console | None) -> list[list[str]]:
    """Run the attacks one after the other; print the comparison and the profile, write them as CSV and Markdown;
    return the comparison's rows."""
    from robench.classifier.device import pick_device

    device = str(pick_device(options.device))
    from robench.runs.options import data_source
    from robench.runs.resolve import resolve_run

    runs = {label: resolve_run(spec, settings) for label, spec in specs(options, data_source(None, settings),
                                                                         settings).items()}
    first = next(iter(runs.values()))
    task = first.spec.task
    warm_up(first, device, console)
    sides = [attack(resolved, device, console) for resolved in runs.values()]
    name = "TextFooler" if options.attack == ROBENCH else options.attack
    versus = ": robench vs TextAttack 0.3.11" if len(runs) > 1 else " (robench)"
    synonyms = "MLM candidates" if options.attack == "bert-attack" else f"synonyms {options.synonym_source}"
    setup = (f"({options.model}/{options.backbone}, train {options.train_size}×{options.epochs} ep, "
             f"{options.examples} examples, seed {options.seed}, {device}, {synonyms}, "
             f"encoder {options.sentence_encoder}; {machine()})")
    title = f"{name} on {task}{versus} {setup}"
    header = ["metric", *runs]
    rows, split = compare(sides), profile_rows(sides)
    target = settings.results_dir / "bench" / (f"attack-{task}-{options.examples}" if options.attack == ROBENCH
                                               else f"attack-{options.attack}-{task}-{options.examples}")
    wide = Console(width=max(Console().width, 132))
    wide.print(_table(title, header, rows))
    wide.print(_table(f"Profile: where the attack stage's time goes {setup}", ["part", *runs], split))
    csv_path, md_path = write(rows, header, title, target)
    write(split, ["part", *runs], f"Profile of {name} on {task} {setup}", target.with_name(target.name + "-profile"))
    print(f"wrote {csv_path} and {md_path} (and the profile beside them); run records in {settings.runs_dir}")
    return rows


def _table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title)
    for col in header:
        table.add_column(col, justify="left" if col in ("metric", "part") else "right")
    for row in rows:
        table.add_row(*row)
    return table
