"""`robench pack` / `robench unpack`: a results directory's runs as two exact files (`robench.core.packed`)."""
from __future__ import annotations

CACHE_HELP = "where packed runs are unpacked (default: $ROBENCH_CACHE_DIR or ~/.cache/robench)"


def add_parser(sub) -> None:
    p = sub.add_parser("pack", help="store a results directory's runs/ as records.jsonl + examples.parquet, exactly "
                                    "(with the runs packed there already); the loose .json/.csv files are removed")
    p.add_argument("results_dirs", nargs="+", metavar="RESULTS_DIR", help="folders that hold a runs/ folder")
    p.add_argument("--cache-dir", help=CACHE_HELP)
    p.set_defaults(handler=cmd_pack)
    p = sub.add_parser("unpack", help="the inverse of pack: a packed results directory's runs back as loose files "
                                      "in its runs/ (or, with --to, copied into another folder)")
    p.add_argument("results_dir", metavar="RESULTS_DIR")
    p.add_argument("--to", metavar="DIR", help="write the run files into DIR and leave the pack as it is")
    p.add_argument("--cache-dir", help=CACHE_HELP)
    p.set_defaults(handler=cmd_unpack)


def cmd_pack(args) -> None:
    from robench.core.packed import pack_results_dir
    from robench.core.paths import resolve_settings

    for results_dir in args.results_dirs:
        settings = resolve_settings(cache_dir=args.cache_dir, results_dir=results_dir)
        total, added = pack_results_dir(settings.results_dir, settings.cache_dir)
        print(f"packed {total} run(s) in {settings.results_dir} ({added} from runs/)")


def cmd_unpack(args) -> None:
    from pathlib import Path

    from robench.core.packed import unpack_into, unpack_results_dir
    from robench.core.paths import resolve_settings

    settings = resolve_settings(cache_dir=args.cache_dir, results_dir=args.results_dir)
    if args.to:
        count = unpack_into(settings.results_dir, Path(args.to), settings.cache_dir)
        print(f"wrote {count} run(s) into {args.to}")
    else:
        count = unpack_results_dir(settings.results_dir, settings.cache_dir)
        print(f"unpacked {count} run(s) into {settings.results_dir / 'runs'}")
