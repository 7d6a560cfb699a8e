"""Packs survive interruption (issue 60, item 1): `pack` and `unpack` killed at every file operation (a real
kill: `os._exit` in a child process, so no cleanup code runs) or stopped by a full disk (ENOSPC from the n-th
write), then the same command re-run: no per-example row is lost, and no record is left without its CSV."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_compare import fake_run

from robench.core.errors import RobenchError
from robench.core.packed import (
    EXAMPLES,
    RECORDS,
    pack_results_dir,
    read_runs_dir,
    runs_to_read,
    unpack,
    unpack_results_dir,
)

REPO = Path(__file__).resolve().parents[1]

# the child: count every file mutation robench makes (each atomic write, rename and unlink), die at the n-th
CHILD = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    import robench.core.files as files
    import robench.core.packed as packed

    at, count = int(sys.argv[1]), [0]
    def tick():
        count[0] += 1
        if count[0] == at:
            os._exit(9)  # a kill: no finally, no except, no cleanup
    write, replace, unlink = files._atomic_write, os.replace, Path.unlink
    def write_(path, text):
        tick(); write(path, text)
    def replace_(a, b):
        tick(); replace(a, b)
    def unlink_(self, missing_ok=False):
        tick(); unlink(self, missing_ok=missing_ok)
    files._atomic_write, os.replace, Path.unlink = write_, replace_, unlink_
    command, results, cache = sys.argv[2], Path(sys.argv[3]), Path(sys.argv[4])
    (packed.pack_results_dir if command == "pack" else packed.unpack_results_dir)(results, cache)
    print("finished after", count[0])
""")


def _runs(runs: Path) -> dict:
    for seed in range(2):
        fake_run(runs, ["failed"] * 3 + ["successful"] * 2, seed=seed)
    return read_runs_dir(runs)


def _rows(files: dict) -> int:
    return sum(f.examples.decode().count("\n") - 1 for f in files.values() if f.examples is not None)


def _child(command: str, at: int, results: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-c", CHILD, str(at), command, str(results), str(cache)], env=env,
                          capture_output=True, text=True, timeout=120)


def _every_run(results: Path, cache: Path) -> dict:
    """The runs as every reader sees them now (loose, packed, or a stopped unpack's mix)."""
    return read_runs_dir(runs_to_read(results, cache))


def _operations(command: str, results: Path, cache: Path) -> int:
    done = _child(command, 0, results, cache)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


@pytest.mark.parametrize("command", ["pack", "unpack"])
def test_a_kill_at_any_point_loses_no_row_and_the_rerun_finishes(tmp_path, command):
    """Kill the command at each of its file operations in turn; the runs every reader sees are the original
    runs at every point, and re-running the command (or the other one) leaves them whole."""
    template = tmp_path / "template"
    original = _runs(template / "runs")
    if command == "unpack":
        pack_results_dir(template, tmp_path / "cache")
    trial = tmp_path / "count"
    _copytree(template, trial)
    total = _operations(command, trial, tmp_path / "cache")
    assert total >= 5
    for at in range(1, total + 1):
        results = tmp_path / f"at{at}"
        _copytree(template, results)
        assert _child(command, at, results, tmp_path / "cache").returncode == 9
        assert _every_run(results, tmp_path / "cache") == original, f"killed at operation {at}"
        for record in (results / "runs").glob("*.json"):  # no record without its CSV, ever
            assert record.with_suffix(".csv").is_file(), f"killed at operation {at}: {record.name}"
        (pack_results_dir if command == "pack" else unpack_results_dir)(results, tmp_path / "cache")
        assert _every_run(results, tmp_path / "cache") == original and _rows(original) == 10


def test_pack_after_a_killed_unpack_keeps_the_packed_rows(tmp_path):
    """The published case: an unpack of the old order stopped after writing records without their CSVs; `pack`
    must not let those CSV-less records replace the packed runs (300 rows lost in the probe)."""
    original = _runs(tmp_path / "runs")
    pack_results_dir(tmp_path, tmp_path / "cache")
    for run_id, files in original.items():  # what the old unpack left: each .json, no .csv
        (tmp_path / "runs" / f"{run_id}.json").write_bytes(files.record)
    assert pack_results_dir(tmp_path, tmp_path / "cache") == (2, 0)
    assert read_runs_dir(unpack(tmp_path, tmp_path / "cache")) == original
    assert not list((tmp_path / "runs").glob("*.json"))


def test_pack_never_replaces_a_packed_run_with_one_that_fails_verification(tmp_path):
    original = _runs(tmp_path / "runs")
    pack_results_dir(tmp_path, tmp_path / "cache")
    run_id = sorted(original)[0]
    record = json.loads(original[run_id].record)
    record["metrics"]["robust_accuracy"] = 1.0  # edited: no longer its manifest's content
    (tmp_path / "runs" / f"{run_id}.json").write_text(json.dumps(record, indent=2))
    with pytest.raises(RobenchError, match=f"run {run_id} .* does not verify.*nothing was packed.*packed run of that "
                                           "id is kept"):
        pack_results_dir(tmp_path, tmp_path / "cache")
    assert read_runs_dir(unpack(tmp_path, tmp_path / "cache")) == original


def test_a_half_done_unpack_is_detected_resumed_or_rolled_back(tmp_path, caplog):
    original = _runs(tmp_path / "runs")
    pack_results_dir(tmp_path, tmp_path / "cache")
    first = sorted(original)[0]
    (tmp_path / "runs" / f"{first}.csv").write_bytes(original[first].examples)
    (tmp_path / "runs" / f"{first}.json").write_bytes(original[first].record)
    assert _every_run(tmp_path, tmp_path / "cache") == original  # readers read the pack, and say why
    assert "an unpack stopped midway" in caplog.text and "robench unpack" in caplog.text
    assert unpack_results_dir(tmp_path, tmp_path / "cache") == 2  # resumed: the same file is no conflict
    assert read_runs_dir(tmp_path / "runs") == original and not (tmp_path / RECORDS).exists()


@pytest.mark.parametrize(("command", "after"), [("pack", 0), ("pack", 1), ("unpack", 0), ("unpack", 1),
                                               ("unpack", 3)])
def test_a_full_disk_stops_cleanly_and_loses_no_row(tmp_path, monkeypatch, command, after):
    """ENOSPC from the (after+1)-th write: one clear error, every run still there, and once space is free the
    same command finishes."""
    import robench.core.files as files

    original = _runs(tmp_path / "runs")
    if command == "unpack":
        pack_results_dir(tmp_path, tmp_path / "cache")
    real, writes = files._atomic_write, [0]

    def full(path, text):
        writes[0] += 1
        if writes[0] > after:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        real(path, text)

    monkeypatch.setattr(files, "_atomic_write", full)
    run = pack_results_dir if command == "pack" else unpack_results_dir
    with pytest.raises(RobenchError, match="No space left on device"):
        run(tmp_path, tmp_path / "cache")
    assert _every_run(tmp_path, tmp_path / "cache") == original
    monkeypatch.setattr(files, "_atomic_write", real)
    run(tmp_path, tmp_path / "cache")
    assert _every_run(tmp_path, tmp_path / "cache") == original
    assert (tmp_path / RECORDS).is_file() == (command == "pack") == (tmp_path / EXAMPLES).is_file()


def _copytree(source: Path, target: Path) -> None:
    import shutil

    shutil.copytree(source, target, symlinks=True)
