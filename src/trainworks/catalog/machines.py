"""Machine-type and accelerator catalog for Vertex AI custom training worker pools.

Data lives in ``machines.json`` next to this module; it is loaded once. Prices there are
approximate us-central1 list prices meant for cost accounting, never for billing.
"""

from __future__ import annotations

import difflib
import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

UNSPECIFIED = "ACCELERATOR_TYPE_UNSPECIFIED"


@dataclass(frozen=True)
class MachineType:
    name: str
    family: str
    vcpus: int
    memory_gib: float
    accelerator_type: str | None  # built-in accelerator name for g2/a2/a3, else None
    accelerator_count: int  # built-in count, else 0
    hourly_usd: float  # machine only, on-demand


@dataclass(frozen=True)
class AcceleratorInfo:
    name: str
    allowed_families: tuple[str, ...]
    hourly_usd: float


@dataclass(frozen=True)
class _Limit:
    max_vcpus: int | None
    max_memory_gib: float | None


@dataclass(frozen=True)
class _Catalog:
    machines: dict[str, MachineType]
    accelerators: dict[str, AcceleratorInfo]
    # attachable accelerators only: name -> {count: limit}; built-in ones are absent
    attach_limits: dict[str, dict[int, _Limit]]
    spot_factor: dict[str, float]


@functools.cache
def _catalog() -> _Catalog:
    text = resources.files("trainworks.catalog").joinpath("machines.json").read_text(encoding="utf-8")
    return _parse(json.loads(text))


def _parse(raw: dict[str, Any]) -> _Catalog:
    families: dict[str, dict[str, float]] = raw["families"]
    accelerators: dict[str, AcceleratorInfo] = {}
    attach_limits: dict[str, dict[int, _Limit]] = {}
    for name, spec in raw["accelerators"].items():
        accelerators[name] = AcceleratorInfo(
            name=name, allowed_families=tuple(spec["families"]), hourly_usd=float(spec["hourly_usd"])
        )
        if "limits" in spec:
            attach_limits[name] = {
                int(count): _Limit(lim.get("max_vcpus"), lim.get("max_memory_gib"))
                for count, lim in sorted(spec["limits"].items(), key=lambda kv: int(kv[0]))
            }

    machines: dict[str, MachineType] = {}
    for spec in raw["machine_types"]:
        fam = families[spec["family"]]  # KeyError here means a broken data file
        vcpus, mem = int(spec["vcpus"]), float(spec["memory_gib"])
        acc = spec.get("accelerator_type")
        if acc is not None and spec["family"] not in accelerators[acc].allowed_families:
            raise ValueError(f"machines.json: {spec['name']} has built-in {acc} not allowed on its family")
        machines[spec["name"]] = MachineType(
            name=spec["name"],
            family=spec["family"],
            vcpus=vcpus,
            memory_gib=mem,
            accelerator_type=acc,
            accelerator_count=int(spec.get("accelerator_count", 0)),
            hourly_usd=round(vcpus * fam["vcpu_hourly_usd"] + mem * fam["memory_gib_hourly_usd"], 6),
        )
    spot = {name: float(fam["spot_factor"]) for name, fam in families.items()}
    return _Catalog(machines, accelerators, attach_limits, spot)


def machine_type(name: str) -> MachineType | None:
    """Look up a machine type by its exact name (e.g. ``n1-standard-4``)."""
    return _catalog().machines.get(name)


def machine_types() -> list[MachineType]:
    """All known machine types, in catalog order (family, then size)."""
    return list(_catalog().machines.values())


def accelerator(name: str) -> AcceleratorInfo | None:
    """Look up an accelerator by its Vertex enum name (e.g. ``NVIDIA_TESLA_T4``)."""
    return _catalog().accelerators.get(name)


def _attachable(machine: MachineType) -> list[str]:
    """Accelerators that can be attached (not built in) to this machine's family."""
    cat = _catalog()
    return [
        name
        for name, info in cat.accelerators.items()
        if name in cat.attach_limits and machine.family in info.allowed_families
    ]


def _fits(machine: MachineType, limit: _Limit) -> bool:
    if limit.max_vcpus is not None and machine.vcpus > limit.max_vcpus:
        return False
    return limit.max_memory_gib is None or machine.memory_gib <= limit.max_memory_gib


def _fmt(values: list[Any] | tuple[Any, ...]) -> str:
    return ", ".join(str(v) for v in values)


def _gib(value: float) -> str:
    return f"{value:g} GiB"


def check_accelerator(machine: MachineType, accelerator_type: str, accelerator_count: int) -> str | None:
    """Validate an accelerator request against a machine type, as Vertex AI custom training does.

    ``accelerator_type`` is the AcceleratorType enum name (``ACCELERATOR_TYPE_UNSPECIFIED`` or ``""``
    when unset). Returns a human-readable error naming the allowed values, or None when valid.
    """
    acc = accelerator_type or UNSPECIFIED
    count = accelerator_count
    if count < 0:
        return f"accelerator_count must be >= 0, got {count}"

    # Accelerator-optimized types (g2/a2/a3): exactly the built-in accelerator and count.
    if machine.accelerator_type is not None:
        want = (
            f"accelerator_type {machine.accelerator_type} with accelerator_count {machine.accelerator_count}"
        )
        if acc == UNSPECIFIED:
            return f"machine type {machine.name} requires {want}; accelerator_type is unset"
        if acc != machine.accelerator_type:
            return f"machine type {machine.name} requires {want}; got accelerator_type {acc}"
        if count != machine.accelerator_count:
            return f"machine type {machine.name} requires {want}; got accelerator_count {count}"
        return None

    attachable = _attachable(machine)
    if acc == UNSPECIFIED:
        if count == 0:
            return None
        if not attachable:
            return (
                f"accelerator_count is {count} but accelerator_type is unset, and machine type "
                f"{machine.name} does not support accelerators; set accelerator_count to 0"
            )
        return (
            f"accelerator_count is {count} but accelerator_type is unset; set accelerator_type to one of "
            f"{_fmt(attachable)} for machine type {machine.name}, or accelerator_count to 0"
        )

    if not attachable:
        return (
            f"machine type {machine.name} does not support accelerators (got {acc}); leave accelerator_type "
            f"unset ({UNSPECIFIED}) with accelerator_count 0, or choose an n1, g2, a2 or a3 machine type"
        )
    if acc not in attachable:
        info = accelerator(acc)
        why = "unknown accelerator_type" if info is None else "accelerator_type"
        where = "" if info is None else f" cannot be attached to {machine.name}"
        hint = (
            "" if info is None else f" ({acc} comes built into {_fmt(info.allowed_families)} machine types)"
        )
        return f"{why} {acc}{where}; allowed for {machine.name}: {_fmt(attachable)}{hint}"

    limits = _catalog().attach_limits[acc]
    allowed = list(limits)
    if count == 0:
        return f"accelerator_type {acc} is set but accelerator_count is 0; allowed counts: {_fmt(allowed)}"
    if count not in limits:
        return (
            f"accelerator_count {count} is not allowed for {acc} on {machine.name}; "
            f"allowed counts: {_fmt(allowed)}"
        )
    limit = limits[count]
    if not _fits(machine, limit):
        caps = []
        if limit.max_vcpus is not None:
            caps.append(f"{limit.max_vcpus} vCPUs")
        if limit.max_memory_gib is not None:
            caps.append(_gib(limit.max_memory_gib))
        ok_counts = [c for c, lim in limits.items() if _fits(machine, lim)]
        fix = (
            f"use accelerator_count {_fmt(ok_counts)} or a smaller machine type"
            if ok_counts
            else "use a smaller machine type"
        )
        return (
            f"{count} x {acc} supports at most {' and '.join(caps)}, but {machine.name} has "
            f"{machine.vcpus} vCPUs and {_gib(machine.memory_gib)}; {fix}"
        )
    return None


def hourly_price(
    machine_type: str, accelerator_type: str, accelerator_count: int, spot: bool = False
) -> float:
    """Approximate hourly USD cost of one replica: machine plus accelerators (not for billing).

    Built-in accelerators of g2/a2/a3 types are always charged at their built-in count. With
    ``spot`` the family's Spot factor is applied to the total. Raises ValueError for unknown names.
    Compatibility is not checked here; use ``check_accelerator`` for that.
    """
    machine = _catalog().machines.get(machine_type)
    if machine is None:
        hint = suggest(machine_type)
        extra = f"; did you mean {_fmt(hint)}?" if hint else ""
        raise ValueError(f"unknown machine type {machine_type!r}{extra}")
    if machine.accelerator_type is not None:
        acc_name, count = machine.accelerator_type, machine.accelerator_count
    else:
        acc_name, count = accelerator_type or UNSPECIFIED, accelerator_count
    total = machine.hourly_usd
    if acc_name != UNSPECIFIED and count > 0:
        info = accelerator(acc_name)
        if info is None:
            raise ValueError(f"unknown accelerator type {acc_name!r}")
        total += info.hourly_usd * count
    if spot:
        total *= _catalog().spot_factor[machine.family]
    return round(total, 6)


def suggest(name: str) -> list[str]:
    """Up to three known machine-type names close to ``name``, for "did you mean" messages."""
    return difflib.get_close_matches(name.strip().lower(), list(_catalog().machines), n=3, cutoff=0.6)
