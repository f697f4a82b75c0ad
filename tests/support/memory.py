"""Replica memory limits as the tests see them: a scale that makes an n1-standard-4 replica's limit small, a
program past it, the error it fails with, and where a server keeps its replicas' cgroups."""

from __future__ import annotations

import hashlib
from pathlib import Path

from tests.support.jobs import MACHINE
from trainworks.backends.memory_limits import memory_cgroup_of
from trainworks.catalog.machines import machine_type

SCALE = 0.01
N1_STANDARD_4 = machine_type(MACHINE["machineType"])
assert N1_STANDARD_4 is not None
LIMIT = int(int(N1_STANDARD_4.memory_gib * (1 << 30)) * SCALE)  # about 154 MiB
OOM = "The replica workerpool0-0 ran out of memory and exited with a non-zero status of 137."
# Touches every page: 400 MiB of real memory, well past the limit.
HOG = "data = b'x' * (400 << 20); print(len(data))"


def replica_cgroups(home: Path) -> Path:
    """Where a server with this home keeps its replicas' cgroups (under the cgroup this test runs in)."""
    tag = hashlib.sha256(str(home.resolve()).encode()).hexdigest()[:8]
    own = memory_cgroup_of("self")
    assert own is not None
    return Path(own) / f"trainworks-{tag}"


def members(cgroup: Path) -> set[int]:
    """The processes in a cgroup (none when it does not exist)."""
    try:
        return {int(p) for p in (cgroup / "cgroup.procs").read_text().split()}
    except OSError:
        return set()
