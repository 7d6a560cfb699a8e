"""Flags of `robench analyze --syntax` (BLiMP through the frozen MLM head, structural probe)."""
from __future__ import annotations

import argparse

from robench.analysis.syntax_config import BlimpConfig, ProbeConfig, SyntaxConfig


def add_syntax_args(p: argparse.ArgumentParser) -> None:
    b, q = BlimpConfig(), ProbeConfig()
    g = p.add_argument_group("syntax (docs/guide/analysis.md; needs `robench resources build-mlm-head`)")
    g.add_argument("--syntax", action="store_true",
                   help="also score BLiMP through the frozen MLM head and train the structural probe per layer")
    g.add_argument("--blimp-pll-pairs", type=int, default=b.pll_pairs,
                   help=f"pairs per BLiMP set scored by pseudo-log-likelihood (default: {b.pll_pairs})")
    g.add_argument("--blimp-prefix-pairs", type=int, default=b.prefix_pairs,
                   help=f"pairs per one-prefix BLiMP set, e.g. anaphor agreement (default: {b.prefix_pairs})")
    g.add_argument("--probe-train-sentences", type=int, default=None,
                   help="first N sentences of EWT dev to train the probe on (default: all 2,001)")
    g.add_argument("--probe-test-sentences", type=int, default=None,
                   help="first N sentences of EWT test to evaluate on (default: all 2,077)")
    g.add_argument("--probe-layers", type=int, nargs="+", default=None,
                   help="hidden-state indices to probe, 0 = embeddings (default: all)")
    g.add_argument("--probe-rank", type=int, default=q.rank, help=f"rank k of the probe (default: {q.rank})")
    g.add_argument("--probe-epochs", type=int, default=q.epochs, help=f"training epochs (default: {q.epochs})")


def syntax_config_from_args(args: argparse.Namespace) -> SyntaxConfig | None:
    if not args.syntax:
        return None
    layers = tuple(sorted(set(args.probe_layers))) if args.probe_layers else None
    if layers is not None and layers[0] < 0:
        from robench.core.errors import RobenchError

        raise RobenchError(f"--probe-layers must be hidden-state indices >= 0, got {layers[0]}")
    return SyntaxConfig(BlimpConfig(args.blimp_pll_pairs, args.blimp_prefix_pairs),
                        ProbeConfig(rank=args.probe_rank, epochs=args.probe_epochs,
                                    train_sentences=args.probe_train_sentences,
                                    test_sentences=args.probe_test_sentences, layers=layers))


def add_parser(sub) -> None:
    """`robench syntax-report`: the evidence table over `robench analyze --syntax` records."""
    from robench.cli.common import add_common_args

    p = sub.add_parser("syntax-report", help="table of the syntax analyses: anaphor agreement, BLiMP, UUAS per "
                                             "model with intervals over seeds and differences from a baseline")
    p.add_argument("--baseline", default="bert", help="model the others are compared with (default: bert)")
    p.add_argument("--task", default=None, help="only records of this task")
    p.add_argument("--out", default=None, help="also write the Markdown here")
    add_common_args(p)
    p.set_defaults(handler=_cmd_report)


def _cmd_report(args) -> None:
    from pathlib import Path

    from robench.analysis import iter_analyses
    from robench.analysis.syntax_report import report
    from robench.cli.common import settings_from_args
    from robench.core.files import atomic_write

    settings = settings_from_args(args)
    records = [r for r in iter_analyses(settings.results_dir) if args.task in (None, r.spec["task"])]
    text = report(records, args.baseline)
    print(text)
    if args.out:
        atomic_write(Path(args.out), text)
        print(f"wrote {args.out}")
