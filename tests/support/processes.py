"""Looking at the processes a test started, through /proc."""

from __future__ import annotations

from pathlib import Path


def group_members(group: int) -> list[int]:
    """The PIDs of process group `group` (a replica supervisor's: itself, its logger, a sandbox's init, the
    command)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == group:
                found.append(int(entry.name))
    return found
