"""From stored jobs to what the planner reads: demands per pool, priority, FIFO order. Pure."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from trainworks.scheduling.admission import Allocation, Demand, JobRequest

PRIORITY_LABEL = "trainworks-priority"


def demands_of(job_spec: Mapping[str, Any]) -> tuple[Demand, ...]:
    demands: list[Demand] = []
    for pool in job_spec.get("workerPoolSpecs", []):
        count = int(pool.get("replicaCount", 0) or 0)
        if count <= 0:
            continue
        machine = pool.get("machineSpec") or {}
        accelerator = machine.get("acceleratorType")
        demands.append(
            Demand(
                machine_type=machine.get("machineType", ""),
                count=count,
                accelerator_type=accelerator if accelerator != "ACCELERATOR_TYPE_UNSPECIFIED" else None,
                accelerator_count=int(machine.get("acceleratorCount", 0) or 0),
            )
        )
    return tuple(demands)


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


def allocation(job_id: int, project: str, location: str, zone: str, spec: Mapping[str, Any]) -> Allocation:
    return Allocation(job_id, project, location, zone, demands_of(spec.get("jobSpec", {})))
