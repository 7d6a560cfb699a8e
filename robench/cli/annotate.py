"""`robench annotate export|import`: a blind human reading of adversarial examples (robench.report.annotate)."""
from __future__ import annotations

from pathlib import Path

from rich.console import Console

from robench.cli.common import narrow_table, plain


def add_parser(sub) -> None:
    p = sub.add_parser("annotate", help="blind human reading of successful adversarial examples: export a rating "
                                       "sheet, import the filled sheet as readings beside the records")
    actions = p.add_subparsers(dest="action", required=True)
    e = actions.add_parser("export", help="a blinded, shuffled sample as a rating sheet (CSV) and a self-contained "
                                         "HTML form for the reader, and a separate key")
    e.add_argument("results_dirs", nargs="+", metavar="RESULTS_DIR", help="folders with a runs/ folder")
    e.add_argument("--out", required=True, metavar="DIR",
                   help="writes DIR/rater/sheet.csv and DIR/rater/form.html (give the reader DIR/rater only) and "
                        "DIR/key.json (keep it from the reader)")
    e.add_argument("--n", type=int, default=60,
                   help="successful examples per attack setting (task, attack and its settings; models and seeds "
                        "pooled), at random (default: 60)")
    e.add_argument("--seed", type=int, default=0, help="the sample's and the shuffle's seed (default: 0)")
    e.set_defaults(handler=cmd_export)
    i = actions.add_parser("import", help="validate a filled sheet against its key, store the readings beside the "
                                         "records, and report them per attack, setting and model")
    i.add_argument("sheet", metavar="SHEET.csv", help="the filled sheet (from the form or edited by hand)")
    i.add_argument("--key", required=True, metavar="KEY", help="the key.json export wrote with that sheet")
    i.set_defaults(handler=cmd_import)


def cmd_export(args) -> None:
    from robench.report.annotate import export_study

    done = export_study([Path(d) for d in args.results_dirs], Path(args.out), args.n, args.seed)
    total = sum(done.per_group.values())
    print(f"study {done.study}: {total} successful examples from {len(done.per_group)} attack setting(s), "
          f"{2 * total} texts to label and {total} pairs to rate")
    for task, attack, setting in done.short:
        print(f"  only {done.per_group.get((task, attack, setting), 0)} distinct examples for {task} {attack} "
              f"{setting} (fewer than --n {args.n})")
    print(f"for the reader: {done.sheet} and {done.form}")
    print(f"keep from the reader: {done.key}")


def cmd_import(args) -> None:
    from robench.report.annotate import import_sheet

    done = import_sheet(Path(args.sheet), Path(args.key))
    models, shared = short_models([model for *_, model in done.summaries])
    caption = "read: pairs read; label: label kept; meaning: meaning kept (>= 3 of 4); fluent; valid: all three; " \
              "gold: originals read as gold" + (f"; every model: {shared}" if shared else "")
    table = narrow_table(f"blind reading, study {done.study} (Wilson 95% intervals)",
                         ("task", "attack", "setting", "model", "read", "label", "meaning", "fluent", "valid", "gold"),
                         caption)
    for (task, attack, setting, model), s in done.summaries.items():
        table.add_row(plain(task), plain(attack), plain(setting), plain(models[model]), str(s.n), s.label_kept.text(),
                      s.meaning_kept.text(), s.fluent.text(), s.valid.text(), s.originals_as_gold.text())
    Console().print(table)
    for path in done.written:
        print(f"wrote {path}")


def short_models(labels: list[str]) -> tuple[dict[str, str], str]:
    """Each model label without the settings every one shares (its model name kept), and those settings."""
    from robench.report.annotate import ALL_MODELS

    parts = [label.split() for label in labels if label != ALL_MODELS]
    shared = [p for p in parts[0][1:] if all(p in other[1:] for other in parts)] if parts else []
    short = {label: label if label == ALL_MODELS else " ".join(p for i, p in enumerate(label.split())
                                                               if i == 0 or p not in shared) for label in labels}
    return short, " ".join(shared)
