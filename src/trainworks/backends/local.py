"""Local backend: every replica is a real process on this host, under the replica supervisor (shim.py).

With a container runtime of "podman", container tasks run inside `podman run`; with "host" the command
runs directly and the image URI is recorded but not used.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from trainworks.backends import procfs
from trainworks.backends.base import (
    Capability,
    LaunchError,
    LaunchRequest,
    Phase,
    ProcessHandle,
    ReplicaStatus,
)

SHIM = Path(__file__).with_name("shim.py")


def _base_interpreter() -> str:
    """An interpreter for the shim; the shim runs isolated (-I -S) so any CPython 3 will do."""
    return sys.executable


class LocalBackend:
    name = "local"
    capabilities = frozenset({Capability.MULTI_REPLICA, Capability.GCS_MOUNT, Capability.ADOPT})

    def __init__(self, container_runtime: str = "host") -> None:
        self.container_runtime = container_runtime
        if container_runtime == "podman":
            self.capabilities = self.capabilities | {Capability.CONTAINERS}

    def launch(self, request: LaunchRequest) -> ProcessHandle:
        request.run_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("exit.json", "shim.json"):
            (request.run_dir / stale).unlink(missing_ok=True)
        # For people and tools looking at a replica: what ran, and which variables it got (values stay out
        # of the file, they may be secrets). The supervisor takes all of it from its command line.
        spec = {
            "argv": request.argv,
            "env_names": sorted(request.env),
            "cwd": str(request.cwd) if request.cwd else None,
            "gcs_root": str(request.gcs_root) if request.gcs_root else None,
        }
        (request.run_dir / "launch.json").write_text(json.dumps(spec))
        try:
            process = subprocess.Popen(
                [
                    _base_interpreter(),
                    "-I",
                    "-S",
                    str(SHIM),
                    str(request.run_dir),
                    str(request.cwd or ""),
                    str(request.gcs_root or ""),
                    *request.argv,
                ],
                env=request.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=open(request.run_dir / "shim.log", "ab"),  # noqa: SIM115 - the child keeps it
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise LaunchError(f"could not start the replica supervisor: {exc}") from exc
        start = procfs.start_time(process.pid)
        if start is None:
            # Exited already (a crash of the shim itself); the poll will report it.
            start = 0
        return ProcessHandle(pid=process.pid, pid_start=start)

    def find(self, run_dir: Path) -> ProcessHandle | None:
        try:
            pid = int(json.loads((run_dir / "shim.json").read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if (run_dir / "exit.json").exists():
            return ProcessHandle(pid=pid, pid_start=0)  # it already ran to the end: poll reads its record
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        if str(SHIM).encode() not in cmdline or str(run_dir).encode() not in cmdline:
            return None  # the pid now belongs to some other process
        start = procfs.start_time(pid)
        return ProcessHandle(pid=pid, pid_start=start) if start is not None else None

    def poll(self, handle: ProcessHandle, run_dir: Path) -> ReplicaStatus:
        procfs.reap(handle.pid)
        record = run_dir / "exit.json"
        if record.exists():
            try:
                data = json.loads(record.read_text())
            except (OSError, ValueError):
                data = None
            if data is not None:
                code = int(data["exit_code"])
                detail = ""
                if "signal" in data:
                    detail = f"killed by signal {signal.Signals(int(data['signal'])).name}"
                return ReplicaStatus(Phase.EXITED, exit_code=code, detail=detail)
        if handle.pid_start and procfs.is_alive(handle.pid, handle.pid_start):
            return ReplicaStatus(Phase.RUNNING)
        if record.exists():  # written between the two checks
            return self.poll(handle, run_dir)
        return ReplicaStatus(Phase.LOST, detail="the replica's supervisor ended without an exit record")

    def signal(self, handle: ProcessHandle, signum: int) -> None:
        if not handle.pid_start or not procfs.is_alive(handle.pid, handle.pid_start):
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(handle.pid, signum)
