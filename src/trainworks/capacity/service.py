"""The capacity preflight (a Trainworks extension): checks the machine shape asked about, reads the jobs
holding capacity the way the job controller's admission does, and answers the report in camelCase JSON."""

from __future__ import annotations

import difflib
from typing import Any

from trainworks.catalog import machines as catalog
from trainworks.jobs.enums import JobState
from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.projects import Projects
from trainworks.kernel.wire import format_timestamp, now_utc
from trainworks.kinds.custom_jobs.service import CustomJobService
from trainworks.kinds.persistent_resources.service import job_resource_id
from trainworks.scheduling.admission import Allocation
from trainworks.scheduling.capacity_report import (
    CapacityReport,
    QuotaUsage,
    ReplicaShape,
    capacity_report,
)
from trainworks.scheduling.inventory import Inventory, accelerator_names
from trainworks.scheduling.job_requests import allocation

S = JobState
# The states in which a job holds its machines, as the job controller's admission counts them.
HOLDING_STATES = {int(S.JOB_STATE_PENDING), int(S.JOB_STATE_RUNNING), int(S.JOB_STATE_CANCELLING)}


class CapacityService:
    def __init__(self, jobs: CustomJobService, projects: Projects, inventory: Inventory) -> None:
        self.jobs = jobs
        self.projects = projects
        self.inventory = inventory

    def report(
        self,
        project: str,
        location: str,
        machine_type: str = "",
        accelerator_type: str = "",
        accelerator_count: str = "",
    ) -> dict[str, Any]:
        """``GET .../capacity``: the report, and for a shape (``machineType`` given) how many replicas fit."""
        shape = parse_shape(machine_type, accelerator_type, accelerator_count)
        number = self.projects.number(project, location)
        report = capacity_report(self.inventory, self.holding(), number, location, shape)
        return report_wire(report, f"projects/{number}/locations/{location}")

    def holding(self) -> list[Allocation]:
        """Every job holding capacity now. Jobs on a persistent resource use the resource's capacity, not the
        inventory's, so admission leaves them out, as here."""
        return [
            allocation(j.id, j.project_number, j.location, j.zone, j.spec)
            for j in self.jobs.active_jobs()
            if j.state in HOLDING_STATES and j.zone and not job_resource_id(j.spec)
        ]


def parse_shape(machine_type: str, accelerator_type: str, accelerator_count: str) -> ReplicaShape | None:
    """The shape named by the query parameters, or None when none is; 400 naming the parameter when bad.

    A machine type with built-in accelerators (a2, a3, g2) may leave them out; if given they must match."""
    machine_type, accelerator_type = machine_type.strip(), accelerator_type.strip()
    count = _count(accelerator_count)
    if not machine_type:
        if accelerator_type or count:
            raise invalid_argument(
                [FieldViolation("machineType", "required when acceleratorType or acceleratorCount is given")]
            )
        return None
    machine = catalog.machine_type(machine_type)
    if machine is None:
        hint = catalog.suggest(machine_type)
        more = f"; did you mean {', '.join(hint)}?" if hint else ""
        raise invalid_argument(
            [FieldViolation("machineType", f"unknown machine type {machine_type!r}{more}")]
        )
    if accelerator_type == catalog.UNSPECIFIED:
        accelerator_type = ""
    if accelerator_type and catalog.accelerator(accelerator_type) is None:
        close = difflib.get_close_matches(accelerator_type.upper(), accelerator_names(), n=3, cutoff=0.6)
        more = f"; did you mean {', '.join(close)}?" if close else ""
        raise invalid_argument(
            [FieldViolation("acceleratorType", f"unknown accelerator type {accelerator_type!r}{more}")]
        )
    if machine.accelerator_type is not None:  # built in: may be left out
        accelerator_type = accelerator_type or machine.accelerator_type
        count = count or machine.accelerator_count
    problem = catalog.check_accelerator(machine, accelerator_type or catalog.UNSPECIFIED, count)
    if problem:
        # The count is at fault when the type itself suits the machine.
        suits = accelerator_type and (
            machine.accelerator_type == accelerator_type
            if machine.accelerator_type is not None
            else _attachable(machine, accelerator_type)
        )
        raise invalid_argument([FieldViolation("acceleratorCount" if suits else "acceleratorType", problem)])
    return ReplicaShape(machine_type, accelerator_type or None, count if accelerator_type else 0)


def _attachable(machine: catalog.MachineType, accelerator_type: str) -> bool:
    info = catalog.accelerator(accelerator_type)
    return info is not None and machine.family in info.allowed_families


def _count(raw: str) -> int:
    raw = raw.strip()
    if not raw:
        return 0
    try:
        count = int(raw)
    except ValueError:
        raise invalid_argument(
            [FieldViolation("acceleratorCount", f"expected a whole number, got {raw!r}")]
        ) from None
    if count < 0:
        raise invalid_argument([FieldViolation("acceleratorCount", f"must be >= 0, got {count}")])
    return count


def _quota_wire(quota: QuotaUsage) -> dict[str, Any]:
    return {"limit": quota.limit, "used": quota.used, "free": quota.free}


def report_wire(report: CapacityReport, parent: str) -> dict[str, Any]:
    """camelCase JSON; null counts mean unlimited. ``shape``, with its replica counts, only when asked."""
    wire: dict[str, Any] = {
        "parent": parent,
        "location": report.location,
        "region": report.region,
        "served": report.served,
        "stockout": report.stockout,
        "asOf": format_timestamp(now_utc()),
        "quota": {
            "vcpus": None if report.cpu_quota is None else _quota_wire(report.cpu_quota),
            "accelerators": {name: _quota_wire(q) for name, q in report.accelerator_quotas.items()},
        },
        "zones": [
            {
                "name": zone.name,
                "elastic": zone.machines is None,
                "machines": None
                if zone.machines is None
                else {
                    machine: {"total": c.total, "reserved": c.reserved, "free": c.free}
                    for machine, c in zone.machines.items()
                },
            }
            for zone in report.zones
        ],
    }
    shape = report.shape
    if shape is not None:
        wire["shape"] = {
            "machineType": shape.shape.machine_type,
            "acceleratorType": shape.shape.accelerator_type,
            "acceleratorCount": shape.shape.accelerator_count,
            "vcpusPerReplica": shape.vcpus,
            "acceleratorsPerReplica": dict(shape.accelerators),
            "quotaReplicas": shape.quota_replicas,
            "capacityReplicas": shape.capacity_replicas,
            "maxReplicas": shape.max_replicas,
            "limitedBy": shape.limited_by,
        }
    return wire
