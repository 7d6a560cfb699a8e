"""`robench show RUN_ID`: a finished run's attacked examples in the terminal, changed words highlighted.

Texts, names and labels come from data and records: control characters (escape sequences, OSC-8 links) and
bidirectional controls in them are shown as visible escapes (`robench.core.text.terminal_safe`), and nothing
from them is read as rich markup. `show` only reads: a read-only results directory is fine."""
from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from robench.cli.common import plain, settings_from_args
from robench.core.text import terminal_safe

STATUS_STYLE = {"successful": "bold red", "failed": "green", "skipped": "dim", "error": "bold magenta"}


def add_parser(sub) -> None:
    p = sub.add_parser("show", help="a run's attacked examples, original vs adversarial, changed words highlighted")
    p.add_argument("run_id", metavar="RUN_ID", help="a run id (the record's file name) or a unique prefix of one")
    p.add_argument("--outcome", choices=["all", "successful", "failed", "skipped", "error"], default="all")
    p.add_argument("--limit", type=int, default=20, help="show at most this many examples (default: 20; 0: all)")
    p.add_argument("--html", metavar="PATH", help="also write the run's static page (filterable by outcome)")
    p.add_argument("--results-dir", help="default: $ROBENCH_RESULTS_DIR or ./results")
    p.set_defaults(handler=cmd_show)


def cmd_show(args) -> None:
    from robench.core.packed import runs_to_read
    from robench.report.examples import load_run
    from robench.report.readings import reading_facts
    from robench.report.validity import validity_facts

    if args.html:
        from robench.cli.core import check_page_path

        check_page_path(args.html)
    settings = settings_from_args(args, read_only=True)
    runs_dir = runs_to_read(settings.results_dir, settings.cache_dir)
    run = load_run(runs_dir, args.run_id)
    console = Console()
    console.print(examples_table(run, args.outcome, args.limit))
    for label, value in validity_facts(run.record.metrics) + reading_facts(runs_dir, run.record.run_id):
        console.print(plain(f"{label}: {value}"))
    if args.html:
        from robench.report.run_page import write_run_page

        print(f"wrote {write_run_page(runs_dir, run.record.run_id, args.html)}")


def examples_table(run, outcome: str, limit: int) -> Table:
    from robench.report.examples import word_diff
    from robench.report.validity import lexicon_settings, marked, swap_marks

    lexicon = lexicon_settings() if "validity" in run.record.metrics else None

    spec = run.record.spec
    chosen = [e for e in run.examples if outcome in ("all", e.status)]
    shown = chosen[:limit] if limit > 0 else chosen
    counts = ", ".join(f"{n} {o}" for o, n in run.counts().items() if n)
    title = f"{spec.get('model')} × {spec.get('attack')} on {spec.get('task')} (seed {spec.get('seed')}): {counts}"
    table = Table(title=plain(title), show_lines=True,
                  caption=plain(f"{len(shown)} of {len(chosen)} {'' if outcome == 'all' else outcome + ' '}"
                                f"examples; run {run.record.run_id}"))
    for name, justify in (("#", "right"), ("outcome", "left"), ("label", "left"), ("prediction", "left"),
                          ("queries", "right"), ("original", "left"), ("adversarial", "left")):
        table.add_column(name, justify=justify, overflow="fold")
    for e in shown:
        original, adversarial = word_diff(e.original_text, e.perturbed_text)
        if lexicon is not None and e.status == "successful":  # antonym and unlisted swaps marked
            adversarial = marked(adversarial, swap_marks(e.original_text, e.perturbed_text, lexicon))
        table.add_row(str(e.index), Text(terminal_safe(e.status), STATUS_STYLE.get(e.status, "")),
                      plain(run.label(e.label)),
                      plain(f"{run.label(e.original_prediction)} → {run.label(e.perturbed_prediction)}"),
                      str(e.queries),
                      _styled(original, "bold red strike") if original else Text("(replayed: no original)", "dim"),
                      _styled(adversarial, "bold green"))
    return table


def _styled(pieces, style: str) -> Text:
    text = Text()
    for piece in pieces:
        text.append(terminal_safe(piece.text), style if piece.changed else "")
        if getattr(piece, "mark", ""):
            text.append(f"[{piece.mark}]", "bold white on red" if piece.mark == "antonym" else "bold yellow")
    return text
