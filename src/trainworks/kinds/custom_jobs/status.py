"""A job's scheduling and restart status, and preemption on demand: Trainworks extensions to the API."""

from __future__ import annotations

from typing import Any

from trainworks.jobs.enums import JobState
from trainworks.kernel.errors import FieldViolation, failed_precondition, invalid_argument
from trainworks.kernel.names import custom_job_name
from trainworks.kernel.wire import format_timestamp
from trainworks.kinds.custom_jobs.rules import LIVE_PHASES, is_spot, replica_task
from trainworks.kinds.custom_jobs.service import CustomJobService
from trainworks.kinds.custom_jobs.usage import job_cost
from trainworks.store.tables import ReplicaRow

S = JobState


def _replica_wire(replica: ReplicaRow) -> dict[str, Any]:
    out: dict[str, Any] = {
        "task": replica_task(replica),
        "attempt": replica.attempt,
        "phase": replica.phase,
        "address": f"{replica.host}:{replica.port}",
        "restarts": replica.restarts,
    }
    if replica.pid is not None:
        out["pid"] = replica.pid
    if replica.exit_code is not None:
        out["exitCode"] = replica.exit_code
    if replica.detail:
        out["detail"] = replica.detail
    if replica.preempt_requested:
        out["preempted"] = True
    if replica.started_at:
        out["startTime"] = format_timestamp(replica.started_at)
    if replica.ended_at:
        out["endTime"] = format_timestamp(replica.ended_at)
    return out


class JobStatusService:
    """Trainworks' view of a job beyond the Vertex resource (scheduling, restarts, replicas); preemption."""

    def __init__(self, jobs: CustomJobService) -> None:
        self.service = jobs
        self.jobs = jobs.store

    def status(self, project: str, location: str, job_id: str) -> dict[str, Any]:
        row = self.service.find(project, location, job_id)
        replicas = self.jobs.replicas(row.id)
        out: dict[str, Any] = {
            "name": custom_job_name(row.project_number, row.location, row.id),
            "state": S(row.state).name,
            "attempt": row.attempt,
            "priority": row.priority,
            "restarts": list(row.history or []),
            "replicas": [_replica_wire(r) for r in replicas],
            "cost": job_cost(row, replicas),
        }
        if row.zone:
            out["zone"] = row.zone
        if row.waiting_reason and S(row.state) == S.JOB_STATE_QUEUED:
            out["waitingReason"] = row.waiting_reason
        return out

    def preempt(
        self, project: str, location: str, job_id: str, replica: str | None, attempt: int | None = None
    ) -> dict[str, Any]:
        """Chaos: preempt a SPOT job's replica (or all of them) as a Spot VM reclaim would; with `attempt`,
        only while the job runs that attempt (a second preemption fired at once must not hit the restart)."""
        row = self.service.find(project, location, job_id)
        if not is_spot(row):
            raise failed_precondition(
                f"The CustomJob {job_id} does not use the SPOT strategy: it is not preemptible."
            )
        if S(row.state) != S.JOB_STATE_RUNNING or row.outcome is not None:
            raise failed_precondition(
                f"The CustomJob {job_id} is {S(row.state).name}; only running jobs are preempted."
            )
        if attempt is not None and row.attempt != attempt:
            raise failed_precondition(
                f"The CustomJob {job_id} runs attempt {row.attempt}, not {attempt}: it restarted meanwhile."
            )
        replicas = [r for r in self.jobs.replicas(row.id, row.attempt) if r.phase in LIVE_PHASES]
        names = {replica_task(r): r for r in replicas}
        if replica is not None and replica not in names:
            raise invalid_argument(
                [
                    FieldViolation(
                        "replica", f"no running replica {replica!r}; running: {', '.join(sorted(names))}"
                    )
                ]
            )
        targets = [names[replica]] if replica is not None else replicas
        for target in targets:
            self.jobs.update_replica(target.id, preempt_requested=True)
        self.service.wake()
        return {"preempted": sorted(replica_task(t) for t in targets)}
