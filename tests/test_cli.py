"""Bad input: one clear line on stderr, a non-zero exit, never a traceback."""
import os
import re
import subprocess
import sys

import pytest

from robench.cli import main


def _run(capsys, *argv):
    code = main(list(argv))
    err = capsys.readouterr().err
    return code, " ".join(err.split())


@pytest.fixture
def base(settings, tiny_backbone):
    return ["--backbone", str(tiny_backbone), "--data-dir", str(settings.data_dir), "--cache-dir",
            str(settings.cache_dir), "--results-dir", str(settings.results_dir), "--epochs", "1", "--quiet"]


@pytest.mark.parametrize("args,message", [
    (["--model", "imbret"], "unknown model 'imbret'"),
    (["--attack", "textfoolr"], "unknown attack 'textfoolr'"),
    (["--task", "sst3"], "did you mean sst2"),
    (["--task", "agnews"], "task 'agnews' has no AdvGLUE split"),
    (["--param", "gamma=2"], "unknown hyperparameter(s) ['gamma']"),
    (["--epochs", "0"], "--epochs must be positive"),
])
def test_bad_names_and_values(capsys, base, args, message):
    code, err = _run(capsys, "run", *base, *args)
    assert code == 2 and message in err and "Traceback" not in err


@pytest.mark.parametrize("argv,message", [
    (["run", "--modle", "bert"], "robench run: error: unrecognized arguments: --modle (did you mean --model?) bert"),
    (["run", "--seeed=3"], "robench run: error: unrecognized arguments: --seeed=3 (did you mean --seed?)"),
    (["bench", "estimate", "--modls", "bert"], "robench bench estimate: error: unrecognized arguments: --modls "
                                               "(did you mean --models?) bert"),
    (["show", "a", "b"], "robench show: error: unrecognized arguments: b"),
])
def test_an_unknown_flag_is_an_error_of_its_command_with_the_nearest_flag(capsys, argv, message):
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    err = " ".join(capsys.readouterr().err.split())
    assert exit_.value.code == 2 and message in err and f"usage: robench {argv[0]}" in err


def test_missing_data_dir(capsys, base, tmp_path):
    base[base.index("--data-dir") + 1] = str(tmp_path / "nowhere")
    code, err = _run(capsys, "run", *base)
    assert code == 2 and "does not exist" in err


def test_malformed_data_file(capsys, base, tmp_path):
    (tmp_path / "sst2").mkdir()
    (tmp_path / "sst2" / "train.tsv").write_text("sentence\tlabel\ngood\tpositive\n")
    (tmp_path / "sst2" / "dev.tsv").write_text("sentence\tlabel\nfine\t1\n")
    (tmp_path / "advglue").mkdir()
    (tmp_path / "advglue" / "dev.json").write_text('{"sst2": []}')
    base[base.index("--data-dir") + 1] = str(tmp_path)
    code, err = _run(capsys, "run", *base)
    assert code == 2 and "outside the task's label set" in err


def test_missing_backbone(capsys, base, tmp_path):
    base[base.index("--backbone") + 1] = str(tmp_path / "no-such-model")
    code, err = _run(capsys, "run", *base)
    assert code == 2 and "does not exist" in err


def test_unreachable_hub_backbone(capsys, base):
    base[base.index("--backbone") + 1] = "no-such-org/no-such-bert"
    code, err = _run(capsys, "run", *base)
    assert code == 2 and "could not load backbone" in err


@pytest.mark.parametrize("attack,missing", [
    ("bert-attack", "robench resources build-mlm"),  # no MLM built in this cache dir
    ("textattack:bert-attack", "robench resources build-mlm"),
    ("textfooler", "counterfitted/mrksic_ppdb_antonyms.txt"),  # the data dir below has no counterfitted/
    ("textattack:textfooler", "counterfitted/mrksic_ppdb_antonyms.txt"),
])
def test_missing_attack_resources_fail_before_training(capsys, base, settings, tmp_path, attack, missing):
    if "textfooler" in attack:
        data = tmp_path / "data-without-counterfitted"
        data.mkdir()
        for part in ("sst2", "advglue", "nltk_data"):
            (data / part).symlink_to(settings.data_dir / part)
        base[base.index("--data-dir") + 1] = str(data)
    code, err = _run(capsys, "run", *base, "--attack", attack)
    assert code == 2 and missing in err and "Traceback" not in err
    assert not (settings.cache_dir / "checkpoints").exists()  # nothing was trained


def test_real_process_exit_code_and_no_traceback(base):
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, "-m", "robench.cli", "run", *base, "--model", "nope"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 2
    assert "robench: error: unknown model 'nope'" in proc.stderr and "Traceback" not in proc.stderr


def test_list_shows_sources(capsys):
    assert main(["list"]) == 0
    out, err = capsys.readouterr()
    assert "bert" in out and "advglue" in out and "sst2" in out and "robench" in out
    assert "robench: importing the built-in models for their summaries" in err  # the one slow part says so
    assert "transfer:RUN_ID" in out  # attack families are listed with what their argument is


def test_every_task_has_a_summary():
    """`robench list tasks` says what each task is (issue 61: five of eight had an empty summary)."""
    from robench.data import TASKS

    for name in TASKS.names():
        assert TASKS.get(name).summary, f"task {name!r} has no summary"


def test_list_tasks_keeps_every_summary_at_80_columns(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["list", "tasks"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for name in ("SST-2", "RTE", "QNLI", "MR", "AG News", "MNLI", "QQP"):
        assert name in out


def test_a_progress_bar_keeps_its_counters_at_80_columns():
    import io

    from rich.console import Console

    from robench.core.progress import progress_bar

    for width in (60, 80):
        buf = io.StringIO()
        with progress_bar(Console(file=buf, width=width, force_terminal=True, color_system=None)) as bar:
            bar.update(bar.add_task("textfooler (120 successful, 31 failed, 22 skipped, 1 error) " * 2, total=3000),
                       advance=1017)
        drawn = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line) for line in re.split(r"[\r\n]", buf.getvalue())]
        last = [line for line in drawn if "/3000" in line][-1]
        assert "1017/3000" in last and "0:00:00" in last and len(last) <= width, last
