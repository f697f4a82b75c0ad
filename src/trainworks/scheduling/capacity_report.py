"""Capacity and quota preflight: what one project could get now in the region serving a location; pure.

Given the inventory and the allocations holding capacity now (the ones admission counts: see
:func:`trainworks.scheduling.admission.plan_admissions`), :func:`capacity_report` says:

* which region serves the location (the one of that name, else the inventory's default), and whether it is
  stocked out;
* the project's quota there: vCPUs and each accelerator, as limit (None = unlimited), used and free. Usage is
  summed over the project's allocations in every location the region serves, as admission sums it;
* per zone, for each machine type: how many exist, how many capacity reservations hold, and how many are
  free outside reservations now (None for an elastic zone: unlimited);
* for one machine shape (machine type, attached accelerators): ``quota_replicas``, how many replicas the
  project's free quota allows; ``capacity_replicas``, the most replicas that fit in one zone now (a job's
  replicas all run in one zone); ``max_replicas``, the smaller of the two. None means unlimited.

Free machines are what a job that consumes no reservation could take: the same numbers admission uses, got by
asking :func:`plan_admissions` itself (one zone at a time, quotas off) rather than re-deriving how running
jobs split between reservations and general capacity. Queued jobs are not counted: they hold nothing yet, and
the backfill holds admission sets aside for them depend on the queue order the candidate would join.

A stocked-out region reports 0 replicas whatever its counts; a location no region serves reports 0 too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType

from trainworks.catalog import machines as catalog
from trainworks.scheduling.admission import (
    NO_RESERVATION,
    Allocation,
    Demand,
    JobRequest,
    accelerators,
    plan_admissions,
    vcpus,
)
from trainworks.scheduling.inventory import Inventory, Region, Zone

LIMITED_BY_STOCKOUT = "STOCKOUT"
LIMITED_BY_NOT_SERVED = "NOT_SERVED"
LIMITED_BY_QUOTA = "QUOTA"
LIMITED_BY_CAPACITY = "CAPACITY"


@dataclass(frozen=True)
class ReplicaShape:
    """One replica's machine: its type and the accelerators attached to it (built-in ones need not be set)."""

    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = 0

    def demand(self, count: int) -> Demand:
        return Demand(self.machine_type, count, self.accelerator_type, self.accelerator_count, NO_RESERVATION)


@dataclass(frozen=True)
class QuotaUsage:
    """One quota of the project in the region."""

    limit: int | None  # None: unlimited
    used: int

    @property
    def free(self) -> int | None:
        return None if self.limit is None else max(0, self.limit - self.used)


@dataclass(frozen=True)
class MachineCount:
    """Machines of one type in one zone."""

    total: int  # that exist in the zone
    reserved: int  # of those, held by the region's capacity reservations
    free: int  # outside reservations and not held by running jobs


@dataclass(frozen=True)
class ZoneCapacity:
    name: str
    machines: Mapping[str, MachineCount] | None  # machine type -> counts; None: elastic (unlimited)


@dataclass(frozen=True)
class ShapeCapacity:
    shape: ReplicaShape
    vcpus: int  # per replica
    accelerators: Mapping[str, int]  # per replica, built in or attached
    quota_replicas: int | None  # None: unlimited
    capacity_replicas: int | None  # None: unlimited
    max_replicas: int | None  # None: unlimited
    limited_by: str | None  # STOCKOUT, NOT_SERVED, QUOTA or CAPACITY; None when unlimited


@dataclass(frozen=True)
class CapacityReport:
    project: str
    location: str
    region: str | None  # None: no region serves the location
    stockout: bool
    cpu_quota: QuotaUsage | None  # None when not served
    accelerator_quotas: Mapping[str, QuotaUsage]
    zones: tuple[ZoneCapacity, ...]
    shape: ShapeCapacity | None = None

    @property
    def served(self) -> bool:
        return self.region is not None


def capacity_report(
    inventory: Inventory,
    holding: Sequence[Allocation],
    project: str,
    location: str,
    shape: ReplicaShape | None = None,
) -> CapacityReport:
    """The capacity report of ``project`` (a project number, as allocations carry) at ``location``.

    ``holding``: every allocation holding capacity now, of any project and location. Raises ValueError for a
    shape whose machine type the catalog does not know."""
    if shape is not None and catalog.machine_type(shape.machine_type) is None:
        raise ValueError(f"unknown machine type {shape.machine_type!r}")
    region = inventory.region(location)
    if region is None:
        unserved = None if shape is None else _shape_capacity(shape, 0, 0, LIMITED_BY_NOT_SERVED)
        return CapacityReport(project, location, None, False, None, MappingProxyType({}), (), unserved)

    # Admission counts quotas and machines per region, whichever of its locations a job names.
    mine = [a for a in holding if _region_name(inventory, a.location) == region.name]
    cpu = QuotaUsage(region.cpu_quota, sum(vcpus(a.demands) for a in mine if a.project == project))
    accs = _accelerator_quotas(region, [a for a in mine if a.project == project], shape)
    zones = tuple(_zone_capacity(region, zone, mine, project) for zone in region.zones)
    report = CapacityReport(project, location, region.name, region.stockout, cpu, accs, zones)
    if shape is None:
        return report
    return replace(report, shape=_shape_report(region, shape, cpu, accs, zones))


# ------------------------------------------------------------------------------------------ quotas
def _region_name(inventory: Inventory, location: str) -> str | None:
    region = inventory.region(location)
    return None if region is None else region.name


def _accelerator_quotas(
    region: Region, allocations: Iterable[Allocation], shape: ReplicaShape | None
) -> Mapping[str, QuotaUsage]:
    """Every accelerator with a quota, in use by the project, or carried by the shape (declared first)."""
    used: dict[str, int] = {}
    for allocation in allocations:
        for name, n in accelerators(allocation.demands).items():
            used[name] = used.get(name, 0) + n
    names = list(region.accelerator_quotas)
    extra = list(used) + ([] if shape is None else list(accelerators([shape.demand(1)])))
    names += [name for name in dict.fromkeys(extra) if name not in region.accelerator_quotas]
    return MappingProxyType(
        {name: QuotaUsage(region.accelerator_quotas.get(name), used.get(name, 0)) for name in names}
    )


def _quota_replicas(
    per_replica_vcpus: int,
    per_replica_accs: Mapping[str, int],
    cpu: QuotaUsage,
    accs: Mapping[str, QuotaUsage],
) -> int | None:
    limits: list[int] = []
    if cpu.free is not None and per_replica_vcpus > 0:
        limits.append(cpu.free // per_replica_vcpus)
    for name, n in per_replica_accs.items():
        free = accs[name].free
        if free is not None and n > 0:
            limits.append(free // n)
    return min(limits) if limits else None


# ------------------------------------------------------------------------------------------ machines
def _zone_capacity(region: Region, zone: Zone, holding: Sequence[Allocation], project: str) -> ZoneCapacity:
    if zone.machines is None:
        return ZoneCapacity(zone.name, None)
    reserved: dict[str, int] = {}
    for reservation in region.reservations.values():
        if reservation.zone == zone.name:
            reserved[reservation.machine_type] = reserved.get(reservation.machine_type, 0) + reservation.count
    probe = _ZoneProbe(region, zone, holding, project)
    counts = {
        machine: MachineCount(
            total, reserved.get(machine, 0), probe.free(machine, total - reserved.get(machine, 0))
        )
        for machine, total in zone.machines.items()
    }
    return ZoneCapacity(zone.name, MappingProxyType(counts))


class _ZoneProbe:
    """Asks the planner how many machines of a type a job could take in one zone now.

    The zone stands alone in a copy of its region with its own reservations, no quotas and no stock-out, and
    holds the allocations placed in it; the planner admits a job of ``n`` machines exactly when ``n`` are free
    outside reservations, so a binary search over ``n`` finds the free count."""

    def __init__(self, region: Region, zone: Zone, holding: Sequence[Allocation], project: str) -> None:
        alone = replace(
            region,
            zones=(zone,),
            cpu_quota=None,
            accelerator_quotas=MappingProxyType({}),
            stockout=False,
            reservations=MappingProxyType(
                {name: r for name, r in region.reservations.items() if r.zone == zone.name}
            ),
        )
        self.inventory = Inventory(regions=MappingProxyType({region.name: alone}), default=None)
        self.location = region.name
        self.project = project
        self.holding = [replace(a, location=region.name) for a in holding if a.zone == zone.name]

    def fits(self, machine_type: str, n: int) -> bool:
        request = JobRequest(-1, self.project, self.location, 0, (), (Demand(machine_type, n),))
        return -1 in plan_admissions(self.inventory, self.holding, [request]).admitted

    def free(self, machine_type: str, upper: int) -> int:
        """The most machines of ``machine_type`` (at most ``upper``) a job could take now."""
        if not self.holding:  # nothing runs in the zone: all of it outside reservations is free
            return max(0, upper)
        low, high = 0, max(0, upper)  # fits(low) holds; the answer lies in [low, high]
        while low < high:
            mid = (low + high + 1) // 2
            if self.fits(machine_type, mid):
                low = mid
            else:
                high = mid - 1
        return low


# ------------------------------------------------------------------------------------------ the shape
def _shape_capacity(
    shape: ReplicaShape,
    quota: int | None,
    capacity: int | None,
    limited_by: str | None = None,
) -> ShapeCapacity:
    demand = [shape.demand(1)]
    if quota is None:
        most = capacity
    elif capacity is None:
        most = quota
    else:
        most = min(quota, capacity)
    if limited_by is None and most is not None:
        limited_by = LIMITED_BY_QUOTA if most == quota else LIMITED_BY_CAPACITY
    return ShapeCapacity(
        shape,
        vcpus(demand),
        MappingProxyType(accelerators(demand)),
        quota,
        capacity,
        most,
        limited_by,
    )


def _shape_report(
    region: Region,
    shape: ReplicaShape,
    cpu: QuotaUsage,
    accs: Mapping[str, QuotaUsage],
    zones: Sequence[ZoneCapacity],
) -> ShapeCapacity:
    demand = [shape.demand(1)]
    quota = _quota_replicas(vcpus(demand), accelerators(demand), cpu, accs)
    if region.stockout:
        return _shape_capacity(shape, quota, 0, LIMITED_BY_STOCKOUT)
    capacity: float = 0
    for zone in zones:
        if zone.machines is None:
            capacity = math.inf
            break
        count = zone.machines.get(shape.machine_type)
        if count is not None:
            capacity = max(capacity, count.free)  # all replicas of a job run in one zone
    return _shape_capacity(shape, quota, None if capacity == math.inf else int(capacity))
