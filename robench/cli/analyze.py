"""`robench analyze`: the diagnostics of arXiv 2108.13602."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from robench.analysis import analysis_dir, analyze
from robench.analysis.spec import AnalysisRecord
from robench.analysis.syntax_config import syntax_rows
from robench.cli.common import add_spec_args, progress_console, settings_from_args, specs_from_args
from robench.cli.syntax import add_syntax_args, syntax_config_from_args

ROWS = [  # label, metric key, format
    ("Dev accuracy (whole eval split)", "dev_accuracy", "%"),
    ("Accuracy on the analysed examples", "sample_accuracy", "%"),
    ("Shuffle: prediction changes", "shuffle_flip_rate", "%"),
    ("Shuffle: gold-prob drop (mean)", "shuffle_gold_prob_drop", "f"),
    ("Shuffle: |gold-prob change| (mean)", "shuffle_gold_prob_abs_change", "f"),
    ("Deletion: top-1 word share", "top1_share", "%"),
    ("Deletion: top-3 words share", "top3_share", "%"),
    ("Deletion: Gini", "gini", "f"),
    ("Deletion: entropy (nats)", "entropy", "f"),
    ("Token cosine within sentence (last layer)", "token_cosine", "f"),
    ("  pre-trained backbone", "backbone_token_cosine", "f"),
    ("[CLS] effective rank (centred)", "cls_effective_rank", "f"),
    ("  pre-trained backbone", "backbone_cls_effective_rank", "f"),
    ("CKA to pre-trained, mean over layers 1..L", "cka_mean", "f"),
    ("CKA to pre-trained, last layer", "cka_last", "f"),
]


def summary_table(record: AnalysisRecord):
    spec, m = record.spec, record.metrics
    table = Table(title=f"analysis of {spec['model']} on {spec['task']} ({spec['backbone']}, seed {spec['seed']}, "
                        f"{m['examples']} examples, {record.config['shuffles']} shuffles each)")
    table.add_column("Metric")
    table.add_column("Value", justify="right")
    for label, key, kind in ROWS:
        value = m.get(key)
        if value is not None:
            table.add_row(label, f"{100 * value:.2f}%" if kind == "%" else f"{value:.4f}")
    for label, key, kind in syntax_rows(m):
        table.add_row(label, f"{100 * m[key]:.2f}%" if kind == "%" else f"{m[key]:.4f}")
    layers = ", ".join(f"{v:.3f}" for v in record.cka_per_layer)
    table.add_row("CKA per layer (emb, 1..L)", layers)
    return table


def add_parser(sub) -> None:
    p = sub.add_parser("analyze", help="diagnostics of arXiv 2108.13602 on a fine-tuned checkpoint",
                       description="Word-order sensitivity, influential-word concentration, representational "
                                   "diversity and per-layer CKA to the pre-trained encoder (docs/guide/analysis.md).")
    add_spec_args(p, attack=False)
    p.add_argument("--examples", type=int, default=100, help="eval examples, chosen by seed (default: 100)")
    p.add_argument("--shuffles", type=int, default=5, help="random word shuffles per example (default: 5)")
    p.add_argument("--force", action="store_true", help="recompute even if the record exists")
    add_syntax_args(p)
    p.set_defaults(handler=cmd_analyze)


def cmd_analyze(args) -> None:
    settings, console = settings_from_args(args), progress_console(args)
    syntax = syntax_config_from_args(args)
    for spec in specs_from_args(args, settings):
        if args.dry_run:
            print_analysis_plan(spec, settings, args, syntax)
            continue
        record = analyze(spec, settings, args.device, args.examples, args.shuffles, console, args.force,
                         syntax=syntax)
        Console().print(summary_table(record))
        print(f"analysis record: {analysis_dir(settings) / (record.analysis_id + '.json')}")


def print_analysis_plan(spec, settings, args, syntax) -> None:
    """`--dry-run`: the training plan (checkpoint cached or not, estimate) and where the record would go."""
    from robench.analysis import analysis_path
    from robench.analysis.spec import AnalysisConfig
    from robench.cli.runs import print_plan

    print_plan(spec, settings, args.device, attack=False, cost=not args.no_estimate, remeasure=args.remeasure)
    path = analysis_path(spec, AnalysisConfig(args.examples, args.shuffles, syntax=syntax), settings)
    print(f"analysis record: {path} ({'finished' if path.is_file() else 'to measure'})")
