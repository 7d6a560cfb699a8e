"""`robench bench startup`: how fast robench answers, measured in fresh processes, beside each target (issue 45).

* `robench --help` and an argument error: imports only (target <= 1 s);
* `robench show RUN_ID` (20 examples) and `robench leaderboard` over that one run, with the lexicon's relations
  cached (target <= 3 s each);
* the lexicon's relations: built from the lists and WordNet (the first use), then loaded from the cache;
* a small `robench run` (stderr read as it comes, as on a terminal): the time to its first line and the longest
  silence between two outputs (target: every phase over 2 s names itself, so no silence beyond a progress bar's
  refresh is longer than its phase line says).

Every figure is wall-clock seconds with the CPU seconds of the process beside it (a loaded machine stretches the
first, not the second).
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from robench.bench.options import StartupBenchOptions
from robench.core.errors import RobenchError
from robench.core.paths import Settings

CLI = [sys.executable, "-m", "robench.cli"]


@dataclass(frozen=True)
class Timing:
    what: str
    wall: float
    cpu: float | None
    target: str = ""
    note: str = ""


def startup_bench(options: StartupBenchOptions, settings: Settings) -> list[Timing]:
    """Run every measurement; print and return them."""
    run_id = options.run_id or _word_level_run(settings.runs_dir)
    rows = [_timed("robench --help", ["--help"], target="<= 1 s"),
            _timed("argument error (run --epochs two)", ["run", "--epochs", "two"], target="<= 1 s", code=2)]
    with tempfile.TemporaryDirectory(prefix="robench-bench-startup-") as scratch:
        cache = Path(scratch) / "cache"
        env = {"ROBENCH_CACHE_DIR": str(cache), "COLUMNS": "80"}
        if options.build_lexicon:
            rows += _lexicon_timings(settings, cache)
        else:  # build it silently first: show and leaderboard are measured with it cached
            _timed("", ["show", run_id, "--results-dir", str(settings.results_dir), "--limit", "1"], env=env)
        rows.append(_timed("show RUN_ID (20 examples, relations cached)",
                           ["show", run_id, "--results-dir", str(settings.results_dir), "--limit", "20"],
                           env=env, target="<= 3 s"))
        board = Path(scratch) / "board"
        (board / "runs").mkdir(parents=True)
        for suffix in (".json", ".csv"):
            shutil.copy(settings.runs_dir / f"{run_id}{suffix}", board / "runs" / f"{run_id}{suffix}")
        rows.append(_timed("leaderboard over that run", ["leaderboard", "--results-dir", str(board)], env=env,
                           target="<= 3 s"))
        if options.small_run:
            rows += _small_run(settings, Path(scratch))
    _print(rows)
    return rows


def _word_level_run(runs_dir: Path) -> str:
    import json

    for path in sorted(runs_dir.glob("*.json")):
        try:
            if "validity" in json.loads(path.read_text(encoding="utf-8")).get("metrics", {}):
                return path.stem
        except (OSError, ValueError, AttributeError):
            continue
    raise RobenchError(f"no word-level run record (one with a validity audit) in {runs_dir}: pass --run-id, or "
                       "--results-dir a results directory that has one (e.g. results/reference)")


def _timed(what: str, argv: list[str], env: dict[str, str] | None = None, target: str = "", code: int = 0
           ) -> Timing:
    start, before = time.perf_counter(), os.times()
    done = subprocess.run(CLI + argv, capture_output=True, text=True, env={**os.environ, **(env or {})})
    wall, after = time.perf_counter() - start, os.times()
    if done.returncode != code:
        raise RobenchError(f"`robench {' '.join(argv)}` exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return Timing(what, wall, after.children_user + after.children_system - before.children_user
                  - before.children_system, target)


def _lexicon_timings(settings: Settings, cache: Path) -> list[Timing]:
    code = ("import sys, time; from robench.core.paths import resolve_settings; "
            "from robench.engine.resources.lexicon import lexicon; "
            f"lexicon(resolve_settings({str(settings.data_dir)!r}, {str(cache)!r}, None))")
    out = []
    for what, target in (("lexicon relations: built (first use)", ""), ("lexicon relations: cached", "")):
        start, before = time.perf_counter(), os.times()
        subprocess.run([sys.executable, "-c", code], check=True, capture_output=True)
        after = os.times()
        out.append(Timing(what, time.perf_counter() - start, after.children_user + after.children_system
                          - before.children_user - before.children_system, target, "in a fresh process"))
    return out


def _small_run(settings: Settings, scratch: Path) -> list[Timing]:
    """A small real run with stderr read as it comes (rich draws as on a terminal): first output, longest silence."""
    argv = ["run", "--model", "bert", "--attack", "advglue", "--train-size", "64", "--epochs", "1", "--eval-size", "8",
            "--data-dir", str(settings.data_dir), "--cache-dir", str(scratch / "run-cache"), "--results-dir",
            str(scratch / "run-results"), "--device", "cpu", "--no-estimate"]
    start, before = time.perf_counter(), os.times()
    proc = subprocess.Popen(CLI + argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "FORCE_COLOR": "1", "COLUMNS": "100"})
    stamps: list[tuple[float, bytes]] = []

    def read() -> None:
        assert proc.stderr is not None
        while chunk := os.read(proc.stderr.fileno(), 4096):
            stamps.append((time.perf_counter() - start, chunk))

    reader = threading.Thread(target=read)
    reader.start()
    proc.wait()
    reader.join()
    wall, after = time.perf_counter() - start, os.times()
    if proc.returncode != 0:
        raise RobenchError(f"the small run exited {proc.returncode}: {b''.join(c for _, c in stamps)[-300:]!r}")
    times = [0.0] + [t for t, _ in stamps] + [wall]
    gaps = [(b - a, i) for i, (a, b) in enumerate(zip(times, times[1:]))]
    silence, at = max(gaps)
    after_line = _last_line(stamps[at - 1][1]) if at > 0 else "(start)"
    cpu = after.children_user + after.children_system - before.children_user - before.children_system
    return [Timing("small run: first stderr line", stamps[0][0] if stamps else wall, None),
            Timing("small run: longest silence", silence, None, "<= 2 s or named", f"after: {after_line}"),
            Timing("small run: total", wall, cpu)]


def _last_line(chunk: bytes) -> str:
    import re

    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", chunk.decode("utf-8", "replace"))
    lines = [line.strip() for line in re.split(r"[\r\n]", text) if line.strip()]
    return lines[-1][:70] if lines else "(a redraw)"


def _print(rows: list[Timing]) -> None:
    table = Table(title="robench bench startup: seconds, each in a fresh process")
    for column in ("measurement", "wall s", "CPU s", "target", "note"):
        table.add_column(column, justify="right" if column.endswith(" s") else "left")
    for r in rows:
        table.add_row(r.what, f"{r.wall:.2f}", "–" if r.cpu is None else f"{r.cpu:.2f}", r.target, r.note)
    Console().print(table)
