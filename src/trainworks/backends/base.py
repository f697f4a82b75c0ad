"""The interface every execution backend implements."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class Capability(enum.Enum):
    MULTI_REPLICA = "multi_replica"  # several replicas of one job, reachable over TCP
    CONTAINERS = "containers"  # runs an image with podman
    GCS_MOUNT = "gcs_mount"  # objects visible at /gcs/<bucket>/...
    ADOPT = "adopt"  # replicas survive a server restart and can be re-adopted


@dataclass(frozen=True)
class LaunchRequest:
    job_id: str
    task_name: str  # workerpool{P}-{i}
    argv: list[str]
    env: dict[str, str]
    run_dir: Path  # stdout.log, stderr.log and the exit record live here
    cwd: Path | None = None
    gcs_root: Path | None = None  # folder to expose at /gcs, when the backend can
    image: str | None = None


@dataclass(frozen=True)
class ProcessHandle:
    pid: int
    pid_start: int  # kernel start time of the pid, to tell a reused pid from ours


class Phase(enum.Enum):
    RUNNING = "running"
    EXITED = "exited"
    LOST = "lost"  # gone without an exit record


@dataclass(frozen=True)
class ReplicaStatus:
    phase: Phase
    exit_code: int | None = None
    detail: str = ""
    extra: dict[str, str] = field(default_factory=dict)


class LaunchError(Exception):
    """The replica could not be started (bad command, missing image, ...)."""


class Backend(Protocol):
    name: str
    capabilities: frozenset[Capability]

    def launch(self, request: LaunchRequest) -> ProcessHandle: ...

    def find(self, run_dir: Path) -> ProcessHandle | None:
        """A replica already started in run_dir whose start was not recorded (the server died meanwhile)."""
        ...

    def poll(self, handle: ProcessHandle, run_dir: Path) -> ReplicaStatus: ...

    def signal(self, handle: ProcessHandle, signum: int) -> None: ...
