"""What one CustomJob costs: its replicas as billed intervals (catalog/billing.py prices them).

One interval per replica row that started, of every attempt, from ``started_at`` to ``ended_at`` (a running
replica counts up to now), priced as its pool's ``machineSpec`` (attached accelerators included) at the Spot
price when ``scheduling.strategy`` is SPOT. A job that runs on a persistent resource consumes capacity the
resource already pays for: its intervals carry ``billed_to`` (the resource's name), so they count as the
job's machine-hours and as ``coveredUsd``, not as its ``costUsd``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from trainworks.catalog.billing import BilledInterval, MachineShape, Usage, summarize, summary_wire
from trainworks.contract.environment import POOL_NAMES
from trainworks.jobs.enums import JobState
from trainworks.kernel.names import custom_job_name, parent_name
from trainworks.kernel.wire import now_utc
from trainworks.kinds.custom_jobs.rules import spec_is_spot
from trainworks.store.tables import CustomJobRow, ReplicaRow

S = JobState
_ENDED_PHASES = ("exited", "lost", "skipped")


def job_intervals(
    job: CustomJobRow, replicas: Iterable[ReplicaRow], resource_name: str | None = None
) -> tuple[BilledInterval, ...]:
    """One interval per replica that started, of every attempt, priced as its pool's machine.

    A replica still running has no end (it counts up to now). One that stopped without an ``ended_at``
    ends at the job's ``endTime`` when the job has one (else it is not billed further). ``resource_name``:
    the persistent resource the job runs on, which pays for these intervals.
    """
    job_spec = job.spec.get("jobSpec") or {}
    pools = job_spec.get("workerPoolSpecs") or []
    spot = spec_is_spot(job.spec)
    shapes = [MachineShape.from_machine_spec((pool or {}).get("machineSpec")) for pool in pools]
    out: list[BilledInterval] = []
    for replica in replicas:
        if replica.started_at is None or not 0 <= replica.pool < len(shapes):
            continue
        end: datetime | None
        if replica.phase == "running":
            end = job.end_time  # None while the job runs
        elif replica.ended_at is not None and replica.ended_at >= replica.started_at:
            end = replica.ended_at
        elif replica.phase in _ENDED_PHASES and job.end_time is not None:
            end = job.end_time
        else:  # planned again after an in-place restart, or no record of its end: no further charge
            end = replica.ended_at if replica.ended_at is not None else replica.started_at
        out.append(
            BilledInterval(
                group=POOL_NAMES[replica.pool] if replica.pool < len(POOL_NAMES) else f"pool{replica.pool}",
                shape=shapes[replica.pool],
                spot=spot,
                start=replica.started_at,
                end=end,
                billed_to=resource_name,
            )
        )
    return tuple(out)


def job_resource_name(job: CustomJobRow) -> str | None:
    """The persistent resource a job runs on (``jobSpec.persistentResourceId``), as a full name."""
    resource_id = (job.spec.get("jobSpec") or {}).get("persistentResourceId")
    if not resource_id:
        return None
    return f"{parent_name(job.project_number, job.location)}/persistentResources/{resource_id}"


def job_usage(job: CustomJobRow, replicas: Iterable[ReplicaRow]) -> Usage:
    return Usage(
        name=custom_job_name(job.project_number, job.location, job.id),
        display_name=job.display_name,
        state=S(job.state).name,
        intervals=job_intervals(job, replicas, job_resource_name(job)),
        kind="customJob",
        spot=spec_is_spot(job.spec),
        create_time=job.create_time,
        start_time=job.start_time,
        end_time=job.end_time,
    )


def job_cost(
    job: CustomJobRow, replicas: Iterable[ReplicaRow], now: datetime | None = None
) -> dict[str, Any]:
    """A job's ``cost`` for the status extension: totals and a breakdown per pool, up to ``now``."""
    now = now or now_utc()
    usage = job_usage(job, replicas)
    return summary_wire(summarize(usage.intervals, now), usage.spot, now)
