"""Reconciles custom jobs: QUEUED -> PENDING -> RUNNING -> SUCCEEDED | FAILED, and CANCELLING -> CANCELLED.

Every decision reads the database and writes it back with a compare-and-set, so the loop can stop at any
point and a restarted server picks up where it was: running replicas are re-adopted through their pid and
start time, and exit codes survive in each replica's exit record.

How a job ends or restarts (docs/state-machines.md has the whole picture):
* it SUCCEEDS when the primary replica (workerpool0-0) exits 0; the other replicas are then stopped;
* it FAILS when a replica exits non-zero, when it passes scheduling.timeout (whatever its retries), or when
  it cannot start;
* a replica that crashes with SIGABRT or SIGSEGV (exit 134/139, possibly transient) restarts the whole job,
  at most 3 times; a replica that vanishes restarts alone, at most 5 times, or restarts the whole job
  (counting toward the same 3) with restartJobOnWorkerRestart;
* a preempted SPOT replica gets SIGTERM and the notice period, then the whole job restarts, at most 6 times;
  an exit that came before the SIGTERM stands (a job that had finished succeeds, one that crashed fails);
* disableRetries turns every restart off.
Before a restart or an end, every replica is stopped: SIGTERM to its process group, SIGKILL after the grace.

A job that a gang backend accepts (Slurm) is submitted whole instead: kinds/custom_jobs/gang.py.
"""

from __future__ import annotations

import logging
import random
import shutil
import signal
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, cast

from trainworks.backends.base import (
    Backend,
    BackendUnavailable,
    Capability,
    GangBackend,
    LaunchError,
    Phase,
    ProcessHandle,
    ReplicaStatus,
)
from trainworks.backends.capture import tail_text
from trainworks.backends.commands import TaskError
from trainworks.backends.exits import ExitWatcher
from trainworks.backends.gpus import devices_of
from trainworks.backends.memory_limits import OUT_OF_MEMORY
from trainworks.backends.python_packages import PackageEnvironments, PackageInstallError
from trainworks.config import Settings
from trainworks.contract.environment import task_name
from trainworks.jobs.enums import JobState
from trainworks.jobs.service_log import forget_service_log, log_service
from trainworks.jobs.store import ACTIVE_STATES
from trainworks.kernel.changes import ChangeFeed
from trainworks.kernel.loop import BUSY_INTERVAL, ReconcileLoop
from trainworks.kernel.request_load import RequestLoad
from trainworks.kernel.status import Code, status_dict
from trainworks.kernel.wire import format_timestamp, now_utc, parse_duration, parse_timestamp
from trainworks.kinds.custom_jobs.gang import GangJobs
from trainworks.kinds.custom_jobs.launcher import ReplicaLauncher
from trainworks.kinds.custom_jobs.rules import (
    FLEX_START_DEFAULT_WAIT,
    LIVE_PHASES,
    MAX_JOB_RETRIES,
    MAX_PREEMPTION_RESTARTS,
    MAX_WORKER_RESTARTS,
    TRANSIENT_EXIT_CODES,
    RestartKind,
    is_flex_start,
    is_spot,
    job_retries_left,
    job_timeout,
    preemption_chance,
    preemption_exposure,
    preemption_number,
    preemption_restarts_left,
    replica_task,
    restart_whole_job_on_worker_restart,
    retries_disabled,
    scheduling_of,
    succeeds_on_exit,
    worker_restarts_left,
)
from trainworks.kinds.custom_jobs.store import JobStore
from trainworks.observability.metrics import ServerMetrics, replica_count
from trainworks.ports import free_port
from trainworks.scheduling.admission import Decision, plan_admissions
from trainworks.scheduling.inventory import Inventory, default_inventory
from trainworks.scheduling.job_requests import allocation, job_request
from trainworks.store.crash_points import crash_point
from trainworks.store.tables import CustomJobRow, ReplicaRow

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
S = JobState
_DEFERRABLE_STATES = frozenset({int(S.JOB_STATE_QUEUED), int(S.JOB_STATE_PENDING)})
_HOLDING_STATES = frozenset({int(S.JOB_STATE_PENDING), int(S.JOB_STATE_RUNNING), int(S.JOB_STATE_CANCELLING)})
# Phases of replica runs that ended: the job acts on each (again, if a crash came before it had).
_ENDED = (Phase.EXITED.value, Phase.LOST.value)
# A SPOT job in a region with random preemptions rolls this often (rules.py's exposure makes the chance per
# roll fit the time since the last, so the period does not change the rate).
SPOT_ROLL_SECONDS = 1.0
# The slow resync reads the active jobs this many at a time, spread over `full_resync_seconds`.
RESYNC_CHUNK = 500
# A job whose pass failed is looked at again after this long (the failure is logged each time).
RETRY_SECONDS = 1.0
# (inventory, {(holding job id, zone)}, {queued job id}): everything an admission pass reads.
_PlanKey = tuple[Inventory, frozenset[tuple[int, str | None]], frozenset[int]]


def _same_key(a: _PlanKey, b: _PlanKey) -> bool:
    return a[0] is b[0] and a[1] == b[1] and a[2] == b[2]


def _exit_values(phase: Phase, code: int | None, detail: str) -> dict[str, Any]:
    """A replica row's values once it has ended."""
    return {"phase": phase.value, "exit_code": code, "detail": detail or None, "ended_at": now_utc()}


def _handle(replica: ReplicaRow) -> ProcessHandle | None:
    if replica.pid is None:
        return None
    return ProcessHandle(pid=replica.pid, pid_start=replica.pid_start or 0)


class CustomJobController(GangJobs, ReconcileLoop):
    name = "custom-job-controller"

    def __init__(
        self,
        settings: Settings,
        jobs: JobStore,
        backend: Backend,
        packages: PackageEnvironments,
        inventory: Inventory | None = None,
        gang: GangBackend | None = None,
        metrics: ServerMetrics | None = None,
        changes: ChangeFeed | None = None,
        requests: RequestLoad | None = None,
    ) -> None:
        self.settings = settings
        # The API's requests go first: launches and queued jobs' looks wait while they keep coming.
        self.requests = requests
        self._flooded = False  # the last pass stopped early: requests kept coming all the while
        self.inventory = inventory or default_inventory()
        self.jobs = jobs
        self.backend = backend
        if gang is not None and Capability.GANG not in gang.capabilities:
            raise ValueError(f"the {gang.name} backend does not start whole jobs")
        # Runs the jobs it accepts (Slurm) whole; every other job runs on `backend`, replica by replica.
        self.gang = gang
        self.launcher = ReplicaLauncher(settings, backend, packages)
        self.metrics = metrics or ServerMetrics()  # the server's /metrics (queue wait, restarts, passes)
        self._prepare_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="prepare")
        # Admission of jobs with persistentResourceId (kinds/persistent_resources/controller.py), when wired.
        self.persistent: Any = None
        # Package builds in flight: an optimisation only; a restarted server simply starts them again.
        self._preparing: dict[int, Future[dict[int, Path]]] = {}
        # Jobs this process admitted (QUEUED -> PENDING), by attempt, not planned since: they have no replica
        # rows of that attempt yet, so their start plans without looking for them (an optimisation only:
        # a restarted server looks).
        self._unplanned: dict[int, int] = {}
        # When each SPOT job last rolled for random preemption, and in which attempt (rules.py's
        # preemption_exposure); a restarted server starts the clock again, from when it started watching.
        self._rolled: dict[int, tuple[int, datetime]] = {}
        self._watching_since = now_utc()
        self._random = random.Random()
        # The last admission pass's input key and decision, reused while nothing it depends on changed; an
        # optimisation only (a restarted server plans again on its first pass).
        self._last_plan: tuple[_PlanKey, Decision] | None = None
        # What a pass looks at (all of it rebuilt by the first pass, so a restarted server starts afresh):
        # the active jobs as last read, the change feed's cursor, the jobs in motion (looked at on every
        # pass), the jobs an event named (a replica's exit, a package build done), and when each job with
        # a deadline (timeout, FLEX_START wait, SPOT roll) is due for a look.
        self.changes = changes or ChangeFeed(jobs.db)
        self.changes.subscribe(jobs.kind, self.wake)
        self.exits = ExitWatcher(self.poke)
        self._active: dict[int, CustomJobRow] = {}
        self._cursor: int | None = None
        self._next_chunk = float("inf")  # when the slow resync reads its next chunk (time.monotonic)
        self._chunk_after: int | None = None  # the last id it read; None: it starts over
        self._hot: set[int] = set()
        self._poked: set[int] = set()
        self._poke_lock = threading.Lock()
        self._due: dict[int, datetime] = {}
        self._replan = True
        # Replica exits seen by the pass over one job, not recorded yet (_poll_exits).
        self._exits: list[tuple[int, dict[str, Any]]] = []
        super().__init__(settings.resync_seconds)

    # -------------------------------------------------------------- loop
    def stop(self) -> None:
        super().stop()
        self.exits.close()
        self.changes.close()
        self._prepare_pool.shutdown(wait=False, cancel_futures=True)

    def wake(self) -> None:
        """Something changed (a job, a persistent resource): admission plans again on the next pass."""
        self._replan = True
        super().wake()

    def poke(self, job_id: int) -> None:
        """An event about one job (its replica ended, its packages are built): look at it on the next pass."""
        with self._poke_lock:
            self._poked.add(job_id)
        self.wake_event.set()

    def reconcile_once(self) -> bool:
        """One pass over the jobs that changed, that an event named, that are due or in motion (every active
        job on the first pass, a chunk of them on the slow resync); True while some job has live work."""
        if self._flooded:  # the last pass stopped for a flood of requests: its reading waits for them too
            self._flooded = False
            self._wait_for_requests()
        now = now_utc()
        try:
            work = self._refresh(now)
        except Exception:
            # The database failed (an outage): what happened meanwhile is read whole once it answers again.
            self._cursor = None
            raise
        replan, self._replan = self._replan, False
        if work or replan:
            jobs = sorted(self._active.values(), key=lambda j: (j.create_time, j.id))
            # Jobs on a persistent resource are admitted on its capacity, the rest by the scheduler.
            self._admit(self.persistent.admit(jobs) if self.persistent is not None else jobs)
        # Launches and queued jobs last, after the other jobs' work (stops, exits, outcomes): only they wait
        # for the API.
        ordered = sorted(work | self._hot, key=self._order)
        for index, job_id in enumerate(ordered):
            job = self._active.get(job_id)
            if job is None:
                self._forget(job_id)
                continue
            waited = self._wait_for_requests() if self._deferrable(job) else 0.0
            try:
                in_motion = self.reconcile(job)
            except Exception:
                log.exception("reconciling job %s failed", job.id)
                self._hot.discard(job_id)
                self._due[job_id] = now_utc() + timedelta(seconds=RETRY_SECONDS)
                continue
            if in_motion:
                self._hot.add(job_id)
            else:
                self._hot.discard(job_id)
            self._schedule(job)
            if self.requests is not None and waited >= self.requests.most and self.wake_event.is_set():
                # Requests kept coming all the while, and something changed meanwhile (a cancel, an exit): the
                # next pass looks at that first; the launches left wait for it (looked at on every pass).
                self._hot.update(ordered[index + 1 :])
                self._flooded = True
                break
            # The interpreter lock goes to a request waiting for it now, not after its switch interval (5 ms).
            time.sleep(0)
        return bool(self._hot)

    def _deferrable(self, job: CustomJobRow) -> bool:
        """Whether this job's work may wait while API requests keep arriving: a launch, or a queued job's
        look (its wait's limit); never a stop, an exit, an outcome or a running job's watch."""
        return job.outcome is None and job.delete_operation_id is None and job.state in _DEFERRABLE_STATES

    def _wait_for_requests(self) -> float:
        """Before deferrable work: wait while requests keep the server busy, boundedly (request_load.py)."""
        waited = 0.0 if self.requests is None else self.requests.defer()
        self.metrics.work_deferred(waited)
        return waited

    def next_wait(self, busy: bool) -> float:
        if busy:
            return BUSY_INTERVAL
        wait = self._next_chunk - time.monotonic()
        if self._due:
            wait = min(wait, (min(self._due.values()) - now_utc()).total_seconds())
        return max(wait, 0.0)

    def _order(self, job_id: int) -> tuple[bool, datetime, int]:
        """Launches and queued jobs after the other jobs' work; the oldest first within each."""
        job = self._active.get(job_id)
        if job is None:
            return (False, self._watching_since, job_id)
        return (self._deferrable(job), job.create_time, job_id)

    def _refresh(self, now: datetime) -> set[int]:
        """Bring the active jobs up to date; the ids this pass must look at besides the jobs in motion."""
        due = {job_id for job_id, when in self._due.items() if when <= now}
        if self._cursor is None:  # the first pass, or the first since the database failed: read everything
            # The cursor first: a change committed while the rows are read is read again, never missed.
            self._cursor = self.changes.head(self.name)
            self._active = {job.id: job for job in self.jobs.active()}
            for gone in set(self._due) | self._hot:
                if gone not in self._active:
                    self._forget(gone)
            self.changes.prune()
            self._replan = True
            self._take_pokes()
            self._chunk_after = None
            self._schedule_chunk()
            return set(self._active)
        work = self._resync_chunk() if time.monotonic() >= self._next_chunk else set()
        self._cursor, changed = self.changes.since(self.name, self._cursor, self.jobs.kind)
        if changed:
            fresh = {job.id: job for job in self.jobs.changed(changed)}
            for job_id in changed:
                job = fresh.get(job_id)
                if job is not None and (S(job.state) in ACTIVE_STATES or job.delete_operation_id is not None):
                    self._active[job_id] = job
                else:
                    self._forget(job_id)
        # Taken once the reads went through: an event must not be lost to a pass the database failed.
        return (work | changed | self._take_pokes() | due) & self._active.keys()

    def _resync_chunk(self) -> set[int]:
        """The safety net, should a change ever escape the feed: the next chunk of active jobs read again
        (every active job once per `full_resync_seconds`, spread out so that no pass is long); their ids."""
        rows = self.jobs.active_chunk(self._chunk_after, RESYNC_CHUNK)
        low = self._chunk_after
        last = len(rows) < RESYNC_CHUNK
        high = None if last else rows[-1].id
        read = {row.id for row in rows}
        for job_id in list(self._active):  # in the range read but no longer active
            if (low is None or job_id > low) and (high is None or job_id <= high) and job_id not in read:
                self._forget(job_id)
                self._replan = True
        for row in rows:
            if row.id not in self._active:
                self._replan = True  # an active job the feed never named
            self._active[row.id] = row
        self._chunk_after = high
        if last:  # a round is complete: what every consumer has read can go
            self.changes.prune()
        self._schedule_chunk()
        return read

    def _schedule_chunk(self) -> None:
        rounds_per_chunk = RESYNC_CHUNK / max(len(self._active), RESYNC_CHUNK)
        self._next_chunk = time.monotonic() + self.settings.full_resync_seconds * rounds_per_chunk

    def _take_pokes(self) -> set[int]:
        with self._poke_lock:
            poked, self._poked = self._poked, set()
        return poked

    def _forget(self, job_id: int) -> None:
        self._active.pop(job_id, None)
        self._unplanned.pop(job_id, None)
        self._hot.discard(job_id)
        self._due.pop(job_id, None)

    def _schedule(self, job: CustomJobRow) -> None:
        """When the job must be looked at again though nothing happens to it: its timeout, the end of its
        FLEX_START wait, its next SPOT roll."""
        if job.id not in self._active:
            return
        state = S(job.state)
        times: list[datetime] = []
        if job.outcome is None and job.start_time is not None and state != S.JOB_STATE_CANCELLING:
            times.append(job.start_time + job_timeout(job))
        if state == S.JOB_STATE_QUEUED and job.outcome is None:
            limit = self._flex_start_limit(job)
            if limit is not None:
                times.append(self._queued_since(job) + limit)
        if state == S.JOB_STATE_RUNNING and job.outcome is None and is_spot(job):
            region = self.inventory.region(job.location)
            if region is not None and region.preemption_rate_per_hour > 0:
                times.append(now_utc() + timedelta(seconds=SPOT_ROLL_SECONDS))
        if times:
            # Just past the deadline: the checks compare with a strict "longer than".
            self._due[job.id] = min(times) + timedelta(milliseconds=5)
        else:
            self._due.pop(job.id, None)

    # -------------------------------------------------------------- QUEUED
    def _admit(self, jobs: list[CustomJobRow]) -> None:
        """Gang admission of queued jobs into the capacity left by the jobs holding some (scheduling/)."""
        queued = [j for j in jobs if j.state == int(S.JOB_STATE_QUEUED) and j.outcome is None]
        if not queued:
            self._last_plan = None
            return
        holding_jobs = [j for j in jobs if j.state in _HOLDING_STATES and j.zone]
        # plan_admissions is pure: its result depends only on the inventory, the holding allocations and the
        # requests. A job's project, location, spec, labels and create time never change, so the ids (and
        # the zones of the holding jobs) stand for the whole input; the frozen inventory is compared by
        # identity. An unchanged key means the same decision: only the per-job time checks below run.
        key = (
            self.inventory,
            frozenset((j.id, j.zone) for j in holding_jobs),
            frozenset(j.id for j in queued),
        )
        pass_started: float | None = None
        if self._last_plan is not None and _same_key(self._last_plan[0], key):
            decision = self._last_plan[1]
        else:
            pass_started = time.perf_counter()
            holding = [  # holding jobs all have a zone
                allocation(j.id, j.project_number, j.location, cast(str, j.zone), j.spec)
                for j in holding_jobs
            ]
            requests = [
                job_request(j.id, j.project_number, j.location, j.spec, j.labels, j.create_time)
                for j in queued
            ]
            decision = plan_admissions(self.inventory, holding, requests)
            self._last_plan = (key, decision)
        self._admit_into_zones(queued, decision.admitted)
        reasons: dict[int, str] = {}  # written together, after the loop
        for job in queued:
            if job.id in decision.admitted:
                continue
            reason = decision.waiting.get(job.id, "waiting for capacity")
            if self._flex_start_expired(job, reason):
                continue
            if reason != job.waiting_reason:
                reasons[job.id] = reason
                job.waiting_reason = reason
                log_service(self.job_dir(job), f"Job is queued: {reason}.")
        self.jobs.set_waiting_reasons(reasons)
        if pass_started is not None:  # a real planning pass, not a reused decision
            self.metrics.scheduling_pass_done(time.perf_counter() - pass_started)

    def _admit_into_zones(self, queued: list[CustomJobRow], admitted: Mapping[int, str]) -> None:
        """QUEUED -> PENDING for the admitted jobs, one transaction per zone (a burst of creates is admitted
        together); a job cancelled meanwhile keeps its state."""
        by_zone: dict[str, list[CustomJobRow]] = {}
        for job in queued:
            zone = admitted.get(job.id)
            if zone is not None:
                by_zone.setdefault(zone, []).append(job)
        for zone, jobs in by_zone.items():
            moved = self.jobs.transition_many(
                [j.id for j in jobs],
                [S.JOB_STATE_QUEUED],
                state=S.JOB_STATE_PENDING,
                zone=zone,
                waiting_reason=None,
            )
            for job in jobs:
                if job.id in moved:
                    job.state, job.zone, job.waiting_reason = int(S.JOB_STATE_PENDING), zone, None
                    self._unplanned[job.id] = job.attempt
                    log_service(self.job_dir(job), f"Waiting for job to be provisioned in {zone}.")

    @staticmethod
    def _flex_start_limit(job: CustomJobRow) -> timedelta | None:
        """How long a FLEX_START job may wait for all its replicas together: maxWaitDuration (default 24 h);
        None when it waits forever (0) or is not FLEX_START."""
        if not is_flex_start(job):
            return None
        raw = scheduling_of(job).get("maxWaitDuration")
        limit = parse_duration(raw) if raw else FLEX_START_DEFAULT_WAIT
        return limit if limit > timedelta(0) else None

    @staticmethod
    def _queued_since(job: CustomJobRow) -> datetime:
        history = job.history or []
        return parse_timestamp(history[-1]["time"]) if history else job.create_time

    def _flex_start_expired(self, job: CustomJobRow, reason: str) -> bool:
        """FLEX_START waits for all replicas together, up to maxWaitDuration (default 24 h, 0: forever)."""
        limit = self._flex_start_limit(job)
        if limit is None or now_utc() - self._queued_since(job) <= limit:
            return False
        seconds = int(limit.total_seconds())
        self._fail(
            job,
            Code.RESOURCE_EXHAUSTED,
            f"FLEX_START: the requested capacity was not available within maxWaitDuration ({seconds}s): "
            f"{reason}.",
        )
        return True

    # -------------------------------------------------------------- one job
    def job_dir(self, job: CustomJobRow) -> Path:
        return self.settings.jobs_dir / str(job.id)

    def reconcile(self, job: CustomJobRow) -> bool:
        if job.delete_operation_id is not None and S(job.state).terminal:
            self._finish_delete(job)
            return False
        state = S(job.state)
        if job.outcome is None and job.start_time is not None and state != S.JOB_STATE_CANCELLING:
            timeout = job_timeout(job)
            if now_utc() - job.start_time > timeout:  # whatever its retries
                self._fail(
                    job,
                    Code.DEADLINE_EXCEEDED,
                    f"The job ran longer than its timeout of {int(timeout.total_seconds())}s.",
                )
        if job.outcome is not None:
            return self._tear_down(job)
        if state == S.JOB_STATE_QUEUED:
            # Admission (_admit) moves it on when its replicas fit; a FLEX_START wait can run out meanwhile.
            return self._flex_start_expired(job, job.waiting_reason or "waiting for capacity")
        if state == S.JOB_STATE_PENDING:
            return self._start(job)
        if state == S.JOB_STATE_RUNNING:
            return self._watch(job)
        if state == S.JOB_STATE_CANCELLING:
            # Cancel always records an outcome; a row without one is repaired here.
            self.jobs.set_fields(job.id, outcome=self._cancel_outcome())
            return True
        return False

    @staticmethod
    def _cancel_outcome() -> dict[str, Any]:
        return {"state": int(S.JOB_STATE_CANCELLED), "error": status_dict(Code.CANCELLED, "CANCELED")}

    def _set_outcome(self, job: CustomJobRow, outcome: dict[str, Any]) -> bool:
        """Record how the job ends, with the replica exits that led to it (`_poll_exits`) in the same
        transaction: a crash cannot keep an exit and lose what it decided."""
        exits, self._exits = self._exits, []
        moved = self.jobs.record_replicas(job.id, exits, ACTIVE_STATES, outcome=outcome)
        if exits:
            crash_point("replica-exit-recorded")
        if moved:
            job.outcome = outcome
        return moved

    def _decide(
        self,
        job: CustomJobRow,
        state: JobState,
        error: dict[str, Any] | None = None,
        grace: float | None = None,
        preemption: bool = False,
    ) -> None:
        """Record how the job ends; replicas are stopped before the state becomes final. `preemption`: the
        end is a preemption's (a stock-out), which a completion seen before the notice is sent overrules."""
        outcome: dict[str, Any] = {"state": int(state), "error": error}
        if grace is not None:
            outcome["grace"] = grace
        if preemption:
            outcome["preemption"] = True
        if self._set_outcome(job, outcome) and error:
            log_service(self.job_dir(job), error["message"], severity="ERROR")

    def _fail(self, job: CustomJobRow, code: Code, message: str, grace: float | None = None) -> None:
        self._decide(job, S.JOB_STATE_FAILED, status_dict(code, message), grace)

    def _restart(self, job: CustomJobRow, kind: RestartKind, reason: str, grace: float | None = None) -> None:
        """Stop every replica, then run the job again from the start (its checkpoint directory is kept)."""
        outcome: dict[str, Any] = {"restart": kind, "reason": reason}
        if grace is not None:
            outcome["grace"] = grace
        if self._set_outcome(job, outcome):
            log_service(self.job_dir(job), f"{reason} The job will be restarted.", severity="WARNING")

    # -------------------------------------------------------------- PENDING
    def _plan(self, job: CustomJobRow) -> list[ReplicaRow]:
        taken = self.jobs.ports_in_use()
        rows: list[ReplicaRow] = []
        for pool, spec in enumerate(job.spec["jobSpec"]["workerPoolSpecs"]):
            for index in range(int(spec.get("replicaCount", 0) or 0)):
                run_dir = self.job_dir(job) / task_name(pool, index)
                # Records of an earlier attempt (all of whose replicas have stopped) must not be adopted.
                for stale in ("shim.json", "exit.json"):
                    (run_dir / stale).unlink(missing_ok=True)
                rows.append(
                    ReplicaRow(
                        job_id=job.id,
                        pool=pool,
                        replica_index=index,
                        host=LOOPBACK,
                        port=free_port(LOOPBACK, taken),
                        phase="planned",
                        run_dir=str(run_dir),
                        attempt=job.attempt,
                    )
                )
        return self.jobs.add_replicas(rows)

    def _prepared(self, job: CustomJobRow) -> Future[dict[int, Path]]:
        future = self._preparing.get(job.id)
        if future is None:
            if self.launcher.needs_preparation(job):
                future = self._prepare_pool.submit(self.launcher.prepare, job, self.job_dir(job))
                job_id = job.id
                future.add_done_callback(lambda _f: self.poke(job_id))
            else:  # nothing to prepare: start now, not after a trip through the pool and another pass
                future = Future()
                future.set_result({})
            self._preparing[job.id] = future
        return future

    def _start(self, job: CustomJobRow) -> bool:
        if self._unplanned.pop(job.id, None) == job.attempt:
            replicas = self._plan(job)
        else:
            replicas = self.jobs.replicas(job.id, job.attempt) or self._plan(job)
        future = self._prepared(job)
        if not future.done():
            return False  # the build pokes the job when it is done
        try:
            pythons = future.result()
        except (PackageInstallError, OSError) as exc:
            self._preparing.pop(job.id, None)
            self._fail(job, Code.FAILED_PRECONDITION, f"The job could not be prepared: {exc}")
            return True
        try:
            gang = self._gang_for(job, replicas)
        except TaskError as exc:
            self._preparing.pop(job.id, None)
            self._fail(job, Code.FAILED_PRECONDITION, f"The job cannot run: {exc}")
            return True
        if gang is not None:
            return self._start_gang(job, replicas, pythons, gang)
        log_service(self.job_dir(job), "Waiting for training program to start.")
        first_start = job.start_time is None
        if not self._launch_planned(job, replicas, pythons, running=True):
            return True
        self._preparing.pop(job.id, None)
        if job.state == S.JOB_STATE_RUNNING:
            crash_point("job-running")
            if first_start:
                self.metrics.job_started(job.create_time)
            log_service(self.job_dir(job), "Job is running.")
        return True

    def _launch_planned(
        self, job: CustomJobRow, replicas: list[ReplicaRow], pythons: dict[int, Path], running: bool = False
    ) -> bool:
        """Start every planned replica of the current attempt; False when one could not start.

        The launched replicas are recorded together, once the last has started (or one failed to): one
        transaction, not one per replica. A crash in between leaves replicas running unrecorded, which the
        next attempt at this adopts (`_orphan`) instead of starting them twice. `running`: a PENDING job
        becomes RUNNING in that transaction when all started (job.state says whether it did)."""
        context = self.launcher.context(job, replicas)
        started: list[tuple[int, dict[str, Any]]] = []
        launched = True
        busy_gpus = self._busy_gpus()  # plus those of each replica started here, not yet recorded
        message = ""
        looped = False
        try:
            for replica in replicas:
                if replica.phase != "planned":
                    continue
                orphan = self._orphan(Path(replica.run_dir))
                if orphan is not None:  # started before a crash, never recorded: adopt it, not start twice
                    handle = orphan
                else:
                    try:
                        handle = self.launcher.launch(
                            job, replica, context, pythons.get(replica.pool), busy_gpus
                        )
                    except (TaskError, LaunchError) as exc:
                        message = f"The replica {replica_task(replica)} could not start: {exc}"
                        launched = False
                        break
                if self.launcher.gpus:
                    busy_gpus |= devices_of(Path(replica.run_dir))
                values = {"phase": "running", "pid": handle.pid, "pid_start": handle.pid_start}
                started.append((replica.id, {**values, "started_at": now_utc()}))
                replica.phase = "running"
            looped = True
        finally:  # whatever stopped the loop, what did start is recorded (and so stopped with the job)
            move = running and launched and looped
            # startTime is the first entry into RUNNING, recorded with it: a crash between cannot lose it.
            start_time = job.start_time or now_utc()
            moved_to = {"state": S.JOB_STATE_RUNNING, "start_time": start_time} if move else {}
            if (
                self.jobs.record_replicas(job.id, started, [S.JOB_STATE_PENDING] if move else (), **moved_to)
                and move
            ):
                job.state, job.start_time = int(S.JOB_STATE_RUNNING), start_time
        if not launched:
            self._fail(job, Code.FAILED_PRECONDITION, message)
        return launched

    def _orphan(self, run_dir: Path) -> ProcessHandle | None:
        """A replica started in run_dir before a crash but never recorded, on a backend that can adopt one."""
        return self.backend.find(run_dir) if Capability.ADOPT in self.backend.capabilities else None

    def _busy_gpus(self) -> set[int]:
        """GPU indices held by live replicas (recorded in their run folders); empty on GPU-less hosts."""
        if not self.launcher.gpus:
            return set()
        busy: set[int] = set()
        for run_dir in self.jobs.live_replica_dirs():
            busy |= devices_of(Path(run_dir))
        return busy

    # -------------------------------------------------------------- RUNNING
    def _random_preemptions(self, job: CustomJobRow, replicas: list[ReplicaRow]) -> None:
        """The region's random preemption rate (expected preemptions per replica-hour) for SPOT replicas."""
        region = self.inventory.region(job.location)
        rate = region.preemption_rate_per_hour if region is not None else 0.0
        now = now_utc()
        started = min((r.started_at for r in replicas if r.started_at is not None), default=None)
        seconds = preemption_exposure(
            now, job.attempt, self._rolled.get(job.id), started, self._watching_since
        )
        self._rolled[job.id] = (job.attempt, now)
        if rate <= 0 or not is_spot(job):
            return
        chance = preemption_chance(rate, seconds)
        for replica in replicas:
            if (
                replica.phase == "running"
                and not replica.preempt_requested
                and self._random.random() < chance
            ):
                self.jobs.update_replica(replica.id, preempt_requested=True)
                replica.preempt_requested = True
                log_service(
                    self.job_dir(job), f"Random preemption of {replica_task(replica)} in {job.location}."
                )

    def _watch(self, job: CustomJobRow) -> bool:
        replicas = self.jobs.replicas(job.id, job.attempt)
        gang = self._gang_of(replicas)
        # Exits before preemptions: a preemption only lands when the teardown signals the replicas, so an exit
        # seen now happened first. A job whose primary replica exited 0 just before has succeeded: it must
        # not be restarted (or failed with a stock-out) for a reclaim that came too late.
        if gang is None and self._poll_exits(job, replicas):
            if job.outcome is not None and not any(r.phase in LIVE_PHASES for r in replicas):
                return self._tear_down(job, replicas)  # nothing left to stop: end it in this pass
            return True
        self._random_preemptions(job, replicas)  # of the replicas still running
        preempted = [r for r in replicas if r.preempt_requested and r.phase in LIVE_PHASES]
        if preempted:
            self._preempt(job, [replica_task(r) for r in preempted])
            crash_point("preemption-decided")
            # Delivered now (SIGTERM, then the notice), not on the next pass: a pass that starts many
            # replicas takes seconds, and a reclaim does not wait while the job trains on.
            return self._tear_down(job) if job.outcome is not None else True
        if gang is not None:
            try:
                statuses = gang.poll_gang(self._gang_members(replicas))
            except BackendUnavailable as exc:
                log.warning("job %s: %s backend unavailable: %s", job.id, gang.name, exc)
                return True
            return self._watch_gang(job, replicas, statuses)
        if any(r.phase == "planned" for r in replicas):  # a worker restarting on its own
            future = self._prepared(job)
            if future.done():
                try:
                    self._launch_planned(job, replicas, future.result())
                except (PackageInstallError, OSError) as exc:
                    self._fail(job, Code.FAILED_PRECONDITION, f"The job could not be prepared: {exc}")
            return True
        return not self._exits_watched(job, replicas)

    def _exits_watched(self, job: CustomJobRow, replicas: list[ReplicaRow]) -> bool:
        """Have each running replica's end wake this job (instead of a poll on every pass); False where the
        host cannot, and the job is polled."""
        if not ExitWatcher.supported():
            return False
        for replica in replicas:
            handle = _handle(replica)
            if replica.phase == "running" and handle is not None:
                self.exits.watch(handle.pid, handle.pid_start, job.id)
        return True

    def _poll_exits(self, job: CustomJobRow, replicas: list[ReplicaRow]) -> bool:
        """Record the replicas that ended and act on the first that decides something; True when one did.
        The exits seen here are recorded with the decision they lead to (`_set_outcome`), in one transaction;
        those that decide nothing, on their own."""
        try:
            for replica in replicas:
                handle = _handle(replica)
                fresh = replica.phase == "running"
                if replica.phase in _ENDED:
                    # Its end was recorded but the server stopped before acting on it: act on it now.
                    status = ReplicaStatus(Phase(replica.phase), replica.exit_code, replica.detail or "")
                elif handle is None or not fresh:
                    continue
                else:
                    status = self.backend.poll(handle, Path(replica.run_dir))
                    if status.phase == Phase.RUNNING:
                        continue
                    self._exits.append(
                        (replica.id, _exit_values(status.phase, status.exit_code, status.detail))
                    )
                    replica.phase = status.phase.value  # it has ended: a preemption finds nothing to stop
                if status.phase == Phase.LOST:
                    self._lost(job, replica)
                    return True
                if self._exited(job, replica, status, announce=fresh):
                    return True
            return False
        finally:
            self._record_exits(job)  # those no decision took along (or all, when deciding failed)

    def _record_exits(self, job: CustomJobRow) -> None:
        exits, self._exits = self._exits, []
        if exits:
            self.jobs.record_replicas(job.id, exits)
            crash_point("replica-exit-recorded")

    def _exited(
        self, job: CustomJobRow, replica: ReplicaRow, status: ReplicaStatus, announce: bool = True
    ) -> bool:
        """Act on a replica's exit (a crash, or the primary's success); True when it decided the job's end.
        `announce`: log the exit (not again for one recorded before a crash)."""
        if announce:
            log_service(
                self.job_dir(job), f"Task {replica_task(replica)} completed. Exit code ({status.exit_code})."
            )
        if status.exit_code != 0:
            self._crashed(job, replica, status.exit_code or 0, status.detail)
            return True
        if succeeds_on_exit(replica, status.exit_code):
            self._decide(job, S.JOB_STATE_SUCCEEDED)
            return True
        return False

    def _crashed(self, job: CustomJobRow, replica: ReplicaRow, code: int, detail: str) -> None:
        task = replica_task(replica)
        reason = detail or "Error"
        message = f"The replica {task} exited with a non-zero status of {code}. Termination reason: {reason}."
        tail = tail_text(replica.run_dir, "stderr")
        if tail:
            message += f"\n{tail}"
        if detail == OUT_OF_MEMORY:  # the OOM killer ended it (backends/memory_limits.py)
            message = f"The replica {task} ran out of memory and exited with a non-zero status of {code}."
        if code in TRANSIENT_EXIT_CODES and job_retries_left(job):
            self._restart(job, RestartKind.TRANSIENT, f"The replica {task} crashed ({detail or code}).")
            return
        self._fail(job, Code.INVALID_ARGUMENT, message)

    def _lost(self, job: CustomJobRow, replica: ReplicaRow) -> None:
        task = replica_task(replica)
        what = f"The replica {task} was lost: its process ended without reporting an exit status"
        if retries_disabled(job):
            self._fail(job, Code.INTERNAL, f"{what} (was it killed from outside?); retries are disabled.")
        elif restart_whole_job_on_worker_restart(job):
            if job_retries_left(job):
                self._restart(job, RestartKind.INTERNAL, f"{what}; restartJobOnWorkerRestart is set.")
            else:
                self._fail(
                    job, Code.INTERNAL, f"{what}; the job was already retried {MAX_JOB_RETRIES} times."
                )
        elif worker_restarts_left(replica):
            log_service(self.job_dir(job), f"{what}. Restarting it.", severity="WARNING")
            self._record_exits(job)  # the lost run's end before its next run's row
            self.metrics.replicas_restarted(RestartKind.WORKER)
            for stale in ("shim.json", "exit.json"):
                (Path(replica.run_dir) / stale).unlink(missing_ok=True)
            # A new run of the same replica (same address); the lost run keeps its row, times and cost.
            self.jobs.add_replicas(
                [
                    ReplicaRow(
                        job_id=job.id,
                        pool=replica.pool,
                        replica_index=replica.replica_index,
                        host=replica.host,
                        port=replica.port,
                        phase="planned",
                        run_dir=replica.run_dir,
                        attempt=replica.attempt,
                        restarts=replica.restarts + 1,
                    )
                ]
            )
        else:
            self._fail(
                job, Code.INTERNAL, f"{what}, and it was already restarted {MAX_WORKER_RESTARTS} times."
            )

    def _preempt(self, job: CustomJobRow, tasks: list[str], by: str | None = None) -> None:
        """`by`: what preempted the replicas, when it was not a Spot VM reclaim (Slurm)."""
        notice = self.settings.preemption_notice_seconds
        preemptions = preemption_number(job)
        names = ", ".join(tasks)
        what = f"{by}: {names} was preempted" if by else f"the Spot VM of {names} was preempted"
        if not preemption_restarts_left(job):
            limit = (
                "retries are disabled"
                if retries_disabled(job)
                else (f"it was already restarted {MAX_PREEMPTION_RESTARTS} times")
            )
            self._decide(
                job,
                S.JOB_STATE_FAILED,
                status_dict(
                    Code.RESOURCE_EXHAUSTED,
                    f"STOCKOUT: {what} and {limit}. Resources are insufficient "
                    f"in region: {job.location}. Try a different region or use a different accelerator.",
                ),
                grace=notice,
                preemption=True,
            )
            return
        cause = f"{by}: {names}" if by else f"Spot VM preempted: {names}"
        self._restart(job, RestartKind.PREEMPTION, f"{cause} (preemption {preemptions}).", grace=notice)

    def _record_exit(self, replica: ReplicaRow, phase: Phase, code: int | None, detail: str) -> None:
        self.jobs.record_replicas(replica.job_id, [(replica.id, _exit_values(phase, code, detail))])

    # -------------------------------------------------------------- teardown
    def _tear_down(self, job: CustomJobRow, replicas: list[ReplicaRow] | None = None) -> bool:
        """`replicas`: the current attempt's, when the caller has just read them."""
        assert job.outcome is not None
        self._preparing.pop(job.id, None)
        if replicas is None:
            replicas = self.jobs.replicas(job.id, job.attempt)
        gang = self._gang_of(replicas)
        if gang is not None:
            try:
                if self._stop_gang(job, replicas, gang):
                    return True
            except BackendUnavailable as exc:
                log.warning("job %s: %s backend unavailable: %s", job.id, gang.name, exc)
                return True
        elif self._stop_local(job, replicas):
            return True
        self.launcher.remove_leftovers(job, [r for r in replicas if r.phase != "skipped"])
        if "restart" in job.outcome:
            self._begin_next_attempt(job)
            return True
        self._rolled.pop(job.id, None)
        state = S(job.outcome["state"])
        done = self.jobs.transition(
            job.id,
            ACTIVE_STATES,
            state=state,
            error=job.outcome.get("error"),
            end_time=now_utc(),
            outcome=None,
        )
        if done:
            final = {
                S.JOB_STATE_SUCCEEDED: "Job completed successfully.",
                S.JOB_STATE_FAILED: "Job failed.",
                S.JOB_STATE_CANCELLED: "Job was cancelled.",
            }.get(state, f"Job ended in {state.name}.")
            log_service(self.job_dir(job), final)
        return False

    def _stop_local(self, job: CustomJobRow, replicas: list[ReplicaRow]) -> bool:
        """SIGTERM to every live replica, SIGKILL after the grace; True while some still run."""
        assert job.outcome is not None
        alive: list[ProcessHandle] = []
        for replica in replicas:
            handle = _handle(replica)
            if replica.phase == "planned":
                self.jobs.update_replica(replica.id, phase="skipped")
                continue
            if handle is None or replica.phase != "running":
                continue
            status = self.backend.poll(handle, Path(replica.run_dir))
            if status.phase == Phase.RUNNING:
                alive.append(handle)
            else:
                self._record_exit(replica, status.phase, status.exit_code, status.detail or "stopped")
                self._completed_before_preemption(job, replica, status)
        if alive:
            now = now_utc()
            if job.teardown_started is None:
                log_service(self.job_dir(job), "Tearing down training program.")
                for handle in alive:
                    self.backend.signal(handle, signal.SIGTERM)
                self.jobs.set_fields(job.id, teardown_started=now)
            elif self._past_grace(job, now):
                for handle in alive:
                    self.backend.signal(handle, signal.SIGKILL)
            return True
        return False

    def _past_grace(self, job: CustomJobRow, now: datetime) -> bool:
        """Whether the teardown began longer ago than the job's grace (a preemption's notice, or the cancel
        grace): time for SIGKILL."""
        assert job.outcome is not None and job.teardown_started is not None
        grace = float(job.outcome.get("grace", self.settings.cancel_grace_seconds))
        return now - job.teardown_started > timedelta(seconds=grace)

    def _completed_before_preemption(
        self, job: CustomJobRow, replica: ReplicaRow, status: ReplicaStatus
    ) -> None:
        """A preemption was decided, and the primary replica exited 0 before it was delivered (no signal sent
        yet, or its supervisor saw the command end before the stop signal came): the job finished before the
        reclaim reached it, so it succeeded (no restart, no stock-out)."""
        assert job.outcome is not None
        if not (
            (job.teardown_started is None or status.interrupted is False)
            and (job.outcome.get("restart") == RestartKind.PREEMPTION or job.outcome.get("preemption"))
            and status.phase == Phase.EXITED
            and succeeds_on_exit(replica, status.exit_code)
        ):
            return
        outcome: dict[str, Any] = {"state": int(S.JOB_STATE_SUCCEEDED), "error": None}
        if "grace" in job.outcome:
            outcome["grace"] = job.outcome["grace"]
        # Not over a cancel that came meanwhile (CANCELLING): that one stands.
        if self.jobs.transition(job.id, [S.JOB_STATE_RUNNING], outcome=outcome):
            job.outcome = outcome
            log_service(
                self.job_dir(job),
                f"Task {replica_task(replica)} completed. Exit code (0). It finished before the preemption "
                "reached it: the job succeeded.",
            )

    def _begin_next_attempt(self, job: CustomJobRow) -> None:
        assert job.outcome is not None
        entry = {
            "attempt": job.attempt,
            "kind": job.outcome["restart"],
            "reason": job.outcome.get("reason", ""),
            "time": format_timestamp(now_utc()),
        }
        moved = self.jobs.transition(
            job.id,
            [S.JOB_STATE_PENDING, S.JOB_STATE_RUNNING],
            state=S.JOB_STATE_QUEUED,
            attempt=job.attempt + 1,
            history=[*(job.history or []), entry],
            outcome=None,
            teardown_started=None,
            zone=None,
        )
        if moved:
            log_service(self.job_dir(job), f"Restarting the job: attempt {job.attempt + 2}.")
            self.metrics.replicas_restarted(job.outcome["restart"], replica_count(job.spec))
        elif S(self.jobs.get(job.id).state) == S.JOB_STATE_CANCELLING:  # type: ignore[union-attr]
            self.jobs.set_fields(job.id, outcome=self._cancel_outcome())  # cancelled while restarting

    # -------------------------------------------------------------- delete
    def _finish_delete(self, job: CustomJobRow) -> None:
        forget_service_log(self.job_dir(job))
        shutil.rmtree(self.job_dir(job), ignore_errors=True)
        self.jobs.remove(job.id, finish_operation=job.delete_operation_id)
