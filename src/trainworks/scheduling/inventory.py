"""The capacity model: regions, their zones' machines, and per-project quotas.

An inventory says how many machines of each type exist in each zone, how many vCPUs and accelerators one
project may use at once in a region, and which regions are stocked out. It is loaded from a YAML (or JSON)
file, or is the built-in default: one elastic region named ``local`` that serves every location and has no
quotas, which is how a single host running jobs as local processes behaves.

File format::

    regions:
      us-central1:
        cpu_quota: 64                            # vCPUs per project at once; absent or null = unlimited
        accelerator_quotas: {NVIDIA_TESLA_A100: 4}   # per project at once; an absent name = unlimited
        preemption_rate_per_hour: 0.0            # expected preemptions of a SPOT replica per hour (Poisson)
        stockout: false                          # true: no capacity can be had at all right now
        zones:
          us-central1-a: {machines: {a2-highgpu-1g: 2, n1-standard-4: 10}}
          us-central1-b: {machines: {n1-standard-4: 4}}
          us-central1-c: {elastic: true}         # unlimited machines of every type
        reservations:                            # capacity held for jobs that consume reservations
          my-res:
            zone: us-central1-a                  # a zone of this region
            machine_type: a2-highgpu-1g          # one machine shape: the type and, for n1, the
            count: 2                             #   accelerator_type and accelerator_count per machine
            project: my-project                  # project ID or number allowed to use it; absent = any
            specific_only: false                 # true: only SPECIFIC_RESERVATION jobs naming it
      local: {elastic: true}                     # one elastic zone named "local-a"
    default: local                               # serves locations not listed; absent = not served

A reservation's machines are carved out of its zone's machines of that type: the zone above has 2
a2-highgpu-1g, both held by ``my-res``, so a job that does not consume reservations finds none there. The
reservations of one type in one zone must not hold more machines than the zone has. How jobs consume
reservations (``reservationAffinity``) is described in :mod:`trainworks.scheduling.admission`.

Every mistake raises :class:`InventoryError` naming the file and the path of the bad value, e.g.
``inventory.yaml: regions.us-central1.zones.us-central1-a.machines.a2-highgpu-lg: unknown machine type``.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from trainworks.catalog import machines as catalog
from trainworks.catalog.accelerators import AcceleratorType

_EMPTY: Mapping[str, int] = MappingProxyType({})


class InventoryError(ValueError):
    """An inventory file that cannot be used; the message names the file and the bad value's path."""


@dataclass(frozen=True)
class Zone:
    name: str
    machines: Mapping[str, int] | None  # machine type -> how many exist; None = elastic (unlimited)

    @property
    def elastic(self) -> bool:
        return self.machines is None


@dataclass(frozen=True)
class Reservation:
    """Capacity of one machine shape in one zone, held for the jobs that consume it (see admission)."""

    name: str
    zone: str
    machine_type: str
    count: int  # machines held, carved out of the zone's machines of that type
    accelerator_type: str | None = None  # per machine; the built-in one for a2/a3/g2
    accelerator_count: int = 0  # per machine
    project: str | None = None  # project ID or number allowed to consume it; None = any project
    specific_only: bool = False  # only SPECIFIC_RESERVATION consumers naming it (specificReservationRequired)

    def full_name(self, project: str) -> str:
        return f"projects/{project}/zones/{self.zone}/reservations/{self.name}"

    def describe_shape(self) -> str:
        """The machine shape, e.g. ``a2-highgpu-1g`` or ``n1-standard-8 with 2 × NVIDIA_TESLA_T4``."""
        info = catalog.machine_type(self.machine_type)
        if self.accelerator_type and info is not None and info.accelerator_type is None:
            return f"{self.machine_type} with {self.accelerator_count} × {self.accelerator_type}"
        return self.machine_type


RESERVATION_NAME = re.compile(r"^[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?$")
_RESERVATION_PATH = re.compile(
    r"^projects/(?P<project>[^/]+)/(?:zones/(?P<zone>[^/]+)/)?reservations/(?P<name>[^/]+)$"
)


def parse_reservation_name(value: str) -> tuple[str | None, str | None, str] | None:
    """(project, zone, name) of a reservation named in a SPECIFIC_RESERVATION affinity, or None if malformed.

    Accepts the full name ``projects/{project}/zones/{zone}/reservations/{name}``, Compute Engine's shared
    form ``projects/{project}/reservations/{name}`` (no zone) and the bare ``{name}``.
    """
    match = _RESERVATION_PATH.match(value)
    if match is not None:
        project, zone, name = match.group("project", "zone", "name")
    elif "/" not in value:
        project, zone, name = None, None, value
    else:
        return None
    if not RESERVATION_NAME.match(name):
        return None
    return project, zone, name


@dataclass(frozen=True)
class Region:
    name: str
    zones: tuple[Zone, ...]
    cpu_quota: int | None = None  # vCPUs one project may use at once in the region; None = unlimited
    accelerator_quotas: Mapping[str, int] = field(default_factory=lambda: _EMPTY)  # absent name = unlimited
    preemption_rate_per_hour: float = 0.0  # expected preemptions of a SPOT replica per hour (Poisson)
    stockout: bool = False  # no capacity can be had at all right now (every job waits)
    reservations: Mapping[str, Reservation] = field(default_factory=lambda: MappingProxyType({}))

    def zone(self, name: str) -> Zone | None:
        for zone in self.zones:
            if zone.name == name:
                return zone
        return None


@dataclass(frozen=True)
class Inventory:
    regions: Mapping[str, Region]
    default: Region | None = None  # serves locations not listed in `regions`

    def region(self, location: str) -> Region | None:
        """The region serving ``location``: the one of that name, else the default, else None."""
        return self.regions.get(location, self.default)

    def describe_served(self) -> str:
        """Which locations this inventory serves, for error messages."""
        names = ", ".join(self.regions) or "none"
        default = "no default region" if self.default is None else f"default region: {self.default.name}"
        return f"regions: {names}; {default}"

    def with_project_numbers(self, number_of: Callable[[str], str]) -> Inventory:
        """A copy whose reservations name their allowed project by number.

        The planner compares a reservation's ``project`` with the job's project *number*; a reservation that
        names a project ID matches only once this has mapped it (``number_of``: project ID -> number).
        """

        def resolve(region: Region) -> Region:
            if not any(r.project and not r.project.isdigit() for r in region.reservations.values()):
                return region
            reservations = {
                name: replace(r, project=number_of(r.project)) if r.project and not r.project.isdigit() else r
                for name, r in region.reservations.items()
            }
            return replace(region, reservations=MappingProxyType(reservations))

        regions = {name: resolve(region) for name, region in self.regions.items()}
        default = None if self.default is None else regions.get(self.default.name, resolve(self.default))
        return Inventory(regions=MappingProxyType(regions), default=default)


def elastic_region(name: str) -> Region:
    """A region with one elastic zone ``<name>-a`` and no quotas."""
    return Region(name=name, zones=(Zone(f"{name}-a", None),), cpu_quota=None, accelerator_quotas=_EMPTY)


def default_inventory() -> Inventory:
    """One elastic region named ``local`` serving every location, with no quotas."""
    local = elastic_region("local")
    return Inventory(regions=MappingProxyType({"local": local}), default=local)


def load_inventory(path: Path | str | None) -> Inventory:
    """Load an inventory file (YAML, or JSON when the name ends in ``.json``); None: the default."""
    if path is None:
        return default_inventory()
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InventoryError(f"{path}: cannot read the inventory file: {exc.strerror or exc}") from exc
    try:
        raw = json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (ValueError, yaml.YAMLError) as exc:
        kind = "JSON" if path.suffix.lower() == ".json" else "YAML"
        detail = " ".join(str(exc).split())
        raise InventoryError(f"{path}: not valid {kind}: {detail}") from exc
    return parse_inventory(raw, source=str(path))


def parse_inventory(raw: Any, source: str = "inventory") -> Inventory:
    """Validate an already-parsed inventory document (see the module docstring for the format)."""
    return _Parser(source).inventory(raw)


# ---------------------------------------------------------------------------------------------------------
_TOP_KEYS = ("regions", "default")
_REGION_KEYS = (
    "zones",
    "cpu_quota",
    "accelerator_quotas",
    "preemption_rate_per_hour",
    "stockout",
    "elastic",
    "reservations",
)
_ZONE_KEYS = ("machines", "elastic")
_RESERVATION_KEYS = (
    "zone",
    "machine_type",
    "count",
    "accelerator_type",
    "accelerator_count",
    "project",
    "specific_only",
)
_PROJECT_ID = re.compile(r"^[a-z][-a-z0-9.:]{0,62}$")


def accelerator_names() -> list[str]:
    """Accelerator enum names a quota may name (every AcceleratorType but UNSPECIFIED)."""
    return [m.name for m in AcceleratorType if m.name != catalog.UNSPECIFIED]


def _did_you_mean(candidates: list[str]) -> str:
    return f"; did you mean {', '.join(candidates)}?" if candidates else ""


class _Parser:
    def __init__(self, source: str) -> None:
        self.source = source

    def error(self, where: str, message: str) -> InventoryError:
        return InventoryError(f"{self.source}: {where}: {message}" if where else f"{self.source}: {message}")

    def mapping(self, value: Any, where: str, allowed: tuple[str, ...] | None = None) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(where, f"must be a mapping, got {_kind(value)}")
        for key in value:
            if not isinstance(key, str) or not key.strip():
                raise self.error(where, f"keys must be non-empty strings, got {key!r}")
            if allowed is not None and key not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
                raise self.error(
                    where or "top level",
                    f"unknown key {key!r}{_did_you_mean(close)} (allowed: {', '.join(allowed)})",
                )
        return value

    def count(self, value: Any, where: str, what: str = "a count") -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(where, f"{what} must be a whole number, got {_kind(value)} {value!r}")
        if value < 0:
            raise self.error(where, f"{what} must be >= 0, got {value}")
        return value

    def flag(self, spec: dict[str, Any], key: str, where: str) -> bool:
        """The true/false `key` of `spec`; false when absent."""
        value = spec.get(key, False)
        if not isinstance(value, bool):
            raise self.error(f"{where}.{key}", f"must be true or false, got {_kind(value)}")
        return value

    def elastic(self, spec: dict[str, Any], where: str, listed: str, meaning: str) -> bool:
        """Whether `spec` sets `elastic: true`, which stands instead of its `listed` key (`meaning`: what
        elastic means there): exactly one of the two."""
        elastic = self.flag(spec, "elastic", where)
        if elastic and listed in spec:
            raise self.error(where, f"{meaning}; remove '{listed}' or 'elastic'")
        if not elastic and listed not in spec:
            raise self.error(where, f"missing key '{listed}' (or set 'elastic: true')")
        return elastic

    def inventory(self, raw: Any) -> Inventory:
        top = self.mapping(raw, "", _TOP_KEYS)
        if "regions" not in top:
            raise self.error("", "missing key 'regions'")
        regions_raw = self.mapping(top["regions"], "regions")
        if not regions_raw:
            raise self.error("regions", "must list at least one region")
        regions: dict[str, Region] = {}
        zone_owner: dict[str, str] = {}
        for name, spec in regions_raw.items():
            region = self.region(name, spec, f"regions.{name}")
            for zone in region.zones:
                if zone.name in zone_owner:
                    raise self.error(
                        f"regions.{name}.zones.{zone.name}",
                        f"zone {zone.name!r} is already a zone of region {zone_owner[zone.name]!r}",
                    )
                zone_owner[zone.name] = name
            regions[name] = region
        default = top.get("default")
        default_region: Region | None = None
        if default is not None:
            if not isinstance(default, str):
                raise self.error("default", f"must be a region name, got {_kind(default)}")
            if default not in regions:
                close = difflib.get_close_matches(default, list(regions), n=1, cutoff=0.6)
                raise self.error(
                    "default",
                    f"unknown region {default!r}{_did_you_mean(close)} (regions: {', '.join(regions)})",
                )
            default_region = regions[default]
        return Inventory(regions=MappingProxyType(regions), default=default_region)

    def region(self, name: str, raw: Any, where: str) -> Region:
        spec = self.mapping({} if raw is None else raw, where, _REGION_KEYS)
        if self.elastic(spec, where, "zones", "an elastic region has one implicit zone"):
            zones: tuple[Zone, ...] = (Zone(f"{name}-a", None),)
        else:
            zones_raw = self.mapping(spec["zones"], f"{where}.zones")
            if not zones_raw:
                raise self.error(f"{where}.zones", "must list at least one zone")
            zones = tuple(self.zone(z, zspec, f"{where}.zones.{z}") for z, zspec in zones_raw.items())

        cpu_quota = spec.get("cpu_quota")
        if cpu_quota is not None:
            cpu_quota = self.count(cpu_quota, f"{where}.cpu_quota", "cpu_quota")

        quotas_raw = spec.get("accelerator_quotas")
        quotas: dict[str, int] = {}
        if quotas_raw is not None:
            known = accelerator_names()
            for acc, limit in self.mapping(quotas_raw, f"{where}.accelerator_quotas").items():
                path = f"{where}.accelerator_quotas.{acc}"
                if acc not in known:
                    close = difflib.get_close_matches(acc.upper(), known, n=3, cutoff=0.6)
                    raise self.error(path, f"unknown accelerator type {acc!r}{_did_you_mean(close)}")
                if limit is not None:  # null = unlimited, same as absent
                    quotas[acc] = self.count(limit, path, "an accelerator quota")

        rate = spec.get("preemption_rate_per_hour", 0.0)
        if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
            raise self.error(f"{where}.preemption_rate_per_hour", f"must be a number, got {rate!r}")
        if rate < 0.0:
            raise self.error(
                f"{where}.preemption_rate_per_hour",
                f"is the expected preemptions per replica-hour and must not be negative, got {rate}",
            )

        stockout = self.flag(spec, "stockout", where)

        reservations = self.reservations(spec.get("reservations"), zones, f"{where}.reservations")

        return Region(
            name=name,
            zones=zones,
            cpu_quota=cpu_quota,
            accelerator_quotas=MappingProxyType(quotas),
            preemption_rate_per_hour=float(rate),
            stockout=stockout,
            reservations=MappingProxyType(reservations),
        )

    def reservations(self, raw: Any, zones: tuple[Zone, ...], where: str) -> dict[str, Reservation]:
        if raw is None:
            return {}
        out: dict[str, Reservation] = {}
        held: dict[tuple[str, str], int] = {}  # (zone, machine type) -> machines held by reservations
        for name, spec in self.mapping(raw, where).items():
            out[name] = reservation = self.reservation(name, spec, zones, f"{where}.{name}")
            key = (reservation.zone, reservation.machine_type)
            held[key] = held.get(key, 0) + reservation.count
            zone = next(z for z in zones if z.name == reservation.zone)
            if zone.machines is None:
                continue
            have = zone.machines.get(reservation.machine_type, 0)
            if held[key] > have:
                others = held[key] - reservation.count
                also = f" (with {others} held by earlier reservations)" if others else ""
                raise self.error(
                    f"{where}.{name}.count",
                    f"reservations hold {held[key]} × {reservation.machine_type} in zone {zone.name}{also}, "
                    f"but the zone has only {have}; a reservation's machines are carved out of its zone's "
                    "machines of that type",
                )
        return out

    def reservation(self, name: str, raw: Any, zones: tuple[Zone, ...], where: str) -> Reservation:
        if not RESERVATION_NAME.match(name):
            raise self.error(
                where,
                f"invalid reservation name {name!r}: 1-63 lowercase letters, digits and '-', starting with a "
                "letter and not ending with '-'",
            )
        spec = self.mapping(raw, where, _RESERVATION_KEYS)
        for key in ("zone", "machine_type", "count"):
            if key not in spec:
                raise self.error(where, f"missing key {key!r}")

        zone = spec["zone"]
        names = [z.name for z in zones]
        if not isinstance(zone, str):
            raise self.error(f"{where}.zone", f"must be a zone name, got {_kind(zone)}")
        if zone not in names:
            close = difflib.get_close_matches(zone, names, n=1, cutoff=0.6)
            raise self.error(
                f"{where}.zone",
                f"{zone!r} is not a zone of this region{_did_you_mean(close)} (zones: {', '.join(names)})",
            )

        machine_name = spec["machine_type"]
        if not isinstance(machine_name, str):
            raise self.error(f"{where}.machine_type", f"must be a machine type, got {_kind(machine_name)}")
        machine = catalog.machine_type(machine_name)
        if machine is None:
            hint = catalog.suggest(machine_name)
            raise self.error(
                f"{where}.machine_type", f"unknown machine type {machine_name!r}{_did_you_mean(hint)}"
            )
        zone_machines = next(z for z in zones if z.name == zone).machines
        if zone_machines is not None and not zone_machines.get(machine_name):
            raise self.error(
                f"{where}.machine_type",
                f"zone {zone} has no {machine_name} machines to reserve "
                f"(it has: {', '.join(zone_machines) or 'none'})",
            )

        count = self.count(spec["count"], f"{where}.count", "count")
        if count < 1:
            raise self.error(f"{where}.count", "a reservation holds at least 1 machine, got 0")

        acc = spec.get("accelerator_type")
        acc_count = spec.get("accelerator_count")
        if acc is not None:
            known = accelerator_names()
            if not isinstance(acc, str) or acc not in known:
                close = difflib.get_close_matches(str(acc).upper(), known, n=3, cutoff=0.6)
                raise self.error(
                    f"{where}.accelerator_type", f"unknown accelerator type {acc!r}{_did_you_mean(close)}"
                )
        if acc_count is not None:
            acc_count = self.count(acc_count, f"{where}.accelerator_count", "accelerator_count")
        if machine.accelerator_type is not None:  # built in: may be left out, else must match
            acc = machine.accelerator_type if acc is None else acc
            acc_count = machine.accelerator_count if acc_count is None else acc_count
        problem = catalog.check_accelerator(machine, acc or catalog.UNSPECIFIED, acc_count or 0)
        if problem:
            field_name = "accelerator_count" if acc and acc_count is not None else "accelerator_type"
            if acc and (info := catalog.accelerator(acc)) is not None:
                allowed = machine.family in info.allowed_families or machine.accelerator_type == acc
                field_name = "accelerator_count" if allowed else "accelerator_type"
            raise self.error(f"{where}.{field_name}", problem)

        project = spec.get("project")
        if project is not None:
            if isinstance(project, int) and not isinstance(project, bool) and project > 0:
                project = str(project)
            if not isinstance(project, str) or not (
                (project.isdigit() and len(project) <= 19) or _PROJECT_ID.match(project)
            ):
                raise self.error(
                    f"{where}.project",
                    f"must be a project ID or number, got {_kind(project)} {project!r}",
                )

        specific_only = self.flag(spec, "specific_only", where)

        return Reservation(
            name=name,
            zone=zone,
            machine_type=machine_name,
            count=count,
            accelerator_type=acc or None,
            accelerator_count=(acc_count or 0) if acc else 0,
            project=project,
            specific_only=specific_only,
        )

    def zone(self, name: str, raw: Any, where: str) -> Zone:
        spec = self.mapping({} if raw is None else raw, where, _ZONE_KEYS)
        if self.elastic(spec, where, "machines", "an elastic zone has unlimited machines"):
            return Zone(name, None)
        machines: dict[str, int] = {}
        for machine, count in self.mapping(spec["machines"], f"{where}.machines").items():
            path = f"{where}.machines.{machine}"
            if catalog.machine_type(machine) is None:
                hint = catalog.suggest(machine)
                raise self.error(path, f"unknown machine type {machine!r}{_did_you_mean(hint)}")
            machines[machine] = self.count(count, path, "a machine count")
        return Zone(name, MappingProxyType(machines))


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
    }.get(type(value), type(value).__name__)
