"""`robench resources list|build-synonyms|build-mlm|build-mlm-head|calibrate`.

The parsers import nothing heavy (`robench --help` answers at once): the resources are imported by the handlers,
and a build flag left out is None here, so its config dataclass's default applies (the defaults live there, once).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from robench.cli.common import add_common_args, progress_console, settings_from_args
from robench.core.errors import RobenchError


def add_parser(sub) -> None:
    p = sub.add_parser("resources", help="offline attack resources: list, build-synonyms, build-mlm, calibrate")
    rsub = p.add_subparsers(dest="resources_command", required=True)
    q = rsub.add_parser("list", help="show each resource, its origin and whether it is available")
    add_common_args(q)
    q.set_defaults(handler=_cmd_list)
    q = rsub.add_parser("build-synonyms", help="build and cache a candidate-synonym table (default: lexicon)")
    q.add_argument("--source", choices=["lexicon", "counterfitted-glove"], default="lexicon",
                   help="lexicon: listed synonyms ranked in a counter-fitted space (the attacks' default); "
                        "counterfitted-glove: nearest neighbours of counter-fitted GloVe-50d (for comparison)")
    q.add_argument("--vocab-size", type=int, default=None, help="GloVe words (default: 100,000 lexicon, 50,000 glove)")
    q.add_argument("--k", type=int, default=50)
    add_common_args(q)
    q.set_defaults(handler=_cmd_build_synonyms)
    q = rsub.add_parser("build-mlm", help="train a masked LM from the packaged MiniLM on the local corpora")
    _add_build_flags(q)
    q.add_argument("--max-minutes", type=float, default=None, help="stop early after this long (recorded)")
    q.add_argument("--save-dtype", choices=["float32", "bfloat16"], help="default: float32")
    q.add_argument("--backbone", default="minilm")
    q.add_argument("--force", action="store_true", help="rebuild even if a build already exists")
    add_common_args(q)
    q.set_defaults(handler=_cmd_build_mlm)
    _add_build_head_parser(rsub)
    q = rsub.add_parser("calibrate", help="map USE similarity thresholds to MiniLM (needs use-m3)")
    q.add_argument("--pairs", type=int, default=400)
    q.add_argument("--threshold", action="append", default=[], metavar="METRIC:VALUE",
                   help="extra USE threshold to map, e.g. angular:0.9 (window pairs) ")
    add_common_args(q)
    q.set_defaults(handler=_cmd_calibrate)


BUILD_FLAGS = ("steps", "batch_size", "max_length", "heldout", "seed")


def _add_build_flags(q, extra: tuple[str, ...] = ()) -> None:
    """--steps, --batch-size, ... and --lr of a build (default: the build config's)."""
    for name in extra + BUILD_FLAGS:
        q.add_argument(f"--{name.replace('_', '-')}", type=int)
    q.add_argument("--lr", type=float)


def _given(args, names: tuple[str, ...]) -> dict:
    """The build flags given on the command line (the config's defaults apply to the others)."""
    return {n: getattr(args, n) for n in names if getattr(args, n) is not None}


def _settings(args):
    args.results_dir = getattr(args, "results_dir", None)
    return settings_from_args(args)


def _console(args):
    return progress_console(args)


def _cmd_list(args) -> None:
    from rich.console import Console
    from rich.table import Table

    from robench.engine.resources import describe_all

    table = Table(title="robench resources")
    for column in ("resource", "status", "location", "details"):
        table.add_column(column, overflow="fold")  # a location is shown in full, folded if it must be
    for name, info in describe_all(_settings(args)).items():
        details = {k: v for k, v in info.items() if k not in ("status", "location")}
        table.add_row(name, info["status"], info.get("location", "–"), json.dumps(details, default=str)[:400])
    Console().print(table)


def _cmd_build_synonyms(args) -> None:
    from robench.engine.resources import build_synonyms

    if args.source == "lexicon":
        from robench.engine.resources.lexicon_table import VOCAB_SIZE, build_lexicon_table

        table = build_lexicon_table(_settings(args), args.vocab_size or VOCAB_SIZE, args.k, console=_console(args))
    else:
        table = build_synonyms(_settings(args), args.vocab_size or 50_000, args.k, console=_console(args))
    print(json.dumps(table.info, indent=2))


def _cmd_build_mlm(args) -> None:
    from robench.classifier.device import pick_device
    from robench.engine.resources import MlmBuildConfig, build_mlm, mlm_dir

    config = MlmBuildConfig(**_given(args, BUILD_FLAGS + ("lr", "max_minutes", "save_dtype")))
    for name in ("steps", "batch_size", "max_length"):
        if getattr(config, name) <= 0:
            raise RobenchError(f"--{name.replace('_', '-')} must be positive")
    settings = _settings(args)
    build_once(mlm_dir(settings, args.backbone), args.force,
               lambda: build_mlm(settings, pick_device(args.device), config, args.backbone, _console(args)))


def _cmd_build_mlm_head(args) -> None:
    from robench.analysis.mlm_head import MlmHeadConfig, build_mlm_head, mlm_head_dir
    from robench.classifier.device import pick_device

    config = MlmHeadConfig(**_given(args, ("texts", "lr") + BUILD_FLAGS))
    settings = _settings(args)
    build_once(mlm_head_dir(settings, args.backbone), args.force,
               lambda: build_mlm_head(settings, pick_device(args.device), config, args.backbone, _console(args)))


def build_once(target: Path, force: bool, build: Callable[[], dict]) -> None:
    """`robench.core.manifest.build_once`, saying what it did."""
    from robench.core.manifest import build_once as build_artefact

    outcome = build_artefact(target, force, build)
    if outcome.problem is not None:
        print(f"the existing build in {target} does not verify ({outcome.problem}); built it again")
    if outcome.kept:
        print(f"kept the existing build in {target} (held-out masked-token accuracy "
              f"{outcome.record['heldout_accuracy_after']:.3f}); pass --force to rebuild")
        return
    print(json.dumps(outcome.record, indent=2, default=str))
    print(f"saved {target}")


def _add_build_head_parser(rsub) -> None:
    q = rsub.add_parser("build-mlm-head", help="train an MLM head on the frozen pre-trained encoder "
                                               "(for `robench analyze --syntax`)")
    _add_build_flags(q, extra=("texts",))
    q.add_argument("--backbone", default="minilm")
    q.add_argument("--force", action="store_true", help="rebuild even if a build already exists")
    add_common_args(q)
    q.set_defaults(handler=_cmd_build_mlm_head)


def _cmd_calibrate(args) -> None:
    from robench.classifier.device import pick_device
    from robench.engine.resources import PAPER_THRESHOLDS, calibrate_thresholds

    extra = []
    for item in args.threshold:
        metric, _, value = item.partition(":")
        try:
            extra.append(("window", metric, float(value)))
        except ValueError as exc:
            raise RobenchError(f"--threshold must look like angular:0.84, got {item!r}") from exc
    result = calibrate_thresholds(_settings(args), pick_device(args.device), args.pairs,
                       thresholds=PAPER_THRESHOLDS + tuple(extra))
    print(json.dumps(result, indent=2))
