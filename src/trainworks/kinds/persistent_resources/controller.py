"""Reconciles persistent resources, and admits the jobs that run on them.

States (every change is a compare-and-set on the row; the LRO that asked for it completes when it is done):

* PROVISIONING -> RUNNING once its warm interpreters are ready (startTime; billing spans open), or ERROR when
  they cannot start (say a preloaded module does not import).
* RUNNING: keeps its warm interpreters alive (a dead one is started again) and serves jobs.
* UPDATING -> RUNNING: the accepted spec is applied (labels naming other preloaded modules wait for new
  interpreters; a replica count change re-opens the billing spans).
* REBOOTING -> RUNNING: admitted jobs on it fail ("rebooted"), its warm interpreters are dropped and the
  generation is bumped, then it provisions again with fresh ones. Queued jobs wait and run afterwards.
* STOPPING -> gone: every job on it fails, its warm state is removed, then the row goes and the delete LRO
  completes in the same transaction.

Jobs with `jobSpec.persistentResourceId` bypass the scheduler's inventory: :class:`PersistentResourceJobs`
admits them (QUEUED -> PENDING) when every resource pool they use has the free replicas, by priority then
age, and otherwise records why they wait. Their replicas start from the resource's warm interpreters
(backends/warm.py) when the command allows it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from trainworks.backends.base import LaunchRequest
from trainworks.backends.warm import WarmPool, WarmTarget
from trainworks.config import Settings
from trainworks.jobs.enums import JobState
from trainworks.jobs.service_log import log_service
from trainworks.kernel.loop import ReconcileLoop, reconcile_each
from trainworks.kernel.lro_store import Key, key_of
from trainworks.kernel.status import Code, status_dict
from trainworks.kernel.wire import now_utc
from trainworks.kinds.custom_jobs.service import CustomJobService
from trainworks.kinds.persistent_resources.service import (
    ADMITTED_JOB_STATES,
    EMPTY,
    job_demands,
    job_resource_id,
    on_resource,
    resource_jobs,
    resource_wire,
    response_type,
    row_name,
    used_replicas,
)
from trainworks.kinds.persistent_resources.store import PersistentResourceStore
from trainworks.kinds.persistent_resources.validation import preload_modules, replica_bounds
from trainworks.kinds.persistent_resources.wire import PersistentResourceState
from trainworks.store.crash_points import crash_point
from trainworks.store.tables import CustomJobRow, PersistentResourceRow

log = logging.getLogger(__name__)

R = PersistentResourceState
S = JobState
_FAILABLE = (S.JOB_STATE_QUEUED, S.JOB_STATE_PENDING, S.JOB_STATE_RUNNING)
_SWEEP_SECONDS = 60.0


def warm_target(row: PersistentResourceRow, labels: dict[str, str] | None = None) -> WarmTarget:
    return WarmTarget(key_of(row), row.generation, preload_modules(row.labels if labels is None else labels))


def _fail_job(jobs: CustomJobService, job: CustomJobRow, code: Code, message: str) -> bool:
    """Record that the job fails; the job controller stops its replicas and ends it."""
    if job.outcome is not None or S(job.state) not in _FAILABLE:
        return False
    outcome = {"state": int(S.JOB_STATE_FAILED), "error": status_dict(code, message)}
    if jobs.decide_outcome(job.id, _FAILABLE, outcome):
        job.outcome = outcome
        return True
    return False


class PersistentResourceJobs:
    """The job controller's view of persistent resources: admission on their capacity, and warm targets."""

    def __init__(self, settings: Settings, store: PersistentResourceStore, jobs: CustomJobService) -> None:
        self.settings = settings
        self.store = store
        self.jobs = jobs

    def admit(self, jobs: list[CustomJobRow]) -> list[CustomJobRow]:
        """Admit the queued jobs that run on a persistent resource; returns the others (for the scheduler)."""
        mine = [j for j in jobs if job_resource_id(j.spec)]
        if not mine:
            return jobs
        queued = [j for j in mine if j.state == int(S.JOB_STATE_QUEUED) and j.outcome is None]
        queued.sort(key=lambda j: (-j.priority, j.create_time, j.id))
        rows: dict[Key, PersistentResourceRow | None] = {}
        used: dict[Key, dict[str, int]] = {}
        for job in queued:
            key = (job.project_number, job.location, job_resource_id(job.spec))
            if key not in rows:
                rows[key] = self.store.get(key)
                row = rows[key]
                if row is not None:
                    used[key] = used_replicas(key, row.spec.get("resourcePools", []), mine)
            try:
                self._admit_one(job, rows[key], used.get(key, {}))
            except Exception:
                log.exception("admitting job %s on persistent resource %s failed", job.id, key[2])
        return [j for j in jobs if not job_resource_id(j.spec)]

    def _admit_one(self, job: CustomJobRow, row: PersistentResourceRow | None, used: dict[str, int]) -> None:
        resource_id = job_resource_id(job.spec)
        job_dir = self.settings.jobs_dir / str(job.id)
        if row is None or R(row.state) in (R.STOPPING, R.ERROR):
            what = "no longer exists" if row is None else f"is {R(row.state).name}"
            message = f"The persistent resource {resource_id!r} {what}; the job cannot run on it."
            if _fail_job(self.jobs, job, Code.FAILED_PRECONDITION, message):
                log_service(job_dir, message, severity="ERROR")
            return
        reason: str
        if R(row.state) != R.RUNNING:
            reason = (
                f"waiting for persistent resource {resource_id!r} to be RUNNING (it is {R(row.state).name})"
            )
        else:
            pools = {str(p["id"]): p for p in row.spec.get("resourcePools", [])}
            demands = job_demands(job.spec.get("jobSpec") or {}, list(pools.values()))
            short = [
                (pool_id, n)
                for pool_id, n in demands.items()
                if n > replica_bounds(pools[pool_id]) - used.get(pool_id, 0)
            ]
            if not short:
                if self.jobs.admit_queued(job.id):
                    job.state, job.zone, job.waiting_reason = int(S.JOB_STATE_PENDING), None, None
                    for pool_id, n in demands.items():
                        used[pool_id] = used.get(pool_id, 0) + n
                    log_service(job_dir, f"Starting on persistent resource {row_name(row)}.")
                return
            pool_id, wanted = short[0]
            pool = pools[pool_id]
            machine = (pool.get("machineSpec") or {}).get("machineType", "?")
            bound = replica_bounds(pool)
            free = max(0, bound - used.get(pool_id, 0))
            reason = (
                f"waiting for {wanted} × {machine} in resource pool {pool_id!r} of persistent resource "
                f"{resource_id!r}: {free} free of {bound}"
            )
        if reason != job.waiting_reason:
            self.jobs.set_waiting_reason(job.id, reason)
            job.waiting_reason = reason
            log_service(job_dir, f"Job is queued: {reason}.")

    def warm_target(self, request: LaunchRequest) -> WarmTarget | None:
        """Where a replica starts warm: the persistent resource its job runs on, while that is RUNNING."""
        if request.persistent_resource is None:
            return None
        row = self.store.get(request.persistent_resource)
        if row is None or R(row.state) != R.RUNNING:
            return None
        return warm_target(row)


class PersistentResourceController(ReconcileLoop):
    name = "persistent-resource-controller"

    def __init__(
        self,
        settings: Settings,
        store: PersistentResourceStore,
        jobs: CustomJobService,
        warm: WarmPool,
        wake_jobs: Callable[[], None] = lambda: None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.jobs = jobs
        self.warm = warm
        self.wake_jobs = wake_jobs
        self._last_sweep = 0.0
        super().__init__(settings.resync_seconds)

    def reconcile_once(self) -> bool:
        """One pass over every resource; True while one is changing state."""
        rows = self.store.all()
        # No resource: no job of one to look at, so skip loading every active job (costly with many queued).
        jobs = resource_jobs(self.jobs) if rows else []
        busy = reconcile_each(
            rows,
            lambda row: self.reconcile(row, [j for j in jobs if on_resource(j, key_of(row))]),
            log,
            "reconciling persistent resource %s failed",
            row_name,
        )
        if time.monotonic() - self._last_sweep > _SWEEP_SECONDS:
            self._last_sweep = time.monotonic()
            self.warm.drop_others([key_of(r) for r in self.store.all()])
        return busy

    # -------------------------------------------------------------- one resource
    def reconcile(self, row: PersistentResourceRow, jobs: list[CustomJobRow]) -> bool:
        state = R(row.state)
        if state == R.PROVISIONING:
            return self._provision(row, jobs, R.PROVISIONING)
        if state == R.RUNNING:
            if row.operation_id is not None:  # done before a restart, not yet reported
                self._complete(row, jobs)
            self.warm.ensure(warm_target(row))  # a warm interpreter that died is started again
            return False
        if state == R.UPDATING:
            return self._update(row, jobs)
        if state == R.REBOOTING:
            return self._reboot(row, jobs)
        if state == R.STOPPING:
            return self._stop_resource(row, jobs)
        if state == R.ERROR:
            if row.operation_id is not None:  # failed before a restart, not yet reported
                failure = row.error or status_dict(Code.FAILED_PRECONDITION, "The resource is in ERROR.")
                self.store.finish_operation(key_of(row), row.operation_id, error=failure)
            self.warm.drop(key_of(row))
        return False

    def _complete(self, row: PersistentResourceRow, jobs: list[CustomJobRow]) -> None:
        fresh = self.store.get(key_of(row))
        if fresh is None or fresh.operation_id is None:
            return
        op = self.store.operations.get(fresh.operation_id)
        if op is None:
            self.store.finish_operation(key_of(fresh), fresh.operation_id)
            return
        used = used_replicas(key_of(fresh), fresh.spec.get("resourcePools", []), jobs)
        response = {"@type": response_type(op.metadata_), **resource_wire(fresh, used)}
        self.store.finish_operation(key_of(fresh), op.id, response=response)

    def _provision(self, row: PersistentResourceRow, jobs: list[CustomJobRow], from_state: R) -> bool:
        target = warm_target(row)
        ready, error = self.warm.ensure(target)
        if error:
            message = f"The persistent resource could not start its warm interpreters: {error}"
            failure = status_dict(Code.FAILED_PRECONDITION, message)
            # The resource fails and so does its operation, together: a crash leaves no operation undone.
            if self.store.transition(
                key_of(row),
                [from_state],
                abort=(row.operation_id, failure) if row.operation_id is not None else None,
                state=R.ERROR,
                error=failure,
                pending_spec=None,
                operation_id=None,
            ):
                self.warm.drop(key_of(row))
                self.wake_jobs()
            return False
        if not ready:
            if row.operation_id is not None:
                modules = ", ".join(target.preload) or "no modules"
                self.store.set_progress(
                    row.operation_id, f"Starting warm interpreters (preloading {modules})."
                )
            return True
        now = now_utc()
        moved = self.store.transition(
            key_of(row),
            [from_state],
            reopen_spans=from_state == R.PROVISIONING,  # billed from the moment it runs
            state=R.RUNNING,
            start_time=row.start_time or now,
            error=None,
            pending_spec=None,
        )
        if moved:
            self._running(row, jobs)
        return True

    def _running(self, row: PersistentResourceRow, jobs: list[CustomJobRow]) -> None:
        """It is RUNNING now (provisioned, updated or rebooted): its operation completes, its jobs start."""
        # A crash here leaves it RUNNING with its operation: reconcile completes it after the restart.
        crash_point("persistent-resource-running")
        self._complete(row, jobs)
        self.wake_jobs()

    def _update(self, row: PersistentResourceRow, jobs: list[CustomJobRow]) -> bool:
        spec = row.pending_spec or row.spec
        labels = dict(spec.get("labels", {}))
        if preload_modules(labels) != preload_modules(row.labels):
            ready, error = self.warm.ensure(warm_target(row, labels))
            if error:
                # The new preload list cannot be imported: the update fails, the resource stays as it was.
                # Failed together with its operation: RUNNING with an operation would read as a done update.
                failure = status_dict(
                    Code.FAILED_PRECONDITION, f"The update could not start warm interpreters: {error}"
                )
                self.store.transition(
                    key_of(row),
                    [R.UPDATING],
                    abort=(row.operation_id, failure) if row.operation_id is not None else None,
                    state=R.RUNNING,
                    pending_spec=None,
                    operation_id=None,
                )
                return True
            if not ready:
                return True
        counts = [p.get("replicaCount") for p in spec.get("resourcePools", [])]
        before = [p.get("replicaCount") for p in row.spec.get("resourcePools", [])]
        moved = self.store.apply_update(
            key_of(row),
            R.UPDATING,
            R.RUNNING,
            spec,
            pending_spec=None,
            reopen_spans=counts != before,  # the new machine count is billed from the same moment
        )
        if moved:
            self._running(row, jobs)
        return True

    def _reboot(self, row: PersistentResourceRow, jobs: list[CustomJobRow]) -> bool:
        if not (row.pending_spec or {}).get("rebooting"):
            message = f"The job was stopped: its persistent resource {row_name(row)} was rebooted."
            self._fail_jobs([j for j in jobs if j.state in ADMITTED_JOB_STATES], Code.ABORTED, message)
            self.warm.drop(key_of(row))  # the warm state goes; new interpreters start from scratch
            self.store.transition(
                key_of(row), [R.REBOOTING], generation=row.generation + 1, pending_spec={"rebooting": True}
            )
            if row.operation_id is not None:
                self.store.set_progress(row.operation_id, "Rebooting: waiting for jobs to stop.")
            return True
        if any(j.state in ADMITTED_JOB_STATES for j in jobs):
            return True  # their replicas are being stopped
        return self._provision(row, jobs, R.REBOOTING)

    def _stop_resource(self, row: PersistentResourceRow, jobs: list[CustomJobRow]) -> bool:
        message = f"The persistent resource {row_name(row)} was deleted."
        self._fail_jobs(jobs, Code.FAILED_PRECONDITION, message)
        if jobs:
            return True  # wait until every job on it has ended
        self.warm.drop(key_of(row), forget=True)
        if row.operation_id is not None:
            self.store.finish_operation(key_of(row), row.operation_id, response=dict(EMPTY), remove=True)
        else:
            self.store.remove(key_of(row))
        return False

    def _fail_jobs(self, jobs: list[CustomJobRow], code: Code, message: str) -> None:
        failed = False
        for job in jobs:
            if _fail_job(self.jobs, job, code, message):
                failed = True
                log_service(self.settings.jobs_dir / str(job.id), message, severity="ERROR")
        if failed:
            self.wake_jobs()


__all__ = ["PersistentResourceController", "PersistentResourceJobs", "warm_target"]
