"""Gang admission: which queued jobs may start now, and in which zone; pure functions, no I/O.

The rules, applied in one pass by :func:`plan_admissions`:

* **Gang.** A job is admitted only when *all* its machines fit at once in *one* zone of the region serving its
  location. A zone's machine counts are shared by every project; an elastic zone always has room.
* **Quotas.** A project may hold at most ``cpu_quota`` vCPUs and ``accelerator_quotas[name]`` accelerators at
  once in a region, summed over the allocations it already holds there plus the job being admitted. The
  vCPUs and accelerators of a machine come from the catalog: a machine's built-in accelerators (a2, a3, g2),
  else what the demand attaches (n1 with ``accelerator_type``/``accelerator_count`` per machine).
* **Order.** Priority descending, then ``order`` ascending (FIFO within a priority), then ``job_id``.
* **Conservative backfill.** The queue is walked once, in that order. A job that fits is admitted and takes
  its capacity. A job that does not fit *reserves* what it needs out of what is still free, so later jobs can
  only use capacity beyond the reservations; a smaller job behind a blocked head is therefore admitted only
  when it cannot delay the head. What is reserved:

  - a job held back only by machines reserves, in the zone of its region where it is closest to fitting (the
    fewest missing machines; ties go to the first zone listed), ``min(needed, still free)`` of each machine
    type it needs there, and the quota it needs (vCPUs and accelerators) out of its project's headroom;
  - a job held back by its project's quota (by usage or by an earlier job's quota reservation) reserves only
    that project's quota headroom, never machines: it cannot start before its own project's work ends, and
    other projects' jobs must not wait for that;
  - a job that can never fit (see :func:`never_fits`), a job in a stocked-out region and a job whose location
    is not served reserve nothing.

  Without run-time estimates "cannot delay" has to mean "uses nothing a blocked earlier job would need", hence
  *conservative* backfill: capacity reserved for a blocked job stays idle until that job fits.
* **Placement.** Among the zones where a job fits, the one that leaves the fewest machines of the job's types
  free (best fit, ties to the first listed zone); elastic zones only when no finite zone fits. Keeping large
  free blocks together helps later gangs.
* **Reasons.** Every waiting job gets a specific reason, e.g. ``waiting for 2 × a2-highgpu-1g in us-central1:
  1 free (us-central1-a)``, ``waiting for quota: needs 16 NVIDIA_TESLA_A100 in us-central1, 12 of 16 in use by
  project p``, ``waiting behind higher-priority or earlier jobs: 2 × n1-standard-4 in us-central1 are reserved
  for them``, ``stock-out in us-central1: no capacity can be had right now``.

Cost: one pass is O(holding + queued × (zones holding the job's machine types) × (machine types per job)) with
incremental free and reserved counts; nothing is rescanned per job.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from trainworks.catalog import machines as catalog
from trainworks.scheduling.inventory import Inventory, Region

_INF = math.inf


@dataclass(frozen=True)
class Demand:
    """One worker pool: ``count`` machines of one type, each with its attached accelerators (n1 only)."""

    machine_type: str
    count: int
    accelerator_type: str | None = None  # attached per machine; ignored for types with built-in ones
    accelerator_count: int = 0  # per machine


@dataclass(frozen=True)
class JobRequest:
    job_id: int
    project: str
    location: str
    priority: int  # higher first
    order: tuple  # FIFO key within a priority, e.g. (create_time, job_id)
    demands: tuple[Demand, ...]


@dataclass(frozen=True)
class Allocation:
    """A job holding capacity now (admitted, running or being torn down)."""

    job_id: int
    project: str
    location: str
    zone: str
    demands: tuple[Demand, ...]


@dataclass(frozen=True)
class Decision:
    admitted: Mapping[int, str]  # job_id -> zone, in queue order
    waiting: Mapping[int, str]  # job_id -> human-readable reason, in queue order


# ------------------------------------------------------------------------------------------ demand helpers
@dataclass(frozen=True)
class _Shape:
    """What a set of demands needs, aggregated: machines per type, vCPUs and accelerators in total."""

    machines: tuple[tuple[str, int], ...]  # (machine type, count), in first-seen order
    vcpus: int
    accelerators: tuple[tuple[str, int], ...]  # (accelerator name, count), in first-seen order
    unknown: tuple[str, ...]  # machine types the catalog does not know


@functools.lru_cache(maxsize=4096)
def _unit(machine: str, accelerator_type: str | None, accelerator_count: int) -> tuple[int, str | None, int]:
    """(vCPUs, accelerator name or None, accelerators) of one machine; vCPUs -1 for an unknown type."""
    info = catalog.machine_type(machine)
    if info is None:
        return -1, None, 0
    if info.accelerator_type is not None:
        return info.vcpus, info.accelerator_type, info.accelerator_count
    if accelerator_type and accelerator_type != catalog.UNSPECIFIED and accelerator_count > 0:
        return info.vcpus, accelerator_type, accelerator_count
    return info.vcpus, None, 0


@functools.lru_cache(maxsize=16384)
def _shape(demands: tuple[Demand, ...]) -> _Shape:
    machines: dict[str, int] = {}
    accs: dict[str, int] = {}
    unknown: list[str] = []
    total_vcpus = 0
    for demand in demands:
        if demand.count <= 0:
            continue
        machines[demand.machine_type] = machines.get(demand.machine_type, 0) + demand.count
        cpus, acc, per_machine = _unit(demand.machine_type, demand.accelerator_type, demand.accelerator_count)
        if cpus < 0:
            if demand.machine_type not in unknown:
                unknown.append(demand.machine_type)
            continue
        total_vcpus += cpus * demand.count
        if acc is not None:
            accs[acc] = accs.get(acc, 0) + per_machine * demand.count
    return _Shape(tuple(machines.items()), total_vcpus, tuple(accs.items()), tuple(unknown))


def machines_needed(demands: Iterable[Demand]) -> dict[str, int]:
    """Machines per type, summed over the demands (pools of the same type add up)."""
    return dict(_shape(tuple(demands)).machines)


def vcpus(demands: Iterable[Demand]) -> int:
    """vCPUs of all the demands' machines, from the catalog (unknown machine types count 0)."""
    return _shape(tuple(demands)).vcpus


def accelerators(demands: Iterable[Demand]) -> dict[str, int]:
    """Accelerators per type: built into the machine type, else attached by the demand."""
    return dict(_shape(tuple(demands)).accelerators)


def _fmt_machines(machines: Iterable[tuple[str, int | float]]) -> str:
    return " + ".join(f"{n} × {t}" for t, n in machines)


# ------------------------------------------------------------------------------------------ never fits
def _unserved(inventory: Inventory, location: str) -> str:
    return f"location {location!r} is not served by the capacity inventory ({inventory.describe_served()})"


def _zone_problem(
    region: Region, machines: tuple[tuple[str, int], ...]
) -> tuple[tuple[int, ...], str | None]:
    """Indices of the zones whose total capacity can hold all ``machines`` at once, or why none can."""
    if not region.zones:
        return (), f"region {region.name} has no zones"
    feasible = tuple(
        i
        for i, zone in enumerate(region.zones)
        if zone.machines is None or all(zone.machines.get(t, 0) >= n for t, n in machines)
    )
    if feasible:
        return feasible, None
    problems = []
    for t, n in machines:
        best, where = max(
            ((zone.machines.get(t, 0) if zone.machines is not None else _INF), zone.name)
            for zone in region.zones
        )
        if best == 0:
            problems.append(f"needs {n} × {t}, but no zone of {region.name} has any")
        elif best < n:
            problems.append(
                f"needs {n} × {t} in one zone, but the largest zone of {region.name} has {best} ({where})"
            )
    if not problems:
        problems.append(
            f"needs {_fmt_machines(machines)} in one zone, but no zone of {region.name} has them all"
        )
    return (), "; ".join(problems)


def _quota_problems(region: Region, shape: _Shape) -> list[str]:
    problems = []
    if region.cpu_quota is not None and shape.vcpus > region.cpu_quota:
        problems.append(
            f"needs {shape.vcpus} vCPUs at once in {region.name}, but the per-project quota there is "
            f"{region.cpu_quota} vCPUs"
        )
    for acc, n in shape.accelerators:
        limit = region.accelerator_quotas.get(acc)
        if limit is not None and n > limit:
            problems.append(
                f"needs {n} {acc} at once in {region.name}, but the per-project quota there is {limit}"
            )
    return problems


def _never_in_region(region: Region, shape: _Shape) -> tuple[tuple[int, ...], str | None]:
    problems = [f"unknown machine type {t!r}" for t in shape.unknown]
    feasible, zone_problem = _zone_problem(region, shape.machines)
    if zone_problem is not None and not shape.unknown:
        problems.append(zone_problem)
    problems += _quota_problems(region, shape)
    return feasible, "; ".join(problems) if problems else None


def never_fits(inventory: Inventory, request: JobRequest) -> str | None:
    """Why ``request`` can never be admitted, even on an idle inventory, or None if it can be.

    Covers an unserved location, unknown machine types, more of a machine type (or of a combination) than any
    single zone of the region has in total, and more vCPUs or accelerators than the per-project quota allows.
    A stock-out is temporary and is not reported here. The caller turns the message into RESOURCE_EXHAUSTED.
    """
    region = inventory.region(request.location)
    if region is None:
        return _unserved(inventory, request.location)
    return _never_in_region(region, _shape(request.demands))[1]


# ------------------------------------------------------------------------------------------ the pass
class _ZoneState:
    __slots__ = ("name", "elastic", "free", "reserved")

    def __init__(self, name: str, machines: Mapping[str, int] | None) -> None:
        self.name = name
        self.elastic = machines is None
        self.free: dict[str, int] = dict(machines or {})  # may go negative if more is held than exists
        self.reserved: dict[str, int] = {}


class _RegionState:
    __slots__ = ("region", "zones", "by_name", "fits")

    def __init__(self, region: Region) -> None:
        self.region = region
        self.zones = [_ZoneState(zone.name, zone.machines) for zone in region.zones]
        self.by_name = {zone.name: zone for zone in self.zones}
        # shape -> (zones whose totals can hold it, never-fits message)
        self.fits: dict[_Shape, tuple[list[_ZoneState], str | None]] = {}

    def fit(self, shape: _Shape) -> tuple[list[_ZoneState], str | None]:
        cached = self.fits.get(shape)
        if cached is None:
            feasible, problem = _never_in_region(self.region, shape)
            cached = self.fits[shape] = ([self.zones[i] for i in feasible], problem)
        return cached


class _QuotaState:
    __slots__ = ("vcpus", "accs", "res_vcpus", "res_accs")

    def __init__(self) -> None:
        self.vcpus = 0
        self.accs: dict[str, int] = {}
        self.res_vcpus = 0
        self.res_accs: dict[str, int] = {}


def _queue_key(job: JobRequest) -> tuple:
    return (-job.priority, job.order, job.job_id)


def plan_admissions(
    inventory: Inventory, holding: Sequence[Allocation], queued: Sequence[JobRequest]
) -> Decision:
    """Decide which of ``queued`` start now (job_id -> zone) and why the others wait (job_id -> reason).

    ``holding`` is every allocation that holds capacity now, whatever its project. See the module docstring
    for the rules. The result depends only on the arguments, not on the order of ``holding`` or ``queued``.
    """
    regions: dict[str, _RegionState] = {}
    quotas: dict[tuple[str, str], _QuotaState] = {}

    def region_state(region: Region) -> _RegionState:
        state = regions.get(region.name)
        if state is None:
            state = regions[region.name] = _RegionState(region)
        return state

    def quota_state(project: str, region: Region) -> _QuotaState:
        key = (project, region.name)
        state = quotas.get(key)
        if state is None:
            state = quotas[key] = _QuotaState()
        return state

    for alloc in holding:
        region = inventory.region(alloc.location)
        if region is None:
            continue
        shape = _shape(alloc.demands)
        zone = region_state(region).by_name.get(alloc.zone)
        if zone is not None and not zone.elastic:
            free = zone.free
            for t, n in shape.machines:
                free[t] = free.get(t, 0) - n
        quota = quota_state(alloc.project, region)
        quota.vcpus += shape.vcpus
        for acc, n in shape.accelerators:
            quota.accs[acc] = quota.accs.get(acc, 0) + n

    admitted: dict[int, str] = {}
    waiting: dict[int, str] = {}
    for job in sorted(queued, key=_queue_key):
        if job.job_id in admitted or job.job_id in waiting:
            raise ValueError(f"job {job.job_id} is queued twice")
        region = inventory.region(job.location)
        if region is None:
            waiting[job.job_id] = f"cannot be placed: {_unserved(inventory, job.location)}"
            continue
        if region.stockout:
            waiting[job.job_id] = f"stock-out in {region.name}: no capacity can be had right now"
            continue
        state = region_state(region)
        shape = _shape(job.demands)
        zones, never = state.fit(shape)
        if never is not None:
            waiting[job.job_id] = f"can never be admitted: {never}"
            continue

        quota = quota_state(job.project, region)
        blocked = _quota_block(region, shape, quota, job.project)
        if blocked is not None:
            waiting[job.job_id] = blocked
            _reserve_quota(region, shape, quota)
            continue

        zone = _best_fit(zones, shape.machines)
        if zone is not None:
            free = zone.free
            if not zone.elastic:
                for t, n in shape.machines:
                    free[t] -= n
            quota.vcpus += shape.vcpus
            for acc, n in shape.accelerators:
                quota.accs[acc] = quota.accs.get(acc, 0) + n
            admitted[job.job_id] = zone.name
            continue

        waiting[job.job_id] = _machine_reason(region, zones, shape.machines)
        closest = _closest(zones, shape.machines)
        reserved = closest.reserved
        free = closest.free
        for t, n in shape.machines:
            avail = free.get(t, 0) - reserved.get(t, 0)
            if avail > 0:
                reserved[t] = reserved.get(t, 0) + min(n, avail)
        _reserve_quota(region, shape, quota)
    return Decision(admitted=admitted, waiting=waiting)


def _best_fit(zones: list[_ZoneState], machines: tuple[tuple[str, int], ...]) -> _ZoneState | None:
    """The zone where all ``machines`` fit beyond reservations leaving the fewest of them free; else None."""
    best: _ZoneState | None = None
    best_slack: float = _INF
    for zone in zones:
        if zone.elastic:
            if best is None:
                best = zone
            continue
        free, reserved = zone.free, zone.reserved
        slack = 0
        for t, n in machines:
            left = free.get(t, 0) - reserved.get(t, 0) - n
            if left < 0:
                break
            slack += left
        else:
            if slack < best_slack:
                best, best_slack = zone, slack
    return best


def _closest(zones: list[_ZoneState], machines: tuple[tuple[str, int], ...]) -> _ZoneState:
    """The zone missing the fewest machines beyond reservations (ties: the first listed)."""
    best = zones[0]
    best_short: float = _INF
    for zone in zones:
        free, reserved = zone.free, zone.reserved
        short = 0
        for t, n in machines:
            avail = free.get(t, 0) - reserved.get(t, 0)
            if avail < n:
                short += n - max(avail, 0)
        if short < best_short:
            best, best_short = zone, short
    return best


def _machine_reason(region: Region, zones: list[_ZoneState], machines: tuple[tuple[str, int], ...]) -> str:
    # Would the job fit if nothing were reserved? Then reservations for earlier jobs hold it back.
    for zone in zones:
        free, reserved = zone.free, zone.reserved
        if all(free.get(t, 0) >= n for t, n in machines):
            held = [(t, reserved.get(t, 0)) for t, n in machines if free.get(t, 0) - reserved.get(t, 0) < n]
            verb = "is" if sum(n for _, n in held) == 1 else "are"
            where = region.name if len(region.zones) == 1 else f"{region.name} ({zone.name})"
            return (
                f"waiting behind higher-priority or earlier jobs: {_fmt_machines(held)} in {where} "
                f"{verb} reserved for them"
            )
    # Not enough free machines anywhere: describe the zone that comes closest.
    best = zones[0]
    best_short: float = _INF
    for zone in zones:
        short = sum(max(0, n - max(zone.free.get(t, 0), 0)) for t, n in machines)
        if short < best_short:
            best, best_short = zone, short
    free = [(t, max(best.free.get(t, 0), 0)) for t, _ in machines]
    held = [(t, n) for t, f in free if (n := min(best.reserved.get(t, 0), f)) > 0]
    if len(machines) == 1:
        count = free[0][1]
        if len(region.zones) == 1:
            have = f"{count} free ({best.name})"
        elif count == 0:
            have = "none free in any zone"
        else:
            have = f"at most {count} free in one zone ({best.name})"
        reason = f"waiting for {_fmt_machines(machines)} in {region.name}: {have}"
    else:
        scope = region.name if len(region.zones) == 1 else f"one zone of {region.name}"
        have = " and ".join(f"{n} × {t}" for t, n in free)
        reason = f"waiting for {_fmt_machines(machines)} in {scope}: {best.name} has {have} free"
    if held:
        verb = "is" if sum(n for _, n in held) == 1 else "are"
        listed = " and ".join(f"{n} × {t}" for t, n in held)
        reason += f", of which {listed} {verb} reserved for higher-priority or earlier jobs"
    return reason


def _quota_block(region: Region, shape: _Shape, quota: _QuotaState, project: str) -> str | None:
    """Why the project's quota holds the job back now (its usage, or earlier jobs' reservations), or None."""
    used: list[str] = []
    reserved: list[str] = []
    limit = region.cpu_quota
    if limit is not None and shape.vcpus:
        if quota.vcpus + shape.vcpus > limit:
            used.append(
                f"needs {shape.vcpus} vCPUs in {region.name}, "
                f"{quota.vcpus} of {limit} in use by project {project}"
            )
        elif quota.vcpus + quota.res_vcpus + shape.vcpus > limit:
            reserved.append(f"{quota.res_vcpus} vCPUs")
    for acc, n in shape.accelerators:
        limit = region.accelerator_quotas.get(acc)
        if limit is None:
            continue
        in_use = quota.accs.get(acc, 0)
        if in_use + n > limit:
            used.append(f"needs {n} {acc} in {region.name}, {in_use} of {limit} in use by project {project}")
        elif in_use + quota.res_accs.get(acc, 0) + n > limit:
            reserved.append(f"{quota.res_accs[acc]} {acc}")
    if used:
        return f"waiting for quota: {'; '.join(used)}"
    if reserved:
        return (
            f"waiting behind higher-priority or earlier jobs of project {project}: quota for "
            f"{' and '.join(reserved)} in {region.name} is reserved for them"
        )
    return None


def _reserve_quota(region: Region, shape: _Shape, quota: _QuotaState) -> None:
    """Set aside, for a blocked job, the quota it needs out of its project's remaining headroom."""
    limit = region.cpu_quota
    if limit is not None and shape.vcpus:
        room = limit - quota.vcpus - quota.res_vcpus
        if room > 0:
            quota.res_vcpus += min(shape.vcpus, room)
    for acc, n in shape.accelerators:
        limit = region.accelerator_quotas.get(acc)
        if limit is None:
            continue
        room = limit - quota.accs.get(acc, 0) - quota.res_accs.get(acc, 0)
        if room > 0:
            quota.res_accs[acc] = quota.res_accs.get(acc, 0) + min(n, room)
