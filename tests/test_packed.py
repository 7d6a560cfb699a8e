"""Packed run files (`robench.core.packed`): a runs directory in records.jsonl + examples.parquet unpacks byte for
byte, every committed pack unpacks to records that verify, and the reports read a packed results directory as
they read any other."""
import dataclasses
import json
import shutil
from pathlib import Path

import pytest
from test_compare import fake_run

from robench.cli import main
from robench.core.errors import RobenchError
from robench.core.packed import (
    EXAMPLES,
    READINGS_DIR,
    RECORDS,
    pack,
    pack_results_dir,
    read_runs_dir,
    runs_to_read,
    unpack,
    unpack_results_dir,
)
from robench.core.records import read_examples, read_record, record_problem
from robench.core.types import ExampleResult
from robench.runs.store import RunStore

REPO = Path(__file__).resolve().parents[1]
COMMITTED = sorted(path.parent for path in (REPO / "results").rglob(RECORDS))


def _awkward_run(runs: Path) -> str:
    """A run whose texts hold what CSV quoting and text columns must carry: quotes, commas, newlines, CRLF,
    non-ASCII, empty fields."""
    record = fake_run(runs, ["successful", "failed", "skipped"], seed=7)
    texts = ['say "hi", then', "two\nlines\r\nand crlf", "naïve — ünïcode ✓"]
    results = [ExampleResult(i, 1, text, text[::-1], 1, 0, "successful", num_words=3, error="" if i else "x,y")
               for i, text in enumerate(texts)]
    RunStore(runs, record.run_id).finish(record, results)
    return record.run_id


def test_a_runs_directory_packs_and_unpacks_byte_for_byte(tmp_path):
    runs = tmp_path / "results" / "runs"
    for seed in (0, 1):
        fake_run(runs, ["failed"] * 5 + ["successful"] * 3, seed=seed)
    _awkward_run(runs)
    before = read_runs_dir(runs)
    total, added = pack_results_dir(tmp_path / "results", tmp_path / "cache")
    assert (total, added) == (3, 3) and not list(runs.glob("*.json")) and not list(runs.glob("*.csv"))
    lines = (tmp_path / "results" / RECORDS).read_text().splitlines()
    assert [json.loads(line)["run_id"] for line in lines] == sorted(before)  # one record a line, by run id
    unpacked = unpack(tmp_path / "results", tmp_path / "cache")
    assert read_runs_dir(unpacked) == before
    for path in unpacked.glob("*.json"):
        assert record_problem(path, read_record(path)) is None


def test_the_unpacked_copy_is_reused_only_while_the_packed_bytes_are_the_same(tmp_path):
    fake_run(tmp_path / "runs", ["failed"] * 4)
    pack_results_dir(tmp_path, tmp_path / "cache")
    first = unpack(tmp_path, tmp_path / "cache")
    marker = first / "marker"
    marker.write_text("")
    assert unpack(tmp_path, tmp_path / "cache") == first and marker.is_file()  # reused, not rewritten
    unpack_results_dir(tmp_path, tmp_path / "cache")
    fake_run(tmp_path / "runs", ["successful"] * 4, seed=1)
    pack_results_dir(tmp_path, tmp_path / "cache")  # the packed runs plus the new one
    second = unpack(tmp_path, tmp_path / "cache")
    assert second != first and len(list(second.glob("*.json"))) == 2


def test_readings_travel_with_the_pack_and_show_reads_them(tmp_path, capsys, monkeypatch):
    """A packed directory's blind readings sit beside the packed files; the unpacked copy carries them (a changed
    reading is a new copy), so `show` reports them as for loose runs; unpacking puts them back beside the runs."""
    from robench.report.readings import Reading, reading_facts, write_readings

    runs = tmp_path / "runs"
    record = fake_run(runs, ["successful", "failed"], seed=0)
    example = next(e for e in read_examples(runs, record.run_id) if e.status == "successful")
    read = Reading("s1", record.run_id, example.index, example.original_text, example.perturbed_text, "positive",
                   "positive", "positive", 4, True)
    write_readings(runs, "s1", [read], "2026-01-01T00:00:00")
    loose = reading_facts(runs, record.run_id)
    pack_results_dir(tmp_path, tmp_path / "cache")
    assert (tmp_path / READINGS_DIR / "s1.json").is_file() and not (runs / READINGS_DIR / "s1.json").exists()
    unpacked = unpack(tmp_path, tmp_path / "cache")
    assert loose and reading_facts(unpacked, record.run_id) == loose
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    main(["show", record.run_id, "--results-dir", str(tmp_path)])
    assert "valid to a reader (all three): 100%" in capsys.readouterr().out
    write_readings(tmp_path, "s1", [dataclasses.replace(read, fluent=False)], "2026-01-02T00:00:00")
    assert unpack(tmp_path, tmp_path / "cache") != unpacked
    unpack_results_dir(tmp_path, tmp_path / "cache")
    assert (runs / READINGS_DIR / "s1.json").is_file() and not (tmp_path / READINGS_DIR / "s1.json").exists()


def test_a_file_robench_did_not_write_that_way_is_refused_and_nothing_written(tmp_path):
    fake_run(tmp_path / "runs", ["failed"] * 4)
    record = next((tmp_path / "runs").glob("*.json"))
    record.write_text(json.dumps(json.loads(record.read_text()), indent=4))  # valid JSON, other layout
    with pytest.raises(RobenchError, match="cannot be packed exactly"):
        pack(read_runs_dir(tmp_path / "runs"), tmp_path)
    assert not (tmp_path / RECORDS).exists() and not (tmp_path / EXAMPLES).exists()


def test_runs_are_not_written_into_a_packed_dir_and_loose_records_beside_a_pack_are_refused(tmp_path):
    """`run` and `grid` would not see the packed runs (and redo them): refused before any work, naming the fix;
    records copied in by hand make the readers refuse the directory, naming the fix."""
    fake_run(tmp_path / "other" / "runs", ["failed"] * 4, seed=1)
    fake_run(tmp_path / "runs", ["failed"] * 4)
    pack_results_dir(tmp_path, tmp_path / "cache")
    with pytest.raises(RobenchError, match="robench unpack"):
        RunStore(tmp_path / "runs", "any-run")
    shutil.copytree(tmp_path / "other" / "runs", tmp_path / "runs", dirs_exist_ok=True)
    with pytest.raises(RobenchError, match="robench pack"):
        runs_to_read(tmp_path, tmp_path / "cache")


def test_damaged_packed_files_are_one_clear_error(tmp_path):
    fake_run(tmp_path / "runs", ["failed"] * 4)
    pack_results_dir(tmp_path, tmp_path / "cache")
    (tmp_path / EXAMPLES).write_bytes(b"not parquet")
    with pytest.raises(RobenchError, match="damaged"):
        unpack(tmp_path, tmp_path / "cache")


def test_leaderboard_compare_and_show_read_a_packed_results_dir(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ROBENCH_CACHE_DIR", str(tmp_path / "cache"))
    loose, packed = tmp_path / "loose", tmp_path / "packed"
    for results in (loose, packed):
        for seed in range(5):
            fake_run(results / "runs", ["failed"] * 6 + ["successful"] * 4, seed=seed)
            fake_run(results / "runs", ["failed"] * 3 + ["successful"] * 7, model="imbert", seed=seed)
    main(["pack", str(packed)])
    assert not list((packed / "runs").glob("*.json"))
    outputs = {}
    for results in (loose, packed):
        capsys.readouterr()
        main(["leaderboard", "--results-dir", str(results), "--baseline", "bert"])
        main(["compare", "--results-dir", str(results), "--baseline", "bert"])
        run_id = next((loose / "runs").glob("*.json")).stem
        main(["show", run_id, "--results-dir", str(results)])
        outputs[results] = capsys.readouterr().out.replace(str(results), "RESULTS")
    assert outputs[loose] == outputs[packed]
    for name in ("leaderboard.csv", "leaderboard.md", "settings.csv", "worstcase.json"):
        assert (loose / name).read_bytes() == (packed / name).read_bytes(), name
    main(["unpack", str(packed), "--to", str(tmp_path / "copy")])
    assert read_runs_dir(tmp_path / "copy") == read_runs_dir(loose / "runs") and (packed / RECORDS).is_file()
    main(["unpack", str(packed)])  # the inverse of pack
    assert read_runs_dir(packed / "runs") == read_runs_dir(loose / "runs") and not (packed / RECORDS).exists()


@pytest.mark.integration  # the published records whole
@pytest.mark.parametrize("results", COMMITTED, ids=[str(p.relative_to(REPO)) for p in COMMITTED])
def test_every_committed_pack_unpacks_to_records_that_verify(results, tmp_path):
    """Each unpacked record matches its manifest (its content's digest, its CSV's size and SHA-256) and is the
    JSON `robench.runs.store` writes, so each file is the one the run wrote; packing them again gives the same
    records.jsonl."""
    runs = unpack(results, tmp_path / "cache")
    assert list(runs.glob("*.json"))
    for path in runs.glob("*.json"):
        record = read_record(path)
        assert record_problem(path, record) is None, path.name
        assert path.read_text(encoding="utf-8") == json.dumps(json.loads(path.read_text()), indent=2)
    pack(read_runs_dir(runs), tmp_path)
    assert (tmp_path / RECORDS).read_bytes() == (results / RECORDS).read_bytes()
