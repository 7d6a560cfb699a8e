"""Benchmark grids: config expansion, skipping finished cells, shared checkpoints, retries, Ray == local."""
from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from robench.core.errors import RobenchError
from robench.core.paths import resolve_settings
from robench.core.records import read_record
from robench.grid import expand, grid, load_config
from robench.grid.executors import Job
from robench.runs.store import RunStore

REPO = Path(__file__).resolve().parents[1]


def tiny_grid(backbone: Path, **overrides) -> dict:
    config = {"name": "t", "tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "backbones": [str(backbone)],
              "seeds": [0], "eval_size": 8, "train": {"epochs": 1, "batch_size": 16, "max_length": 32, "lr": 1e-3}}
    config.update(overrides)
    return config


@dataclass
class Recorder:
    """A `before` hook that logs the jobs it sees and fails the first `fail_first` attempts of chosen jobs.

    State lives in files under `folder`, so it also works in Ray workers (separate processes)."""

    folder: Path
    fail_kinds: tuple[str, ...] = ()
    fail_first: int = 0

    def __call__(self, job: Job) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        with open(self.folder / "jobs.log", "a") as fh:
            fh.write(f"{job.kind} {job.key}\n")
        if job.kind in self.fail_kinds:
            count = self.folder / f"{job.key}.failures"
            seen = int(count.read_text()) if count.exists() else 0
            if seen < self.fail_first:
                count.write_text(str(seen + 1))
                raise RuntimeError(f"injected failure {seen + 1} of {job.kind} {job.key}")

    def jobs(self) -> list[str]:
        log = self.folder / "jobs.log"
        return [line.split()[0] for line in log.read_text().splitlines()] if log.exists() else []


# ---------------------------------------------------------------- config

def test_expand_is_the_cartesian_product_with_overrides():
    cfg = load_config({"tasks": ["sst2", "rte"], "models": ["bert", "imbert+freelb"], "attacks": ["advglue", "x"],
                       "seeds": [0, 1, 2], "train_size": {"sst2": [100, 200], "default": "full"},
                       "eval_size": {"x": 10}, "train": {"epochs": 2, "lr": 1e-4},
                       "model_params": {"imbert+freelb": {"adv_steps": 2}}, "attack_params": {"x": {"k": 5}}})
    specs = expand(cfg)
    # sst2: 2 models x 3 seeds x 2 train sizes x 2 attacks; rte: 2 x 3 x 1 x 2
    assert len(specs) == 24 + 12 == len({s.run_id for s in specs})
    assert {s.train_size for s in specs if s.task == "sst2"} == {100, 200}
    assert {s.train_size for s in specs if s.task == "rte"} == {None}
    assert {(s.attack, s.eval_size) for s in specs} == {("advglue", None), ("x", 10)}
    assert all(s.train.epochs == 2 and s.train.lr == 1e-4 and s.train.batch_size == 32 for s in specs)
    assert all(s.model_params == ({"adv_steps": 2} if s.model == "imbert+freelb" else {}) for s in specs)
    assert all(s.attack_params == ({"k": 5} if s.attack == "x" else {}) for s in specs)
    assert all(s.backbone == "minilm" and s.data_source == "local" for s in specs)


@pytest.mark.parametrize("bad, message", [
    ({"tasks": ["sst2"], "models": ["bert"]}, "missing 'attacks'"),
    ({"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "sedes": [0]}, "unknown key"),
    ({"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "seeds": [0, 0]}, "twice"),
    ({"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "train_size": 0}, "positive integers"),
    ({"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "eval_size": {"textfooler": 5}},
     "not in the grid"),
    ({"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "model_params": {"smart": {}}}, "not in the grid"),
    ({"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "train": {"epoch": 1}}, "unknown hyperparameter"),
    ({"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "resources": {"cpus": 0}}, "positive"),
])
def test_bad_configs_are_clear_errors(bad, message):
    with pytest.raises(RobenchError, match=message):
        load_config(bad)


def test_bad_toml_file(tmp_path):
    path = tmp_path / "g.toml"
    path.write_text("tasks = [sst2]\n")
    with pytest.raises(RobenchError, match="invalid TOML"):
        load_config(path)
    with pytest.raises(RobenchError, match="not found"):
        load_config(tmp_path / "missing.toml")


def test_gpu_grid_is_the_documented_larger_protocol():
    specs = expand(load_config(REPO / "results" / "grid-gpu.toml"))
    models = {"bert", "imbert", "freelb", "smart", "pgd", "a2t", "ascc", "safer"}
    assert len(specs) == 2 * len(models) * 5 * 3 == len({s.run_id for s in specs})
    assert {s.model for s in specs} == models and {s.seed for s in specs} == {0, 1, 2, 3, 4}  # verdicts need 4
    assert {s.attack for s in specs} == {"textfooler", "bert-attack", "gradient-swap"}
    assert {s.model_params.get("a2t_attack") for s in specs if s.model == "a2t"} == {"textfooler"}  # the control
    assert {(s.task, s.train_size) for s in specs} == {("sst2", 8000), ("mr", None)}  # 8,000+; MR: all of train
    assert {s.eval_size for s in specs} == {None}  # the whole SST-2 dev split and MR held-out part


def test_model_cells_restrict_one_model_to_a_subset_of_attacks_and_seeds():
    """[model_cells.MODEL] cuts a protocol for an expensive model: fewer seeds, or the replay only; names and
    seeds outside the grid, or other keys, are errors naming the table."""
    base = {"tasks": ["sst2"], "models": ["bert", "safer", "pgd"], "attacks": ["advglue", "textfooler"],
            "seeds": [0, 1, 2]}
    config = load_config({**base, "model_cells": {"safer": {"attacks": ["advglue"]}, "pgd": {"seeds": [0, 1]}}})
    cells = {(s.model, s.attack, s.seed) for s in expand(config)}
    assert {(a, s) for m, a, s in cells if m == "bert"} == {(a, s) for a in base["attacks"] for s in base["seeds"]}
    assert {(a, s) for m, a, s in cells if m == "safer"} == {("advglue", s) for s in base["seeds"]}
    assert {(a, s) for m, a, s in cells if m == "pgd"} == {(a, s) for a in base["attacks"] for s in (0, 1)}
    for cells, message in (({"safer": {"attacks": ["bert-attack"]}}, r"attacks \['bert-attack'\] are not attacks"),
                           ({"pgd": {"seeds": [7]}}, r"\[model_cells.pgd\] seeds \[7\] are not seeds"),
                           ({"pgd": {"epochs": 3}}, "knows 'attacks' and 'seeds'"),
                           ({"imbert": {"seeds": [0]}}, "'imbert' is not in the grid"),
                           ({"pgd": {"seeds": []}}, "seeds must be a non-empty list")):
        with pytest.raises(RobenchError, match=message):
            load_config({**base, "model_cells": cells})


def test_train_values_by_training_size():
    """[train] values may be tables by training size: small training sets train longer (the low-resource grid)."""
    config = load_config({"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"],
                          "train_size": [100, 300, "full"],
                          "train": {"epochs": {"100": 10, "full": 1, "default": 3}, "lr": 1e-4}})
    got = {s.train_size: (s.train.epochs, s.train.lr) for s in expand(config)}
    assert got == {100: (10, 1e-4), 300: (3, 1e-4), None: (1, 1e-4)}
    with pytest.raises(RobenchError, match="training size '150', which is not a train_size of the grid"):
        load_config({"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "train_size": [100],
                     "train": {"epochs": {"150": 2}}})
    with pytest.raises(RobenchError, match="epochs must be an integer"):
        load_config({"tasks": ["sst2"], "models": ["bert"], "attacks": ["advglue"], "train_size": [100],
                     "train": {"epochs": {"100": "x"}}})


def test_reference_grid_is_the_documented_protocol():
    """results/grid-reference.toml (v3, issue 29, docs/studies/reference.md): every defence x 5 seeds, one
    training setting, AdvGLUE whole and the word-level attacks on the same 300 dev sentences, in CPU order."""
    specs = expand(load_config(REPO / "results" / "grid-reference.toml"))
    models = ["bert", "a2t", "imbert", "freelb", "smart", "pgd", "ascc", "safer"]
    # the cuts (docs/studies/reference.md, "Cost"): pgd and ascc on 4 seeds, safer on the AdvGLUE replay (and
    # certificate)
    assert len(specs) == 5 * 5 * 4 + 2 * 4 * 4 + 5 == len({s.run_id for s in specs})
    assert {(s.attack, s.seed) for s in specs if s.model == "safer"} == {("advglue", seed) for seed in range(5)}
    assert {s.seed for s in specs if s.model in ("pgd", "ascc")} == {0, 1, 2, 3}
    assert list(dict.fromkeys(s.model for s in specs)) == models  # the order the grid spends CPU in
    assert {s.seed for s in specs} == {0, 1, 2, 3, 4} and {s.task for s in specs} == {"sst2"}
    assert {(s.train_size, s.train.epochs) for s in specs} == {(3000, 2)}
    assert {(s.eval_size, s.eval_seed) for s in specs if s.attack != "advglue"} == {(300, 0)}
    assert {s.eval_size for s in specs if s.attack == "advglue"} == {None}
    assert {s.model_params.get("a2t_attack") for s in specs if s.model == "a2t"} == {"textfooler"}
    assert {tuple(s.model_params["im_layers"]) for s in specs if s.model == "imbert"} == {(0, 1, 2)}


def test_low_resource_grid_is_the_documented_protocol():
    """results/grid-reference-lowres.toml: bert vs imbert x 3 training sizes (epochs chosen on dev per size)
    x 5 seeds, AdvGLUE whole and TextFooler on the same 100 dev sentences."""
    specs = expand(load_config(REPO / "results" / "grid-reference-lowres.toml"))
    assert len(specs) == 2 * 3 * 5 * 2 == len({s.run_id for s in specs})
    assert {s.model for s in specs} == {"bert", "imbert"} and {s.seed for s in specs} == {0, 1, 2, 3, 4}
    assert {(s.train_size, s.train.epochs) for s in specs} == {(100, 10), (300, 6), (1000, 3)}
    assert {(s.eval_size, s.eval_seed) for s in specs if s.attack == "textfooler"} == {(100, 0)}


def test_second_task_grid_is_the_documented_protocol():
    """results/grid-reference-qnli.toml: bert vs imbert on QNLI's whole offline training part x 5 seeds,
    AdvGLUE-qnli replayed whole."""
    specs = expand(load_config(REPO / "results" / "grid-reference-qnli.toml"))
    assert len(specs) == 2 * 5 == len({s.run_id for s in specs})
    assert {(s.task, s.attack, s.train_size, s.eval_size) for s in specs} == {("qnli", "advglue", None, None)}
    assert {s.model for s in specs} == {"bert", "imbert"} and {s.train.epochs for s in specs} == {2}


def test_example_grid_dry_run(tiny_data, tiny_backbone, tmp_path, capsys):
    from robench.cli import main

    example = (REPO / "examples" / "grid-tiny.toml").read_text(encoding="utf-8")
    assert 'backbones = ["minilm"]' in example
    config = tmp_path / "grid-tiny.toml"  # the example as it is, on the tiny backbone (the estimate calibrates it)
    config.write_text(example.replace('backbones = ["minilm"]', f'backbones = ["{tiny_backbone}"]'))
    assert main(["grid", str(config), "--dry-run", "--data-dir", str(tiny_data),
                 "--results-dir", str(tmp_path / "r"), "--cache-dir", str(tmp_path / "c")]) == 0
    assert "2 cells, 0 finished, 2 train jobs, 2 attack jobs" in capsys.readouterr().out


# ---------------------------------------------------------------- execution (local executor)

def test_each_checkpoints_attacks_run_before_the_next_training(settings, tiny_backbone, tmp_path):
    hook = Recorder(tmp_path / "hook")
    result = grid(tiny_grid(tiny_backbone, seeds=[0, 1], eval_size=[8, "full"]), settings, executor="local",
                  before=hook)
    assert result.count("done") == 4
    assert hook.jobs() == ["train", "attack", "attack", "train", "attack", "attack"]


def test_shared_checkpoints_and_skipping_finished_cells(settings, tiny_backbone, tmp_path):
    config = tiny_grid(tiny_backbone, eval_size=[8, "full"])  # two cells share each checkpoint
    hook = Recorder(tmp_path / "hook1")
    result = grid(config, settings, executor="local", before=hook)
    assert [c.state for c in result.cells] == ["done", "done"]
    assert hook.jobs() == ["train", "attack", "attack"]
    assert len({read_record(settings.runs_dir / f"{c.spec.run_id}.json").checkpoint for c in result.cells}) == 1

    again = Recorder(tmp_path / "hook2")
    result = grid(config, settings, executor="local", before=again)
    assert [c.state for c in result.cells] == ["skipped", "skipped"] and again.jobs() == []

    (settings.runs_dir / f"{result.cells[1].spec.run_id}.json").unlink()
    third = Recorder(tmp_path / "hook3")
    result = grid(config, settings, executor="local", before=third)
    assert [c.state for c in result.cells] == ["skipped", "done"] and third.jobs() == ["train", "attack"]


def test_a_job_that_fails_once_is_retried(settings, tiny_backbone, tmp_path):
    hook = Recorder(tmp_path / "hook", fail_kinds=("train", "attack"), fail_first=1)
    result = grid(tiny_grid(tiny_backbone), settings, executor="local", before=hook, max_retries=1)
    assert [(c.state, c.attempts) for c in result.cells] == [("done", 2)]
    assert [(t.state, t.attempts) for t in result.trains] == [("done", 2)]
    assert hook.jobs() == ["train", "train", "attack", "attack"]
    assert json.loads(result.failures_path.read_text()) == {"failures": []}


def test_a_job_that_keeps_failing_is_recorded_and_the_grid_goes_on(settings, tiny_backbone, tmp_path):
    from robench.report.leaderboard import write_leaderboard

    grid(tiny_grid(tiny_backbone), settings, executor="local")  # the sst2 cell finishes cleanly first
    always = Recorder(tmp_path / "hook", fail_kinds=("attack",), fail_first=99)
    result = grid(tiny_grid(tiny_backbone, tasks=["sst2", "rte"]), settings, executor="local", before=always)
    assert [c.state for c in result.cells] == ["skipped", "failed"]
    assert result.cells[1].attempts == 3 and "injected failure 3" in result.cells[1].error
    failures = json.loads(result.failures_path.read_text())["failures"]
    assert [(f["job"], f["run_ids"], f["attempts"]) for f in failures] == [
        ("attack", [result.cells[1].spec.run_id], 3)]
    assert "RuntimeError: injected failure 3" in failures[0]["error"] and "Traceback" in failures[0]["traceback"]
    table, _, _ = write_leaderboard(settings.results_dir)  # failures live outside runs/: ignored
    assert list(table["task"]) == ["sst2"]


def test_a_failed_training_fails_its_cells(settings, tiny_backbone, tmp_path):
    hook = Recorder(tmp_path / "hook", fail_kinds=("train",), fail_first=99)
    result = grid(tiny_grid(tiny_backbone), settings, executor="local", before=hook, max_retries=0)
    assert [(c.state, c.error) for c in result.cells] == [
        ("failed", f"training failed: RuntimeError: injected failure 1 of train {result.trains[0].key}")]
    assert hook.jobs() == ["train"]


# ---------------------------------------------------------------- Ray

@pytest.fixture(scope="session")
def ray_session(tiny_lm):
    import ray

    from robench.engine.resources.causal_lm import LM_DIR_ENV

    # the workers score fluency with the tests' tiny LM too (they start before any test's environment is set)
    ray.init(num_cpus=2, include_dashboard=False, logging_level=logging.WARNING, log_to_driver=False,
             object_store_memory=80 * 1024 ** 2, runtime_env={"env_vars": {LM_DIR_ENV: str(tiny_lm)}})
    yield ray
    ray.shutdown()


def _comparable(path: Path) -> dict:
    record = asdict(read_record(path))
    for volatile in ("timings", "created", "git_commit"):
        record.pop(volatile)
    record["checkpoint"] = Path(record["checkpoint"]).name  # same key, different cache dirs
    if isinstance(record.get("manifest"), dict):  # the record's own checksum covers the volatile fields too;
        record["manifest"].pop("record_sha256", None)  # its per-example CSV's checksum must still match
    return record


@pytest.mark.integration
def test_ray_and_local_executors_write_identical_records(ray_session, tiny_data, tiny_backbone, tmp_path):
    ray_session.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the test hook, for the workers
    config = tiny_grid(tiny_backbone, seeds=[0, 1])
    local = resolve_settings(tiny_data, tmp_path / "local-cache", tmp_path / "local-results")
    remote = resolve_settings(tiny_data, tmp_path / "ray-cache", tmp_path / "ray-results")
    hook = Recorder(tmp_path / "hook", fail_kinds=("train",), fail_first=1)  # each train fails once, in a worker

    local_result = grid(config, local, executor="local", device="cpu")
    ray_result = grid(config, remote, executor="ray", device="cpu", before=hook)

    assert [c.state for c in local_result.cells] == [c.state for c in ray_result.cells] == ["done", "done"]
    assert [t.attempts for t in ray_result.trains] == [2, 2]
    assert sorted(hook.jobs()) == ["attack"] * 2 + ["train"] * 4
    for cell in local_result.cells:
        run_id = cell.spec.run_id
        assert _comparable(local.runs_dir / f"{run_id}.json") == _comparable(remote.runs_dir / f"{run_id}.json")
        assert RunStore(local.runs_dir, run_id).csv_path.read_text() == \
            RunStore(remote.runs_dir, run_id).csv_path.read_text()
