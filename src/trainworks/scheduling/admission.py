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
* **Reservations** (capacity reservations declared in the inventory; not to be confused with the backfill
  holds above, which the reasons call "reserved for higher-priority or earlier jobs"). A reservation holds
  ``count`` machines of one shape (machine type, and for n1 the attached accelerators per machine) in one
  zone, carved out of that zone's machines; the rest of the zone is *general* capacity. The planner keeps
  separate free counts for each reservation and for the general capacity of each zone. Each worker pool
  (``Demand``) consumes capacity according to its ``reservationAffinity``, as on Vertex AI:

  - ``NO_RESERVATION``: general capacity only; reserved machines are never used, even when idle.
  - ``ANY_RESERVATION``: matching reservations first, then general capacity (machine by machine, so a pool
    may be split). A reservation matches when it is in the zone the job is placed in, has the pool's exact
    machine shape, allows the job's project (its ``project`` is absent or equals the job's project number)
    and is not ``specific_only``. Among the zones where the job fits, the one where it consumes the most
    reserved machines is chosen (then best fit as above).
  - ``SPECIFIC_RESERVATION`` with key ``compute.googleapis.com/reservation-name`` and one value, the
    reservation's full name ``projects/{project}/zones/{zone}/reservations/{name}`` (Compute Engine's
    shared form ``projects/{project}/reservations/{name}`` and the bare name are accepted too): only that
    reservation's capacity, in its zone. The job waits for that reservation even when general capacity is
    free. The reservation must exist in the region serving the job's location, be in the zone the name
    gives, have the pool's exact machine shape, allow the job's project and hold at least the pool's
    replicas (else :func:`never_fits` says which). The project in the full name is not compared:
    ``project`` in the inventory says who may consume the reservation. Pools naming reservations in
    different zones can never run (a job runs in one zone).
  - ``reservationAffinity`` absent, or ``TYPE_UNSPECIFIED`` (which the create-time validation rejects: the
    type is required once the message is set): like ``NO_RESERVATION``. Compute Engine gives a VM with no
    affinity ``ANY_RESERVATION``, but Vertex AI consumes reservations only when a pool asks for them through
    ``reservationAffinity`` ("draw its Compute Engine resources from a Shared Reservation, or exclusively from
    on-demand capacity"), so an unset affinity never takes reserved capacity here either.

  Emulation: a region that declares no reservations at all and has an elastic zone (the default ``local``
  inventory) places a ``SPECIFIC_RESERVATION`` pool on its elastic capacity, as if the named reservation
  existed there, so that a job written for Vertex runs unchanged on one host.

  Quotas apply to reserved machines as to any others. Which reservations an allocation holding capacity
  consumes is either given (``Allocation.reservations``, e.g. recorded from ``Decision.reservations``) or
  re-derived from its demands: first every ``SPECIFIC_RESERVATION`` pool takes its reservation, then the
  ``ANY_RESERVATION`` pools take what is left of the matching reservations in their zone (pools with the
  fewest matching reservations first, then by job id), and the rest is general. Re-derivation may count an
  ``ANY_RESERVATION`` job against a reservation that freed up after it started; it never charges general
  capacity with more than the jobs took at admission, except when several projects' jobs compete for
  overlapping sets of project-restricted reservations (record ``Decision.reservations`` to be exact).
* **Reasons.** Every waiting job gets a specific reason, e.g. ``waiting for 2 × a2-highgpu-1g in us-central1:
  1 free (us-central1-a)``, ``waiting for quota: needs 16 NVIDIA_TESLA_A100 in us-central1, 12 of 16 in use by
  project p``, ``waiting behind higher-priority or earlier jobs: 2 × n1-standard-4 in us-central1 are reserved
  for them``, ``stock-out in us-central1: no capacity can be had right now``, ``waiting for 2 × a2-highgpu-1g
  in reservation my-res: 1 free``.

Cost: one pass is O(holding + queued × (zones holding the job's machine types) × (machine types per job)) with
incremental free and reserved counts; nothing is rescanned per job.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from trainworks.catalog import machines as catalog
from trainworks.scheduling.inventory import Inventory, Region, Reservation, parse_reservation_name

_INF = math.inf

NO_RESERVATION = "NO_RESERVATION"
ANY_RESERVATION = "ANY_RESERVATION"
SPECIFIC_RESERVATION = "SPECIFIC_RESERVATION"
RESERVATION_NAME_KEY = "compute.googleapis.com/reservation-name"


@dataclass(frozen=True)
class Demand:
    """One worker pool: ``count`` machines of one type, each with its attached accelerators (n1 only)."""

    machine_type: str
    count: int
    accelerator_type: str | None = None  # attached per machine; ignored for types with built-in ones
    accelerator_count: int = 0  # per machine
    # NO_RESERVATION, ANY_RESERVATION or SPECIFIC_RESERVATION; anything else (unset) acts as NO_RESERVATION
    reservation_affinity: str = NO_RESERVATION
    reservation: str | None = None  # SPECIFIC_RESERVATION: the reservation's full or bare name


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
    # machines taken from each reservation, (name, count); None: re-derived from the demands (see the module)
    reservations: tuple[tuple[str, int], ...] | None = None


@dataclass(frozen=True)
class Decision:
    admitted: Mapping[int, str]  # job_id -> zone, in queue order
    waiting: Mapping[int, str]  # job_id -> human-readable reason, in queue order
    # admitted job_id -> machines it takes from each reservation, (name, count); absent: none
    reservations: Mapping[int, tuple[tuple[str, int], ...]] = field(default_factory=dict)


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


_Unit = tuple[str, str | None, int]  # one machine's shape: (machine type, accelerator or None, accelerators)


def _machine_shape(machine: str, accelerator_type: str | None, accelerator_count: int) -> _Unit:
    _, acc, count = _unit(machine, accelerator_type, accelerator_count)
    return machine, acc, count


def _reservation_shape(reservation: Reservation) -> _Unit:
    return _machine_shape(
        reservation.machine_type, reservation.accelerator_type, reservation.accelerator_count
    )


def _describe_unit(unit: _Unit) -> str:
    machine, acc, count = unit
    info = catalog.machine_type(machine)
    if acc is not None and info is not None and info.accelerator_type is None:
        return f"{machine} with {count} × {acc}"
    return machine


@dataclass(frozen=True)
class _Need:
    """Demands split by reservation affinity."""

    general: tuple[tuple[str, int], ...]  # NO_RESERVATION (or unset): machines per type
    specific: tuple[tuple[str, _Unit, int], ...]  # SPECIFIC_RESERVATION: (reservation as named, shape, count)
    any: tuple[tuple[_Unit, int], ...]  # ANY_RESERVATION: machines per shape


@functools.lru_cache(maxsize=16384)
def _need(demands: tuple[Demand, ...]) -> _Need:
    general: dict[str, int] = {}
    specific: dict[tuple[str, _Unit], int] = {}
    anyres: dict[_Unit, int] = {}
    for demand in demands:
        if demand.count <= 0:
            continue
        kind = demand.reservation_affinity
        if kind in (SPECIFIC_RESERVATION, ANY_RESERVATION):
            unit = _machine_shape(demand.machine_type, demand.accelerator_type, demand.accelerator_count)
            if kind == ANY_RESERVATION:
                anyres[unit] = anyres.get(unit, 0) + demand.count
            else:
                key = (demand.reservation or "", unit)
                specific[key] = specific.get(key, 0) + demand.count
        else:
            general[demand.machine_type] = general.get(demand.machine_type, 0) + demand.count
    return _Need(
        tuple(general.items()),
        tuple((name, unit, n) for (name, unit), n in specific.items()),
        tuple(anyres.items()),
    )


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


def _general_machines(region: Region) -> list[Mapping[str, int] | None]:
    """Per zone (in order), its machines outside reservations; None for an elastic zone."""
    if not region.reservations:
        return [zone.machines for zone in region.zones]
    out: list[Mapping[str, int] | None] = []
    for zone in region.zones:
        if zone.machines is None:
            out.append(None)
            continue
        general = dict(zone.machines)
        for reservation in region.reservations.values():
            if reservation.zone == zone.name:
                t = reservation.machine_type
                general[t] = general.get(t, 0) - reservation.count
        out.append(general)
    return out


def _held_by_reservations(region: Region, machine_type: str) -> str:
    """A note on the machines of that type that the region's reservations hold, else ``""``."""
    held = [r for r in region.reservations.values() if r.machine_type == machine_type]
    if not held:
        return ""
    total = sum(r.count for r in held)
    names = ", ".join(r.name for r in held)
    return f" outside reservations, which hold {total} ({names}) for jobs that consume them"


def _zone_problem(
    region: Region, machines: tuple[tuple[str, int], ...]
) -> tuple[tuple[int, ...], str | None]:
    """Indices of the zones whose general capacity (outside reservations) can hold all ``machines`` at once,
    or why none can."""
    if not region.zones:
        return (), f"region {region.name} has no zones"
    general = _general_machines(region)
    feasible = tuple(
        i for i, have in enumerate(general) if have is None or all(have.get(t, 0) >= n for t, n in machines)
    )
    if feasible:
        return feasible, None
    problems = []
    for t, n in machines:
        best, where = max(
            ((have.get(t, 0) if have is not None else _INF), zone.name)
            for zone, have in zip(region.zones, general, strict=True)
        )
        note = _held_by_reservations(region, t)
        if best == 0:
            problems.append(f"needs {n} × {t}, but no zone of {region.name} has any{note}")
        elif best < n:
            problems.append(
                f"needs {n} × {t} in one zone, but the largest zone of {region.name} has {best} ({where})"
                f"{note}"
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
    single zone of the region has in total outside reservations (counting the reservations the job may
    consume), more vCPUs or accelerators than the per-project quota allows, and a SPECIFIC_RESERVATION that
    names an unknown reservation, one in another zone, of another machine shape, not allowed to the project,
    or holding fewer machines than the pools ask of it.
    A stock-out is temporary and is not reported here. The caller turns the message into RESOURCE_EXHAUSTED.
    """
    region = inventory.region(request.location)
    if region is None:
        return _unserved(inventory, request.location)
    return _RegionState(region).resolve(request.demands, request.project).never


# ------------------------------------------------------------------------------------------ the pass
class _ZoneState:
    __slots__ = ("name", "elastic", "total", "free", "reserved", "reservations")

    def __init__(self, name: str, machines: Mapping[str, int] | None) -> None:
        self.name = name
        self.elastic = machines is None
        self.total: dict[str, int] = dict(machines or {})  # general capacity: outside reservations
        self.free: dict[str, int] = dict(machines or {})  # may go negative if more is held than exists
        self.reserved: dict[str, int] = {}  # backfill holds on general capacity (not capacity reservations)
        self.reservations: list[_ResState] = []


class _ResState:
    """A capacity reservation's counts during one pass."""

    __slots__ = ("reservation", "name", "zone", "unit", "total", "free", "held")

    def __init__(self, reservation: Reservation, zone: _ZoneState) -> None:
        self.reservation = reservation
        self.name = reservation.name
        self.zone = zone
        self.unit = _reservation_shape(reservation)
        self.total = reservation.count
        self.free = reservation.count  # may go negative if more is held than it has
        self.held = 0  # backfill holds for blocked jobs

    def allows(self, project: str) -> bool:
        return self.reservation.project is None or self.reservation.project == project


class _Fit:
    """A job's demands resolved against one region: where it may go and what it takes there."""

    __slots__ = ("zones", "never", "general", "specific", "any", "simple")

    def __init__(
        self,
        zones: list[_ZoneState],
        never: str | None,
        general: tuple[tuple[str, int], ...],
        specific: tuple[tuple[_ResState, int], ...] = (),
        anyres: tuple[tuple[str, int, tuple[_ResState, ...]], ...] = (),
    ) -> None:
        self.zones = zones  # zones whose capacity can hold the job at all (empty when it never fits)
        self.never = never  # why it can never be admitted, or None
        self.general = general  # machines per type from general capacity only
        self.specific = specific  # machines from a named reservation
        self.any = anyres  # (machine type, count, matching reservations): reservations first, then general
        self.simple = not specific and not anyres  # no reservation involved: the fast path


_TOTAL, _UNHELD, _FREE = 0, 1, 2  # _take modes: idle capacity; free now ignoring backfill holds; free now


def _take(
    zone: _ZoneState, fit: _Fit, mode: int = _FREE
) -> tuple[int, dict[_ResState, int], dict[str, int], dict[str, int]]:
    """What the job would take in ``zone``: (machines missing, taken per reservation (clipped to what is
    there), machines per type from general capacity, machines per type that ANY pools take from reservations).
    """
    short = 0
    take: dict[_ResState, int] = {}
    for rs, n in fit.specific:
        have = rs.total if mode == _TOTAL else rs.free if mode == _UNHELD else rs.free - rs.held
        got = max(0, min(n, have - take.get(rs, 0)))
        take[rs] = take.get(rs, 0) + got
        short += n - got
    general = dict(fit.general)
    from_reservations: dict[str, int] = {}
    for t, n, matching in fit.any:
        for rs in matching:
            if rs.zone is not zone:
                continue
            have = rs.total if mode == _TOTAL else rs.free if mode == _UNHELD else rs.free - rs.held
            got = max(0, min(n, have - take.get(rs, 0)))
            if got:
                take[rs] = take.get(rs, 0) + got
                from_reservations[t] = from_reservations.get(t, 0) + got
                n -= got
                if not n:
                    break
        if n:
            general[t] = general.get(t, 0) + n
    if not zone.elastic:
        for t, n in general.items():
            if mode == _TOTAL:
                have = zone.total.get(t, 0)
            elif mode == _UNHELD:
                have = zone.free.get(t, 0)
            else:
                have = zone.free.get(t, 0) - zone.reserved.get(t, 0)
            if have < n:
                short += n - max(have, 0)
    return short, take, general, from_reservations


class _RegionState:
    __slots__ = ("region", "zones", "by_name", "fits", "reservations", "res_by_name", "resolved")

    def __init__(self, region: Region) -> None:
        self.region = region
        self.zones = [_ZoneState(zone.name, zone.machines) for zone in region.zones]
        self.by_name = {zone.name: zone for zone in self.zones}
        # shape -> (zones whose totals can hold it, never-fits message)
        self.fits: dict[_Shape, tuple[list[_ZoneState], str | None]] = {}
        self.reservations: list[_ResState] = []
        self.res_by_name: dict[str, _ResState] = {}
        for reservation in region.reservations.values():
            zone = self.by_name.get(reservation.zone)
            if zone is None:
                continue
            rs = _ResState(reservation, zone)
            self.reservations.append(rs)
            self.res_by_name[rs.name] = rs
            zone.reservations.append(rs)
            if not zone.elastic:  # carved out of the zone's machines of that type
                t = reservation.machine_type
                zone.total[t] = zone.total.get(t, 0) - reservation.count
                zone.free[t] = zone.free.get(t, 0) - reservation.count
        # (demands, project) -> the demands resolved against this region
        self.resolved: dict[tuple[tuple[Demand, ...], str], _Fit] = {}

    def fit(self, shape: _Shape) -> tuple[list[_ZoneState], str | None]:
        cached = self.fits.get(shape)
        if cached is None:
            feasible, problem = _never_in_region(self.region, shape)
            cached = self.fits[shape] = ([self.zones[i] for i in feasible], problem)
        return cached

    def resolve(self, demands: tuple[Demand, ...], project: str) -> _Fit:
        """The demands resolved against this region's zones and reservations (cached per pass)."""
        need = _need(demands)
        if not need.specific and not need.any:
            zones, never = self.fit(_shape(demands))
            return _Fit(zones, never, need.general)
        key = (demands, project)
        cached = self.resolved.get(key)
        if cached is None:
            cached = self.resolved[key] = self._resolve(demands, need, project)
        return cached

    def _resolve(self, demands: tuple[Demand, ...], need: _Need, project: str) -> _Fit:
        region = self.region
        shape = _shape(demands)
        problems = [f"unknown machine type {t!r}" for t in shape.unknown]
        general = dict(need.general)
        specific: dict[_ResState, int] = {}
        allowed: set[str] | None = None  # the zones the job may use; None: all
        emulate = not region.reservations and any(zone.elastic for zone in self.zones)
        for named, unit, n in need.specific:
            problem = None
            parsed = parse_reservation_name(named)
            rs = None if parsed is None else self.res_by_name.get(parsed[2])
            if parsed is None:
                problem = f"{named!r} is not a reservation name"
            elif rs is None and emulate:  # elastic capacity stands in for any reservation
                elastic = {zone.name for zone in self.zones if zone.elastic}
                allowed = elastic if allowed is None else allowed & elastic
            elif rs is None:
                known = ", ".join(self.res_by_name) or "none"
                problem = f"reservation {parsed[2]!r} does not exist in {region.name} (reservations: {known})"
            elif parsed[1] is not None and parsed[1] != rs.zone.name:
                problem = f"reservation {rs.name} is in zone {rs.zone.name}, not {parsed[1]}"
            elif unit != rs.unit:
                problem = (
                    f"a pool needs {_describe_unit(unit)} but reservation {rs.name} holds "
                    f"{_describe_unit(rs.unit)} machines"
                )
            elif not rs.allows(project):
                problem = (
                    f"reservation {rs.name} may only be used by project {rs.reservation.project}, "
                    f"not {project}"
                )
            else:
                specific[rs] = specific.get(rs, 0) + n
                continue
            if problem is not None:
                problems.append(problem)
            general[unit[0]] = general.get(unit[0], 0) + n
        for rs, n in specific.items():
            if n > rs.total:
                problems.append(
                    f"needs {n} × {rs.reservation.machine_type} from reservation {rs.name}, which holds "
                    f"{rs.total}"
                )
        zones_of = sorted({rs.zone.name for rs in specific})
        if len(zones_of) > 1:
            listed = ", ".join(f"{rs.name} ({rs.zone.name})" for rs in specific)
            problems.append(
                f"its pools name reservations in different zones ({listed}), but a job runs in one zone"
            )
        elif zones_of:
            allowed = set(zones_of) if allowed is None else allowed & set(zones_of)
        anyres: list[tuple[str, int, tuple[_ResState, ...]]] = []
        for unit, n in need.any:
            matching = tuple(
                rs
                for rs in self.reservations
                if rs.unit == unit and not rs.reservation.specific_only and rs.allows(project)
            )
            if matching:
                anyres.append((unit[0], n, matching))
            else:
                general[unit[0]] = general.get(unit[0], 0) + n
        general_needs = tuple(general.items())
        if not specific and not anyres and allowed is None and not problems:
            zones, never = self.fit(shape)  # nothing to do with reservations after all
            return _Fit(zones, never, general_needs)
        problems += _quota_problems(region, shape)
        if problems:
            return _Fit([], "; ".join(problems), general_needs, tuple(specific.items()), tuple(anyres))
        fit = _Fit([], None, general_needs, tuple(specific.items()), tuple(anyres))
        candidates = [zone for zone in self.zones if allowed is None or zone.name in allowed]
        fit.zones = [zone for zone in candidates if _take(zone, fit, _TOTAL)[0] == 0]
        if not fit.zones:
            fit.never = _no_zone_problem(region, candidates, fit)
        return fit


def _no_zone_problem(region: Region, candidates: list[_ZoneState], fit: _Fit) -> str:
    """Why no zone can ever hold a job that consumes reservations."""
    if not candidates:
        return f"no zone of {region.name} can hold it"
    best = min(candidates, key=lambda zone: _take(zone, fit, _TOTAL)[0])
    _, _, general, from_reservations = _take(best, fit, _TOTAL)
    names = [rs.name for rs, _ in fit.specific]
    if names:
        where = f"zone {best.name} (where reservation {', '.join(names)} is)"
    elif len(candidates) == 1:
        where = f"zone {best.name}"
    else:
        where = f"one zone of {region.name} (closest: {best.name})"
    missing = [
        f"{n} × {t} outside reservations in {where}, which has {max(best.total.get(t, 0), 0)}"
        for t, n in general.items()
        if best.total.get(t, 0) < n
    ]
    extra = ""
    if from_reservations:
        taken = " and ".join(f"{n} × {t}" for t, n in from_reservations.items())
        extra = f" (besides {taken} from the reservations it may consume)"
    return f"needs {'; '.join(missing) or f'more machines in {where}'}{extra}"


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

    deferred: list[tuple[int, int, _ZoneState, _Fit]] = []  # ANY_RESERVATION allocations, placed last
    for alloc in holding:
        region = inventory.region(alloc.location)
        if region is None:
            continue
        shape = _shape(alloc.demands)
        state = region_state(region)
        zone = state.by_name.get(alloc.zone)
        if zone is not None:
            general = shape.machines
            if alloc.reservations is not None:  # recorded: take exactly that
                taken: dict[str, int] = {}
                for name, n in alloc.reservations:
                    rs = state.res_by_name.get(name)
                    if rs is not None and rs.zone is zone:
                        rs.free -= n
                        taken[rs.reservation.machine_type] = taken.get(rs.reservation.machine_type, 0) + n
                general = tuple((t, n - taken.get(t, 0)) for t, n in general)
            elif state.reservations:
                fit = state.resolve(alloc.demands, alloc.project)
                general = fit.general
                for rs, n in fit.specific:
                    if rs.zone is zone:
                        rs.free -= n
                    else:  # not where its reservation is (the inventory changed): count it as general
                        general += ((rs.reservation.machine_type, n),)
                if fit.any:
                    options = sum(len(matching) for _, _, matching in fit.any)
                    deferred.append((options, alloc.job_id, zone, fit))
            if not zone.elastic:
                free = zone.free
                for t, n in general:
                    free[t] = free.get(t, 0) - n
        quota = quota_state(alloc.project, region)
        quota.vcpus += shape.vcpus
        for acc, n in shape.accelerators:
            quota.accs[acc] = quota.accs.get(acc, 0) + n
    # ANY_RESERVATION allocations take what SPECIFIC_RESERVATION ones left of their reservations (fewest
    # matching reservations first, then by job id, so the result does not depend on the order of `holding`).
    for _, _, zone, fit in sorted(deferred, key=lambda entry: entry[:2]):
        only_any = _Fit([], None, (), (), fit.any)
        _, take, any_general, _ = _take(zone, only_any, _UNHELD)
        for rs, n in take.items():
            rs.free -= n
        if not zone.elastic:
            for t, n in any_general.items():
                zone.free[t] = zone.free.get(t, 0) - n

    admitted: dict[int, str] = {}
    waiting: dict[int, str] = {}
    consumed: dict[int, tuple[tuple[str, int], ...]] = {}
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
        fit = state.resolve(job.demands, job.project)
        zones, never = fit.zones, fit.never
        if never is not None:
            waiting[job.job_id] = f"can never be admitted: {never}"
            continue

        quota = quota_state(job.project, region)
        blocked = _quota_block(region, shape, quota, job.project)
        if blocked is not None:
            waiting[job.job_id] = blocked
            _reserve_quota(region, shape, quota)
            continue

        if not fit.simple:
            if _admit_reserved(job, fit, state, waiting, admitted, consumed):
                quota.vcpus += shape.vcpus
                for acc, n in shape.accelerators:
                    quota.accs[acc] = quota.accs.get(acc, 0) + n
            else:
                _reserve_quota(region, shape, quota)
            continue

        machines = fit.general
        zone = _best_fit(zones, machines)
        if zone is not None:
            free = zone.free
            if not zone.elastic:
                for t, n in machines:
                    free[t] -= n
            quota.vcpus += shape.vcpus
            for acc, n in shape.accelerators:
                quota.accs[acc] = quota.accs.get(acc, 0) + n
            admitted[job.job_id] = zone.name
            continue

        reason = _machine_reason(region, zones, machines)
        if state.reservations:
            reason += _unusable_reservations(state, machines)
        waiting[job.job_id] = reason
        closest = _closest(zones, machines)
        reserved = closest.reserved
        free = closest.free
        for t, n in machines:
            avail = free.get(t, 0) - reserved.get(t, 0)
            if avail > 0:
                reserved[t] = reserved.get(t, 0) + min(n, avail)
        _reserve_quota(region, shape, quota)
    return Decision(admitted=admitted, waiting=waiting, reservations=consumed)


def _admit_reserved(
    job: JobRequest,
    fit: _Fit,
    state: _RegionState,
    waiting: dict[int, str],
    admitted: dict[int, str],
    consumed: dict[int, tuple[tuple[str, int], ...]],
) -> bool:
    """Admit a job that consumes reservations, else record why it waits and hold what it needs there.

    True when admitted.

    Placement: the zone where it takes the most reserved machines, then best fit, finite zones before elastic
    ones, then the first listed. When it waits, it holds in its closest zone what it would take there."""
    best: tuple[_ZoneState, dict[_ResState, int], dict[str, int]] | None = None
    best_key: tuple[bool, int, float] | None = None
    for zone in fit.zones:
        short, take, general, _ = _take(zone, fit)
        if short:
            continue
        slack: float = sum(rs.free - rs.held - n for rs, n in take.items())
        if zone.elastic:
            slack = _INF
        else:
            slack += sum(zone.free.get(t, 0) - zone.reserved.get(t, 0) - n for t, n in general.items())
        key = (zone.elastic, -sum(take.values()), slack)
        if best_key is None or key < best_key:
            best, best_key = (zone, take, general), key
    if best is not None:
        zone, take, general = best
        for rs, n in take.items():
            rs.free -= n
        if not zone.elastic:
            for t, n in general.items():
                zone.free[t] -= n
        admitted[job.job_id] = zone.name
        used = tuple((rs.name, n) for rs, n in take.items() if n)
        if used:
            consumed[job.job_id] = used
        return True

    closest = min(fit.zones, key=lambda zone: _take(zone, fit)[0])  # ties: the first listed
    waiting[job.job_id] = _reserved_reason(state.region, fit, closest)
    _, take, general, _ = _take(closest, fit)
    for rs, n in take.items():  # already clipped to what is free beyond holds
        rs.held += n
    if not closest.elastic:
        for t, n in general.items():
            avail = closest.free.get(t, 0) - closest.reserved.get(t, 0)
            if avail > 0:
                closest.reserved[t] = closest.reserved.get(t, 0) + min(n, avail)
    return False


def _unusable_reservations(state: _RegionState, machines: tuple[tuple[str, int], ...]) -> str:
    """A note on idle reserved machines of the types a job needs, which it may not use; else ``""``."""
    types = {t for t, _ in machines}
    idle = [
        (rs.name, rs.reservation.machine_type, free)
        for rs in state.reservations
        if rs.reservation.machine_type in types and (free := rs.free - rs.held) > 0
    ]
    if not idle:
        return ""
    listed = " and ".join(f"{n} × {t} in reservation {name}" for name, t, n in idle)
    verb = "is" if len(idle) == 1 and idle[0][2] == 1 else "are"
    return f"; {listed} {verb} free, but not for this job (see its reservationAffinity)"


def _reserved_reason(region: Region, fit: _Fit, closest: _ZoneState) -> str:
    """Why a job that consumes reservations waits, described in its closest zone."""
    multi = len(region.zones) > 1
    where = f"{region.name} ({closest.name})" if multi else region.name
    # Would it fit if nothing were held for earlier jobs? Then those holds keep it back.
    for zone in fit.zones:
        short, want, want_general, _ = _take(zone, fit, _UNHELD)
        if short:
            continue
        held = [
            (f"{rs.reservation.machine_type} in reservation {rs.name}", rs.held)
            for rs, n in want.items()
            if rs.free - rs.held < n
        ]
        if not zone.elastic:
            held += [
                (t, zone.reserved.get(t, 0))
                for t, n in want_general.items()
                if zone.free.get(t, 0) - zone.reserved.get(t, 0) < n
            ]
        at = f"{region.name} ({zone.name})" if multi else region.name
        verb = "is" if sum(n for _, n in held) == 1 else "are"
        listed = " and ".join(f"{n} × {what}" for what, n in held) or "the capacity it needs"
        return f"waiting behind higher-priority or earlier jobs: {listed} in {at} {verb} reserved for them"
    parts: list[str] = []
    for rs, n in fit.specific:
        free = max(rs.free, 0)
        if free - rs.held >= n:
            continue
        part = f"{n} × {rs.reservation.machine_type} in reservation {rs.name}: {free} free"
        if rs.held and free:
            part += _of_which_reserved(min(rs.held, free))
        parts.append(part)
    _, _, general, from_reservations = _take(closest, fit)
    if not closest.elastic:
        for t, n in general.items():
            free = max(closest.free.get(t, 0), 0)
            avail = free - closest.reserved.get(t, 0)
            if avail >= n:
                continue
            matching = {
                rs.name: rs
                for tt, _, candidates in fit.any
                if tt == t
                for rs in candidates
                if rs.zone is closest
            }
            if matching:  # ANY_RESERVATION pools: describe the reservations they may use, then the rest
                res_free = sum(max(rs.free, 0) for rs in matching.values())
                res_held = sum(min(rs.held, max(rs.free, 0)) for rs in matching.values())
                total = n + from_reservations.get(t, 0)
                part = (
                    f"{total} × {t} in {where}, reservations first: {res_free} free "
                    f"in reservation {', '.join(matching)}"
                )
                if res_held:
                    part += f" ({res_held} reserved for higher-priority or earlier jobs)"
                part += f" and {free} free outside reservations"
            else:
                part = f"{n} × {t} outside reservations in {where}: {free} free"
            if free > avail:
                part += _of_which_reserved(min(free, closest.reserved.get(t, 0)))
            parts.append(part)
    return "waiting for " + "; ".join(parts) if parts else f"waiting for capacity in {where}"


def _of_which_reserved(held: int) -> str:
    return f", of which {held} {'is' if held == 1 else 'are'} reserved for higher-priority or earlier jobs"


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
    best_free = [(t, max(best.free.get(t, 0), 0)) for t, _ in machines]
    held = [(t, n) for t, f in best_free if (n := min(best.reserved.get(t, 0), f)) > 0]
    if len(machines) == 1:
        count = best_free[0][1]
        if len(region.zones) == 1:
            have = f"{count} free ({best.name})"
        elif count == 0:
            have = "none free in any zone"
        else:
            have = f"at most {count} free in one zone ({best.name})"
        reason = f"waiting for {_fmt_machines(machines)} in {region.name}: {have}"
    else:
        scope = region.name if len(region.zones) == 1 else f"one zone of {region.name}"
        have = " and ".join(f"{n} × {t}" for t, n in best_free)
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
