"""`robench show RUN_ID`: a finished run's attacked examples in the terminal, the attack's edits marked inline,
readable at 80 columns (wrapped at words; `[[old -> new]]` when piped).

Texts, names and labels come from data and records: control characters (escape sequences, OSC-8 links) and
bidirectional controls in them are shown as visible escapes (`robench.core.text.terminal_safe`), and nothing
from them is read as rich markup. `show` only reads: a read-only results directory is fine."""
from __future__ import annotations

from rich.console import Console
from rich.text import Text

from robench.cli.common import plain, run_title, settings_from_args
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
        from robench.cli.runs import check_page_path

        check_page_path(args.html)
    settings = settings_from_args(args, read_only=True)
    runs_dir = runs_to_read(settings.results_dir, settings.cache_dir)
    run = load_run(runs_dir, args.run_id)
    console = Console()
    print_examples(console, run, args.outcome, args.limit)
    for label, value in validity_facts(run.record.metrics) + reading_facts(runs_dir, run.record.run_id):
        console.print(plain(f"{label}: {value}"))
    if args.html:
        from robench.report.run_page import write_run_page

        print(f"wrote {write_run_page(runs_dir, run.record.run_id, args.html)}")


def print_examples(console: Console, run, outcome: str, limit: int) -> None:
    """The chosen examples, one block each: a header line (index, outcome, label, prediction, queries) and the
    adversarial text with the attack's edits marked inline, wrapped at words to any width. On a terminal an edit
    is the old words struck through in red beside the new ones in green; piped, it is `[[old -> new]]`."""
    from robench.report.examples import inline_diff
    from robench.report.validity import MARKED, lexicon_settings, swap_marks

    lexicon = lexicon_settings() if "validity" in run.record.metrics else None
    chosen = [e for e in run.examples if outcome in ("all", e.status)]
    shown = chosen[:limit] if limit > 0 else chosen
    counts = ", ".join(f"{n} {o}" for o, n in run.counts().items() if n)
    terminal = console.is_terminal
    console.print(plain(f"{run_title(run.record.spec, run.record.hyperparameters)}: {counts}"), style="bold")
    for e in shown:
        marks = {word: cls for word, cls in swap_marks(e.original_text, e.perturbed_text, lexicon).items()
                 if cls in MARKED} if lexicon is not None and e.status == "successful" else {}
        head = Text(f"#{e.index} ")
        head.append(terminal_safe(e.status), STATUS_STYLE.get(e.status, ""))
        head.append(terminal_safe(f"  label {run.label(e.label)}  prediction {run.label(e.original_prediction)} → "
                                  f"{run.label(e.perturbed_prediction)}  {e.queries} queries"))
        text = _diff_text(inline_diff(e.original_text, e.perturbed_text), marks, terminal) if e.original_text \
            else Text(terminal_safe(e.perturbed_text)).append("  (replayed: no original)", "dim")
        console.print()
        console.print(head)
        for line in text.wrap(console, max(console.width - 4, 20)):  # indented, with no trailing blanks
            line.rstrip()
            console.print(Text("    ").append_text(line))
    console.print()
    console.print(plain(f"{len(shown)} of {len(chosen)} {'' if outcome == 'all' else outcome + ' '}examples; "
                        f"run {run.record.run_id}"))


def _diff_text(pieces: list, marks: dict[str, str], terminal: bool) -> Text:
    text = Text()
    for piece in pieces:
        if isinstance(piece, str):
            text.append(terminal_safe(piece))
            continue
        old, new = terminal_safe(piece.old), terminal_safe(piece.new)
        if terminal:
            text.append(old, "red strike")
            text.append(" " if old and new else "")
            text.append(new, "bold green")
        else:
            text.append(f"[[{old} -> {new}]]")
        if not new:
            text.append(" ")
        for word in dict.fromkeys(piece.new.lower().split()):
            if (mark := marks.get(word)) is not None:
                text.append(f"[{mark}]", "bold white on red" if mark == "antonym" else "bold yellow")
    return text
