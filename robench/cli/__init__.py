"""`robench` command line: a thin layer over the Python API."""
from __future__ import annotations

import argparse
import difflib
import functools
import importlib
import logging
import os
from typing import Sequence

from rich.console import Console
from rich.markup import escape

from robench.core.errors import RobenchError
from robench.core.text import terminal_safe

ERR = Console(stderr=True)

# One module per group of sub-commands; each defines `add_parser(subparsers)` and sets `handler=` on its parsers.
# Keep their top-level imports light: heavy libraries are imported inside the handlers.
SUBCOMMANDS: tuple[str, ...] = (
    "robench.cli.runs",
    "robench.cli.resources",
    "robench.cli.bench",
    "robench.cli.analyze",
    "robench.cli.syntax",
    "robench.cli.grid",
    "robench.cli.compare",
    "robench.cli.show",
    "robench.cli.pack",
    "robench.cli.annotate",
)


@functools.cache
def build_parser() -> argparse.ArgumentParser:
    """The whole command line, built once per process (parsing does not change it; every choice is static)."""
    parser = argparse.ArgumentParser(prog="robench",
                                     description="Adversarial-robustness benchmarking for NLP classifiers.")
    sub = parser.add_subparsers(dest="command", required=True)
    for module in SUBCOMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The parsed command line; an unknown flag is an error of the (sub-)command it was given to, with its usage
    and the nearest flag it knows (`robench run: error: unrecognized arguments: --modle (did you mean --model?)`)."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        command = _command_parser(parser, args)
        known = [o for action in command._actions for o in action.option_strings if o.startswith("--")]
        hints = [f"{flag} (did you mean {match[0]}?)" if flag.startswith("--") and
                 (match := difflib.get_close_matches(flag.split("=", 1)[0], known, n=1)) else flag for flag in extra]
        command.error(f"unrecognized arguments: {' '.join(hints)}")
    return args


def _command_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> argparse.ArgumentParser:
    """The innermost sub-command's parser that `args` went through (`robench bench estimate`: bench's estimate)."""
    while True:
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        name = getattr(args, sub.dest, None) if sub is not None else None
        if name not in (sub.choices if sub is not None else {}):
            return parser
        parser = sub.choices[name]


INTERRUPTED = ("robench: interrupted; kept: finished checkpoints, finished records and every attacked example "
               "(re-run the same command to resume the attack); lost: a fine-tuning in progress, which restarts "
               "from the beginning")


class _WarningLine(logging.Handler):
    """robench's warnings (damaged caches, discarded partial files, waiting for a lock) as one stderr line."""

    def emit(self, record: logging.LogRecord) -> None:
        ERR.print(f"[yellow]robench: warning:[/] {escape(terminal_safe(record.getMessage()))}", highlight=False,
                  soft_wrap=True)


class _PhaseLine(logging.Handler):
    """What robench is doing, for work of more than about 2 s without a progress bar (`robench.core.progress.phase`),
    as one dim stderr line. A phase's heartbeat (how long it has run) is redrawn in place on a terminal; in a pipe
    it is a plain line, every beat in the phase's first PLAIN_EVERY seconds and then one every PLAIN_EVERY."""

    def __init__(self, level: int) -> None:
        super().__init__(level)
        self.drawn = False  # a heartbeat is on the terminal's last line
        self.last_plain = 0.0

    def emit(self, record: logging.LogRecord) -> None:
        import time

        from robench.core.progress import PLAIN_EVERY

        text = f"robench: {terminal_safe(record.getMessage())}"
        beat = getattr(record, "heartbeat", False)
        if beat and not ERR.is_terminal:  # a pipe: every beat of a short phase, then one line every PLAIN_EVERY
            if getattr(record, "elapsed", 0.0) >= PLAIN_EVERY and time.monotonic() - self.last_plain < PLAIN_EVERY:
                return
            self.last_plain = time.monotonic()
        if ERR.is_terminal and (beat or self.drawn):
            ERR.file.write("\r\x1b[2K")  # over the last heartbeat
            self.drawn = beat
            if beat:
                ERR.print(f"[dim]{escape(text)}[/]", highlight=False, end="", overflow="ellipsis", no_wrap=True,
                          crop=True)
                ERR.file.flush()
                return
        ERR.print(f"[dim]{escape(text)}[/]", highlight=False, soft_wrap=True)


def _error_line(message: str) -> None:
    """One `robench: error:` line: rich markup and terminal controls in the message printed as they are typed."""
    ERR.print(f"[bold red]robench: error:[/] {escape(terminal_safe(message))}", highlight=False, soft_wrap=True)


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")  # read when transformers is imported, if ever
    args = parse(argv)
    logger, phases = logging.getLogger("robench"), logging.getLogger("robench.phases")
    handler, phase_handler = _WarningLine(logging.WARNING), _PhaseLine(logging.INFO)
    logger.addHandler(handler)
    if not getattr(args, "quiet", False):
        phases.addHandler(phase_handler)
        phases.setLevel(logging.INFO)
    try:
        args.handler(args)
    except RobenchError as exc:
        _error_line(str(exc))
        return 2
    except KeyboardInterrupt:
        ERR.print(INTERRUPTED, highlight=False, soft_wrap=True, markup=False)
        return 130
    except Exception as exc:
        from robench.core.files import disk_full

        if not disk_full(exc):
            raise
        _error_line(f"a write failed: {exc}; nothing half-written is kept: free some space (or point "
                    "--results-dir / --cache-dir elsewhere) and re-run")
        return 2
    finally:
        logger.removeHandler(handler)
        phases.removeHandler(phase_handler)
        phases.setLevel(logging.NOTSET)
    return 0

