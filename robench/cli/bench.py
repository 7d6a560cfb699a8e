"""`robench bench NAME`: benchmarks that print ratios measured side by side."""
from __future__ import annotations

import argparse
import importlib

from robench.benchmarks import BENCHMARKS


def add_parser(sub) -> None:
    p = sub.add_parser("bench", help="benchmarks (ratios measured side by side in one run)",
                       description="Run `robench bench NAME --help` for each benchmark's options.")
    p.add_argument("name", choices=sorted(BENCHMARKS))
    p.add_argument("args", nargs=argparse.REMAINDER, help="options passed to the benchmark")
    p.set_defaults(handler=lambda args: importlib.import_module(BENCHMARKS[args.name]).main(args.args))
