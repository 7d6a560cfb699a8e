"""`robench bench startup`'s pieces (the measurements themselves are the bench's, not the suite's)."""
from __future__ import annotations

import pytest

from robench.bench import startup
from robench.core.errors import RobenchError


def test_a_timed_command_reports_wall_and_cpu_seconds_and_checks_its_exit_code():
    timing = startup._timed("argument error", ["run", "--epochs", "two"], code=2)
    assert timing.wall > 0 and timing.cpu is not None and timing.cpu >= 0
    with pytest.raises(RobenchError, match="exited 2"):
        startup._timed("argument error", ["run", "--epochs", "two"])


def test_the_run_to_show_must_be_word_level(tmp_path):
    (tmp_path / "a-advglue.json").write_text('{"metrics": {"examples": 3}}')
    with pytest.raises(RobenchError, match="no word-level run record"):
        startup._word_level_run(tmp_path)
    (tmp_path / "b-textfooler.json").write_text('{"metrics": {"validity": {}}}')
    assert startup._word_level_run(tmp_path) == "b-textfooler"


def test_the_line_before_a_silence_is_read_without_terminal_codes():
    assert startup._last_line(b"\x1b[2mrobench: loading torch\x1b[0m\r\n\x1b[?25l") == "robench: loading torch"
    assert startup._last_line(b"\x1b[?25l") == "(a redraw)"
