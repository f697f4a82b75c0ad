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
        preemption_rate_per_hour: 0.0            # chance per replica-hour that a SPOT replica is preempted
        stockout: false                          # true: no capacity can be had at all right now
        zones:
          us-central1-a: {machines: {a2-highgpu-1g: 2, n1-standard-4: 10}}
          us-central1-b: {machines: {n1-standard-4: 4}}
          us-central1-c: {elastic: true}         # unlimited machines of every type
      local: {elastic: true}                     # one elastic zone named "local-a"
    default: local                               # serves locations not listed; absent = not served

Every mistake raises :class:`InventoryError` naming the file and the path of the bad value, e.g.
``inventory.yaml: regions.us-central1.zones.us-central1-a.machines.a2-highgpu-lg: unknown machine type``.
"""

from __future__ import annotations

import difflib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from trainworks.catalog import machines as catalog
from trainworks.resources.enums import AcceleratorType

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
class Region:
    name: str
    zones: tuple[Zone, ...]
    cpu_quota: int | None = None  # vCPUs one project may use at once in the region; None = unlimited
    accelerator_quotas: Mapping[str, int] = field(default_factory=lambda: _EMPTY)  # absent name = unlimited
    preemption_rate_per_hour: float = 0.0  # chance per replica-hour that a SPOT replica is preempted
    stockout: bool = False  # no capacity can be had at all right now (every job waits)

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
_REGION_KEYS = ("zones", "cpu_quota", "accelerator_quotas", "preemption_rate_per_hour", "stockout", "elastic")
_ZONE_KEYS = ("machines", "elastic")


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
        elastic = spec.get("elastic", False)
        if not isinstance(elastic, bool):
            raise self.error(f"{where}.elastic", f"must be true or false, got {_kind(elastic)}")
        if elastic:
            if "zones" in spec:
                raise self.error(
                    where, "an elastic region has one implicit zone; remove 'zones' or 'elastic'"
                )
            zones: tuple[Zone, ...] = (Zone(f"{name}-a", None),)
        else:
            if "zones" not in spec:
                raise self.error(where, "missing key 'zones' (or set 'elastic: true')")
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
        if not 0.0 <= rate <= 1.0:
            raise self.error(
                f"{where}.preemption_rate_per_hour",
                f"is a chance per replica-hour and must be between 0 and 1, got {rate}",
            )

        stockout = spec.get("stockout", False)
        if not isinstance(stockout, bool):
            raise self.error(f"{where}.stockout", f"must be true or false, got {_kind(stockout)}")

        return Region(
            name=name,
            zones=zones,
            cpu_quota=cpu_quota,
            accelerator_quotas=MappingProxyType(quotas),
            preemption_rate_per_hour=float(rate),
            stockout=stockout,
        )

    def zone(self, name: str, raw: Any, where: str) -> Zone:
        spec = self.mapping({} if raw is None else raw, where, _ZONE_KEYS)
        elastic = spec.get("elastic", False)
        if not isinstance(elastic, bool):
            raise self.error(f"{where}.elastic", f"must be true or false, got {_kind(elastic)}")
        if elastic:
            if "machines" in spec:
                raise self.error(
                    where, "an elastic zone has unlimited machines; remove 'machines' or 'elastic'"
                )
            return Zone(name, None)
        if "machines" not in spec:
            raise self.error(where, "missing key 'machines' (or set 'elastic: true')")
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
