"""`robench.core.locks.file_lock`: one holder at a time, and no lock file left behind."""
from __future__ import annotations

import fcntl
import threading

import pytest

from robench.core.locks import file_lock


def test_the_lock_file_is_removed_after_success_and_after_an_error(tmp_path):
    path = tmp_path / "runs" / "x.lock"
    with file_lock(path, "waiting"):
        assert path.is_file()
    assert not path.exists()
    with pytest.raises(RuntimeError), file_lock(path, "waiting"):
        raise RuntimeError("boom")
    assert not path.exists()


def test_a_waiter_woken_by_the_removal_holds_the_file_now_at_the_path(tmp_path, caplog):
    # flock locks belong to open files, so threads that each open the path contend like processes
    path = tmp_path / "x.lock"
    first_in, release, second_in, done = (threading.Event() for _ in range(4))

    def first() -> None:
        with file_lock(path, "waiting"):
            first_in.set()
            release.wait(10)

    def second() -> None:
        first_in.wait(10)
        with file_lock(path, "waiting for the first"):
            second_in.set()
            done.wait(10)

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for t in threads:
        t.start()
    try:
        first_in.wait(10)
        for _ in range(1000):  # until the second has opened the first's file and waits on it
            if "waiting for the first" in caplog.text:
                break
            threading.Event().wait(0.01)
        release.set()
        assert second_in.wait(10)
        with open(path, "a") as fh, pytest.raises(BlockingIOError):  # a third process would wait
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        release.set()
        done.set()
        for t in threads:
            t.join(10)
    assert not path.exists()
