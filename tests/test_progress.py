"""Long work is never silent: a phase says how long it has run (against its expected time on this machine, when it
has one), a progress bar in a pipe prints plain lines, and the machine's load and speed are measured."""
from __future__ import annotations

import io
import logging
import time

import pytest
from rich.console import Console


def test_a_phase_beats_while_it_runs_and_says_its_expected_time(monkeypatch, caplog):
    from robench.core import progress

    monkeypatch.setattr(progress, "HEARTBEAT", 0.05)
    with caplog.at_level(logging.INFO, "robench.phases"):
        with progress.phase("building the thing (first use)", expected=70.0):
            time.sleep(0.3)
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == "building the thing (first use); expected ~70 s on this machine now"
    beats = [r for r in caplog.records if getattr(r, "heartbeat", False)]
    assert len(beats) >= 2 and all(r.getMessage().startswith("building the thing: ") for r in beats)
    assert beats[0].getMessage().endswith("so far of ~70 s expected")


def test_a_phase_that_fails_stops_beating(monkeypatch, caplog):
    from robench.core import progress

    monkeypatch.setattr(progress, "HEARTBEAT", 0.05)
    with caplog.at_level(logging.INFO, "robench.phases"), pytest.raises(ValueError):
        with progress.phase("failing"):
            raise ValueError("no")
    count = len(caplog.records)
    time.sleep(0.2)
    assert len(caplog.records) == count and not any("done in" in r.getMessage() for r in caplog.records)


def test_a_bar_in_a_pipe_prints_plain_lines(monkeypatch):
    from robench.core import progress

    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=200)
    monkeypatch.setattr(progress, "PLAIN_EVERY", 0.0)
    with progress.progress_bar(console) as bar:
        task = bar.add_task("train bert", total=4)
        for _ in range(4):
            bar.update(task, advance=1, description="train bert epoch 1/1")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("train bert epoch 1/1: 1/4 (25%), ") and "left" in lines[0]
    assert lines[-1].startswith("train bert epoch 1/1: 4/4 (100%), ") and "left" not in lines[-1]
    assert len(lines) == 4  # the finished line once


def test_a_bar_in_a_pipe_prints_at_most_every_plain_every_seconds():
    from robench.core.progress import progress_bar

    out = io.StringIO()
    with progress_bar(Console(file=out, force_terminal=False)) as bar:
        task = bar.add_task("attack", total=1000)
        for _ in range(999):
            bar.advance(task)
    assert out.getvalue() == ""  # fast work: nothing until PLAIN_EVERY has passed or it completes
    assert progress_bar(None).disable and not isinstance(progress_bar(None), type(bar))


def test_plain_lines_say_how_far_and_how_long():
    from robench.core.progress import clock, plain_line

    assert plain_line("attack", 3, 12, 30.0) == "attack: 3/12 (25%), 30 s, ~1 min 30 s left"
    assert plain_line("attack", 0, None, 5.0) == "attack: 0, 5 s"
    assert clock(42.4) == "42 s" and clock(185) == "3 min 5 s"


def test_the_phase_handler_draws_beats_in_place_on_a_terminal_and_thins_them_in_a_pipe(monkeypatch):
    import robench.cli as cli

    def emit(terminal: bool, messages: list[tuple[str, bool]]) -> str:
        out = io.StringIO()
        monkeypatch.setattr(cli, "ERR", Console(file=out, force_terminal=terminal, width=100, color_system=None))
        handler = cli._PhaseLine(logging.INFO)
        for text, elapsed in messages:
            record = logging.LogRecord("robench.phases", logging.INFO, "", 0, text, (), None)
            if elapsed is not None:
                record.heartbeat, record.elapsed = True, elapsed
            handler.emit(record)
        return out.getvalue()

    sequence = [("loading", None), ("loading: 2 s so far", 2.0), ("loading: 4 s so far", 4.0),
                ("loading: 12 s so far", 12.0), ("loading: done in 13 s", None)]
    piped = emit(False, sequence)  # every beat of the first PLAIN_EVERY seconds, then one each PLAIN_EVERY
    assert piped.splitlines() == ["robench: loading", "robench: loading: 2 s so far", "robench: loading: 4 s so far",
                                  "robench: loading: done in 13 s"]
    drawn = emit(True, sequence)
    assert "\r\x1b[2Krobench: loading: 12 s so far" in drawn
    assert drawn.endswith("robench: loading: done in 13 s\n")


def test_the_load_share_and_when_it_differs_materially():
    from robench.core.machine import Load, load, load_differs, slowdown

    idle, busy = Load(0.2, 2), Load(9.0, 2)
    assert idle.share == 1.0 and busy.share == pytest.approx(0.2)
    assert load_differs(idle, busy) and load_differs(busy, idle)
    assert not load_differs(Load(4.0, 2), Load(5.0, 2)) and not load_differs(idle, Load(0.9, 2))
    assert load().cpus >= 1 and load().average >= 0
    assert slowdown() >= 0.25
    assert busy.describe() == "load 9.0 on 2 CPUs"
