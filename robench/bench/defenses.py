"""`robench bench defenses`: every defense against `bert`, side by side in one invocation.

For each seed, training size (the full subset and the low-resource one) and
model, `robench.runs.runner.run` fine-tunes (or reuses) the model and replays the
AdvGLUE dev set against it. The leaderboard (`defenses.csv`, `defenses.md` in
the results dir, rewritten after every run so an interrupted bench still leaves
one) shows clean SST-2 dev accuracy, AdvGLUE accuracy and the training cost
relative to `bert`: the ratio of mean `train_seconds` at the same training size,
counting only models trained in this invocation (reused checkpoints have no
comparable time; their ratio is left empty).

`search_imbert` (`--search`) instead grid-searches IM-BERT's gamma, T and layers,
selecting on SST-2 dev accuracy only (no attack, never AdvGLUE). `step_cost`
(`--step-cost N`) only times N training steps (`robench.training.loop.train_step`) per
model on the same batches (after one warm-up step) and prints the per-step cost
relative to `bert`.
"""
from __future__ import annotations

import itertools
from collections.abc import Sequence

import pandas as pd
from rich.console import Console
from rich.table import Table

from robench.bench.options import DefensesOptions, SearchGrid
from robench.core.errors import RobenchError
from robench.core.files import atomic_write
from robench.core.params import params_by_model
from robench.core.paths import Settings
from robench.report.leaderboard import aggregate, csv_text, records_frame
from robench.report.leaderboard_markdown import format_mean_std
from robench.runs.spec import TrainConfig
from robench.runs.store import now

COLUMNS = [("dev_accuracy", "SST-2 dev acc (clean)", True), ("robust_accuracy", "AdvGLUE-sst2 acc", True),
           ("dev_minus_robust", "drop (dev − AdvGLUE)", True)]  # robench.report.leaderboard.derived_metrics


def compare_defenses(options: DefensesOptions, settings: Settings, console: Console | None) -> pd.DataFrame:
    """Run every (seed, train size, model); print and write the leaderboard; return it."""
    from robench.runs.resolve import resolve_run
    from robench.runs.runner import run_resolved

    if "bert" not in options.models:
        raise RobenchError("--models must include bert: training cost is reported relative to it")
    params = params_by_model(options.models, options.params)
    sizes = [options.train_size] + ([options.low_resource] if options.low_resource > 0 else [])
    specs = [options.spec(settings, m, seed, size, params[m])
             for seed in options.seeds for size in sizes for m in options.models]
    runs = [resolve_run(spec, settings) for spec in specs]  # fail fast on a bad name or value, before any training
    started, fresh = now(), {}
    for i, resolved in enumerate(runs, 1):
        spec = resolved.spec
        if console is not None:
            console.log(f"[{i}/{len(runs)}] {spec.model}, train size {spec.train_size}, seed {spec.seed}")
        record = run_resolved(resolved, options.device, console)
        fresh[record.run_id] = not record.timings.get("train_cached", True) and record.created >= started
        table = leaderboard(settings, fresh, options.models)
        write(settings, "defenses", table, markdown(table, options))
    Console().print(rich_table(table, "Defenses vs bert"))
    print(f"wrote {settings.results_dir / 'defenses.csv'} and {settings.results_dir / 'defenses.md'}")
    return table


def leaderboard(settings: Settings, fresh: dict[str, bool], models: Sequence[str]) -> pd.DataFrame:
    """Mean ± std per (model, train size) of the given runs, plus training cost relative to bert."""
    frame = records_frame(settings.runs_dir)
    frame = frame[frame["run_id"].isin(fresh)].copy()
    table = aggregate(frame)
    timed = frame[frame["run_id"].map(fresh)].groupby(["model", "train_size"])["train_seconds"].mean()
    per_query = _seconds_per_query(settings, frame).groupby([frame["model"], frame["train_size"]]).mean()
    ratios, inference = [], []
    for _, row in table.iterrows():
        own, base = timed.get((row["model"], row["train_size"])), timed.get(("bert", row["train_size"]))
        ratios.append(own / base if own is not None and base else float("nan"))
        own, base = per_query.get((row["model"], row["train_size"])), per_query.get(("bert", row["train_size"]))
        inference.append(own / base if own is not None and base else float("nan"))
    table["train_cost_vs_bert"] = ratios
    table["inference_cost_vs_bert"] = inference
    order = {m: i for i, m in enumerate(models)}
    sizes = pd.to_numeric(table["train_size"], errors="coerce").fillna(float("inf"))
    return table.assign(_size=-sizes, _model=table["model"].map(order)).sort_values(["_size", "_model"]).drop(
        columns=["_size", "_model"]).reset_index(drop=True)


def _seconds_per_query(settings: Settings, frame: pd.DataFrame) -> pd.Series:
    """Attack seconds per victim query of each run (a certificate's own time left out): the cost of one
    prediction as attacks see it (SAFER: its vote)."""
    from robench.core.records import read_record, record_path

    out = []
    for run_id in frame["run_id"]:
        rec = read_record(record_path(settings.runs_dir, run_id))
        queries = rec.timings.get("victim_queries") or 0
        seconds = rec.timings.get("attack_seconds", 0.0) - (rec.metrics.get("certify_seconds") or 0.0)
        out.append(seconds / queries if queries else float("nan"))
    return pd.Series(out, index=frame.index, dtype=float)


def markdown(table: pd.DataFrame, options: DefensesOptions) -> str:
    header = ["model", "train size", "seeds"] + [label for _, label, _ in COLUMNS] + ["train cost vs bert",
                                                                                     "inference cost vs bert"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for _, row in table.iterrows():
        cells = [str(row["model"]), str(row["train_size"]), str(row["seeds"])]
        cells += [format_mean_std(row.get(f"{m}_mean"), row.get(f"{m}_std"), pct) for m, _, pct in COLUMNS]
        for cost in (row["train_cost_vs_bert"], row["inference_cost_vs_bert"]):
            cells.append("–" if pd.isna(cost) else f"{cost:.2f}×")
        lines.append("| " + " | ".join(cells) + " |")
    low = f" ({options.epochs_for(options.low_resource)} at {options.low_resource})" if options.low_resource else ""
    note = (f"\n{options.task}, backbone {options.backbone}, seeds {' '.join(map(str, options.seeds))}, "
            f"{options.epochs} epochs{low}, lr {options.lr}, batch {options.batch_size}; "
            "accuracies in %, mean ± std over seeds; "
            "clean = whole SST-2 dev split, AdvGLUE = AdvGLUE dev sst2; training cost = mean train_seconds / "
            "bert's at the same train size (a2t's training attack included), inference cost = attack seconds per "
            "victim query / bert's (SAFER: its vote; its certificate left out), measured in one invocation.\n")
    return "\n".join(lines) + "\n" + note


def rich_table(table: pd.DataFrame, title: str) -> Table:
    out = Table(title=title)
    for name in ("model", "train size", "seeds", "clean acc", "AdvGLUE acc", "drop", "train cost vs bert",
                 "inference cost vs bert"):
        out.add_column(name, justify="left" if name == "model" else "right")
    for _, row in table.iterrows():
        costs = [row["train_cost_vs_bert"], row["inference_cost_vs_bert"]]
        out.add_row(str(row["model"]), str(row["train_size"]), str(row["seeds"]),
                    *[format_mean_std(row.get(f"{m}_mean"), row.get(f"{m}_std"), pct) for m, _, pct in COLUMNS],
                    *["–" if pd.isna(cost) else f"{cost:.2f}×" for cost in costs])
    return out


def write(settings: Settings, stem: str, table: pd.DataFrame, md: str) -> None:
    atomic_write(settings.results_dir / f"{stem}.csv", csv_text(table))
    atomic_write(settings.results_dir / f"{stem}.md", md)


def search_imbert(options: DefensesOptions, grid: SearchGrid, settings: Settings,
                  console: Console | None) -> pd.DataFrame:
    """Grid over (layers, T, gamma) for `imbert`; select the best mean SST-2 dev accuracy; return the table."""
    from robench.core.params import make_params
    from robench.runs.runner import train
    from robench.training.defense import MODELS

    base = params_by_model(["imbert"], options.params)["imbert"]
    imbert = MODELS.get("imbert")  # its params class parses and checks `im_layers` (through the registry)
    try:
        layer_sets = [make_params(imbert.params, {"im_layers": v}, "--grid-layers").im_layers for v in grid.layers]
    except (ValueError, RobenchError) as exc:
        raise RobenchError(f"--grid-layers: {exc}") from exc
    rows = []
    points = list(itertools.product(layer_sets, grid.steps, grid.gamma))
    for i, (layers, steps, gamma) in enumerate(points, 1):
        params = {**base, "im_layers": list(layers) if layers else None, "im_steps": steps, "im_gamma": gamma}
        if console is not None:
            console.log(f"[{i}/{len(points)}] imbert {params}")
        for seed in options.seeds:
            trained = train(options.spec(settings, "imbert", seed, options.train_size, params), settings,
                            device=options.device, console=console)
            rows.append({"im_layers": "all" if layers is None else ",".join(map(str, layers)), "im_steps": steps,
                         "im_gamma": gamma, "seed": seed, "dev_accuracy": trained.record["dev_accuracy"],
                         "train_seconds": trained.record["train_seconds"]})
        table = (pd.DataFrame(rows).groupby(["im_layers", "im_steps", "im_gamma"], sort=False)
                 .agg(seeds=("seed", "size"), dev_accuracy_mean=("dev_accuracy", "mean"),
                      dev_accuracy_std=("dev_accuracy", "std"), train_seconds=("train_seconds", "mean"))
                 .reset_index().sort_values("dev_accuracy_mean", ascending=False, kind="stable"))
        best = table.iloc[0]
        choice = (f"--param imbert:im_layers={best['im_layers']} --param imbert:im_steps={best['im_steps']} "
                  f"--param imbert:im_gamma={best['im_gamma']}")
        md = table.to_markdown(index=False) if _has_tabulate() else table.to_string(index=False)
        write(settings, "imbert_search", table,
              f"IM-BERT search on {options.task} dev accuracy (train size {options.train_size}, seeds "
              f"{' '.join(map(str, options.seeds))}); never selected on AdvGLUE.\n\n{md}\n\nbest: {choice}\n")
    out = Table(title="IM-BERT search (SST-2 dev accuracy)")
    for name in ("layers", "T", "gamma", "seeds", "dev acc", "train s"):
        out.add_column(name, justify="right")
    for _, row in table.iterrows():
        out.add_row(str(row["im_layers"]), str(row["im_steps"]), f"{row['im_gamma']:g}", str(row["seeds"]),
                    format_mean_std(row["dev_accuracy_mean"], row["dev_accuracy_std"], True),
                    f"{row['train_seconds']:.1f}")
    Console().print(out)
    print(f"best on dev: {choice}\nwrote {settings.results_dir / 'imbert_search.csv'}")
    return table


def _has_tabulate() -> bool:
    try:
        import tabulate  # noqa: F401
    except ImportError:
        return False
    return True


def step_cost(options: DefensesOptions, steps: int, settings: Settings,
              infer_sentences: int = 4) -> dict[str, dict[str, float]]:
    """Seconds per training step of each model on the same batches, and seconds per prediction as attacks query
    it (its defended victim, on the leave-one-word-out variants of `infer_sentences` dev sentences), each
    relative to bert, measured side by side in one process; with the passes behind them (rows through the
    model's forward per training row and per query), which do not depend on the machine's load."""
    import time

    import torch
    from transformers import DataCollatorWithPadding

    from robench.classifier.backbone import load_tokenizer, resolve_backbone
    from robench.classifier.device import pick_device
    from robench.classifier.victim import Victim, defended
    from robench.data import TASKS
    from robench.data.loading import load_split, subset, texts_of
    from robench.runs.options import data_source
    from robench.runs.speed import leave_one_out
    from robench.training.defense import resolve_model
    from robench.training.loop import encode, train_step, training_context
    from robench.training.objective import Objective

    if "bert" not in options.models:
        raise RobenchError("--models must include bert: costs are reported relative to it")
    device, task = pick_device(options.device), TASKS.get(options.task)
    backbone = resolve_backbone(options.backbone)
    tokenizer = load_tokenizer(backbone.location)
    n = options.batch_size * (steps + 1)
    source = data_source(options.data_source, settings)
    data = subset(load_split(task, "train", settings.data_dir, source), n, options.seeds[0])
    collate = DataCollatorWithPadding(tokenizer)
    features = encode(tokenizer, task, data, options.max_length)
    batches = [collate(features[i:i + options.batch_size]) for i in range(0, len(features), options.batch_size)]
    params, runners = params_by_model(options.models, options.params), {}
    config = TrainConfig(batch_size=options.batch_size, max_length=options.max_length)
    for name in options.models:
        defense = resolve_model(name)
        resolved = defense.resolve_params(params[name])
        torch.manual_seed(options.seeds[0])
        model = defense.build(backbone.location, task.num_labels, resolved).to(device).train()
        objective = defense.objective(model, resolved)
        # as the training loop does: ascc maps its synonym table onto the vocabulary, safer loads its sets
        objective.prepare(training_context(model, tokenizer, task, data, settings, device, options.seeds[0], config))
        runners[name] = (objective, torch.optim.AdamW(model.parameters(), lr=options.lr))
    rows = {name: _row_counter(objective.model) for name, (objective, _) in runners.items()}
    max_grad_norm = TrainConfig().max_grad_norm
    seconds = dict.fromkeys(runners, 0.0)
    for i, batch in enumerate(batches):  # round robin over models, so machine load hits all of them alike
        batch = {k: v.to(device) for k, v in batch.items()}
        for name, (objective, optimizer) in runners.items():
            _sync(device)
            start = time.perf_counter()
            train_step(objective, optimizer, None, batch, device, max_grad_norm)
            _sync(device)
            if i > 0:  # the first step is a warm-up
                seconds[name] += (time.perf_counter() - start) / (len(batches) - 1)
    train_rows = sum(len(batch["input_ids"]) for batch in batches)
    passes_per_step = {name: count[0] / train_rows for name, count in rows.items()}
    # inference as attacks query each model (SAFER: its vote), on the same attack-shaped queries, round robin
    dev = load_split(task, "eval", settings.data_dir, source)
    sentences = texts_of(subset(dev, infer_sentences, options.seeds[0]), task)
    queries = [variant for text in sentences for variant in leave_one_out(text)]
    victims = {name: defended(Victim(objective.model.eval(), tokenizer, device, max_length=options.max_length),
                              settings) for name, (objective, _) in runners.items()}
    per_query = dict.fromkeys(runners, 0.0)
    for name, victim in victims.items():
        victim.predict(queries[:1])  # warm-up
    for name, victim in victims.items():
        victim.reset()
        rows[name][0] = 0
        _sync(device)
        start = time.perf_counter()
        victim.predict(queries)
        _sync(device)
        per_query[name] = (time.perf_counter() - start) / len(queries)
    passes_per_query = {name: count[0] / len(queries) for name, count in rows.items()}
    out = Table(title=f"Cost on {device} (batch {options.batch_size}, {len(batches) - 1} timed training steps; "
                      f"{len(queries)} attack-shaped queries)")
    for col in ("model", "passes / step", "s / step", "vs bert", "passes / query", "s / query", "vs bert "):
        out.add_column(col, justify="left" if col == "model" else "right")
    for name, sec in seconds.items():
        out.add_row(name, f"{passes_per_step[name]:.2f}", f"{sec:.3f}", f"{sec / seconds['bert']:.2f}×",
                    f"{passes_per_query[name]:.2f}", f"{per_query[name]:.4f}",
                    f"{per_query[name] / per_query['bert']:.2f}×")
    Console().print(out)
    if any(type(objective).epoch_features is not Objective.epoch_features for objective, _ in runners.values()):
        print("s / step is the optimisation step only: an objective's epoch work (a2t's training attack) is in "
              "the training cost of the full bench (robench bench defenses) and in --dry-run estimates")
    return {"seconds_per_step": seconds, "seconds_per_query": per_query, "passes_per_step": passes_per_step,
            "passes_per_query": passes_per_query}


def _row_counter(model) -> list[int]:
    """A one-element counter of the rows (examples) that go through `model`'s forward from now on."""
    count = [0]

    def hook(module, args, kwargs) -> None:
        inputs = kwargs.get("input_ids", kwargs.get("inputs_embeds"))
        count[0] += len(inputs if inputs is not None else args[0])

    model.register_forward_pre_hook(hook, with_kwargs=True)
    return count


def _sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)
