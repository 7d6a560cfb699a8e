"""`robench compare --baseline MODEL`: each model against the baseline at the same setting, paired."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from robench.cli.common import settings_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="paired comparison of every model with a baseline model, per setting")
    p.add_argument("--baseline", default="bert", help="the baseline model (default: bert)")
    p.add_argument("--results-dir", help="default: $ROBENCH_RESULTS_DIR or ./results")
    p.set_defaults(handler=cmd_compare)


def cmd_compare(args) -> None:
    from robench.report.compare import compare, group_settings
    from robench.report.leaderboard import load_records

    settings = settings_from_args(args)
    records = load_records(settings.runs_dir)
    found = compare(group_settings(records.current), settings.runs_dir, args.baseline)
    table = Table(title=f"Accuracy under attack against {args.baseline}: paired over shared examples and seeds "
                        "(95% bootstrap interval, permutation p-value)")
    for name in ("task", "attack", "setting", "model", "seeds", "examples", "difference (points)", "p", "verdict"):
        table.add_column(name, justify="right" if name in ("seeds", "examples", "p") else "left")
    order = sorted(found, key=lambda c: (c.setting.spec["task"], c.setting.spec["attack"], c.setting.label,
                                         c.setting.spec["model"]))
    for c in order:
        d = c.difference
        table.add_row(c.setting.spec["task"], c.setting.spec["attack"], c.setting.label, c.setting.spec["model"],
                      " ".join(map(str, c.seeds)), str(c.examples),
                      f"{100 * d.value:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}]", f"{c.p_value:.3g}",
                      c.verdict)
    Console(width=200).print(table)
    if not found:
        print(f"no other model has runs at a setting where {args.baseline} has")
    if records.note:
        print(records.note)
