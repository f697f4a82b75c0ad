"""The rules of a CustomJob's run (pure, no I/O): how its replicas are named, when it succeeds, and how its
scheduling settings govern it: timeouts, SPOT, retry, restart and preemption limits."""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from trainworks.contract.environment import POOL_NAMES, task_name
from trainworks.jobs.enums import Strategy
from trainworks.kernel.wire import parse_duration
from trainworks.kinds.custom_jobs.wire import DEFAULT_TIMEOUT
from trainworks.store.tables import CustomJobRow, ReplicaRow

MAX_PREEMPTION_RESTARTS = 6  # Spot VMs: "Compute Engine tries to restart the job up to six times"
MAX_JOB_RETRIES = 3  # transient crashes and lost workers that restart the whole job
MAX_WORKER_RESTARTS = 5  # a lost worker restarted on its own
TRANSIENT_EXIT_CODES = {134, 139, 6, 11}  # SIGABRT, SIGSEGV (as 128+n, or raw from some runtimes)
FLEX_START_DEFAULT_WAIT = timedelta(hours=24)
FLEX_START_MAX_RUN = timedelta(days=7)


class RestartKind(enum.StrEnum):
    """Why a job or a replica ran again: the `kind` of a restart history entry and of the restart metric."""

    TRANSIENT = "transient"  # a replica crashed with a transient exit code: the whole job
    INTERNAL = "internal"  # a lost replica restarted the whole job
    PREEMPTION = "preemption"  # a preempted replica restarted the whole job
    WORKER = "worker"  # a lost replica restarted on its own


# A task (replica) name, as a shell or a preemption names one: workerpool{P}-{i} (contract's task_name).
TASK_NAME = re.compile(rf"^(?:{'|'.join(POOL_NAMES)})-\d+$")
PRIMARY = (0, 0)  # (pool, index) of the primary replica, whose exit 0 ends the job
LIVE_PHASES = ("planned", "running")  # a replica row in one of these still has (or will have) a process


def replica_task(replica: ReplicaRow) -> str:
    return task_name(replica.pool, replica.replica_index)


def is_task_name(text: str) -> bool:
    return TASK_NAME.match(text) is not None


def is_primary(replica: ReplicaRow) -> bool:
    return (replica.pool, replica.replica_index) == PRIMARY


def succeeds_on_exit(replica: ReplicaRow, exit_code: int | None) -> bool:
    """A job SUCCEEDS when its primary replica (workerpool0-0) exits 0."""
    return exit_code == 0 and is_primary(replica)


def scheduling_of(job: CustomJobRow) -> dict[str, Any]:
    return job.spec["jobSpec"].get("scheduling") or {}


def job_timeout(job: CustomJobRow) -> timedelta:
    scheduling = scheduling_of(job)
    timeout = parse_duration(scheduling["timeout"]) if scheduling.get("timeout") else DEFAULT_TIMEOUT
    return min(timeout, FLEX_START_MAX_RUN) if is_flex_start(job) else timeout


def is_flex_start(job: CustomJobRow) -> bool:
    return scheduling_of(job).get("strategy") in (Strategy.FLEX_START.name, int(Strategy.FLEX_START))


def spec_is_spot(spec: Mapping[str, Any]) -> bool:
    """Whether a stored job spec asks for Spot VMs (scheduling.strategy SPOT): preemptible, Spot-priced."""
    strategy = ((spec.get("jobSpec") or {}).get("scheduling") or {}).get("strategy")
    return strategy in (Strategy.SPOT.name, int(Strategy.SPOT))


def is_spot(job: CustomJobRow) -> bool:
    return spec_is_spot(job.spec)


def retries_disabled(job: CustomJobRow) -> bool:
    return bool(scheduling_of(job).get("disableRetries"))


def restart_whole_job_on_worker_restart(job: CustomJobRow) -> bool:
    return bool(scheduling_of(job).get("restartJobOnWorkerRestart")) and not retries_disabled(job)


def preemption_chance(rate_per_hour: float, seconds: float) -> float:
    """Probability of at least one preemption in `seconds` for a Poisson rate per replica-hour. Pure."""
    return 1.0 - math.exp(-rate_per_hour * max(seconds, 0.0) / 3600.0)


def preemption_exposure(
    now: datetime,
    attempt: int,
    last_roll: tuple[int, datetime] | None,
    attempt_start: datetime | None,
    watching_since: datetime,
) -> float:
    """Seconds of running that a random-preemption roll of a SPOT job covers. Pure.

    From the job's last roll (`last_roll`: its attempt and time) when that was in this attempt; otherwise from
    when the attempt's replicas started, not from when a pass first saw them (with many jobs a pass can take
    seconds). Never from before `watching_since` (a restarted server starts the clock again), and never
    across the time a restarted job waited in the queue: that is no replica's running time."""
    if last_roll is not None and last_roll[0] == attempt:
        start = last_roll[1]
    else:
        start = max(attempt_start or now, watching_since)
    return max((now - start).total_seconds(), 0.0)


def restarts_of(job: CustomJobRow, *kinds: str) -> int:
    return sum(1 for entry in job.history or [] if entry.get("kind") in kinds)


def job_retries_left(job: CustomJobRow) -> bool:
    """Whether a transient crash or a lost replica may restart the whole job again (at most 3 times)."""
    return (
        not retries_disabled(job)
        and restarts_of(job, RestartKind.TRANSIENT, RestartKind.INTERNAL) < MAX_JOB_RETRIES
    )


def worker_restarts_left(replica: ReplicaRow) -> bool:
    """Whether a lost replica may be restarted on its own again (at most 5 times)."""
    return replica.restarts < MAX_WORKER_RESTARTS


def preemption_number(job: CustomJobRow) -> int:
    """Which preemption of the job the next one is (1 first)."""
    return restarts_of(job, RestartKind.PREEMPTION) + 1


def preemption_restarts_left(job: CustomJobRow) -> bool:
    """Whether the next preemption restarts the job (at most 6 times) rather than failing it."""
    return not retries_disabled(job) and preemption_number(job) <= MAX_PREEMPTION_RESTARTS
