"""Replica exits as events (backends/exits.py): real processes, their ends reported once, at once."""

from __future__ import annotations

import queue
import subprocess
import sys

from trainworks.backends import procfs
from trainworks.backends.exits import ExitWatcher


def test_an_exit_is_reported_once_with_its_key() -> None:
    ended: queue.Queue[int] = queue.Queue()
    watcher = ExitWatcher(ended.put)
    # Blocks until its stdin closes: the test decides when it ends.
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        watcher.watch(child.pid, procfs.start_time(child.pid), 41)
        watcher.watch(child.pid, procfs.start_time(child.pid), 41)  # twice: still one report
        assert watcher.watching(child.pid)
        assert ended.empty()
        assert child.stdin is not None
        child.stdin.close()
        assert ended.get(timeout=30) == 41
        assert not watcher.watching(child.pid)
        child.wait(timeout=30)
        assert ended.empty()
    finally:
        child.kill()
        child.wait()
        watcher.close()


def test_a_process_already_gone_or_replaced_is_reported_at_once() -> None:
    ended: queue.Queue[int] = queue.Queue()
    watcher = ExitWatcher(ended.put)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    start = procfs.start_time(gone.pid)
    gone.wait()
    watcher.watch(gone.pid, start, 1)  # reaped: no such process
    assert ended.get_nowait() == 1
    other = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        watcher.watch(other.pid, procfs.start_time(other.pid) + 1, 2)  # the pid names another process now
        assert ended.get_nowait() == 2
        assert not watcher.watching(other.pid)
    finally:
        other.kill()
        other.wait()
        watcher.close()
