"""Process identity from /proc: a pid plus its start time names one process for good."""

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
