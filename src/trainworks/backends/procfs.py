"""Processes as /proc shows them: a pid plus its start time names one process for good; a process's children
and command line. Standard library only, no pathlib: the zygote loads this module on its start path."""

from __future__ import annotations

import contextlib
import os


def start_time(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat (clock ticks since boot), or None if the process is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read().decode("utf-8", "replace")
    except OSError:
        return None
    # The command name may contain spaces and parentheses: split after the last ')'.
    fields = data[data.rfind(")") + 2 :].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def is_alive(pid: int, expected_start: int) -> bool:
    return start_time(pid) == expected_start


def reap(pid: int) -> None:
    """Collect our own exited child so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def children(pid: int) -> list[int]:
    """The pids of a process's children (its main thread's), empty when it is gone."""
    try:
        with open(f"/proc/{pid}/task/{pid}/children", "rb") as handle:
            return [int(part) for part in handle.read().split()]
    except OSError:
        return []


def cmdline(pid: int) -> list[str]:
    """A process's command line, empty when it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0") if part]
