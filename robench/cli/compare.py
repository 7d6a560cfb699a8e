"""`robench compare --baseline MODEL`: each model against the baseline at the same setting, paired."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table

from robench.cli.common import plain, settings_from_args


def add_parser(sub) -> None:
    p = sub.add_parser("compare", help="paired comparison of every model with a baseline model, per setting")
    p.add_argument("--baseline", default="bert", help="the baseline model (default: bert)")
    p.add_argument("--results-dir", help="default: $ROBENCH_RESULTS_DIR or ./results")
    from robench.cli.runs import add_with_reference

    add_with_reference(p)
    p.set_defaults(handler=cmd_compare)


def cmd_compare(args) -> None:
    import tempfile

    from robench.cli.runs import reference_view
    from robench.core.packed import runs_to_read

    settings = settings_from_args(args, read_only=True)  # compare writes nothing
    with tempfile.TemporaryDirectory(prefix="robench-compare-") as scratch:
        _compare(args, runs_to_read(reference_view(args, settings, scratch), settings.cache_dir), settings.data_dir)


def _compare(args, runs_dir, data_dir) -> None:
    from robench.core.text import terminal_safe
    from robench.report.compare import compare, group_settings, not_compared, nothing_compared
    from robench.report.leaderboard import load_records
    from robench.report.reference import BASELINE, published_among
    from robench.report.stats import MIN_SEEDS
    from robench.report.untrained import unchecked_runs, untrained_runs

    records = load_records(runs_dir)
    groups = group_settings(records.current)
    untrained = untrained_runs(records.current, runs_dir, data_dir)
    unchecked = unchecked_runs(records.current, runs_dir, data_dir)
    published = published_among(records.current) if args.baseline == BASELINE else None  # its verdicts stay
    found = compare(groups, runs_dir, args.baseline, untrained, published)
    table = Table(title=f"Accuracy under attack against {args.baseline}: paired over matched seeds and shared "
                        f"examples (95% interval and p-value under crossed seed x example effects, the seed part "
                        f"random on its S - 1 df); Holm over the comparison's family (its name and size); a "
                        f"verdict needs {MIN_SEEDS} seeds. D: the difference the verdict finds with 80% power (at "
                        "Holm's first step, alpha 0.05 / family size: a conservative bound; one unadjusted test's: "
                        "leaderboard.csv, `_detectable`)")
    audit = ("swaps syn/infl/ant/unl % (model | baseline)",)  # the validity audit (robench.report.validity)
    right = ("seeds", "examples", "D", "p", "Holm p")
    for name in ("task", "attack", "setting", "model", "seeds", "examples", "difference (points)", "p", "family",
                 "Holm p", "D", "verdict", *audit):
        table.add_column(name, justify="right" if name in right else "left",
                         no_wrap=name in ("family", "verdict", "seeds"))
    order = sorted(found, key=lambda c: (c.setting.spec["task"], c.setting.spec["attack"], c.setting.label,
                                         c.setting.spec["model"]))
    for c in order:
        d = c.difference
        table.add_row(*(plain(v) for v in (c.setting.spec["task"], c.setting.spec["attack"], c.setting.label,
                                           c.setting.spec["model"])),  # names from records: no markup, no controls
                      _seeds(c), str(c.examples), _interval(d), _p(c.p_value), c.family_label, _p(c.adjusted_p),
                      _points(c.detectable_adjusted), c.verdict_text,
                      f"{audit_cell(c.setting.records)} | {audit_cell(c.baseline.records)}")
    Console(width=230).print(table)
    if not found:
        print(nothing_compared(groups, args.baseline))
    else:
        print(family_note(found))
        if any(c.single for c in found):
            print("seeds \"1 vs ...\": one checkpoint of your own against the baseline's seeds on the same examples "
                  "(is it inside their spread? docs/guide/statistics.md, \"One checkpoint against the baseline's "
                  "seeds\")")
    for s, why in not_compared(groups, found, args.baseline):
        print(f"not compared: {terminal_safe(s.spec['model'])} {terminal_safe(s.spec['attack'])} "
              f"{terminal_safe(s.label)}: {why}")
    for run_id, warning in sorted(untrained.items()):
        print(f"warning: {run_id}: {warning}; its seed is left out of every comparison")
    for run_id, note in sorted(unchecked.items()):
        print(f"note: {run_id}: {note}")
    if records.note:
        print(records.note)


def family_note(found) -> str:
    """What each family of `found` is, with its size."""
    from robench.report.compare import CLAIMS, YOURS
    from robench.report.stats import comparisons

    what = {CLAIMS: "the published protocol's pre-specified claims, Holm over all of them (their verdicts as "
                    "published in results/reference/claims.md)",
            YOURS: "your runs against the published baseline, Holm among themselves (the published rows keep "
                   "their published p-values)"}
    sizes = dict.fromkeys(sorted({c.family_name for c in found}, key=lambda n: (n != "exploratory", n)))
    for c in found:
        sizes[c.family_name] = c.family
    lines = [f"family {name}: {comparisons(size)}, "
             f"{what.get(name, 'Holm-adjusted together' if size != 1 else 'no adjustment (p = Holm p)')}"
             for name, size in sizes.items()]
    return "\n".join(lines + ["one without a p-value counts with p = 1; p-values are deterministic quadratures, so "
                              "they carry no Monte-Carlo error and no verdict depends on a random seed"])


def _seeds(c) -> str:
    """The matched seeds compared, and those left out because a checkpoint did not train."""
    kept = " ".join(map(str, c.seeds))
    if c.single:  # one checkpoint of your own (one seed of it) against the baseline's seeds (robench.report.single)
        seed = c.setting.records[0].spec.get("seed", 0)
        kept = f"{'1' if seed == 0 else f'seed {seed}'} vs {kept}"
    return f"{kept} ({' '.join(map(str, c.excluded))} untrained)" if c.excluded else kept


def _interval(d) -> str:
    if d.value != d.value:  # no shared seed or example
        return "–"
    if d.low != d.low:  # one matched seed, too few examples or no variation: no interval
        return f"{100 * d.value:+.1f}"
    return f"{100 * d.value:+.1f} [{100 * d.low:+.1f}, {100 * d.high:+.1f}]"


def _points(value: float) -> str:
    return "–" if value != value else f"{100 * value:.1f}"


def _p(value: float) -> str:
    return "–" if value != value else f"{value:.3g}"


def audit_cell(records) -> str:
    """Synonym / inflection / antonym / unlisted swap shares of a setting's records, mean over seeds; "–" without
    an audit."""
    from robench.report.validity import validity_columns

    cols = [validity_columns(r.metrics) for r in records]
    cols = [c for c in cols if c.get("synonym_swap_rate") is not None]
    if not cols:
        return "–"
    keys = ("synonym_swap_rate", "inflection_swap_rate", "antonym_swap_rate", "unlisted_swap_rate")
    return "/".join(f"{100 * sum(c[k] or 0.0 for c in cols) / len(cols):.0f}" for k in keys)
