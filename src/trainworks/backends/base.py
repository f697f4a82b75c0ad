"""The interface every execution backend implements."""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any, Protocol

from trainworks.contract.environment import JobContext


class Capability(enum.Enum):
    MULTI_REPLICA = "multi_replica"  # several replicas of one job, reachable over TCP
    CONTAINERS = "containers"  # runs an image with podman
    GCS_MOUNT = "gcs_mount"  # objects visible at /gcs/<bucket>/...
    ADOPT = "adopt"  # replicas survive a server restart and can be re-adopted
    GANG = "gang"  # starts all replicas of a job at once (GangBackend), each tracked by a backend_ref


@dataclass(frozen=True)
class LaunchRequest:
    job_id: str
    task_name: str  # workerpool{P}-{i}
    argv: list[str]
    env: dict[str, str]
    run_dir: Path  # its log (capture.py: .trainworks-log/) and the exit record live here
    cwd: Path | None = None
    gcs_root: Path | None = None  # folder to expose at /gcs, when the backend can
    image: str | None = None
    project: str | None = None  # the job's project number: which buckets the replica may see at /gcs
    memory_bytes: int | None = None  # its machine type's memory: what its memory limit derives from
    # (project number, location, id) of the persistent resource the job runs on, whose zygotes may start it
    persistent_resource: tuple[str, str, str] | None = None


def write_launch_record(request: LaunchRequest, argv: Sequence[str], **extra: Any) -> None:
    """launch.json in the replica's run folder, for people and tools looking at a replica: what ran and the
    names of the variables it got (values stay out of the file, they may be secrets)."""
    record = {
        "argv": list(argv),
        "env_names": sorted(request.env),
        "cwd": str(request.cwd) if request.cwd else None,
        "gcs_root": str(request.gcs_root) if request.gcs_root else None,
        **extra,
    }
    (request.run_dir / "launch.json").write_text(json.dumps(record))


@dataclass(frozen=True)
class ProcessHandle:
    pid: int
    pid_start: int  # kernel start time of the pid, to tell a reused pid from ours


class Phase(enum.Enum):
    RUNNING = "running"
    EXITED = "exited"
    LOST = "lost"  # gone without an exit record
    # Gang backends only:
    PENDING = "pending"  # accepted, not started yet (ReplicaStatus.detail says why)
    PREEMPTED = "preempted"  # the backend's scheduler took the nodes away (preemption, requeue)
    TIMEOUT = "timeout"  # stopped by the backend's own time limit


@dataclass(frozen=True)
class ReplicaStatus:
    phase: Phase
    exit_code: int | None = None
    detail: str = ""
    extra: dict[str, str] = field(default_factory=dict)
    # Whether a stop signal reached the replica while its command still ran; None: not known (old records,
    # backends that do not say). An exit 0 with False finished before the stop.
    interrupted: bool | None = None


class LaunchError(Exception):
    """The replica could not be started (bad command, missing image, ...)."""


class BackendUnavailable(Exception):
    """The backend could not be asked just now (its scheduler is down or busy): try again on the next pass."""


class Backend(Protocol):
    name: str
    capabilities: frozenset[Capability]

    def launch(self, request: LaunchRequest) -> ProcessHandle: ...

    def find(self, run_dir: Path) -> ProcessHandle | None:
        """A replica already started in run_dir whose start was not recorded (the server died meanwhile)."""
        ...

    def poll(self, handle: ProcessHandle, run_dir: Path) -> ReplicaStatus: ...

    def signal(self, handle: ProcessHandle, signum: int) -> None: ...


@dataclass(frozen=True)
class GangMember:
    """One replica of a gang, in CLUSTER_SPEC order."""

    pool: int
    index: int
    run_dir: Path  # its log and exit.json, as for a local replica
    extra_env: Mapping[str, str] = field(default_factory=dict)
    python: Path | None = None  # the pool's package environment (python package tasks)


@dataclass(frozen=True)
class PlacementRequest:
    """What a gang backend decides from whether, and where, a job runs (its labels, project, location and
    persistent resource), built from the job by the controller."""

    project_number: str
    location: str
    labels: Mapping[str, str] = field(default_factory=dict)
    persistent_resource_id: str | None = None


@dataclass(frozen=True)
class GangRequest:
    """Every replica of one attempt of a job. The backend places them and works out their addresses; the
    rest of the contract comes from `context` (replica i gets port base_port + i)."""

    placement: PlacementRequest  # where the job runs is chosen from it, as `accepts` chose
    context: JobContext
    members: tuple[GangMember, ...]
    attempt: int
    job_dir: Path
    base_port: int
    env: Mapping[str, str]  # the environment every replica starts from (PATH, HOME, ...)
    gcs_root: Path | None = None
    time_limit: timedelta | None = None


class GangBackend(Protocol):
    """A backend that starts a whole job at once and reports on each replica through its backend_ref."""

    name: str
    capabilities: frozenset[Capability]

    def accepts(self, placement: PlacementRequest) -> bool:
        """Whether this job runs here; raises commands.TaskError when the job asks for it but cannot."""
        ...

    def find_gang(self, request: GangRequest) -> list[str] | None:
        """The refs of this attempt if it was submitted before a crash but never recorded."""
        ...

    def launch_gang(self, request: GangRequest) -> list[str]:
        """Submit the gang; one backend_ref per member. Raises LaunchError, or BackendUnavailable."""
        ...

    def describe(self, refs: Sequence[str]) -> str: ...

    def poll_gang(self, members: Sequence[tuple[str, Path]]) -> list[ReplicaStatus]:
        """The status of each (backend_ref, run_dir), from one look at the backend."""
        ...

    def cancel_gang(self, refs: Sequence[str]) -> None:
        """The backend's own cancel of the gangs these refs belong to (SIGTERM, then its own kill)."""
        ...

    def signal_gang(self, refs: Sequence[str], signum: int) -> None:
        """Signal every running replica of these gangs; a gang not started yet is cancelled instead."""
        ...
