"""Replica exits as events: one epoll over pidfds of the replicas' supervisors, on a thread of its own.

A supervisor writes its replica's exit record durably and then ends (backends/shim.py), so the end of its
process is the moment the exit can be read: the controller is told which job to look at, instead of polling
every running replica on every pass. A process that is not ours to wait on still has a pidfd (Linux 5.3+).
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import threading
from collections.abc import Callable

from trainworks.backends import procfs

log = logging.getLogger(__name__)


class ExitWatcher:
    """Calls `on_exit(key)` once when a watched process ends (or at once when it already has)."""

    def __init__(self, on_exit: Callable[[int], None]) -> None:
        self.on_exit = on_exit
        self._lock = threading.Lock()
        self._epoll = select.epoll()
        self._watched: dict[int, tuple[int, int]] = {}  # pidfd -> (pid, key)
        self._pids: set[int] = set()
        self._wake_r, self._wake_w = os.pipe()  # closing: wakes the thread out of poll()
        self._epoll.register(self._wake_r, select.EPOLLIN)
        self._thread: threading.Thread | None = None
        self._closed = False

    @staticmethod
    def supported() -> bool:
        return hasattr(os, "pidfd_open")

    def watch(self, pid: int, pid_start: int, key: int) -> None:
        """Watch the process `pid` that started at `pid_start` (its /proc start time: pids are reused)."""
        with self._lock:
            if self._closed or pid in self._pids:
                return
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                fd = -1
            if fd >= 0 and not procfs.is_alive(pid, pid_start):  # the pid now names another process
                os.close(fd)
                fd = -1
            if fd < 0:
                ended = True
            else:
                ended = False
                self._pids.add(pid)
                self._watched[fd] = (pid, key)
                self._epoll.register(fd, select.EPOLLIN)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="replica-exits", daemon=True)
                    self._thread.start()
        if ended:
            self.on_exit(key)

    def watching(self, pid: int) -> bool:
        with self._lock:
            return pid in self._pids

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join(timeout=10)
        with self._lock:
            for fd in self._watched:
                os.close(fd)
            self._watched.clear()
            self._epoll.close()
            os.close(self._wake_r)
            os.close(self._wake_w)

    def _run(self) -> None:
        while True:
            try:
                events = self._epoll.poll()
            except InterruptedError:
                continue
            ended: list[int] = []
            with self._lock:
                if self._closed:
                    return
                for fd, _mask in events:
                    entry = self._watched.pop(fd, None)
                    if entry is None:
                        continue
                    pid, key = entry
                    self._pids.discard(pid)
                    with contextlib.suppress(OSError):
                        self._epoll.unregister(fd)
                    os.close(fd)
                    ended.append(key)
            for key in ended:
                try:
                    self.on_exit(key)
                except Exception:  # the watcher must outlive a failing callback
                    log.exception("acting on the exit of a process of job %s failed", key)
