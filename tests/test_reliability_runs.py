"""Fault injection, continued (docs/studies/reliability.md): bad input, file modes, concurrent identical runs,
interruptions, grids validated at --dry-run, links, limits. The data, hyperparameter, partial-file, checkpoint and
name cases are in test_reliability.py, whose helpers these share."""
from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest
import torch
from conftest import tiny_spec
from test_reliability import _cli, _nothing_trained, _one_error, _rows, base_args

import robench
from robench.cli import main
from robench.core.types import ExampleResult
from robench.runs.resolve import resolve_run
from robench.runs.spec import TrainConfig
from robench.runs.store import RunStore
from robench.training.loop import checkpoint_key


@pytest.fixture
def base(settings, tiny_backbone):
    return base_args(settings, tiny_backbone)


# --- 6. bad input: one clear line, exit 2 ----------------------------------------------------

def test_backbone_directory_without_weights_or_tokenizer(capsys, base, tiny_backbone, tmp_path):
    only_config = tmp_path / "only-config"
    only_config.mkdir()
    shutil.copy(tiny_backbone / "config.json", only_config)
    base[base.index("--backbone") + 1] = str(only_config)
    assert "has no weights" in _one_error(capsys, "run", *base)
    no_tokenizer = tmp_path / "no-tokenizer"
    no_tokenizer.mkdir()
    for name in ("config.json", "model.safetensors"):
        shutil.copy(tiny_backbone / name, no_tokenizer)
    base[base.index("--backbone") + 1] = str(no_tokenizer)
    assert "has no tokenizer" in _one_error(capsys, "run", *base)


@pytest.mark.parametrize("content", [b"\xff\xfe\x00binary", b'{"metrics": null}',
                                     b"[1, 2]", b"{not json"], ids=["binary", "null-metrics", "list", "broken"])
def test_a_malformed_record_is_a_clear_error_in_run_and_leaderboard(capsys, base, settings, content):
    assert main(["run", *base]) == 0
    capsys.readouterr()
    [path] = settings.runs_dir.glob("*.json")
    if content == b'{"metrics": null}':
        saved = json.loads(path.read_text())
        saved["metrics"] = None
        content = json.dumps(saved).encode()
    path.write_bytes(content)
    assert "is malformed" in _one_error(capsys, "run", *base)
    assert "is malformed" in _one_error(capsys, "leaderboard", "--results-dir", settings.results_dir)


@pytest.mark.parametrize("flag", ["--results-dir", "--cache-dir"])
def test_results_or_cache_dir_that_is_a_file(capsys, base, settings, tmp_path, flag):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    base[base.index(flag) + 1] = str(a_file)
    assert "is not a directory" in _one_error(capsys, "run", *base)
    base[base.index(flag) + 1] = str(a_file / "below")
    assert "is a file" in _one_error(capsys, "run", *base)
    assert _nothing_trained(settings)


def test_leaderboard_html_to_a_directory(capsys, settings, tiny_backbone, tmp_path):
    robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    line = _one_error(capsys, "leaderboard", "--results-dir", settings.results_dir, "--html", f"{tmp_path}/")
    assert "is a directory" in line
    assert not (settings.results_dir / "leaderboard.csv").exists()  # checked before anything is written


def test_markup_in_error_text_is_printed_verbatim(capsys, base):
    line = _one_error(capsys, "run", *base, "--param", "[bold]x=1")
    assert "[bold]x" in line


# --- 9. file modes -----------------------------------------------------------------------------

@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_records_honour_the_umask(tmp_path, umask, mode):
    """Records, per-example CSVs, partial results and leaderboards, written through the store and the leaderboard
    (no training, no attack): a new file gets the permissions the umask gives any new file."""
    from test_compare import fake_run

    from robench.report.leaderboard import write_leaderboard

    results_dir = tmp_path / "results"
    old = os.umask(umask)
    try:
        record = fake_run(results_dir / "runs", ["failed", "successful", "skipped"])
        partial = RunStore(results_dir / "runs", "interrupted")
        partial.append(ExampleResult(0, 1, "a b", "a c", 1, 0, "successful", 3, 2, 1))
        _, csv_path, md_path = write_leaderboard(results_dir)
    finally:
        os.umask(old)
    store = RunStore(results_dir / "runs", record.run_id)
    assert store.finished() is not None  # a real record, as the leaderboard read it
    for path in (store.record_path, store.csv_path, partial.partial_path, csv_path, md_path):
        assert path.stat().st_mode & 0o777 == mode, (path, oct(path.stat().st_mode & 0o777))


# --- 10. concurrent identical runs ---------------------------------------------------------------

def test_two_identical_runs_at_once_train_and_attack_once(settings, tiny_backbone, work):
    spec, records, errors = tiny_spec(tiny_backbone), [], []

    def go():
        try:
            records.append(robench.run(spec, settings, device="cpu"))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=go) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and len(records) == 2
    assert work.counts == {"trained": 1, "attacked": 1}  # the second run waited for the first and reused its work
    assert records[0].run_id == records[1].run_id and records[0].metrics == records[1].metrics
    assert len(list(settings.checkpoints_dir.glob("*/model.safetensors"))) == 1


def test_two_identical_trainings_at_once_train_once(settings, tiny_backbone, work):
    spec, trained = tiny_spec(tiny_backbone), []
    threads = [threading.Thread(target=lambda: trained.append(robench.train(spec, settings, device="cpu")))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(t.cached for t in trained) == [False, True] and work.trained == 1


# --- 11. interruptions -----------------------------------------------------------------------

def test_ctrl_c_says_what_is_kept(capsys, base, monkeypatch):
    import robench.runs.runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(robench.runs.runner, "run_resolved", interrupted)  # the CLI runs the resolved run
    code, lines = _cli(capsys, "run", *base)
    assert code == 130 and len(lines) == 1
    assert "attacked example" in lines[0] and "restarts from the beginning" in lines[0]


def test_interrupted_run_resumes_to_the_same_rows_and_accumulates_cost(settings, tiny_backbone, tmp_path,
                                                                      monkeypatch):
    spec = tiny_spec(tiny_backbone)
    uninterrupted = robench.run(spec, settings, device="cpu")
    full_rows = _rows(RunStore(settings.runs_dir, uninterrupted.run_id))
    other = robench.core.paths.resolve_settings(settings.data_dir, settings.cache_dir, tmp_path / "other")
    append, calls = RunStore.append, []

    def dying(self, result, progress=None):
        if len(calls) == 10:
            raise KeyboardInterrupt
        calls.append(1)
        append(self, result, progress)

    monkeypatch.setattr(RunStore, "append", dying)
    with pytest.raises(KeyboardInterrupt):
        robench.run(spec, other, device="cpu")
    monkeypatch.setattr(RunStore, "append", append)
    resumed = robench.run(spec, other, device="cpu")
    assert resumed.metrics == uninterrupted.metrics
    assert _rows(RunStore(other.runs_dir, resumed.run_id)) == full_rows
    assert resumed.timings["resumed_examples"] == 10
    # AdvGLUE predicts all 24 texts before recording any: 24 queries, then 14 more after the resume
    assert resumed.timings["victim_queries"] == 24 + 14
    assert resumed.timings["attack_seconds"] > 0


def test_boundary_values_train_and_attack(settings, tiny_backbone):
    spec = tiny_spec(tiny_backbone, task="rte", train_size=1, eval_size=1,
                     train=TrainConfig(epochs=1, batch_size=1, max_length=8, lr=1e-3, warmup_ratio=1.0))
    record = robench.run(spec, settings, device="cpu")
    assert record.metrics["examples"] == 1 and torch.isfinite(torch.tensor(record.metrics["dev_accuracy"]))


# --- 8. grids validate every cell at --dry-run -------------------------------------------------

def _grid(tmp_path: Path, backbone: Path, extra: str) -> Path:
    path = tmp_path / "grid.toml"
    path.write_text(f'tasks = ["sst2"]\nmodels = ["bert"]\nattacks = ["advglue"]\n'
                    f'backbones = [{json.dumps(str(backbone))}]\n{extra}', encoding="utf-8")
    return path


@pytest.mark.parametrize("extra,message", [
    ("[train]\nepochs = 0\n", "[train]: epochs must be positive"),  # the brackets survive rich markup
    ("[train]\nbatch_size = -4\n", "batch_size must be positive"),
    ("[train]\nlr = nan\n", "lr must be finite"),
    ("[train]\nepochs = 4294967296\n", "epochs must be"),  # found by hypothesis: it filled 20 GB estimating
    ("[train]\nmax_length = 4096\n", "exceeds the 128 positions"),
    ("seeds = [-1]\n", "seeds must be integers from 0"),  # the grid key, not a flag never typed (issue 47)
    ("eval_size = 0\n", "eval_size values must be positive integers"),
    ("[model_params.bert]\nx = 1\n", "unknown hyperparameter(s) ['x']"),
    ("[resources]\ncpus = inf\n", "cpus must be finite"),
])
def test_grid_dry_run_rejects_bad_cells(capsys, settings, tiny_backbone, tmp_path, extra, message):
    config = _grid(tmp_path, tiny_backbone, extra)
    line = _one_error(capsys, "grid", config, "--dry-run", "--data-dir", settings.data_dir, "--cache-dir",
                      settings.cache_dir, "--results-dir", settings.results_dir)
    assert message in line


@pytest.mark.parametrize("flags,message", [(["--cpus-per-job", "nan"], "cpus must be finite"),
                                           (["--gpus-per-job", "-1"], "must be positive"),
                                           (["--max-retries", "-1"], "--max-retries must be >= 0")])
def test_grid_numeric_flags(capsys, settings, tiny_backbone, tmp_path, flags, message):
    config = _grid(tmp_path, tiny_backbone, "")
    assert message in _one_error(capsys, "grid", config, "--dry-run", *flags, "--data-dir", settings.data_dir,
                                 "--cache-dir", settings.cache_dir, "--results-dir", settings.results_dir)


def test_binary_grid_config(capsys, settings, tmp_path):
    config = tmp_path / "grid.toml"
    config.write_bytes(b"\xff\xfe\x00\x01 binary")
    assert "not UTF-8 text" in _one_error(capsys, "grid", config, "--dry-run", "--data-dir", settings.data_dir)


# --- 12. no non-relative links in the leaderboard page ----------------------------------------

@pytest.mark.parametrize("run_id", ["javascript:alert(1)//", "//evil.example/x", "/etc/passwd", "../../x",
                                    "data:text/html,<b>x</b>"])
def test_leaderboard_page_never_links_outside(settings, tiny_backbone, tmp_path, run_id):
    import re

    from robench.report.leaderboard_cells import record_href
    from robench.report.leaderboard_page import write_html

    record = robench.run(tiny_spec(tiny_backbone), settings, device="cpu")
    path = settings.runs_dir / f"{record.run_id}.json"
    forged = json.loads(path.read_text())
    forged["run_id"] = run_id
    (settings.runs_dir / "forged.json").write_text(json.dumps({**forged, "spec": {**forged["spec"], "seed": 7}}))
    for page in (settings.runs_dir / "page.html", tmp_path / "elsewhere" / "page.html"):
        html = write_html(settings.results_dir, page).read_text(encoding="utf-8")
        hrefs = re.findall(r'(?:href|src)="([^"]*)"', html)
        assert hrefs and all(not re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:|/", h) for h in hrefs), hrefs
        assert not any("evil" in h or "passwd" in h or "javascript" in h.lower() for h in hrefs)
    assert record_href(settings.runs_dir, record.run_id, settings.runs_dir) == f"{record.run_id}.json"
    assert record_href(settings.runs_dir, run_id, settings.runs_dir) is None


@pytest.mark.parametrize("model_type, positions, pad, limit", [("bert", 512, 0, 512), ("roberta", 514, 1, 512),
                                                                ("xlm-roberta", 514, 1, 512)])
def test_position_limit_of_a_backbone_directory(tiny_backbone, tmp_path, model_type, positions, pad, limit):
    from robench.classifier.backbone import resolve_backbone

    folder = tmp_path / model_type
    shutil.copytree(tiny_backbone, folder)
    config = json.loads((folder / "config.json").read_text())
    config.update(model_type=model_type, max_position_embeddings=positions, pad_token_id=pad)
    (folder / "config.json").write_text(json.dumps(config))
    assert resolve_backbone(str(folder)).max_positions == limit


def test_a_parameter_spelled_two_ways_is_one_setting(settings, tiny_backbone):

    text = resolve_run(tiny_spec(tiny_backbone, model="imbert", attack="textfooler", eval_size=4,
                                 model_params={"im_layers": "0,1", "im_gamma": 0.02},
                                 attack_params={"k": 20}), settings, attack=True)
    typed = resolve_run(tiny_spec(tiny_backbone, model="imbert", attack="textfooler", eval_size=4,
                                  model_params={"im_layers": [0, 1], "im_gamma": 0.02}, attack_params={"k": 20}),
                        settings, attack=True)
    assert text.spec.run_id == typed.spec.run_id and checkpoint_key(text) == checkpoint_key(typed)
    assert typed.spec.model_params == {"im_layers": [0, 1], "im_gamma": 0.02} and typed.spec.attack_params == {"k": 20}
