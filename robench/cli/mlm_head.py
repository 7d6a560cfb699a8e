"""`robench resources build-mlm-head`: the MLM head on the frozen encoder (robench.mlm_head)."""
from __future__ import annotations

import json

from robench.cli.common import add_common_args, progress_console, settings_from_args


def add_build_head_parser(rsub) -> None:
    from robench.mlm_head import MlmHeadConfig

    q = rsub.add_parser("build-mlm-head", help="train an MLM head on the frozen pre-trained encoder "
                                               "(for `robench analyze --syntax`)")
    defaults = MlmHeadConfig()
    for name in ("texts", "heldout", "max_length", "steps", "batch_size", "seed"):
        q.add_argument(f"--{name.replace('_', '-')}", type=int, default=getattr(defaults, name))
    q.add_argument("--lr", type=float, default=defaults.lr)
    q.add_argument("--backbone", default="minilm")
    q.add_argument("--force", action="store_true", help="rebuild even if a build already exists")
    add_common_args(q)
    q.set_defaults(handler=_cmd_build_mlm_head)


def _cmd_build_mlm_head(args) -> None:
    from robench.device import pick_device
    from robench.mlm_head import MlmHeadConfig, build_mlm_head, mlm_head_dir

    config = MlmHeadConfig(texts=args.texts, heldout=args.heldout, max_length=args.max_length, steps=args.steps,
                           batch_size=args.batch_size, lr=args.lr, seed=args.seed)
    args.results_dir = getattr(args, "results_dir", None)
    settings = settings_from_args(args)
    existing = mlm_head_dir(settings, args.backbone) / "build.json"
    if existing.is_file() and not args.force:
        build = json.loads(existing.read_text())
        print(f"kept the existing head in {existing.parent} (held-out masked-token accuracy "
              f"{build['heldout_accuracy_after']:.3f}); pass --force to rebuild")
        return
    record = build_mlm_head(settings, pick_device(args.device), config, args.backbone, progress_console(args))
    print(json.dumps(record, indent=2, default=str))
    print(f"saved {mlm_head_dir(settings, args.backbone)}")
