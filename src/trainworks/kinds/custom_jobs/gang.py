"""The part of the CustomJob controller for jobs a gang backend runs whole (Slurm: slurm/backend.py).

A job that a gang backend accepts is submitted once per attempt, and each replica row keeps its
backend_ref. The job stays PENDING (with the backend's reason) until the backend runs it; the backend's
preemption or requeue takes the preemption path, its time limit the timeout failure, and a lost replica
restarts the whole job (a gang cannot restart one member). Teardown is the backend's cancel for a
cancelled job, otherwise SIGTERM through the backend; SIGKILL after the grace either way.
"""

from __future__ import annotations

import logging
import signal
from concurrent.futures import Future
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from trainworks.backends.base import (
    BackendUnavailable,
    Capability,
    GangBackend,
    LaunchError,
    Phase,
    ReplicaStatus,
)
from trainworks.backends.commands import TaskError
from trainworks.config import Settings
from trainworks.jobs.enums import JobState
from trainworks.jobs.service_log import log_service
from trainworks.kernel.status import Code
from trainworks.kernel.wire import now_utc
from trainworks.kinds.custom_jobs.launcher import ReplicaLauncher, placement
from trainworks.kinds.custom_jobs.rules import (
    MAX_JOB_RETRIES,
    RestartKind,
    job_retries_left,
    job_timeout,
    replica_task,
    retries_disabled,
)
from trainworks.kinds.custom_jobs.store import JobStore
from trainworks.observability.metrics import ServerMetrics
from trainworks.store.tables import CustomJobRow, ReplicaRow

log = logging.getLogger(__name__)
S = JobState


class GangJobs:
    """Mixed into CustomJobController: the gang path next to its replica-by-replica path."""

    settings: Settings
    jobs: JobStore
    launcher: ReplicaLauncher
    gang: GangBackend | None
    metrics: ServerMetrics
    _preparing: dict[int, Future[dict[int, Path]]]

    # provided by the controller (declared for the type checker only: the controller's own come first)
    if TYPE_CHECKING:

        def job_dir(self, job: CustomJobRow) -> Path: ...
        def _fail(self, job: CustomJobRow, code: Code, message: str, grace: float | None = None) -> None: ...
        def _restart(
            self, job: CustomJobRow, kind: RestartKind, reason: str, grace: float | None = None
        ) -> None: ...
        def _preempt(self, job: CustomJobRow, tasks: list[str], by: str | None = None) -> None: ...
        def _exited(
            self, job: CustomJobRow, replica: ReplicaRow, status: ReplicaStatus, announce: bool = True
        ) -> bool: ...
        def _past_grace(self, job: CustomJobRow, now: datetime) -> bool: ...
        def _record_exit(self, replica: ReplicaRow, phase: Phase, code: int | None, detail: str) -> None: ...

    def _gang_of(self, replicas: list[ReplicaRow]) -> GangBackend | None:
        """The gang backend this attempt was submitted to (its replicas carry backend_refs), if any."""
        if self.gang is not None and any(r.backend_ref for r in replicas):
            return self.gang
        return None

    def _gang_for(self, job: CustomJobRow, replicas: list[ReplicaRow]) -> GangBackend | None:
        """The gang backend this attempt runs on: the one it went to, or one that takes it (TaskError when
        the job asks for one that cannot)."""
        gang = self._gang_of(replicas)
        if gang is None and self.gang is not None and self.gang.accepts(placement(job)):
            gang = self.gang
        return gang

    @staticmethod
    def _gang_members(replicas: list[ReplicaRow]) -> list[tuple[str, Path]]:
        return [(r.backend_ref or "", Path(r.run_dir)) for r in replicas]

    def _start_gang(
        self, job: CustomJobRow, replicas: list[ReplicaRow], pythons: dict[int, Path], gang: GangBackend
    ) -> bool:
        """Submit the attempt once; it stays PENDING, with the backend's reason, until the backend runs it."""
        try:
            if any(r.backend_ref is None for r in replicas):
                self._submit_gang(job, replicas, pythons, gang)
                return True
            statuses = gang.poll_gang(self._gang_members(replicas))
        except BackendUnavailable as exc:
            log.warning("job %s: %s backend unavailable: %s", job.id, gang.name, exc)
            return True
        if all(s.phase == Phase.PENDING for s in statuses):
            reason = statuses[0].detail or "waiting"
            if reason != job.waiting_reason:
                self.jobs.set_fields(job.id, waiting_reason=reason)
                job.waiting_reason = reason
                log_service(self.job_dir(job), f"Waiting for the job to start: {reason}.")
            return True
        if any(s.phase in (Phase.RUNNING, Phase.EXITED) for s in statuses):
            self._gang_running(job, replicas)
        return self._watch_gang(job, replicas, statuses)

    def _submit_gang(
        self, job: CustomJobRow, replicas: list[ReplicaRow], pythons: dict[int, Path], gang: GangBackend
    ) -> None:
        taken = self.jobs.ports_in_use() - {r.port for r in replicas}
        try:
            request = self.launcher.gang_request(gang, job, replicas, pythons, taken, job_timeout(job))
            # Submitted before a crash but never recorded: adopt it rather than submit it twice.
            adopted = gang.find_gang(request) if Capability.ADOPT in gang.capabilities else None
            refs = adopted or gang.launch_gang(request)
        except (TaskError, LaunchError) as exc:
            self._preparing.pop(job.id, None)
            self._fail(job, Code.FAILED_PRECONDITION, f"The job could not be submitted to {gang.name}: {exc}")
            return
        log_service(self.job_dir(job), "Waiting for training program to start.")
        for replica, ref, slot in zip(replicas, refs, request.context.slots, strict=True):
            self.jobs.update_replica(replica.id, phase="running", backend_ref=ref, port=slot.port)
        self._preparing.pop(job.id, None)
        log_service(self.job_dir(job), f"Submitted as {gang.describe(refs)}.")

    def _gang_running(self, job: CustomJobRow, replicas: list[ReplicaRow]) -> None:
        """The backend started every replica together: the job is RUNNING from now."""
        now = now_utc()
        # startTime is the first entry into RUNNING, recorded with it: a crash in between must not lose it.
        if not self.jobs.transition(
            job.id,
            [S.JOB_STATE_PENDING],
            state=S.JOB_STATE_RUNNING,
            waiting_reason=None,
            start_time=job.start_time or now,
        ):
            return
        if job.start_time is None:
            self.metrics.job_started(job.create_time)
            job.start_time = now
        for replica in replicas:
            if replica.started_at is None:
                self.jobs.update_replica(replica.id, started_at=now)
        log_service(self.job_dir(job), "Job is running.")

    def _watch_gang(
        self, job: CustomJobRow, replicas: list[ReplicaRow], statuses: list[ReplicaStatus]
    ) -> bool:
        """One look at a gang: preemption and the time limit first (they kill replicas too), then exits."""
        current = [(r, s) for r, s in zip(replicas, statuses, strict=True) if r.phase == "running"]
        preempted = [(r, s) for r, s in current if s.phase == Phase.PREEMPTED]
        if preempted:
            self._preempt(job, [replica_task(r) for r, _ in preempted], by=preempted[0][1].detail)
            return True
        timed_out = next((s for _, s in current if s.phase == Phase.TIMEOUT), None)
        if timed_out is not None:
            timeout = int(job_timeout(job).total_seconds())
            message = f"The job ran longer than its timeout of {timeout}s ({timed_out.detail})."
            self._fail(job, Code.DEADLINE_EXCEEDED, message)
            return True
        for replica, status in current:
            if status.phase in (Phase.RUNNING, Phase.PENDING):
                continue
            self._record_exit(replica, status.phase, status.exit_code, status.detail)
            if status.phase == Phase.LOST:
                self._gang_lost(job, replica, status.detail)
                return True
            if self._exited(job, replica, status):
                return True
        return True

    def _gang_lost(self, job: CustomJobRow, replica: ReplicaRow, detail: str) -> None:
        """A gang cannot restart one member: a lost replica restarts the whole job (at most 3 times)."""
        what = f"The replica {replica_task(replica)} was lost: {detail or 'it ended without an exit status'}"
        if retries_disabled(job):
            self._fail(job, Code.INTERNAL, f"{what}; retries are disabled.")
        elif job_retries_left(job):
            self._restart(job, RestartKind.INTERNAL, f"{what}.")
        else:
            self._fail(job, Code.INTERNAL, f"{what}; the job was already retried {MAX_JOB_RETRIES} times.")

    def _stop_gang(self, job: CustomJobRow, replicas: list[ReplicaRow], gang: GangBackend) -> bool:
        """The backend's cancel for a cancelled job, SIGTERM otherwise; SIGKILL after the grace. The first
        call always reaches the backend, so a requeued job waiting to run again is removed too. True while
        some replica still runs."""
        assert job.outcome is not None
        rows = [r for r in replicas if r.backend_ref and r.phase == "running"]
        statuses = gang.poll_gang(self._gang_members(rows)) if rows else []
        alive = False
        for replica, status in zip(rows, statuses, strict=True):
            if status.phase in (Phase.RUNNING, Phase.PENDING):
                alive = True
            elif status.phase == Phase.LOST and replica.started_at is None:
                self.jobs.update_replica(replica.id, phase="skipped")  # removed before it ever ran
            else:
                self._record_exit(replica, status.phase, status.exit_code, status.detail or "stopped")
        refs = [r.backend_ref for r in replicas if r.backend_ref]
        now = now_utc()
        if job.teardown_started is None:
            if alive:
                log_service(self.job_dir(job), "Tearing down training program.")
            if job.outcome.get("state") == int(S.JOB_STATE_CANCELLED):
                gang.cancel_gang(refs)
            else:
                gang.signal_gang(refs, signal.SIGTERM)
            self.jobs.set_fields(job.id, teardown_started=now)
            job.teardown_started = now
        elif alive and self._past_grace(job, now):
            gang.signal_gang(refs, signal.SIGKILL)
        return alive
