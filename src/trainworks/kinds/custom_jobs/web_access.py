"""Access to live replicas: the CustomJob's `webAccessUris`, and which replica a shell opens into."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from trainworks.jobs.enums import JobState
from trainworks.kernel.errors import FieldViolation, failed_precondition, invalid_argument
from trainworks.kinds.custom_jobs.rules import is_task_name, replica_task
from trainworks.store.tables import CustomJobRow, ReplicaRow

if TYPE_CHECKING:
    from trainworks.kinds.custom_jobs.service import CustomJobService

S = JobState


def terminal_path(project_number: str, location: str, job_id: int, replica: str) -> str:
    """The console page of a replica's web terminal (the console serves it; the shell socket backs it)."""
    return f"/console/terminal/{project_number}/{location}/{job_id}/{replica}"


def wants_web_access(row: CustomJobRow) -> bool:
    return bool(row.spec.get("jobSpec", {}).get("enableWebAccess")) and S(row.state) == S.JOB_STATE_RUNNING


def web_access_uris(base_url: str, row: CustomJobRow, replicas: Sequence[ReplicaRow]) -> dict[str, str]:
    """One web terminal URI per running replica of the current attempt, while the job is RUNNING."""
    if not wants_web_access(row):
        return {}
    base = base_url.rstrip("/")
    return {
        replica_task(r): base + terminal_path(row.project_number, row.location, row.id, replica_task(r))
        for r in replicas
        if r.attempt == row.attempt and r.phase == "running"
    }


def shell_replica(
    service: CustomJobService, project: str, location: str, job_id: str, replica: str
) -> ReplicaRow:
    """The running replica a shell opens into; FAILED_PRECONDITION when the job or replica is not running."""
    if not is_task_name(replica):
        raise invalid_argument(
            [FieldViolation("replica", f"{replica!r} is not a replica name such as workerpool0-0")]
        )
    row = service.find(project, location, job_id)
    if S(row.state) != S.JOB_STATE_RUNNING or row.outcome is not None:
        raise failed_precondition(
            f"The CustomJob {job_id} is {S(row.state).name}; "
            "a shell opens only into the replicas of a running job."
        )
    replicas = service.store.replicas(row.id, row.attempt)
    names = {replica_task(r): r for r in replicas}
    if replica not in names:
        raise invalid_argument(
            [
                FieldViolation(
                    "replica", f"the job has no replica {replica!r}; it has {', '.join(sorted(names))}"
                )
            ]
        )
    target = names[replica]
    if target.phase != "running" or target.pid is None or target.pid_start is None:
        raise failed_precondition(
            f"The replica {replica} of CustomJob {job_id} is not running ({target.phase})."
        )
    if target.backend_ref:
        raise failed_precondition(
            f"The replica {replica} of CustomJob {job_id} runs on a Slurm cluster; shells open only into "
            "replicas that run on the server's host."
        )
    return target
