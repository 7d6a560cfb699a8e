"""End-to-end runs on the tiny backbone: records, checkpoint cache, resume, leaderboard."""
import csv
import dataclasses
import json

import pytest
from conftest import tiny_spec

import robench
from robench.core.hashing import content_hash
from robench.core.records import RECORD_FORMAT
from robench.engine.words import split_words
from robench.report.leaderboard import write_leaderboard
from robench.runs.store import RunStore, hyperparameters_hash


def test_run_writes_record_and_csv(settings, tiny_backbone):
    record = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    saved = json.loads((settings.runs_dir / f"{record.run_id}.json").read_text())
    for key in ("spec", "hyperparameters", "resources", "versions", "git_commit", "metrics", "timings"):
        assert key in saved
    assert saved["hyperparameters"]["train"]["lr"] == 1e-3
    assert saved["resources"]["backbone"]["location"] == str(tiny_backbone)
    assert saved["versions"]["torch"] and saved["versions"]["transformers"]
    m = saved["metrics"]
    assert m["examples"] == 24 and m["dev_minus_robust"] == pytest.approx(m["dev_accuracy"] - m["robust_accuracy"])
    # AdvGLUE's examples come without originals (dev_accuracy is the dev split's): no clean accuracy, so no drop
    assert m["clean_accuracy"] is None and m["accuracy_drop"] is None
    assert saved["format"] == RECORD_FORMAT and saved["resources"]["data"]["eval_examples"] == 24
    assert saved["resources"]["data"]["eval_indices_hash"] == content_hash(list(range(24)))
    rows = list(csv.DictReader(open(settings.runs_dir / f"{record.run_id}.csv")))
    assert len(rows) == 24 and {r["status"] for r in rows} <= {"failed", "successful"}
    assert sum(r["status"] == "failed" for r in rows) / 24 == pytest.approx(m["robust_accuracy"])
    assert (record.checkpoint.endswith(tuple("0123456789abcdef")))
    assert list((settings.checkpoints_dir).glob("*/model.safetensors"))


def test_identical_run_reuses_checkpoint(settings, tiny_backbone, work):
    first = robench.train(tiny_spec(tiny_backbone), settings, device="cpu")
    again = robench.train(tiny_spec(tiny_backbone), settings, device="cpu")
    other_attack_same_training = robench.run(tiny_spec(tiny_backbone, eval_size=8), settings, device="cpu")
    assert not first.cached and again.cached and again.checkpoint == first.checkpoint
    assert other_attack_same_training.timings["train_cached"] is True
    assert work.counts == {"trained": 1, "attacked": 1}  # one training served all three
    different = robench.train(tiny_spec(tiny_backbone, seed=1), settings, device="cpu")
    assert different.checkpoint != first.checkpoint and work.trained == 2


def test_finished_run_is_not_redone(settings, tiny_backbone, work):
    first = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    assert work.counts == {"trained": 1, "attacked": 1}
    path = settings.runs_dir / f"{first.run_id}.json"
    written = path.read_bytes()
    second = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    assert work.counts == {"trained": 1, "attacked": 1}  # neither trained nor attacked again
    assert path.read_bytes() == written  # the record is the one written first, untouched
    assert (second.run_id, second.metrics, second.timings) == (first.run_id, first.metrics, first.timings)


def test_record_made_with_other_default_hyperparameters_is_redone(settings, tiny_backbone, work, monkeypatch,
                                                                 caplog):
    """The run id holds only what the spec asks for, so a recipe's changed default keeps the id: the record is
    reused only when its recorded hyperparameters are the run's resolved ones (plan, run and grids agree)."""
    from robench.runs import runner
    from robench.runs.resolve import ResolvedRun

    first = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    recorded = ResolvedRun.hyperparameters

    def changed_default(self):
        out = recorded(self)
        return {**out, "attack": {**(out["attack"] or {}), "a_new_default": True}}

    monkeypatch.setattr(ResolvedRun, "hyperparameters", changed_default)
    assert not runner.plan(tiny_spec(tiny_backbone), settings, device="cpu", cost=False).record_finished
    again = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    assert "other hyperparameters: attack.a_new_default" in caplog.text
    assert again.run_id == first.run_id and again.hyperparameters["attack"]["a_new_default"] is True
    assert work.counts == {"trained": 1, "attacked": 2}  # attacked again, on the cached checkpoint
    assert runner.plan(tiny_spec(tiny_backbone), settings, device="cpu", cost=False).record_finished


def test_record_made_before_a_knob_existed_is_reused():
    """A knob added later (KNOBS_ADDED_LATER) with the value that reproduces the earlier code: a record without
    it verifies when the run asks for that value, and not when it asks for another; a run without the knob (an
    attack that has none) is not asked about it."""
    from types import SimpleNamespace

    from robench.runs.store import _hyperparameter_problem

    before = SimpleNamespace(hyperparameters={"train": {"lr": 0.1}, "attack": {"k": 50}})
    assert _hyperparameter_problem(before, {"train": {"lr": 0.1}, "attack": {"k": 50, "grammar_check": True}}) is None
    assert "attack.grammar_check" in _hyperparameter_problem(
        before, {"train": {"lr": 0.1}, "attack": {"k": 50, "grammar_check": False}})
    assert _hyperparameter_problem(before, {"train": {"lr": 0.1}, "attack": {"k": 50}}) is None
    assert "attack.k" in _hyperparameter_problem(before, {"train": {"lr": 0.1}, "attack": {"k": 20}})


def test_a_knob_at_its_earlier_value_is_the_same_setting(settings, tiny_backbone):
    """The leaderboard and compare group a record made before a knob existed with one made after at the knob's
    earlier value (the control replication's a2t seeds 5-6 beside its seeds 7-9), never with another value."""
    from robench.report.identity import attack_setting_id, setting_id

    record = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    attack = {k: v for k, v in (record.hyperparameters["attack"] or {}).items()}

    def with_attack(values):
        return dataclasses.replace(record, hyperparameters={**record.hyperparameters, "attack": values})

    attack = {k: v for k, v in attack.items() if k not in ("fluency_max_drop", "sense_min_cos")}
    before = with_attack(attack)
    now = with_attack({**attack, "grammar_check": True, "beam_width": 1, "fluency_max_drop": None,
                       "sense_min_cos": None})
    other = with_attack({**attack, "fluency_max_drop": 1.5})
    assert setting_id(before) == setting_id(now) and attack_setting_id(before) == attack_setting_id(now)
    assert setting_id(other) != setting_id(before) and attack_setting_id(other) != attack_setting_id(before)


def test_a_partial_line_made_before_a_knob_resumes_at_its_earlier_value():
    """An attack interrupted before an upgrade added a knob (at the value that reproduces the code before it)
    resumes with its finished examples, as its finished record would verify; another value starts over."""
    before = {"train": {"lr": 0.1}, "attack": {"k": 20}}
    now = {"train": {"lr": 0.1}, "attack": {"k": 20, "population_size": 0, "population_search": "genetic",
                                            "generations": 20, "lm_top_k": None}}
    assert hyperparameters_hash(before) == hyperparameters_hash(now)
    assert hyperparameters_hash({**now, "attack": {**now["attack"], "population_size": 20}}) != hyperparameters_hash(
        before)


def test_older_format_record_is_redone(settings, tiny_backbone, work):
    first = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    path = settings.runs_dir / f"{first.run_id}.json"
    old = json.loads(path.read_text())
    del old["format"]  # records written before formats were numbered
    path.write_text(json.dumps(old))
    assert RunStore(settings.runs_dir, first.run_id).finished() is None
    again = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    assert again.format == RECORD_FORMAT and json.loads(path.read_text())["format"] == RECORD_FORMAT
    assert work.counts == {"trained": 1, "attacked": 2}  # attacked again, on the cached checkpoint


def test_eval_subset_is_identical_across_training_seeds(settings, tiny_backbone):
    def attacked(**overrides):
        record = robench.run(tiny_spec(tiny_backbone, eval_size=8, **overrides), settings, device="cpu")
        rows = list(csv.DictReader(open(settings.runs_dir / f"{record.run_id}.csv")))
        return record.resources["data"]["eval_indices_hash"], [r["perturbed_text"] for r in rows]

    seed0, seed1, other_eval_seed = attacked(seed=0), attacked(seed=1), attacked(seed=0, eval_seed=1)
    assert seed0 == seed1 and len(seed0[1]) == 8
    assert other_eval_seed[0] != seed0[0] and other_eval_seed[1] != seed0[1]


def test_pair_separator_is_not_a_word(settings, tiny_backbone):
    record = robench.run(tiny_spec(tiny_backbone, task="rte", eval_size=6), settings, device="cpu")
    rows = list(csv.DictReader(open(settings.runs_dir / f"{record.run_id}.csv")))
    for row in rows:
        first, second = row["perturbed_text"].split(" [SEP] ")
        assert int(row["num_words"]) == len(split_words(first)) + len(split_words(second))


def test_interrupted_attack_resumes_with_same_numbers(settings, tiny_backbone):
    spec = tiny_spec(tiny_backbone)
    full = robench.run(spec, settings, device="cpu")
    store = RunStore(settings.runs_dir, full.run_id)  # the run id covers the spec and its data fingerprint
    rows = list(csv.DictReader(open(store.csv_path)))
    store.record_path.unlink()
    store.csv_path.unlink()
    with open(store.partial_path, "w") as fh:  # an attack stopped after 10 examples, mid-write
        for row in rows[:10]:
            typed = {f.name: int(row[f.name]) if f.type == "int" else row[f.name]
                     for f in dataclasses.fields(robench.core.types.ExampleResult)}
            fh.write(json.dumps({**typed, "made_with": hyperparameters_hash(full.hyperparameters)}) + "\n")
        fh.write('{"index": 10, "lab')
    resumed = robench.run(spec, settings, device="cpu")
    assert resumed.metrics == full.metrics
    assert resumed.timings["victim_queries"] == 14  # only the unfinished examples were predicted
    assert not store.partial_path.exists()


def test_leaderboard_mean_and_std_over_seeds(settings, tiny_backbone):
    for seed in (0, 1):
        robench.run(tiny_spec(tiny_backbone, seed=seed), settings, device="cpu")
    table, csv_path, md_path = write_leaderboard(settings.results_dir)
    assert len(table) == 1 and table.loc[0, "seeds"] == 2
    frame = [json.loads(p.read_text())["metrics"]["robust_accuracy"] for p in settings.runs_dir.glob("*.json")]
    assert table.loc[0, "advglue.robust_accuracy_mean"] == pytest.approx(sum(frame) / 2)
    assert "±" in md_path.read_text() and csv_path.read_text().startswith("task,rank,rank_by,rank_accuracy,model")
    settings_csv = (settings.results_dir / "settings.csv").read_text()  # one row per setting, as before
    assert settings_csv.startswith("task,model,attack,backbone,train_size") and len(settings_csv.splitlines()) == 2


def test_git_commit_names_the_diff_of_a_dirty_tree(tmp_path):
    """A record made from uncommitted changes carries the hash of `git diff HEAD`, so it is traceable."""
    import hashlib
    import subprocess

    from robench.runs.store import git_commit

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, check=True).stdout

    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    sha = git("rev-parse", "HEAD").decode().strip()
    source = tmp_path / "a.txt"
    assert git_commit(source) == sha
    (tmp_path / "a.txt").write_text("two\n")
    digest = hashlib.sha256(git("diff", "HEAD", "--binary")).hexdigest()[:16]
    assert git_commit(source) == f"{sha}+dirty.{digest}"
    (tmp_path / "a.txt").write_text("three\n")
    assert git_commit(source) != f"{sha}+dirty.{digest}"  # another diff, another hash


def test_an_installed_robench_records_no_commit_of_the_users_repository(tmp_path):
    """robench installed into a virtual environment inside the user's own repository: git, run from the package
    directory, finds the user's repository; its commit says nothing about robench, so none is recorded."""
    import shutil
    import subprocess

    import robench.runs.store as store

    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, check=True).stdout

    git("init", "-q")
    (tmp_path / "train.py").write_text("print('my project')\n")
    git("add", "train.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "my project")
    installed = tmp_path / ".venv" / "lib" / "site-packages" / "robench" / "runs" / "store.py"
    installed.parent.mkdir(parents=True)
    shutil.copy(store.__file__, installed)
    assert store.git_commit(installed) is None
    assert store.git_commit(tmp_path / "train.py") == git("rev-parse", "HEAD").decode().strip()
    outside = tmp_path.parent / f"{tmp_path.name}-no-repository" / "store.py"
    outside.parent.mkdir()
    shutil.copy(store.__file__, outside)
    assert store.git_commit(outside) is None


def test_a_run_spec_cannot_change_after_it_was_made():
    """RunSpec is frozen, and so are the dicts it holds: changing one would change the run id under a record."""
    import pickle

    from robench.runs.spec import RunSpec

    params = {"k": 20, "windows": [5, 15], "nested": {"x": 1}}
    spec = RunSpec(attack="textfooler", attack_params=params, task_source={"labels": ["neg", "pos"]})
    run_id = spec.run_id
    params["k"] = 99  # the caller's dict is copied, not held
    for change in (lambda: spec.attack_params.__setitem__("k", 1), lambda: spec.attack_params.update(k=1),
                   lambda: spec.attack_params.pop("k"), lambda: spec.attack_params["windows"].append(50),
                   lambda: spec.attack_params["nested"].setdefault("y", 2), lambda: spec.model_params.clear(),
                   lambda: spec.task_source["labels"].sort()):
        with pytest.raises(TypeError, match="immutable"):
            change()
    assert spec.run_id == run_id and spec.attack_params == {"k": 20, "windows": [5, 15], "nested": {"x": 1}}
    assert spec.task_source["labels"] == ["neg", "pos"]
    copy = pickle.loads(pickle.dumps(spec))  # grid workers get specs pickled
    assert copy == spec and copy.run_id == run_id
    plain = spec.to_dict()
    plain["attack_params"]["k"] = 1  # to_dict is the caller's to change
    assert spec.attack_params["k"] == 20 and RunSpec.from_dict(spec.to_dict()) == spec
    changed = dataclasses.replace(spec, attack_params={**spec.attack_params, "k": 30})
    assert changed.run_id != run_id


def test_an_integer_given_to_a_float_knob_resolves_to_the_same_setting_as_the_float():
    """`--attack-param fluency_max_drop=0` parses to the integer 0, a grid or Python gives 0.0: one setting, so one
    resolved value (the records of issue 57's reading held both, and hashed apart)."""
    from robench.attacks.textfooler import TextFoolerParams
    from robench.core.params import make_params, parse_assignments

    from_cli = make_params(TextFoolerParams, parse_assignments(["fluency_max_drop=0", "k=20"]), "textfooler")
    from_grid = make_params(TextFoolerParams, {"fluency_max_drop": 0.0, "k": 20}, "textfooler")
    assert from_cli == from_grid
    assert isinstance(from_cli.fluency_max_drop, float) and isinstance(from_cli.k, int)
    assert json.dumps(dataclasses.asdict(from_cli)) == json.dumps(dataclasses.asdict(from_grid))
