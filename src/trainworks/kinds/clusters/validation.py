"""The rules a ModelDevelopmentCluster (training cluster) must satisfy. Pure: returns field violations.

Field paths are proto (snake_case) paths, e.g. `node_pools[1].scaling_spec.min_node_count`; map entries of
Slurm config are named `orchestrator_spec.slurm_spec.config.<Key>` with the key as sent.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from datetime import timedelta
from typing import Any, Protocol

from trainworks.catalog import machines as machine_catalog
from trainworks.catalog.accelerators import AcceleratorType
from trainworks.catalog.machines import MachineType
from trainworks.catalog.node_images import valid_image_name
from trainworks.jobs.enums import ReservationAffinityType
from trainworks.kernel.errors import FieldViolation
from trainworks.kinds.clusters.wire import (
    ModelDevelopmentCluster,
    NodePool,
    ProvisioningModel,
    SlurmSpec,
)
from trainworks.kinds.custom_jobs.validation import (
    _accelerator_field,
    _check_reservation_affinity,
    check_boot_disk_size,
    check_display_name,
    check_labels,
    check_required_format,
)
from trainworks.kinds.custom_jobs.wire import MachineSpec
from trainworks.slurm import keys

# With a slurmSpec the ID becomes the Slurm cluster name and node-name prefix: no hyphens (the docs).
SLURM_CLUSTER_ID = re.compile(r"^[a-z][a-z0-9]{0,9}$")
CLUSTER_ID = re.compile(r"^[a-z]([a-z0-9-]{0,8}[a-z0-9])?$")
# Pool and partition IDs are not specified by the docs: RFC 1035 labels of at most 32 characters, so that
# node names (`<cluster>-<pool>-<n>`) stay valid host names.
POOL_ID = re.compile(r"^[a-z]([a-z0-9-]{0,30}[a-z0-9])?$")
PARTITION_ID = POOL_ID
NETWORK = re.compile(r"^projects/[^/\s]+/global/networks/[^/\s]+$")
SUBNETWORK = re.compile(r"^projects/[^/\s]+/regions/[^/\s]+/subnetworks/[^/\s]+$")
# Filestore and Managed Lustre instances: projects/P/locations/ZONE/instances/I.
INSTANCE = re.compile(r"^projects/[^/\s]+/locations/[^/\s]+/instances/[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
ZONE = re.compile(r"^[a-z]+-[a-z]+[0-9]+-[a-z]$")
BUCKET = re.compile(r"^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$")
BOOT_DISK_TYPES = frozenset(
    {
        "pd-standard",
        "pd-balanced",
        "pd-ssd",
        "pd-extreme",
        "hyperdisk-balanced",
        "hyperdisk-extreme",
        "hyperdisk-ml",
        "hyperdisk-throughput",
    }
)
# As DiskSpec (persistent resources).
DEFAULT_BOOT_DISK: dict[str, str | int] = {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}
FLEX_START_MIN = timedelta(seconds=30)
FLEX_START_MAX = timedelta(seconds=604800)
DEFAULT_FLEX_START = "604800s"
SLURM = "orchestrator_spec.slurm_spec"

M = ProvisioningModel


class MachineCatalog(Protocol):
    """What validation reads of the machine catalog (the module trainworks.catalog.machines is one)."""

    def machine_type(self, name: str) -> MachineType | None: ...

    def check_accelerator(
        self, machine: MachineType, accelerator_type: str, accelerator_count: int
    ) -> str | None: ...

    def suggest(self, name: str) -> list[str]: ...


def check_cluster_id(value: str, slurm: bool = True) -> list[FieldViolation]:
    where = "model_development_cluster_id"
    if not value:
        return [FieldViolation(where, "Required field is not set.")]
    if slurm and "-" in value and CLUSTER_ID.fullmatch(value):
        return [
            FieldViolation(
                where,
                f"{value!r} is not a valid ID for a cluster with a slurm_spec: the ID names the Slurm "
                "cluster and its nodes, so it may not contain '-'; use 1 to 10 lowercase letters and digits, "
                "starting with a letter (^[a-z][a-z0-9]{0,9}$)",
            )
        ]
    pattern = SLURM_CLUSTER_ID if slurm else CLUSTER_ID
    if not pattern.fullmatch(value):
        allowed = "lowercase letters and digits" if slurm else "lowercase letters, digits and '-'"
        return [
            FieldViolation(
                where,
                f"{value[:80]!r} is not a valid ID: 1 to 10 characters, {allowed}, starting with a letter "
                f"({pattern.pattern})",
            )
        ]
    return []


def _not_instance(name: str) -> str:
    return f"{name[:200]!r} is not an instance name: use projects/PROJECT/locations/ZONE/instances/NAME"


# ------------------------------------------------------------------ machines and provisioning
def is_gpu(spec: MachineSpec | None, machines: MachineCatalog = machine_catalog) -> bool:
    """Whether a pool's machines have accelerators: built in (a2/a3/g2) or attached."""
    if spec is None:
        return False
    if spec.accelerator_count > 0 or spec.accelerator_type != AcceleratorType.ACCELERATOR_TYPE_UNSPECIFIED:
        return True
    info = machines.machine_type(spec.machine_type)
    return info is not None and info.accelerator_type is not None


def effective_model(pool: NodePool, machines: MachineCatalog = machine_catalog) -> ProvisioningModel | None:
    """The provisioning model a pool runs with: the one set, else ON_DEMAND for CPU pools and RESERVATION for
    GPU pools with a reservation affinity; None for a GPU pool with neither (rejected)."""
    if pool.provisioning_model != M.PROVISIONING_MODEL_UNSPECIFIED:
        return ProvisioningModel(pool.provisioning_model)
    if not is_gpu(pool.machine_spec, machines):
        return M.ON_DEMAND
    has_affinity = pool.machine_spec is not None and pool.machine_spec.reservation_affinity is not None
    return M.RESERVATION if has_affinity else None


def _check_machine(spec: MachineSpec, path: str, machines: MachineCatalog) -> list[FieldViolation]:
    where = f"{path}.machine_spec"
    out: list[FieldViolation] = []
    if spec.gpu_partition_size:
        out.append(FieldViolation(f"{where}.gpu_partition_size", "not supported for training cluster pools"))
    if spec.tpu_topology:
        out.append(FieldViolation(f"{where}.tpu_topology", "not supported for training cluster pools"))
    if not spec.machine_type:
        return [*out, FieldViolation(f"{where}.machine_type", "Required field is not set.")]
    machine = machines.machine_type(spec.machine_type)
    if machine is None:
        hint = machines.suggest(spec.machine_type)
        suffix = f"; did you mean {', '.join(hint)}?" if hint else ""
        return [
            *out,
            FieldViolation(f"{where}.machine_type", f"unknown machine type {spec.machine_type!r}{suffix}"),
        ]
    accelerator = AcceleratorType(spec.accelerator_type).name
    problem = machines.check_accelerator(machine, accelerator, spec.accelerator_count)
    if problem:
        out.append(
            FieldViolation(
                f"{where}.{_accelerator_field(machine, accelerator, spec.accelerator_count)}", problem
            )
        )
    return out


def _check_provisioning(pool: NodePool, path: str, machines: MachineCatalog) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    spec = pool.machine_spec
    affinity = spec.reservation_affinity if spec is not None else None
    model = effective_model(pool, machines)
    unset = pool.provisioning_model == M.PROVISIONING_MODEL_UNSPECIFIED
    if model is None:
        out.append(
            FieldViolation(
                f"{path}.provisioning_model",
                "Required for a GPU node pool without a reservation: set ON_DEMAND, SPOT or FLEX_START, or "
                "set machine_spec.reservation_affinity to use a reservation (RESERVATION)",
            )
        )
    elif model == M.RESERVATION and affinity is None:
        out.append(
            FieldViolation(
                f"{path}.machine_spec.reservation_affinity",
                "Required when provisioning_model is RESERVATION: name the reservation with "
                "SPECIFIC_RESERVATION",
            )
        )
    elif model != M.RESERVATION and affinity is not None:
        why = (
            "a CPU node pool without provisioning_model is ON_DEMAND; set provisioning_model to RESERVATION "
            "to use this reservation"
            if unset
            else f"must not be set when provisioning_model is {model.name}; use RESERVATION to consume it"
        )
        out.append(FieldViolation(f"{path}.machine_spec.reservation_affinity", why))
    if affinity is not None:
        where = f"{path}.machine_spec.reservation_affinity"
        kind = affinity.reservation_affinity_type
        if kind not in (
            ReservationAffinityType.TYPE_UNSPECIFIED,
            ReservationAffinityType.SPECIFIC_RESERVATION,
        ):
            out.append(
                FieldViolation(
                    f"{where}.reservation_affinity_type",
                    "training clusters take only SPECIFIC_RESERVATION, got "
                    + ReservationAffinityType(kind).name,
                )
            )
        else:
            out += _check_reservation_affinity(affinity, where)
    duration = pool.flex_start_max_duration
    if duration is not None:
        where = f"{path}.flex_start_max_duration"
        if model != M.FLEX_START:
            out.append(FieldViolation(where, "only allowed when provisioning_model is FLEX_START"))
        elif not FLEX_START_MIN <= duration <= FLEX_START_MAX:
            out.append(FieldViolation(where, "must be between 30s and 604800s (7 days)"))
    return out


def _check_pool(pool: NodePool, path: str, machines: MachineCatalog) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    out += check_required_format(
        pool.id,
        f"{path}.id",
        POOL_ID.fullmatch,
        f"{pool.id[:80]!r} is not a valid node pool ID: 1 to 32 lowercase letters, digits and '-', "
        "starting with a letter and not ending with '-'",
    )
    if pool.machine_spec is None:
        out.append(FieldViolation(f"{path}.machine_spec", "Required field is not set."))
    else:
        out += _check_machine(pool.machine_spec, path, machines)
    out += _check_provisioning(pool, path, machines)
    scaling = pool.scaling_spec
    if scaling is not None:
        low, high = scaling.min_node_count, scaling.max_node_count
        if low < 0:
            out.append(
                FieldViolation(f"{path}.scaling_spec.min_node_count", f"must not be negative, got {low}")
            )
        if high < 0:
            out.append(
                FieldViolation(f"{path}.scaling_spec.max_node_count", f"must not be negative, got {high}")
            )
        if 0 <= high < low:
            out.append(
                FieldViolation(
                    f"{path}.scaling_spec.min_node_count",
                    f"min_node_count ({low}) must not exceed max_node_count ({high})",
                )
            )
    if pool.zone and not ZONE.match(pool.zone):
        out.append(FieldViolation(f"{path}.zone", f"{pool.zone[:80]!r} is not a zone, e.g. us-central1-a"))
    disk = pool.boot_disk
    if disk is not None:
        if disk.boot_disk_type and disk.boot_disk_type not in BOOT_DISK_TYPES:
            out.append(
                FieldViolation(
                    f"{path}.boot_disk.boot_disk_type",
                    f"unknown disk type {disk.boot_disk_type[:80]!r}; use one of "
                    + ", ".join(sorted(BOOT_DISK_TYPES)),
                )
            )
        out += check_boot_disk_size(disk, f"{path}.boot_disk")
    if pool.node_image and not valid_image_name(pool.node_image):
        out.append(
            FieldViolation(
                f"{path}.node_image",
                f"{pool.node_image[:200]!r} is not an image: use projects/PROJECT/global/images/IMAGE or "
                "projects/PROJECT/global/images/family/FAMILY",
            )
        )
    for kind in ("filestores", "lustres"):
        for j, name in enumerate(getattr(pool, kind)):
            if not INSTANCE.match(name):
                out.append(FieldViolation(f"{path}.{kind}[{j}]", _not_instance(name)))
    out += check_labels(pool.labels, f"{path}.labels")
    confidential = pool.confidential_instance_config
    if confidential is not None and not confidential.confidential_instance_type:
        out.append(
            FieldViolation(
                f"{path}.confidential_instance_config.confidential_instance_type",
                "Required field is not set.",
            )
        )
    return out


def _check_pools(cluster: ModelDevelopmentCluster, machines: MachineCatalog) -> list[FieldViolation]:
    if not cluster.node_pools:
        return [FieldViolation("node_pools", "Required field is not set.")]
    out: list[FieldViolation] = []
    seen: dict[str, int] = {}
    for i, pool in enumerate(cluster.node_pools):
        out += _check_pool(pool, f"node_pools[{i}]", machines)
        if pool.id in seen:
            out.append(
                FieldViolation(
                    f"node_pools[{i}].id",
                    f"duplicate node pool ID {pool.id!r} (also node_pools[{seen[pool.id]}])",
                )
            )
        elif pool.id:
            seen[pool.id] = i
    return out


# ------------------------------------------------------------------ Slurm
def _check_pairs(
    config: Mapping[str, str],
    path: str,
    canonical: Callable[[str], str | None],
    reserved: Callable[[str], str | None],
    unknown: str,
    cannot: str,
) -> list[FieldViolation]:
    """slurm.conf pairs: known (`canonical` names them), not reserved, one token each, no key twice."""
    out: list[FieldViolation] = []
    seen: dict[str, str] = {}
    for key, value in config.items():
        where = f"{path}.{key}"
        name = canonical(key)
        if name is None:
            out.append(FieldViolation(where, f"{key[:80]!r} {unknown}"))
            continue
        reason = reserved(name)
        if reason:
            out.append(FieldViolation(where, f"{name} {cannot}: {reason}"))
            continue
        if name in seen:
            out.append(FieldViolation(where, f"{name} is also given as {seen[name]!r}"))
        seen.setdefault(name, key)
        problem = keys.check_value(value)
        if problem:
            out.append(FieldViolation(where, problem))
    return out


def _check_config(config: Mapping[str, str], path: str) -> list[FieldViolation]:
    """Global slurm.conf pairs."""
    return _check_pairs(
        config,
        path,
        keys.canonical_key,
        keys.reserved_reason,
        "is not a slurm.conf parameter (Slurm 22.05)",
        "cannot be set",
    )


def _check_line_config(
    config: Mapping[str, str],
    path: str,
    line: str,
    canonical: Callable[[str], str | None],
    reserved: Callable[[str], str | None],
) -> list[FieldViolation]:
    """Extra pairs of a `PartitionName=` or `NodeName=` line."""
    return _check_pairs(
        config,
        path,
        canonical,
        reserved,
        f"is not a parameter of a slurm.conf {line} line",
        "cannot be set here",
    )


def has_legacy(slurm: SlurmSpec) -> bool:
    """Whether the legacy scheduling/accounting fields carry any value (an empty message sets nothing)."""
    return any(part is not None and part.to_wire() for part in (slurm.scheduling, slurm.accounting))


def _check_slurm(cluster: ModelDevelopmentCluster) -> list[FieldViolation]:
    if cluster.orchestrator_spec is None:
        return [FieldViolation("orchestrator_spec", "Required field is not set.")]
    slurm = cluster.orchestrator_spec.slurm_spec
    if slurm is None:
        return [FieldViolation(SLURM, "Required field is not set.")]
    out: list[FieldViolation] = []
    pools = {p.id: i for i, p in enumerate(cluster.node_pools) if p.id}
    login = slurm.login_node_pool_id

    out += check_required_format(
        slurm.home_directory_storage,
        f"{SLURM}.home_directory_storage",
        INSTANCE.match,
        f"{slurm.home_directory_storage[:200]!r} is not a Filestore or Lustre instance: use "
        "projects/PROJECT/locations/ZONE/instances/NAME",
    )

    if not login:
        out.append(FieldViolation(f"{SLURM}.login_node_pool_id", "Required field is not set."))
    elif login not in pools:
        out.append(FieldViolation(f"{SLURM}.login_node_pool_id", f"no node pool {login!r} in node_pools"))
    else:
        i = pools[login]
        scaling = cluster.node_pools[i].scaling_spec
        low, high = (scaling.min_node_count, scaling.max_node_count) if scaling else (0, 0)
        if low != high or high < 1:
            out.append(
                FieldViolation(
                    f"node_pools[{i}].scaling_spec",
                    f"the login node pool {login!r} needs min_node_count = max_node_count >= 1 (static login "
                    f"nodes), got {low} and {high}",
                )
            )

    if not slurm.partitions:
        out.append(FieldViolation(f"{SLURM}.partitions", "Required field is not set."))
    seen: dict[str, int] = {}
    for k, part in enumerate(slurm.partitions):
        where = f"{SLURM}.partitions[{k}]"
        id_errors = check_required_format(
            part.id,
            f"{where}.id",
            PARTITION_ID.match,
            f"{part.id[:80]!r} is not a valid partition ID: 1 to 32 lowercase letters, digits and "
            "'-', starting with a letter and not ending with '-'",
        )
        if id_errors:
            out += id_errors
        elif part.id in seen:
            out.append(
                FieldViolation(
                    f"{where}.id", f"duplicate partition ID {part.id!r} (also partitions[{seen[part.id]}])"
                )
            )
        else:
            seen[part.id] = k
        if not part.node_pool_ids:
            out.append(FieldViolation(f"{where}.node_pool_ids", "Required field is not set."))
        listed: set[str] = set()
        for m, pool_id in enumerate(part.node_pool_ids):
            if pool_id not in pools:
                out.append(
                    FieldViolation(f"{where}.node_pool_ids[{m}]", f"no node pool {pool_id!r} in node_pools")
                )
            elif pool_id == login:
                out.append(
                    FieldViolation(
                        f"{where}.node_pool_ids[{m}]",
                        f"{pool_id!r} is the login node pool; partitions hold compute pools",
                    )
                )
            elif pool_id in listed:
                out.append(FieldViolation(f"{where}.node_pool_ids[{m}]", f"{pool_id!r} is listed twice"))
            listed.add(pool_id)
        out += _check_line_config(
            part.config,
            f"{where}.config",
            "PartitionName",
            keys.canonical_partition_key,
            keys.reserved_partition_reason,
        )
    if slurm.default_partition_id and slurm.default_partition_id not in seen:
        out.append(
            FieldViolation(
                f"{SLURM}.default_partition_id",
                f"must name one of the partitions, got {slurm.default_partition_id!r}",
            )
        )

    sets: dict[str, int] = {}
    for k, node_set in enumerate(slurm.node_sets):
        where = f"{SLURM}.node_sets[{k}]"
        pool_id = node_set.node_pool_id
        if not pool_id:
            out.append(FieldViolation(f"{where}.node_pool_id", "Required field is not set."))
        elif pool_id not in pools:
            out.append(FieldViolation(f"{where}.node_pool_id", f"no node pool {pool_id!r} in node_pools"))
        elif pool_id == login:
            out.append(
                FieldViolation(
                    f"{where}.node_pool_id",
                    f"{pool_id!r} is the login node pool; node sets configure compute pools",
                )
            )
        elif pool_id in sets:
            out.append(
                FieldViolation(
                    f"{where}.node_pool_id",
                    f"node pool {pool_id!r} already has a node set (node_sets[{sets[pool_id]}]); at most one "
                    "per pool",
                )
            )
        else:
            sets[pool_id] = k
        out += _check_line_config(
            node_set.config, f"{where}.config", "NodeName", keys.canonical_node_key, keys.reserved_node_reason
        )

    out += _check_config(slurm.config, f"{SLURM}.config")
    if slurm.config and has_legacy(slurm):
        out.append(
            FieldViolation(
                f"{SLURM}.config",
                "config replaces scheduling and accounting, and a cluster uses one or the other; to move to "
                "config, name config, scheduling and accounting in the update mask and send only config",
            )
        )
    for kind in ("prolog_bash_scripts", "epilog_bash_scripts"):
        for j, body in enumerate(getattr(slurm, kind)):
            if not body.strip():
                out.append(FieldViolation(f"{SLURM}.{kind}[{j}]", "a script must not be empty"))
    return out


def validate_cluster(
    cluster: ModelDevelopmentCluster, machines: MachineCatalog = machine_catalog
) -> list[FieldViolation]:
    """Every rule on the user-settable fields (output-only ones are ignored)."""
    out = check_display_name(cluster.display_name, required=False)
    out += check_labels(cluster.labels)
    network = cluster.network
    if network is not None:
        out += check_required_format(
            network.network,
            "network.network",
            NETWORK.match,
            f"{network.network[:200]!r} is not a network: use projects/PROJECT/global/networks/NETWORK",
        )
        if network.subnetwork and not SUBNETWORK.match(network.subnetwork):
            out.append(
                FieldViolation(
                    "network.subnetwork",
                    f"{network.subnetwork[:200]!r} is not a subnetwork: use "
                    "projects/PROJECT/regions/REGION/subnetworks/SUBNETWORK",
                )
            )
    out += _check_pools(cluster, machines)
    out += _check_slurm(cluster)
    runtime = cluster.runtime_spec
    if runtime is not None and runtime.service_account and "@" not in runtime.service_account:
        out.append(
            FieldViolation(
                "runtime_spec.service_account", "must be a service account email (name@project...)"
            )
        )
    export = cluster.lustre_export_config
    if export is not None:
        where = "lustre_export_config"
        out += check_required_format(
            export.destination_bucket,
            f"{where}.destination_bucket",
            BUCKET.match,
            "must be a bucket name, without gs:// (e.g. my-backups)",
        )
        for j, name in enumerate(export.lustres):
            if not INSTANCE.match(name):
                out.append(FieldViolation(f"{where}.lustres[{j}]", _not_instance(name)))
        if export.start_time is not None and not (
            0 <= export.start_time.hours <= 23 and 0 <= export.start_time.minutes <= 59
        ):
            out.append(FieldViolation(f"{where}.start_time", "hours must be 0 to 23 and minutes 0 to 59"))
    return out


# ------------------------------------------------------------------ server defaults
def fill_pool_defaults(pool: Mapping[str, Any], machines: MachineCatalog = machine_catalog) -> dict[str, Any]:
    """A canonical pool with the server defaults: provisioningModel resolved, bootDisk, and for FLEX_START the
    effectiveFlexStartMaxDuration (output only)."""
    out = copy.deepcopy(dict(pool))
    parsed = NodePool.model_validate(out)
    model = effective_model(parsed, machines)
    if model is not None:
        out["provisioningModel"] = model.name
    disk = dict(out.get("bootDisk") or {})
    out["bootDisk"] = {
        "bootDiskType": disk.get("bootDiskType") or DEFAULT_BOOT_DISK["bootDiskType"],
        "bootDiskSizeGb": int(disk.get("bootDiskSizeGb") or DEFAULT_BOOT_DISK["bootDiskSizeGb"]),
    }
    if model == M.FLEX_START:
        out["effectiveFlexStartMaxDuration"] = out.get("flexStartMaxDuration") or DEFAULT_FLEX_START
    else:
        out.pop("effectiveFlexStartMaxDuration", None)
    return out


def default_network(project_number: str) -> str:
    return f"projects/{project_number}/global/networks/default"


def fill_defaults(
    spec: Mapping[str, Any], project_number: str, machines: MachineCatalog = machine_catalog
) -> dict[str, Any]:
    """A canonical (camelCase) spec with the server defaults filled in; idempotent."""
    out = copy.deepcopy(dict(spec))
    network = dict(out.get("network") or {})
    if not network.get("network"):
        network["network"] = default_network(project_number)
    out["network"] = network
    out["nodePools"] = [fill_pool_defaults(p, machines) for p in out.get("nodePools", [])]
    return out


def default_partition(spec: Mapping[str, Any]) -> str:
    """The partition jobs go to by default: defaultPartitionId, else the first partition ("" if none)."""
    slurm = (spec.get("orchestratorSpec") or {}).get("slurmSpec") or {}
    partitions = slurm.get("partitions") or []
    return str(slurm.get("defaultPartitionId") or (partitions[0].get("id", "") if partitions else ""))


# ------------------------------------------------------------------ immutability (updates)
_POOL_IMMUTABLE = (
    ("machineSpec", "machine_spec"),
    ("provisioningModel", "provisioning_model"),
    ("confidentialInstanceConfig", "confidential_instance_config"),
)


def check_immutable(current: Mapping[str, Any], new: Mapping[str, Any]) -> list[FieldViolation]:
    """IMMUTABLE fields that an update would change, comparing canonical specs with their defaults filled
    (fill_pool_defaults): network, runtimeSpec, homeDirectoryStorage, and for a pool kept by ID its
    machineSpec, provisioningModel and confidentialInstanceConfig. Paths index the new spec."""
    out: list[FieldViolation] = []
    for field, path in (("network", "network"), ("runtimeSpec", "runtime_spec")):
        if (current.get(field) or {}) != (new.get(field) or {}):
            out.append(FieldViolation(path, f"{path} is immutable"))
    old_slurm = (current.get("orchestratorSpec") or {}).get("slurmSpec") or {}
    new_slurm = (new.get("orchestratorSpec") or {}).get("slurmSpec") or {}
    if old_slurm.get("homeDirectoryStorage", "") != new_slurm.get("homeDirectoryStorage", ""):
        out.append(FieldViolation(f"{SLURM}.home_directory_storage", "home_directory_storage is immutable"))
    before = {p.get("id"): p for p in current.get("nodePools", [])}
    for i, pool in enumerate(new.get("nodePools", [])):
        old = before.get(pool.get("id"))
        if old is None:
            continue  # a new pool
        for field, path in _POOL_IMMUTABLE:
            if (old.get(field) or None) != (pool.get(field) or None):
                out.append(
                    FieldViolation(
                        f"node_pools[{i}].{path}",
                        f"the {path} of node pool {pool.get('id')!r} is immutable; add a pool with another "
                        "ID instead",
                    )
                )
    return out


__all__ = [
    "DEFAULT_BOOT_DISK",
    "MachineCatalog",
    "check_cluster_id",
    "check_immutable",
    "default_network",
    "default_partition",
    "effective_model",
    "fill_defaults",
    "fill_pool_defaults",
    "has_legacy",
    "is_gpu",
    "validate_cluster",
]
