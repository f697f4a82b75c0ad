"""The rules a CustomJob must satisfy before it is stored. Pure: returns field violations."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from datetime import timedelta
from typing import Protocol

from trainworks.catalog import machines
from trainworks.catalog.accelerators import AcceleratorType
from trainworks.jobs.enums import ReservationAffinityType, Strategy
from trainworks.kernel.errors import FieldViolation
from trainworks.kernel.wire_errors import map_key
from trainworks.kinds.custom_jobs.wire import (
    CustomJob,
    CustomJobSpec,
    DiskSpec,
    EncryptionSpec,
    EnvVar,
    MachineSpec,
    ReservationAffinity,
    WorkerPoolSpec,
)
from trainworks.scheduling.admission import RESERVATION_NAME_KEY
from trainworks.scheduling.inventory import parse_reservation_name
from trainworks.scheduling.job_requests import PRIORITY_LABEL
from trainworks.storage.gcs import StoragePathError, parse_gcs_uri

MAX_POOLS = 4
MAX_ENV = 100
MAX_ARGS_CHARS = 100_000
MAX_LABELS = 64
MAX_DISPLAY_NAME = 128
MAX_PACKAGE_URIS = 100
# "Label keys and values can be no longer than 64 characters (Unicode codepoints)" (CustomJob.labels).
MAX_LABEL_CHARS = 64
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PYTHON_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _label_char_ok(ch: str) -> bool:
    if ch in "_-" or ch.isdigit():
        return True
    return ch.islower() or unicodedata.category(ch) == "Lo"


def check_labels(labels: dict[str, str], path: str = "labels") -> list[FieldViolation]:
    out: list[FieldViolation] = []
    if len(labels) > MAX_LABELS:
        out.append(FieldViolation(path, f"at most {MAX_LABELS} labels are allowed, got {len(labels)}"))
    for key, value in labels.items():
        where = map_key(path, key)
        if not key or len(key) > MAX_LABEL_CHARS:
            out.append(FieldViolation(where, f"label keys must be 1 to {MAX_LABEL_CHARS} characters long"))
        elif not (key[0].islower() or unicodedata.category(key[0]) == "Lo"):
            out.append(FieldViolation(where, "label keys must start with a lowercase letter"))
        elif not all(_label_char_ok(c) for c in key):
            out.append(
                FieldViolation(where, "label keys may contain only lowercase letters, digits, '_' and '-'")
            )
        if len(value) > MAX_LABEL_CHARS:
            out.append(
                FieldViolation(where, f"label values must be at most {MAX_LABEL_CHARS} characters long")
            )
        elif not all(_label_char_ok(c) for c in value):
            out.append(
                FieldViolation(where, "label values may contain only lowercase letters, digits, '_' and '-'")
            )
    return out


def check_display_name(
    name: str, path: str = "display_name", *, required: bool = True
) -> list[FieldViolation]:
    if required and not name.strip():
        return [FieldViolation(path, "Required field is not set.")]
    if len(name) > MAX_DISPLAY_NAME:
        return [FieldViolation(path, f"must be at most {MAX_DISPLAY_NAME} characters")]
    return []


def check_encryption_spec(spec: EncryptionSpec | None, path: str = "encryption_spec") -> list[FieldViolation]:
    """A customer-managed key, when the spec is given, must be named."""
    if spec is not None and not spec.kms_key_name:
        return [FieldViolation(f"{path}.kms_key_name", "Required field is not set.")]
    return []


def check_boot_disk_size(disk: DiskSpec | None, path: str) -> list[FieldViolation]:
    """A boot disk of 10 to 65536 GB (0: the default size); `path` names the DiskSpec."""
    if disk is not None and disk.boot_disk_size_gb and not 10 <= disk.boot_disk_size_gb <= 65536:
        return [FieldViolation(f"{path}.boot_disk_size_gb", "must be between 10 and 65536")]
    return []


def check_required_format(
    value: str, path: str, valid: Callable[[str], object], invalid: str
) -> list[FieldViolation]:
    """A required string field with a format: "not set" when empty, else `invalid` when `valid` rejects it."""
    if not value:
        return [FieldViolation(path, "Required field is not set.")]
    if not valid(value):
        return [FieldViolation(path, invalid)]
    return []


def _check_env(env: list[EnvVar], path: str) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    if len(env) > MAX_ENV:
        out.append(FieldViolation(path, f"at most {MAX_ENV} environment variables are allowed"))
    for i, var in enumerate(env):
        # Both are REQUIRED; proto3 cannot tell "" from absent, so an empty value is "not set" (Vertex
        # answers `...env[0].value; Message: Required field is not set.`).
        out += check_required_format(
            var.name,
            f"{path}[{i}].name",
            _ENV_NAME.match,
            f"{var.name!r} is not a valid environment variable name (letters, digits and '_', "
            "not starting with a digit)",
        )
        if not var.value:
            out.append(FieldViolation(f"{path}[{i}].value", "Required field is not set."))
    return out


def _check_gcs_uri(uri: str, path: str) -> list[FieldViolation]:
    try:
        parse_gcs_uri(uri)
    except StoragePathError as exc:
        return [FieldViolation(path, str(exc))]
    return []


class _WithMachine(Protocol):
    """A pool that names its machine: a worker pool, or a persistent resource's resource pool."""

    machine_spec: MachineSpec | None


def _check_machine(pool: _WithMachine, path: str) -> list[FieldViolation]:
    spec = pool.machine_spec
    if spec is None or not spec.machine_type:
        return [FieldViolation(f"{path}.machine_spec.machine_type", "a machine type is required")]
    machine = machines.machine_type(spec.machine_type)
    if machine is None:
        hint = machines.suggest(spec.machine_type)
        suffix = f"; did you mean {', '.join(hint)}?" if hint else ""
        return [
            FieldViolation(
                f"{path}.machine_spec.machine_type", f"unknown machine type {spec.machine_type!r}{suffix}"
            )
        ]
    problem = machines.check_accelerator(machine, spec.accelerator_type.name, spec.accelerator_count)
    if problem:
        field = _accelerator_field(machine, spec.accelerator_type.name, spec.accelerator_count)
        return [FieldViolation(f"{path}.machine_spec.{field}", problem)]
    return []


def _check_reservation_affinity(affinity: ReservationAffinity, path: str) -> list[FieldViolation]:
    """reservationAffinity as Vertex AI takes it: the type is required; SPECIFIC_RESERVATION names exactly one
    reservation under the key ``compute.googleapis.com/reservation-name``; the other types name none."""
    kind = affinity.reservation_affinity_type
    if kind == ReservationAffinityType.TYPE_UNSPECIFIED:
        return [FieldViolation(f"{path}.reservation_affinity_type", "Required field is not set.")]
    out: list[FieldViolation] = []
    if kind != ReservationAffinityType.SPECIFIC_RESERVATION:
        if affinity.key:
            out.append(
                FieldViolation(
                    f"{path}.key", f"must not be set when reservation_affinity_type is {kind.name}"
                )
            )
        if affinity.values:
            out.append(
                FieldViolation(
                    f"{path}.values", f"must not be set when reservation_affinity_type is {kind.name}"
                )
            )
        return out
    if affinity.key != RESERVATION_NAME_KEY:
        got = f", got {affinity.key!r}" if affinity.key else ""
        out.append(
            FieldViolation(
                f"{path}.key", f"SPECIFIC_RESERVATION requires the key {RESERVATION_NAME_KEY!r}{got}"
            )
        )
    if len(affinity.values) != 1:
        out.append(
            FieldViolation(
                f"{path}.values",
                "SPECIFIC_RESERVATION requires exactly one value, the reservation's full name "
                f"projects/{{project}}/zones/{{zone}}/reservations/{{name}}; got {len(affinity.values)}",
            )
        )
    elif parse_reservation_name(affinity.values[0]) is None:
        out.append(
            FieldViolation(
                f"{path}.values[0]",
                f"{affinity.values[0][:200]!r} is not a reservation name: use "
                "projects/{project}/zones/{zone}/reservations/{name}",
            )
        )
    return out


def _accelerator_field(machine: machines.MachineType, accelerator: str, count: int) -> str:
    """Which field a rejected accelerator request is reported on: the type when it is missing or cannot go on
    this machine type, else the count."""
    if count < 0:
        return "accelerator_count"
    if accelerator == machines.UNSPECIFIED:
        # A count without a type: the type is missing, unless this machine type takes no accelerators.
        takes_any = machine.accelerator_type is not None or any(
            (info := machines.accelerator(a.name)) is not None and machine.family in info.allowed_families
            for a in AcceleratorType
        )
        return "accelerator_type" if takes_any else "accelerator_count"
    if machine.accelerator_type is not None:
        return "accelerator_count" if accelerator == machine.accelerator_type else "accelerator_type"
    info = machines.accelerator(accelerator)
    if info is None or machine.family not in info.allowed_families:
        return "accelerator_type"
    return "accelerator_count"


def _check_task(pool: WorkerPoolSpec, path: str) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    container, package = pool.container_spec, pool.python_package_spec
    if (container is None) == (package is None):
        return [
            FieldViolation(
                path, "exactly one of container_spec or python_package_spec must be set for a worker pool"
            )
        ]
    if container is not None:
        if not container.image_uri:
            out.append(FieldViolation(f"{path}.container_spec.image_uri", "an image URI is required"))
        out += _check_env(container.env, f"{path}.container_spec.env")
    if package is not None:
        where = f"{path}.python_package_spec"
        if not package.executor_image_uri:
            out.append(FieldViolation(f"{where}.executor_image_uri", "an executor image URI is required"))
        if not package.package_uris:
            out.append(FieldViolation(f"{where}.package_uris", "at least one package URI is required"))
        elif len(package.package_uris) > MAX_PACKAGE_URIS:
            out.append(FieldViolation(f"{where}.package_uris", f"at most {MAX_PACKAGE_URIS} package URIs"))
        for i, uri in enumerate(package.package_uris):
            out += _check_gcs_uri(uri, f"{where}.package_uris[{i}]")
        if not package.python_module:
            out.append(FieldViolation(f"{where}.python_module", "a python module is required"))
        elif not _PYTHON_MODULE.match(package.python_module):
            out.append(
                FieldViolation(f"{where}.python_module", f"{package.python_module!r} is not a module name")
            )
        out += _check_env(package.env, f"{where}.env")
    return out


def _check_pool(pool: WorkerPoolSpec, index: int, path: str) -> list[FieldViolation]:
    if pool.is_empty:
        if index == 0:
            return [FieldViolation(path, "the primary worker pool (index 0) must not be empty")]
        return []
    out: list[FieldViolation] = []
    if index == 0 and pool.replica_count != 1:
        out.append(
            FieldViolation(
                f"{path}.replica_count",
                f"the primary worker pool must have replica_count 1, got {pool.replica_count}",
            )
        )
    elif pool.replica_count < 1:
        out.append(
            FieldViolation(
                f"{path}.replica_count",
                f"replica_count must be at least 1, got {pool.replica_count}; send {{}} to skip a pool",
            )
        )
    elif pool.replica_count > 1000:
        out.append(FieldViolation(f"{path}.replica_count", "replica_count must be at most 1000"))
    out += _check_machine(pool, path)
    if pool.machine_spec is not None and pool.machine_spec.reservation_affinity is not None:
        where = f"{path}.machine_spec.reservation_affinity"
        out += _check_reservation_affinity(pool.machine_spec.reservation_affinity, where)
    out += _check_task(pool, path)
    out += check_boot_disk_size(pool.disk_spec, f"{path}.disk_spec")
    for i, mount in enumerate(pool.nfs_mounts):
        where = f"{path}.nfs_mounts[{i}]"
        for name in ("server", "path", "mount_point"):
            if not getattr(mount, name):
                out.append(FieldViolation(f"{where}.{name}", "Required field is not set."))
        if mount.path and not mount.path.startswith("/"):
            out.append(FieldViolation(f"{where}.path", "must start with '/'"))
    return out


FLEX_START_MAX_RUN = timedelta(days=7)


def _check_flex_start(spec: CustomJobSpec, path: str) -> list[FieldViolation]:
    """FLEX_START (queued provisioning): one machine configuration for every pool, runs of at most 7 days."""
    out: list[FieldViolation] = []
    shapes = [
        (i, pool.machine_spec.to_wire() if pool.machine_spec else {})
        for i, pool in enumerate(spec.worker_pool_specs)
        if not pool.is_empty
    ]
    first = shapes[0][1] if shapes else {}
    for i, shape in shapes[1:]:
        if shape != first:
            out.append(
                FieldViolation(
                    f"{path}.worker_pool_specs[{i}].machine_spec",
                    "with the FLEX_START strategy every worker pool must use the same machine configuration "
                    "as worker_pool_specs[0]",
                )
            )
    if spec.scheduling and spec.scheduling.timeout and spec.scheduling.timeout > FLEX_START_MAX_RUN:
        out.append(
            FieldViolation(f"{path}.scheduling.timeout", "FLEX_START runs are limited to 7 days (604800s)")
        )
    return out


def _check_spec(spec: CustomJobSpec, path: str) -> list[FieldViolation]:
    out: list[FieldViolation] = []
    pools = spec.worker_pool_specs
    if not pools:
        return [FieldViolation(f"{path}.worker_pool_specs", "at least one worker pool spec is required")]
    if len(pools) > MAX_POOLS:
        out.append(
            FieldViolation(f"{path}.worker_pool_specs", f"at most {MAX_POOLS} worker pools are allowed")
        )
    for i, pool in enumerate(pools[:MAX_POOLS]):
        out += _check_pool(pool, i, f"{path}.worker_pool_specs[{i}]")
    total_args = sum(len(a) for pool in pools for a in pool.args)
    if total_args > MAX_ARGS_CHARS:
        out.append(
            FieldViolation(
                f"{path}.worker_pool_specs",
                f"all args together must be at most {MAX_ARGS_CHARS} characters, got {total_args}",
            )
        )
    scheduling = spec.scheduling
    if scheduling is not None:
        if scheduling.timeout is not None and scheduling.timeout <= timedelta(0):
            out.append(FieldViolation(f"{path}.scheduling.timeout", "the timeout must be positive"))
        if scheduling.max_wait_duration is not None:
            if scheduling.max_wait_duration < timedelta(0):
                out.append(FieldViolation(f"{path}.scheduling.max_wait_duration", "must not be negative"))
            if scheduling.strategy != Strategy.FLEX_START:
                out.append(
                    FieldViolation(
                        f"{path}.scheduling.max_wait_duration", "only allowed with the FLEX_START strategy"
                    )
                )
        if scheduling.strategy == Strategy.FLEX_START:
            out += _check_flex_start(spec, path)
    if spec.base_output_directory is not None:
        where = f"{path}.base_output_directory.output_uri_prefix"
        if not spec.base_output_directory.output_uri_prefix:
            out.append(FieldViolation(where, "Required field is not set."))
        else:
            out += _check_gcs_uri(spec.base_output_directory.output_uri_prefix, where)
    return out


def check_job_labels(labels: dict[str, str]) -> list[FieldViolation]:
    """A job's labels: the label rules, and the scheduling priority label holds an integer."""
    out = check_labels(labels)
    value = labels.get(PRIORITY_LABEL)
    if value is None:
        return out
    try:
        int(value)
    except ValueError:
        out.append(
            FieldViolation(f'labels["{PRIORITY_LABEL}"]', "the scheduling priority must be an integer")
        )
    return out


# Checks a job's persistentResourceId against the stored resources (kinds/persistent_resources/service.py):
# called with the job spec and its path once the rest of the spec is valid.
PersistentResourceCheck = Callable[[CustomJobSpec, str], list[FieldViolation]]


def _check_persistent_resource(
    spec: CustomJobSpec, path: str, check: PersistentResourceCheck | None
) -> list[FieldViolation]:
    if check is None:
        return [
            FieldViolation(
                f"{path}.persistent_resource_id",
                f"persistent resource {spec.persistent_resource_id!r} does not exist in this location",
            )
        ]
    return check(spec, path)


def check_job_spec(
    spec: CustomJobSpec, path: str, persistent_resources: PersistentResourceCheck | None = None
) -> list[FieldViolation]:
    """A CustomJobSpec wherever it stands (a job, a tuning job's trials, a training pipeline's task inputs);
    its persistent resource is looked up only once the rest of the spec is valid."""
    out = _check_spec(spec, path)
    if spec.persistent_resource_id and not out:
        out += _check_persistent_resource(spec, path, persistent_resources)
    return out


def validate_custom_job(
    job: CustomJob, persistent_resources: PersistentResourceCheck | None = None
) -> list[FieldViolation]:
    out = check_display_name(job.display_name)
    if job.job_spec is None:
        out.append(FieldViolation("job_spec", "Required field is not set."))
    else:
        out += check_job_spec(job.job_spec, "job_spec", persistent_resources)
    out += check_job_labels(job.labels)
    out += check_encryption_spec(job.encryption_spec)
    return out
