"""How a CustomJob's scheduling settings govern its run: timeouts, retry limits, restart kinds (pure)."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from trainworks.jobs.enums import Strategy
from trainworks.kernel.wire import parse_duration
from trainworks.kinds.custom_jobs.wire import DEFAULT_TIMEOUT
from trainworks.store.tables import CustomJobRow

MAX_PREEMPTION_RESTARTS = 6  # Spot VMs: "Compute Engine tries to restart the job up to six times"
MAX_JOB_RETRIES = 3  # transient crashes and lost workers that restart the whole job
MAX_WORKER_RESTARTS = 5  # a lost worker restarted on its own
TRANSIENT_EXIT_CODES = {134, 139, 6, 11}  # SIGABRT, SIGSEGV (as 128+n, or raw from some runtimes)
FLEX_START_DEFAULT_WAIT = timedelta(hours=24)
FLEX_START_MAX_RUN = timedelta(days=7)


def scheduling_of(job: CustomJobRow) -> dict[str, Any]:
    return job.spec["jobSpec"].get("scheduling") or {}


def job_timeout(job: CustomJobRow) -> timedelta:
    scheduling = scheduling_of(job)
    timeout = parse_duration(scheduling["timeout"]) if scheduling.get("timeout") else DEFAULT_TIMEOUT
    return min(timeout, FLEX_START_MAX_RUN) if is_flex_start(job) else timeout


def is_flex_start(job: CustomJobRow) -> bool:
    return scheduling_of(job).get("strategy") in (Strategy.FLEX_START.name, int(Strategy.FLEX_START))


def is_spot(job: CustomJobRow) -> bool:
    strategy = scheduling_of(job).get("strategy")
    return strategy in (Strategy.SPOT.name, int(Strategy.SPOT))


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
