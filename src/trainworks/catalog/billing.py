"""Billed intervals and what they cost: machine-hours, accelerator-hours and approximate cost from the
catalog's prices. Pure: the costs report and the job kinds' own cost figures both compute with it.

Everything billed is reduced to **billed intervals**: one machine of a given shape, on-demand or Spot, from
a start to an end (or to *now* while it still runs). ``Decimal`` is used from the catalog's hourly prices to
the rounded figures on the wire (USD to 4 decimals, hours to 6).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from trainworks.catalog import machines as catalog
from trainworks.kernel.wire import format_timestamp

CURRENCY = "USD"
PRICING_NOTE = "Approximate list prices from the machine catalog, for accounting and estimates, not billing."
USD_STEP = Decimal("0.0001")
HOURS_STEP = Decimal("0.000001")
_MICROS_PER_HOUR = Decimal(3_600_000_000)
_ZERO = Decimal(0)


@dataclass(frozen=True)
class MachineShape:
    """One machine as priced: its type and attached accelerators (built-in ones come from the catalog)."""

    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = 0

    @classmethod
    def from_machine_spec(cls, spec: Mapping[str, Any] | None) -> MachineShape:
        """From a canonical ``machineSpec`` dict (acceleratorCount may be absent, a number or a string)."""
        spec = spec or {}
        accelerator = spec.get("acceleratorType") or None
        if accelerator == catalog.UNSPECIFIED:
            accelerator = None
        count = int(spec.get("acceleratorCount", 0) or 0) if accelerator else 0
        return cls(str(spec.get("machineType", "")), accelerator, count)

    def accelerators(self) -> tuple[str, int] | None:
        """The accelerators one machine carries: built into g2/a2/a3 types, else attached; None if none."""
        machine = catalog.machine_type(self.machine_type)
        if machine is not None and machine.accelerator_type is not None:
            return machine.accelerator_type, machine.accelerator_count
        if self.accelerator_type and self.accelerator_count > 0:
            return self.accelerator_type, self.accelerator_count
        return None

    def to_wire(self) -> dict[str, Any]:
        out: dict[str, Any] = {"machineType": self.machine_type}
        accelerators = self.accelerators()
        if accelerators:
            out["acceleratorType"], out["acceleratorCount"] = accelerators
        return out


@dataclass(frozen=True)
class BilledInterval:
    """One machine billed from ``start`` to ``end`` (None: still running, billed up to *now*).

    ``group`` is the part of the owner it belongs to (``workerpool0``, or a persistent resource's pool id).
    ``billed_to`` names who pays when that is not the owner: a job on a persistent resource.
    ``machines``: how many identical machines the interval stands for (a resource pool's replica count).
    """

    group: str
    shape: MachineShape
    spot: bool
    start: datetime
    end: datetime | None = None
    billed_to: str | None = None
    machines: int = 1


@dataclass(frozen=True)
class Usage:
    """Something that accrues cost (a CustomJob or a PersistentResource) and its billed intervals."""

    name: str
    display_name: str
    state: str
    intervals: tuple[BilledInterval, ...]
    kind: str = "customJob"  # or "persistentResource"
    spot: bool = False
    create_time: datetime | None = None
    start_time: datetime | None = None
    end_time: datetime | None = None


@functools.lru_cache(maxsize=1024)
def hourly_price(shape: MachineShape, spot: bool) -> Decimal | None:
    """The catalog's hourly price of one machine of ``shape``; None for a machine the catalog lacks."""
    try:
        price = catalog.hourly_price(
            shape.machine_type, shape.accelerator_type or "", shape.accelerator_count, spot=spot
        )
    except ValueError:
        return None
    return Decimal(str(price))


def _aware(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def interval_hours(interval: BilledInterval, now: datetime) -> Decimal:
    """Machine-hours from start to end (or now) times its machines, exact to the microsecond; never < 0."""
    end = _aware(interval.end) if interval.end is not None else _aware(now)
    delta = end - _aware(interval.start)
    if delta <= timedelta(0) or interval.machines <= 0:
        return _ZERO
    return Decimal(delta // timedelta(microseconds=1)) * interval.machines / _MICROS_PER_HOUR


def _add(into: dict[str, Decimal], key: str, value: Decimal) -> None:
    into[key] = into.get(key, _ZERO) + value


@dataclass
class GroupCost:
    """The intervals of one group (pool) with one machine shape and pricing."""

    group: str
    shape: MachineShape
    spot: bool
    hourly_usd: Decimal | None  # None: the catalog has no price for this machine
    on_demand_hourly_usd: Decimal | None
    intervals: int = 0
    running: int = 0
    machine_hours: Decimal = _ZERO
    accelerator_hours: dict[str, Decimal] = field(default_factory=dict)
    cost_usd: Decimal = _ZERO
    on_demand_usd: Decimal = _ZERO
    covered_usd: Decimal = _ZERO


@dataclass
class CostSummary:
    """Exact (unrounded) totals over a set of intervals, with one :class:`GroupCost` per group and shape."""

    machine_hours: Decimal = _ZERO
    accelerator_hours: dict[str, Decimal] = field(default_factory=dict)
    cost_usd: Decimal = _ZERO
    on_demand_usd: Decimal = _ZERO
    covered_usd: Decimal = _ZERO
    running: bool = False
    billed_to: tuple[str, ...] = ()
    groups: list[GroupCost] = field(default_factory=list)

    def add(self, other: CostSummary | GroupCost) -> None:
        """Fold another summary's or a group's totals into this one (groups are not merged)."""
        self.machine_hours += other.machine_hours
        for name, hours in other.accelerator_hours.items():
            _add(self.accelerator_hours, name, hours)
        self.cost_usd += other.cost_usd
        self.on_demand_usd += other.on_demand_usd
        self.covered_usd += other.covered_usd
        # A group's `running` counts machines; a summary's is a flag (True > 0).
        self.running = self.running or other.running > 0


def summarize(intervals: Iterable[BilledInterval], now: datetime) -> CostSummary:
    """Machine-hours, accelerator-hours by type, cost and on-demand equivalent of ``intervals``.

    Cost uses the Spot price for Spot intervals; ``on_demand_usd`` prices the same hours on demand.
    Intervals ``billed_to`` someone else add to hours and to ``covered_usd``, not to ``cost_usd``.
    """
    summary = CostSummary()
    groups: dict[tuple[str, MachineShape, bool], GroupCost] = {}
    billed_to: list[str] = []
    for interval in intervals:
        key = (interval.group, interval.shape, interval.spot)
        group = groups.get(key)
        if group is None:
            group = groups[key] = GroupCost(
                interval.group,
                interval.shape,
                interval.spot,
                hourly_price(interval.shape, interval.spot),
                hourly_price(interval.shape, False),
            )
        hours = interval_hours(interval, now)
        group.intervals += 1
        group.running += interval.machines if interval.end is None else 0
        group.machine_hours += hours
        accelerators = interval.shape.accelerators()
        if accelerators:
            _add(group.accelerator_hours, accelerators[0], hours * accelerators[1])
        cost = hours * (group.hourly_usd or _ZERO)
        if interval.billed_to is None:
            group.cost_usd += cost
            group.on_demand_usd += hours * (group.on_demand_hourly_usd or _ZERO)
        else:
            group.covered_usd += cost
            if interval.billed_to not in billed_to:
                billed_to.append(interval.billed_to)
    for group in groups.values():
        summary.add(group)
    summary.groups = sorted(groups.values(), key=lambda g: (g.group, g.shape.machine_type, g.spot))
    summary.billed_to = tuple(billed_to)
    return summary


# ============================================================================== wire (pure)
def usd(value: Decimal) -> float:
    """USD rounded half-up to 4 decimals, as a JSON number."""
    return float(value.quantize(USD_STEP, rounding=ROUND_HALF_UP))


def hours_wire(value: Decimal) -> float:
    """Hours rounded half-up to 6 decimals (3.6 ms), as a JSON number."""
    return float(value.quantize(HOURS_STEP, rounding=ROUND_HALF_UP))


def _accelerator_hours_wire(values: Mapping[str, Decimal]) -> dict[str, float]:
    return {name: hours_wire(values[name]) for name in sorted(values)}


def _group_wire(group: GroupCost, key: str) -> dict[str, Any]:
    out: dict[str, Any] = {key: group.group, **group.shape.to_wire(), "spot": group.spot}
    out["intervals"] = group.intervals
    if group.running:
        out["running"] = group.running
    if group.hourly_usd is None:
        out["priced"] = False
    else:
        out["hourlyPriceUsd"] = float(group.hourly_usd)
    out["machineHours"] = hours_wire(group.machine_hours)
    out["acceleratorHours"] = _accelerator_hours_wire(group.accelerator_hours)
    out["costUsd"] = usd(group.cost_usd)
    out["onDemandEquivalentUsd"] = usd(group.on_demand_usd)
    if group.covered_usd:
        out["coveredUsd"] = usd(group.covered_usd)
    return out


def totals_wire(summary: CostSummary) -> dict[str, Any]:
    """The figures every summary, row and total shares."""
    out: dict[str, Any] = {
        "machineHours": hours_wire(summary.machine_hours),
        "acceleratorHours": _accelerator_hours_wire(summary.accelerator_hours),
        "costUsd": usd(summary.cost_usd),
        "onDemandEquivalentUsd": usd(summary.on_demand_usd),
    }
    if summary.covered_usd:
        out["coveredUsd"] = usd(summary.covered_usd)
    return out


def summary_wire(summary: CostSummary, spot: bool, now: datetime, group_key: str = "pool") -> dict[str, Any]:
    """A job's ``cost`` as the status extension returns it."""
    out: dict[str, Any] = {"currency": CURRENCY, "spot": spot, **totals_wire(summary)}
    if summary.billed_to:
        out["billedTo"] = summary.billed_to[0] if len(summary.billed_to) == 1 else list(summary.billed_to)
    out["running"] = summary.running
    out["asOf"] = format_timestamp(now)
    out["pools" if group_key == "pool" else "groups"] = [_group_wire(g, group_key) for g in summary.groups]
    return out


def _row_wire(usage: Usage, summary: CostSummary, group_key: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": usage.name,
        "kind": usage.kind,
        "displayName": usage.display_name,
        "state": usage.state,
        "spot": usage.spot,
    }
    for key, value in (
        ("createTime", usage.create_time),
        ("startTime", usage.start_time),
        ("endTime", usage.end_time),
    ):
        if value is not None:
            out[key] = format_timestamp(value)
    out.update(totals_wire(summary))
    if summary.billed_to:
        out["billedTo"] = summary.billed_to[0] if len(summary.billed_to) == 1 else list(summary.billed_to)
    out["running"] = summary.running
    out["pools" if group_key == "pool" else "groups"] = [_group_wire(g, group_key) for g in summary.groups]
    return out


def usage_rows(usages: Sequence[Usage], now: datetime) -> tuple[list[dict[str, Any]], CostSummary]:
    """One row per job (``by=job``), in the given order, and the exact totals over them."""
    total = CostSummary()
    rows = []
    for usage in usages:
        summary = summarize(usage.intervals, now)
        total.add(summary)
        rows.append(_row_wire(usage, summary, "pool"))
    return rows, total


def resource_rows(
    resources: Sequence[Usage], jobs: Iterable[Usage], now: datetime
) -> tuple[list[dict[str, Any]], CostSummary]:
    """One row per persistent resource (``by=resource``) and the exact totals over them.

    A resource is billed for every interval its machines run, idle or not. Job intervals ``billed_to`` a
    resource add to that resource's ``usedMachineHours`` and ``jobs`` count, so that idle capacity shows.
    """
    used: dict[str, Decimal] = {}
    job_count: dict[str, set[str]] = {}
    for job in jobs:
        for interval in job.intervals:
            if interval.billed_to is not None:
                _add(used, interval.billed_to, interval_hours(interval, now))
                job_count.setdefault(interval.billed_to, set()).add(job.name)
    total = CostSummary()
    rows = []
    for resource in resources:
        summary = summarize(resource.intervals, now)
        total.add(summary)
        row = _row_wire(resource, summary, "resourcePool")
        row["usedMachineHours"] = hours_wire(used.get(resource.name, _ZERO))
        row["jobs"] = len(job_count.get(resource.name, ()))
        rows.append(row)
    return rows, total


def report_wire(by: str, rows: list[dict[str, Any]], total: CostSummary, now: datetime) -> dict[str, Any]:
    """The costs endpoint's answer: rows and their totals (rounded from the exact sum, not row by row)."""
    totals = {"count": len(rows), **totals_wire(total)}
    return {
        "by": by,
        "currency": CURRENCY,
        "asOf": format_timestamp(now),
        "pricing": PRICING_NOTE,
        "rows": rows,
        "totals": totals,
    }
