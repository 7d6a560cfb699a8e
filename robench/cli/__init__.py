"""`robench` command line: a thin layer over the Python API."""
from __future__ import annotations

import argparse
import importlib
import logging
import os
from typing import Sequence

from rich.console import Console
from rich.markup import escape

from robench.errors import RobenchError

ERR = Console(stderr=True)

# One module per group of sub-commands; each defines `add_parser(subparsers)` and sets `handler=` on its parsers.
# Keep their top-level imports light: heavy libraries are imported inside the handlers.
SUBCOMMANDS: tuple[str, ...] = (
    "robench.cli.core",
    "robench.cli.resources",
    "robench.cli.bench",
    "robench.cli.analyze",
    "robench.cli.syntax",
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


INTERRUPTED = ("robench: interrupted; kept: finished checkpoints, finished records and every attacked example "
               "(re-run the same command to resume the attack); lost: a fine-tuning in progress, which restarts "
               "from the beginning")


class _WarningLine(logging.Handler):
    """robench's warnings (damaged caches, discarded partial files, waiting for a lock) as one stderr line."""

    def emit(self, record: logging.LogRecord) -> None:
        ERR.print(f"[yellow]robench: warning:[/] {escape(record.getMessage())}", highlight=False, soft_wrap=True)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    args = build_parser().parse_args(argv)
    logger = logging.getLogger("robench")
    handler = _WarningLine(logging.WARNING)
    logger.addHandler(handler)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        args.handler(args)
    except RobenchError as exc:
        ERR.print(f"[bold red]robench: error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        ERR.print(INTERRUPTED, highlight=False, soft_wrap=True, markup=False)
        return 130
    finally:
        logger.removeHandler(handler)
    return 0

