"""From stored jobs to what the planner reads: demands per pool (with their reservation affinity), priority,
FIFO order. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from trainworks.scheduling.admission import (
    ANY_RESERVATION,
    NO_RESERVATION,
    SPECIFIC_RESERVATION,
    Allocation,
    Demand,
    JobRequest,
)

PRIORITY_LABEL = "trainworks-priority"


def demands_of(job_spec: Mapping[str, Any]) -> tuple[Demand, ...]:
    demands: list[Demand] = []
    for pool in job_spec.get("workerPoolSpecs", []):
        count = int(pool.get("replicaCount", 0) or 0)
        if count <= 0:
            continue
        machine = pool.get("machineSpec") or {}
        accelerator = machine.get("acceleratorType")
        affinity, reservation = reservation_affinity_of(machine)
        demands.append(
            Demand(
                machine_type=machine.get("machineType", ""),
                count=count,
                accelerator_type=accelerator if accelerator != "ACCELERATOR_TYPE_UNSPECIFIED" else None,
                accelerator_count=int(machine.get("acceleratorCount", 0) or 0),
                reservation_affinity=affinity,
                reservation=reservation,
            )
        )
    return tuple(demands)


_AFFINITY_NUMBERS = {1: NO_RESERVATION, 2: ANY_RESERVATION, 3: SPECIFIC_RESERVATION}


def reservation_affinity_of(machine_spec: Mapping[str, Any]) -> tuple[str, str | None]:
    """(affinity type, reservation named by SPECIFIC_RESERVATION) of a stored machineSpec.

    Unset, TYPE_UNSPECIFIED and anything unknown act as NO_RESERVATION (see scheduling.admission)."""
    affinity = machine_spec.get("reservationAffinity") or {}
    kind = affinity.get("reservationAffinityType")
    if isinstance(kind, int):  # an enum stored by number
        kind = _AFFINITY_NUMBERS.get(kind)
    if kind == SPECIFIC_RESERVATION:
        values = affinity.get("values") or []
        return kind, str(values[0]) if values else ""
    if kind == ANY_RESERVATION:
        return kind, None
    return NO_RESERVATION, None


def priority_of(labels: Mapping[str, str]) -> int:
    """The `trainworks-priority` label (an integer, higher first); 0 when absent."""
    try:
        return int(labels.get(PRIORITY_LABEL, "0"))
    except ValueError:
        return 0


def job_request(
    job_id: int,
    project: str,
    location: str,
    spec: Mapping[str, Any],
    labels: Mapping[str, str],
    created: datetime,
) -> JobRequest:
    return JobRequest(
        job_id=job_id,
        project=project,
        location=location,
        priority=priority_of(labels),
        order=(created, job_id),
        demands=demands_of(spec.get("jobSpec", {})),
    )


def allocation(
    job_id: int,
    project: str,
    location: str,
    zone: str,
    spec: Mapping[str, Any],
    reservations: tuple[tuple[str, int], ...] | None = None,
) -> Allocation:
    """A job holding capacity. ``reservations``: what it takes from each reservation, when recorded (e.g. from
    ``Decision.reservations`` at admission); None re-derives it from the spec and zone (see admission)."""
    return Allocation(job_id, project, location, zone, demands_of(spec.get("jobSpec", {})), reservations)
