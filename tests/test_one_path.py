"""One path from request to result (issue 44 item 4): `robench run`, `robench.evaluate`, a grid cell and a bench
each resolve a run once, read each split of its data once, and write its record once."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from test_with_reference import protocol  # noqa: F401 (the toy published protocol, a fixture)

import robench
from robench.cli import main


@pytest.fixture
def trace(monkeypatch) -> Counter:
    """Counts entries into `resolve_run` ("resolve": its first step, `check_spec`, is called from nowhere else),
    requests for a split of the task data ("train", "eval": `robench.data.loading.load_split`, memoised or not)
    and record writes ("write": `RunStore.finish`)."""
    import robench.data.loading as loading
    import robench.runs.resolve as resolve
    from robench.runs.store import RunStore

    counts: Counter = Counter()
    check, load, finish = resolve.check_spec, loading._load_split, RunStore.finish

    def counted_check(spec):
        counts["resolve"] += 1
        return check(spec)

    def counted_load(task, split, *args):
        counts[split] += 1
        return load(task, split, *args)

    def counted_finish(self, record, results):
        counts["write"] += 1
        return finish(self, record, results)

    monkeypatch.setattr(resolve, "check_spec", counted_check)
    monkeypatch.setattr(loading, "_load_split", counted_load)
    monkeypatch.setattr(RunStore, "finish", counted_finish)
    return counts


def test_a_cli_run_resolves_once_reads_each_split_once_and_writes_once(trace, base):
    flags = ["run", "--attack", "advglue", "--train-size", "32", "--no-estimate", *map(str, base)]
    assert main(flags) == 0
    assert trace == {"resolve": 1, "train": 1, "eval": 1, "write": 1}
    assert main(flags) == 0  # finished
    assert trace == {"resolve": 2, "train": 2, "eval": 1, "write": 1}  # resolved again (its train size), not written


def test_evaluate_resolves_once_and_reads_the_eval_split_once(trace, settings):
    def constant(texts):
        return np.tile([0.2, 0.8], (len(texts), 1))

    record = robench.evaluate(constant, name="constant", task="sst2", attack="advglue", settings=settings,
                              device="cpu")
    assert record.metrics["dev_accuracy"] > 0
    assert trace == {"resolve": 1, "eval": 1, "write": 1}  # dev accuracy and chance checks share one read


def test_a_grid_resolves_each_cell_once_and_its_worker_writes_each_record_once(trace, monkeypatch, settings,
                                                                               tiny_backbone, tmp_path):
    """The driver resolves each cell once (`plan_cells`) and sends the resolved run with the job; the worker writes
    the record on its disk, and the driver, which shares it here, writes nothing. A driver on another disk writes
    the worker's record there once, the same bytes."""
    import robench.grid.driver as driver
    from robench.core.paths import resolve_settings
    from robench.grid import grid
    from robench.runs.store import RunStore

    kept, keep = [], driver._keep_record
    monkeypatch.setattr(driver, "_keep_record", lambda s, attacked: (kept.append(attacked), keep(s, attacked)))
    config = {"name": "t", "tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "seeds": [0],
              "backbones": [str(tiny_backbone)], "eval_size": [8, "full"],
              "train": {"epochs": 1, "batch_size": 16, "max_length": 32, "lr": 1e-3}}
    result = grid(config, settings, executor="local")
    assert [c.state for c in result.cells] == ["done", "done"]
    assert trace["resolve"] == 2 and trace["write"] == 2  # two cells (one checkpoint): each resolved, written once
    elsewhere = resolve_settings(settings.data_dir, tmp_path / "other-cache", tmp_path / "other-results")
    for attacked in kept:
        keep(elsewhere, attacked)
        run_id = attacked.record.run_id
        there, here = RunStore(elsewhere.runs_dir, run_id), RunStore(settings.runs_dir, run_id)
        assert there.record_path.read_bytes() == here.record_path.read_bytes()
        assert there.csv_path.read_bytes() == here.csv_path.read_bytes()
        assert there.finished() is not None
    assert trace["write"] == 4


def test_a_bench_resolves_each_run_once(trace, settings, tiny_backbone, tiny_data):
    assert main(["bench", "defenses", "--backbone", str(tiny_backbone), "--data-dir", str(tiny_data), "--cache-dir",
                 str(settings.cache_dir), "--results-dir", str(settings.results_dir), "--models", "bert",
                 "--train-size", "32", "--low-resource", "0", "--seeds", "0", "--epochs", "1", "--max-length", "32",
                 "--device", "cpu", "--quiet"]) == 0
    assert trace["resolve"] == 1 and trace["write"] == 1


def test_grids_and_benches_build_their_specs_as_robench_run_does(settings, tiny_backbone):
    """The one spec builder: a grid cell and a bench's spec equal the spec `robench.make_spec` (`robench run`'s
    path) gives for the same values."""
    from robench.bench.defenses import DefensesOptions
    from robench.grid.config import expand, load_config

    config = load_config({"name": "t", "tasks": ["sst2"], "models": ["bert"], "attacks": ["textfooler"],
                          "backbones": [str(tiny_backbone)], "seeds": [3], "train_size": 64, "eval_size": 8,
                          "train": {"epochs": 2, "batch_size": 16, "lr": 1e-3, "warmup_ratio": 0.2}})
    (cell,) = expand(config)
    assert cell == robench.make_spec(settings, model="bert", attack="textfooler", backbone=str(tiny_backbone), seed=3,
                                     train_size=64, eval_size=8, epochs=2, batch_size=16, lr=1e-3, warmup_ratio=0.2)
    bench = DefensesOptions(backbone=str(tiny_backbone), train_size=32, epochs=1, lr=1e-3, max_length=32)
    assert bench.spec(settings, "bert", 0, 32, {}) == robench.make_spec(
        settings, attack="advglue", backbone=str(tiny_backbone), train_size=32, eval_size="full", epochs=1, lr=1e-3,
        batch_size=32, max_length=32)


def test_a_resolved_run_carries_the_splits_it_read(settings, tiny_backbone):
    from conftest import tiny_spec

    from robench.runs.resolve import resolve_run

    resolved = resolve_run(tiny_spec(tiny_backbone, attack="textfooler", train_size=32, eval_size=4), settings)
    assert set(resolved.data.read) == {"train", "eval"}  # the length check and the train size read them
    assert resolved.split("eval") is resolved.data.read["eval"] and resolved.attacked_split() is resolved.split("eval")


def test_a_protocol_run_resolves_each_run_once(trace, capsys, settings, where, protocol):  # noqa: F811 (the fixture)
    """`run --checkpoint DIR --protocol NAME`: the runs resolved to check them against the published settings are
    the runs that go on (`robench.report.reference.protocol_runs`), not resolved again; a dry run too."""
    trace.clear()  # making the toy protocol ran robench.evaluate
    flags = ["run", "--checkpoint", str(protocol), "--protocol", "toy", "--seed", "0", "1", *map(str, where)]
    assert main([*flags, "--dry-run", "--no-estimate"]) == 0
    assert trace["resolve"] == 2 and trace["write"] == 0  # one attack setting, two seeds
    assert capsys.readouterr().out.count('"run_id"') == 2
    assert main(flags) == 0
    assert trace["resolve"] == 4 and trace["write"] == 2
    assert capsys.readouterr().out.count("record: ") == 2


def test_the_data_source_default_is_decided_in_one_place(tmp_path):
    """Given, else local with a data dir, else the hub: `robench.runs.options.data_source`, which a run's specs and
    the benches use, and which `build_specs` (no settings known) reads as local."""
    from robench.core.paths import Settings
    from robench.runs.options import RunOptions, build_specs, data_source, specs

    offline, online = Settings(tmp_path, tmp_path, tmp_path), Settings(None, tmp_path, tmp_path)
    assert (data_source(None, offline), data_source(None, online), data_source("local", online)) == \
        ("local", "hub", "local")
    assert [specs(RunOptions(), where)[0].data_source for where in (online, offline)] == ["hub", "local"]
    assert build_specs(RunOptions())[0].data_source == data_source(None) == "local"
