"""Replica supervisors started the way the server starts them, for the backend tests that drive one."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from tests.support.server import wait_for
from trainworks.backends import procfs
from trainworks.backends.local import SHIM
from trainworks.backends.shell import supervised
from trainworks.backends.warm import WarmPool, WarmTarget, _read, stop_recorded
from trainworks.kinds.custom_jobs.launcher import host_env


def start_supervisor(
    run_dir: Path, argv: Sequence[str], sandboxed: bool = True, plan: str | None = None
) -> subprocess.Popen[bytes]:
    """backends/shim.py running `argv` in `run_dir`, as backends/local.py starts it: in a session of its own,
    its plan on stdin (`plan`: sandbox.format_plan's text; by default a bare sandbox, or none)."""
    if plan is None:
        plan = "sandbox\n" if sandboxed else ""
    process = subprocess.Popen(
        [sys.executable, "-I", "-S", str(SHIM), str(run_dir), "", "-" if plan else "", *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    assert process.stdin is not None
    process.stdin.write(plan.encode())
    process.stdin.close()
    return process


@contextlib.contextmanager
def warm_interpreter(folder: Path, name: str) -> Iterator[tuple[WarmPool, WarmTarget]]:
    """A persistent resource's warm interpreter (backends/warm.py), ready; dropped after."""
    pool = WarmPool(folder, host_env)
    target = WarmTarget(("1", "us-central1", name), 0, ())
    wait_for(lambda: pool.ensure(target)[0], what="the zygote to be ready")
    try:
        yield pool, target
    finally:
        pool.drop(target.key, forget=True)


def stop_warm_interpreters(folder: Path) -> int:
    """Kill the warm interpreters (persistent resources' zygotes) recorded under `folder`, by the pid their
    records name (checked against its kernel start time), and say how many. They outlive their server by
    design (a restarted server adopts them), and live while their record does."""
    records = (_read(path) for path in folder.glob("**/persistent/*/*/*/zygotes/*.json"))
    return sum(stop_recorded(record) for record in records if record is not None)


def replica_inits(run_dir: Path) -> list[int]:
    """The host PIDs of a running replica's supervisor's children but its logger (shell.supervised): in a
    sandbox, the init of the replica's PID namespace (whose child is the command); empty when there is no
    supervisor."""
    try:
        supervisor = json.loads((run_dir / "shim.json").read_text())["pid"]
    except (OSError, ValueError, KeyError):
        return []
    return [pid for pid in supervised(supervisor) if procfs.start_time(pid) is not None]
