"""The rules a PersistentResource must satisfy before it is stored. Pure: returns field violations."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from trainworks.kernel.errors import FieldViolation
from trainworks.kernel.wire_errors import map_key
from trainworks.kinds.custom_jobs.validation import (
    _check_machine,
    check_boot_disk_size,
    check_display_name,
    check_encryption_spec,
    check_labels,
)
from trainworks.kinds.persistent_resources.wire import PersistentResource, ResourcePool

RESOURCE_ID = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
MAX_POOLS = 16
MAX_REPLICAS = 1000
# Modules the resource's pre-started interpreters import before any job arrives, e.g. `torch` or
# `torch-numpy` (label values allow lowercase letters, digits, '_' and '-'; '-' separates modules).
PRELOAD_LABEL = "trainworks-preload"
_MODULE = re.compile(r"^[a-z_][a-z0-9_]*$")


def check_resource_id(value: str) -> list[FieldViolation]:
    if not value:
        return [FieldViolation("persistent_resource_id", "Required field is not set.")]
    if not RESOURCE_ID.fullmatch(value):
        return [
            FieldViolation(
                "persistent_resource_id",
                f"{value[:80]!r} is not a valid ID: 1 to 63 characters, lowercase letters, digits and '-', "
                "starting with a letter and not ending with '-' (^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$)",
            )
        ]
    return []


def preload_modules(labels: Mapping[str, str]) -> tuple[str, ...]:
    value = labels.get(PRELOAD_LABEL, "")
    return tuple(part for part in value.split("-") if part)


def check_preload(labels: Mapping[str, str]) -> list[FieldViolation]:
    value = labels.get(PRELOAD_LABEL)
    if value is None:
        return []
    bad = [part for part in value.split("-") if part and not _MODULE.match(part)]
    if bad:
        return [
            FieldViolation(
                map_key("labels", PRELOAD_LABEL),
                f"{bad[0]!r} is not a top-level module name; list modules separated by '-', e.g. torch-numpy",
            )
        ]
    return []


def replica_bounds(pool: Mapping[str, Any]) -> int:
    """How many replicas jobs may use in a canonical pool: its replicaCount, or its autoscaling maximum."""
    autoscaling = pool.get("autoscalingSpec") or {}
    if "maxReplicaCount" in autoscaling:
        return int(autoscaling["maxReplicaCount"])
    return int(pool.get("replicaCount", 0) or 0)


def check_pool_counts(pool: ResourcePool, path: str) -> list[FieldViolation]:
    """replicaCount and autoscalingSpec: replicaCount >= 1; min > 0 (0 is only for Ray), min <= replicaCount,
    min < max, max >= replicaCount."""
    out: list[FieldViolation] = []
    count = pool.replica_count
    if count is not None and count < 1:
        out.append(FieldViolation(f"{path}.replica_count", f"must be at least 1, got {count}"))
    elif count is not None and count > MAX_REPLICAS:
        out.append(FieldViolation(f"{path}.replica_count", f"must be at most {MAX_REPLICAS}, got {count}"))
    scaling = pool.autoscaling_spec
    if scaling is None:
        return out
    where = f"{path}.autoscaling_spec"
    low, high = scaling.min_replica_count, scaling.max_replica_count
    if high is None:
        out.append(FieldViolation(f"{where}.max_replica_count", "Required field is not set."))
    elif high > MAX_REPLICAS:
        out.append(FieldViolation(f"{where}.max_replica_count", f"must be at most {MAX_REPLICAS}"))
    if low is not None and low < 1:
        out.append(
            FieldViolation(
                f"{where}.min_replica_count", f"must be at least 1 (0 is allowed only with Ray), got {low}"
            )
        )
    if low is not None and high is not None and low >= high:
        out.append(
            FieldViolation(
                f"{where}.min_replica_count",
                f"min_replica_count ({low}) must be less than max_replica_count ({high})",
            )
        )
    if count is not None and count >= 1:
        if low is not None and low > count:
            out.append(
                FieldViolation(
                    f"{where}.min_replica_count",
                    f"min_replica_count ({low}) must not exceed replica_count ({count})",
                )
            )
        if high is not None and high < count:
            out.append(
                FieldViolation(
                    f"{where}.max_replica_count",
                    f"max_replica_count ({high}) must not be less than replica_count ({count})",
                )
            )
    return out


def _check_pool(pool: ResourcePool, path: str) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    if pool.id and not RESOURCE_ID.fullmatch(pool.id):
        out.append(
            FieldViolation(
                f"{path}.id",
                f"{pool.id[:80]!r} is not a valid pool ID: lowercase letters, digits and '-', starting "
                "with a letter, at most 63 characters",
            )
        )
    if pool.machine_spec is None:
        out.append(FieldViolation(f"{path}.machine_spec", "Required field is not set."))
    else:
        out += _check_machine(pool, path)
    out += check_pool_counts(pool, path)
    out += check_boot_disk_size(pool.disk_spec, f"{path}.disk_spec")
    return out


def validate_resource(resource: PersistentResource) -> list[FieldViolation]:
    out = check_display_name(resource.display_name, required=False)
    pools = resource.resource_pools
    if not pools:
        out.append(FieldViolation("resource_pools", "Required field is not set."))
    elif len(pools) > MAX_POOLS:
        out.append(FieldViolation("resource_pools", f"at most {MAX_POOLS} resource pools are allowed"))
    seen: dict[str, int] = {}
    for i, pool in enumerate(pools[:MAX_POOLS]):
        out += _check_pool(pool, f"resource_pools[{i}]")
        if pool.id:
            if pool.id in seen:
                out.append(
                    FieldViolation(
                        f"resource_pools[{i}].id",
                        f"duplicate pool ID {pool.id!r} (also resource_pools[{seen[pool.id]}])",
                    )
                )
            seen.setdefault(pool.id, i)
    out += check_labels(resource.labels)
    out += check_preload(resource.labels)
    out += check_encryption_spec(resource.encryption_spec)
    runtime = resource.resource_runtime_spec
    if runtime is not None:
        if runtime.ray_spec is not None:
            out.append(
                FieldViolation(
                    "resource_runtime_spec.ray_spec",
                    "Ray clusters are not supported by this server; omit ray_spec to run CustomJobs",
                )
            )
        account = runtime.service_account_spec
        if account is not None and account.service_account and not account.enable_custom_service_account:
            out.append(
                FieldViolation(
                    "resource_runtime_spec.service_account_spec.enable_custom_service_account",
                    "must be true when service_account is set",
                )
            )
    return out


def fill_pools(pools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Canonical pools with what the service fills in: an ID where none was given, and replicaCount (the
    autoscaling minimum, or 1) where it was omitted."""
    taken = {p["id"] for p in pools if p.get("id")}
    out: list[dict[str, Any]] = []
    counter = 0
    for pool in pools:
        pool = dict(pool)
        if not pool.get("id"):
            machine = str((pool.get("machineSpec") or {}).get("machineType", "pool"))
            while True:
                candidate = f"{machine}-{counter}"[:63].rstrip("-")
                counter += 1
                if candidate not in taken and RESOURCE_ID.match(candidate):
                    break
            pool = {"id": candidate, **pool}
            taken.add(candidate)
        if "replicaCount" not in pool:
            minimum = (pool.get("autoscalingSpec") or {}).get("minReplicaCount")
            pool["replicaCount"] = str(minimum if minimum is not None else 1)
        out.append(pool)
    return out
