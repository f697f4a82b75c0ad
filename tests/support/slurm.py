"""A throwaway Slurm test cluster, brought up and down with scripts/slurm-local.sh.

Each cluster gets its own directory and a free block of loopback ports (slurmctld on P, slurmd on P+1..P+N),
so several can run side by side. `down` stops every daemon by the PID in its pid file.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "slurm-local.sh"
INSTALL_HINT = "run scripts/install-test-deps.sh (as root) to install slurm-wlm and munge"


def slurm_available() -> bool:
    return all(shutil.which(p) for p in ("slurmctld", "slurmd", "munged", "sbatch"))


def require_slurm() -> None:
    if not slurm_available():
        pytest.fail(f"Slurm is not installed: {INSTALL_HINT}")


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_block(size: int, start: int = 21000, stop: int = 29000) -> int:
    """The first port P with P..P+size-1 all free on loopback (blocks are 100-aligned)."""
    for base in range(start, stop, 100):
        if all(_port_free(base + i) for i in range(size)):
            return base
    raise RuntimeError("no free block of loopback ports for a Slurm test cluster")


@dataclass(frozen=True)
class SlurmTestCluster:
    base: Path
    port: int
    nodes: int

    @property
    def conf(self) -> Path:
        return self.base / "etc" / "slurm.conf"

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def run(self, *argv: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv), env=self.env(), capture_output=True, text=True, check=check, timeout=timeout
        )


def _script(base: Path, port: int, nodes: int, cpus: int, action: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "SLURM_LOCAL_DIR": str(base),
        "SLURM_LOCAL_PORT": str(port),
        "SLURM_LOCAL_NODES": str(nodes),
        "SLURM_LOCAL_CPUS": str(cpus),
    }
    return subprocess.run(["bash", str(SCRIPT), action], env=env, capture_output=True, text=True, timeout=120)


@contextmanager
def slurm_test_cluster(base: Path, nodes: int = 4, cpus: int = 2) -> Iterator[SlurmTestCluster]:
    """A running Slurm cluster of `nodes` emulated nodes for the duration of the block."""
    require_slurm()
    port = free_port_block(nodes + 1)
    up = _script(base, port, nodes, cpus, "up")
    if up.returncode != 0:
        _script(base, port, nodes, cpus, "down")
        raise RuntimeError(f"slurm-local.sh up failed:\n{up.stdout}\n{up.stderr}")
    try:
        yield SlurmTestCluster(base, port, nodes)
    finally:
        _script(base, port, nodes, cpus, "down")
