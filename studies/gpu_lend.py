#!/usr/bin/env python3
"""GPU evidence that fits one lend (issue 48): the most valuable figures first, nothing lost when time runs out.

    python studies/gpu_lend.py --plan                       # expected seconds per step; exit 1 over --limit
    python studies/gpu_lend.py --bundle "$OUT"              # on the lent machine (docs/studies/gpu.md)

Steps, in priority order, each writing its records and tables into --out as it finishes (--steps: by default
those the pack of studies/gpu_prepare.py serves, `PACK_STEPS`):

1. attack: robench's TextFooler on the whole SST-2 dev split (wall time, fraction of the raw forward rate and the
   profile: `robench.bench.attack`); then the estimate's calibration (`robench.runs.estimate`) of the claim models
   on this device.
   textattack: robench beside `textattack:textfooler` on a subset through the same victim. TextAttack imports
   packages its TextFooler path never calls and the machine lacks; the step's process gets stand-ins for them
   that fail on use (`NOT_CARRIED`), and the step fails if one was used.
2. probe: how many concurrent training jobs saturate the device: 1, 2, 4, 8 processes train the slowest claim
   model at once, started together; the throughput of each count, and the smallest count within 90% of the best.
3. claims: bert vs imbert on AdvGLUE-sst2, 5 seeds each, at the largest SST-2 training size whose estimated
   wall time fits the time left (sized from the calibration and the probe when they are measured), `robench run`
   jobs in parallel on the one device; `robench compare`'s verdict and the IM-BERT claim's beside the CPU one.
4. extra: the positive control (a2t) and other defences at that size, in whatever time is left.

Resuming: finished run records are skipped (`robench run` resumes by run id), a finished step's tables are kept,
and the chosen training size and job count are kept in `<out>/state.json`, so a second lend continues where the
first stopped. After each step the summary of every step so far is printed (the command's output tail carries
the figures) and written to `<out>/summary.md`; with --bundle DIR, `DIR/evidence-gpu.tar.gz` (the whole out dir)
and `DIR/summary.md` are refreshed too (two files: the device tool returns at most eight).

This file drives; its parts beside it: `gpu_lend_plan.py` (protocols, places, costs and the plan),
`gpu_lend_steps.py` (the steps and their jobs), `gpu_lend_summary.py` and `gpu_lend_standins.py`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpu_lend_plan import (
    FINAL_RESERVE_S,
    PACK_STEPS,
    PROTOCOLS,
    REPO,
    SCRIPT,
    STEPS,
    LendError,
    Paths,
    Protocol,
    jobs_and_speedup,
    largest_size,
    load_costs,
    make_plan,
    print_plan,
    read_json,
)
from gpu_lend_standins import NOT_CARRIED, standing_in
from gpu_lend_steps import (
    Job,
    attack_step,
    probe_step,
    probe_worker,
    protocol_flags,
    run_jobs,
    run_models,
    textattack_step,
)
from gpu_lend_summary import publish

# ---------------------------------------------------------------- the driver

def read_state(paths: Paths, protocol: Protocol) -> dict[str, Any]:
    state = read_json(paths.state) or {"protocol": protocol.name}
    if state["protocol"] != protocol.name:
        raise LendError(f"{paths.out} holds the {state['protocol']!r} protocol's results, not {protocol.name!r}: "
                        "give another --out")
    return state


def save_state(paths: Paths, state: dict[str, Any]) -> None:
    from robench.core.files import atomic_write

    atomic_write(paths.state, json.dumps(state, indent=1) + "\n")


def drive(protocol: Protocol, paths: Paths, args: argparse.Namespace) -> int:
    start = time.monotonic()
    deadline = start + args.limit - FINAL_RESERVE_S
    paths.out.mkdir(parents=True, exist_ok=True)
    unpack_committed(paths)
    state = read_state(paths, protocol)
    state["runs"] = state.get("runs", 0) + 1
    save_state(paths, state)
    failed = False
    for step in args.steps:
        left = deadline - time.monotonic()
        print(f"== {step} ({left:.0f} s left)", flush=True)
        if left <= 0:
            break
        try:
            failed |= not run_step(step, protocol, paths, args, state, deadline)
        except LendError as exc:
            print(f"gpu_lend: {step}: {exc}", flush=True)
            failed = True
        except Exception:  # one step's fault must not cost the lend the steps after it
            traceback.print_exc()
            failed = True
        save_state(paths, state)
        try:
            publish(protocol, paths, state)
        except Exception:  # the records are written; the next step publishes again
            traceback.print_exc()
    print(f"== done in {time.monotonic() - start:.0f} s; results in {paths.out}", flush=True)
    return 1 if failed else 0


def unpack_committed(paths: Paths) -> None:
    """A lend's records are committed packed (`robench pack`, as every published results directory): unpacked
    here, so that this lend skips what an earlier one finished."""
    from robench.core.packed import RECORDS, unpack_results_dir

    if (paths.out / RECORDS).is_file():
        print(f"unpacked {unpack_results_dir(paths.out, paths.cache)} committed run(s) in {paths.out}", flush=True)


def run_step(step: str, protocol: Protocol, paths: Paths, args: argparse.Namespace, state: dict[str, Any],
             deadline: float) -> bool:
    """One step; False when it failed or was stopped (what it finished is kept)."""
    if step in ("attack", "textattack"):
        return state.get(step) == "done" or attack_child(step, paths, args, state, deadline)
    if step == "probe":
        if "saturation" not in state:
            probe_step(protocol, paths, args, deadline)
            state["saturation"] = "saturation.json"
        return True
    if step == "claims":
        choose_size(protocol, paths, args, state, deadline)
    elif "train_size" not in state:
        raise LendError("the extra models train at the claims' size: run the claims step first")
    models = protocol.models if step == "claims" else protocol.extra_models
    counts = run_models(protocol, models, paths, args, state["train_size"], state["jobs"], deadline)
    print(f"{step}: " + ", ".join(f"{v} {k}" for k, v in counts.items()), flush=True)
    return counts["failed"] == 0 and counts["stopped at the limit"] == 0


def attack_child(step: str, paths: Paths, args: argparse.Namespace, state: dict[str, Any], deadline: float
                 ) -> bool:
    """The attack or textattack step in a child process, stopped at the deadline; its output's tail is printed
    here. A step cut off is run again by the next lend, without the parts it finished (their tables are kept)."""
    child = Job(step, [sys.executable, str(SCRIPT), *protocol_flags(args), "--child-step", step])
    (job,) = run_jobs([child], 1, deadline, paths.cache / "logs")
    print((paths.cache / "logs" / f"{step}.log").read_text(encoding="utf-8")[-6000:], flush=True)
    if job.returncode == 0:
        state[step] = "done"
    return job.returncode == 0


def choose_size(protocol: Protocol, paths: Paths, args: argparse.Namespace, state: dict[str, Any],
                deadline: float) -> None:
    """The job count (--jobs, else the probe's) and the largest training size that fits the time left, once: a
    later lend keeps both (the run ids depend on the size)."""
    costs = load_costs(paths.out)
    state.setdefault("jobs", args.jobs or jobs_and_speedup(costs, None)[0])
    if "train_size" in state:
        return
    size = largest_size(protocol, costs, deadline - time.monotonic(), state["jobs"])
    if size is None:
        print(f"the claims do not fit the time left at {protocol.min_train_size} sentences; running them there "
              "anyway (a later lend resumes them)", flush=True)
    state["train_size"] = size or protocol.min_train_size
    save_state(paths, state)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="gpu_lend", description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--plan", action="store_true", help="print each step's expected seconds; exit 1 over --limit")
    p.add_argument("--limit", type=float, default=600.0, help="seconds for the whole script (default 600)")
    p.add_argument("--protocol", choices=sorted(PROTOCOLS), default="h200")
    p.add_argument("--backbone", help="override the protocol's backbone (a local path: the CPU test's tiny BERT)")
    p.add_argument("--steps", type=lambda s: tuple(s.split(",")), default=PACK_STEPS,
                   help=f"comma-separated subset of {','.join(STEPS)}, run in that order (default: those the "
                        f"pack serves, {','.join(PACK_STEPS)})")
    p.add_argument("--jobs", type=int, help="concurrent jobs for the claims and extras (default: the probe's)")
    p.add_argument("--out", type=Path, default=REPO / "results" / "evidence-gpu",
                   help="records, tables, state (default results/evidence-gpu)")
    p.add_argument("--bundle", type=Path, help="also refresh DIR/evidence-gpu.tar.gz and DIR/summary.md after "
                                               "each step (on the lent machine: $OUT)")
    p.add_argument("--cache-dir", type=Path, default=Path(os.environ.get("ROBENCH_CACHE_DIR", "/tmp/gpu-lend-cache")),
                   help="checkpoints, built resources, job logs (default $ROBENCH_CACHE_DIR or /tmp/gpu-lend-cache)")
    p.add_argument("--data-dir", type=Path, help="default $ROBENCH_DATA_DIR")
    p.add_argument("--device", default="cuda")
    p.add_argument("--child-step", choices=("attack", "textattack"), help=argparse.SUPPRESS)
    p.add_argument("--probe-worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--probe-dir", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--probe-index", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if unknown := sorted(set(args.steps) - set(STEPS)):
        p.error(f"unknown step(s) {unknown} (known: {', '.join(STEPS)})")
    args.steps = tuple(step for step in STEPS if step in args.steps)
    if args.limit <= 0 or (args.jobs is not None and args.jobs <= 0):
        p.error("--limit and --jobs must be positive")
    args.out, args.cache_dir = args.out.resolve(), args.cache_dir.resolve()
    return args


def main(argv: list[str] | None = None) -> int:
    from robench.core.errors import RobenchError

    args = parse_args(argv)
    protocol = PROTOCOLS[args.protocol]
    if args.backbone:
        protocol = replace(protocol, backbone=args.backbone)
    data = args.data_dir or (Path(os.environ["ROBENCH_DATA_DIR"]) if os.environ.get("ROBENCH_DATA_DIR") else None)
    paths = Paths(args.out, args.cache_dir, data.resolve() if data else None,
                  args.bundle.resolve() if args.bundle else None)
    try:
        if args.child_step == "attack":
            attack_step(protocol, paths, args.device)
        elif args.child_step == "textattack":
            with standing_in(NOT_CARRIED):
                textattack_step(protocol, paths, args.device)
        elif args.probe_worker:
            probe_worker(protocol, paths, args.device, args.probe_index, args.probe_dir)
        elif args.plan:
            lines, size = make_plan(protocol, paths, args.limit, read_json(paths.state) or {}, args.steps)
            if not print_plan(lines, args.limit, size):
                raise LendError(f"the plan needs {sum(x.seconds for x in lines):.0f} s, over the limit of "
                                f"{args.limit:.0f} s")
        else:
            return drive(protocol, paths, args)
    except (LendError, RobenchError) as exc:
        print(f"gpu_lend: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
