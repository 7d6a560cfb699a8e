"""`robench analyze`: the diagnostics of arXiv 2108.13602."""
from __future__ import annotations

from rich.console import Console

from robench.analysis import analysis_dir, analyze, summary_table
from robench.cli.common import add_spec_args, progress_console, settings_from_args, specs_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("analyze", help="diagnostics of arXiv 2108.13602 on a fine-tuned checkpoint",
                       description="Word-order sensitivity, influential-word concentration, representational "
                                   "diversity and per-layer CKA to the pre-trained encoder (docs/analysis.md).")
    add_spec_args(p, attack=False)
    p.add_argument("--examples", type=int, default=100, help="eval examples, chosen by seed (default: 100)")
    p.add_argument("--shuffles", type=int, default=5, help="random word shuffles per example (default: 5)")
    p.add_argument("--force", action="store_true", help="recompute even if the record exists")
    p.set_defaults(handler=cmd_analyze)


def cmd_analyze(args) -> None:
    settings, console = settings_from_args(args), progress_console(args)
    for spec in specs_from_args(args, settings):
        record = analyze(spec, settings, args.device, args.examples, args.shuffles, console, args.force)
        Console().print(summary_table(record))
        print(f"analysis record: {analysis_dir(settings) / (record.analysis_id + '.json')}")
