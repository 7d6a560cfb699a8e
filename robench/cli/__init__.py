"""`robench` command line: a thin layer over the Python API."""
from __future__ import annotations

import argparse
import importlib
import os
from typing import Sequence

from rich.console import Console

from robench.errors import RobenchError

ERR = Console(stderr=True)

# One module per group of sub-commands; each defines `add_parser(subparsers)` and sets `handler=` on its parsers.
# Keep their top-level imports light: heavy libraries are imported inside the handlers.
SUBCOMMANDS: tuple[str, ...] = (
    "robench.cli.core",
    "robench.cli.resources",
    "robench.cli.bench",
    "robench.cli.analyze",
    "robench.cli.grid",
    "robench.cli.compare",
    "robench.cli.show",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="robench",
                                     description="Adversarial-robustness benchmarking for NLP classifiers.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        args.handler(args)
    except RobenchError as exc:
        ERR.print(f"[bold red]robench: error:[/] {exc}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        ERR.print("robench: interrupted; finished work is saved, re-run the same command to resume")
        return 130
    return 0

