"""`robench grid CONFIG`."""
from __future__ import annotations

import dataclasses

from rich.console import Console

from robench.cli.common import add_common_args, say_estimate, settings_from_args
from robench.core.errors import RobenchError
from robench.core.params import make_params
from robench.grid import expand, grid, grid_estimate, load_config, plan_cells
from robench.grid.board import Board
from robench.grid.executors import JobResources


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("grid", help="run a benchmark grid (models x attacks x tasks x seeds) on Ray or locally")
    p.add_argument("config", help="grid config (TOML), e.g. examples/grid-tiny.toml")
    p.add_argument("--executor", choices=["ray", "local"], default="ray",
                   help="ray: a local Ray instance or the cluster at --address (default); local: sequential")
    p.add_argument("--address", help="join this Ray cluster (e.g. HEAD_IP:6379; default: $RAY_ADDRESS or a new "
                                     "local instance)")
    p.add_argument("--max-retries", type=int, default=2, help="retries per failed job (default: 2)")
    p.add_argument("--cpus-per-job", type=float, help="CPUs each Ray job asks for (overrides [resources] cpus)")
    p.add_argument("--gpus-per-job", type=float,
                   help="GPUs each Ray job asks for on CUDA, e.g. 0.25 to run 4 jobs per GPU "
                        "(overrides [resources] gpus)")
    p.add_argument("--dry-run", action="store_true", help="validate and list the cells and train jobs; run nothing")
    p.add_argument("--no-estimate", action="store_true",
                   help="skip the cost estimate (and timing each model behind it)")
    add_common_args(p)
    p.set_defaults(handler=cmd_grid)


def cmd_grid(args) -> None:
    settings = settings_from_args(args)
    cfg = load_config(args.config)
    if args.data_source:
        cfg = dataclasses.replace(cfg, data_source=args.data_source)
    if args.max_retries < 0:
        raise RobenchError(f"--max-retries must be >= 0, got {args.max_retries}")
    if args.cpus_per_job is not None or args.gpus_per_job is not None:
        resources = make_params(JobResources, {
            "cpus": cfg.resources.cpus if args.cpus_per_job is None else args.cpus_per_job,
            "gpus": cfg.resources.gpus if args.gpus_per_job is None else args.gpus_per_job,
        }, "--cpus-per-job / --gpus-per-job")
        cfg = dataclasses.replace(cfg, resources=resources)
    cells, trains = planned = plan_cells(expand(cfg), settings)  # each cell resolved once
    if args.dry_run:
        Console().print(Board(cells, trains, f"grid {cfg.name} (dry run)").table())
        print(f"{len(cells)} cells, {sum(c.state == 'skipped' for c in cells)} finished, "
              f"{len(trains)} train jobs, {sum(len(t.cells) for t in trains)} attack jobs")
    if trains and not args.no_estimate:
        say_estimate(grid_estimate(trains, settings, args.device, persist=True),
                     "sum over the grid's jobs; parallel workers divide it", grid=True)
    if args.dry_run:
        return
    result = grid(cfg, settings, executor=args.executor, device=args.device, address=args.address,
                  max_retries=args.max_retries, console=None if args.quiet else Console(stderr=True), planned=planned)
    print(f"grid {result.grid_id}: {result.count('done')} done, {result.count('skipped')} already finished, "
          f"{result.count('failed')} failed in {result.seconds:.1f} s; records in {settings.runs_dir}")
    if result.count("failed"):
        raise RobenchError(f"{result.count('failed')} cell(s) failed; errors in {result.failures_path}")
