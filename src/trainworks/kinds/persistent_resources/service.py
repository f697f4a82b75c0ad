"""PersistentResource rules: create, get, list, update, reboot, delete; and the checks of CustomJobs that run
on a resource (`jobSpec.persistentResourceId`).

Every change of state is an LRO that the controller (kinds/persistent_resources/controller.py) completes once
the change is done. Capacity is derived, never counted: a resource pool's `usedReplicaCount` is the sum of the
replicas of the admitted jobs (PENDING, RUNNING or CANCELLING) whose worker pools it serves.
"""

from __future__ import annotations

import builtins
import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import select

from trainworks.jobs.enums import JobState
from trainworks.kernel.errors import FieldViolation, failed_precondition, invalid_argument
from trainworks.kernel.listing import table_filter
from trainworks.kernel.lro_service import LroResourceService
from trainworks.kernel.lro_store import DuplicateResource, Key, key_of
from trainworks.kernel.names import parent_name
from trainworks.kernel.operations import OperationService, operation_wire
from trainworks.kernel.projects import Projects
from trainworks.kernel.update_masks import UpdateMaskRules, listed_root
from trainworks.kernel.wire import format_timestamp, input_dict, now_utc
from trainworks.kernel.wire_errors import parse_body
from trainworks.kinds.custom_jobs.service import CustomJobService
from trainworks.kinds.custom_jobs.validation import MAX_DISPLAY_NAME, check_labels
from trainworks.kinds.custom_jobs.wire import CustomJobSpec
from trainworks.kinds.persistent_resources.store import PersistentResourceStore
from trainworks.kinds.persistent_resources.validation import (
    check_pool_counts,
    check_preload,
    check_resource_id,
    fill_pools,
    replica_bounds,
    validate_resource,
)
from trainworks.kinds.persistent_resources.wire import (
    PersistentResource,
    PersistentResourceState,
    ResourcePool,
)
from trainworks.storage.output_buckets import OutputBuckets
from trainworks.store.tables import CustomJobRow, OperationRow, PersistentResourceRow

R = PersistentResourceState
S = JobState
ADMITTED_JOB_STATES = frozenset(
    {int(S.JOB_STATE_PENDING), int(S.JOB_STATE_RUNNING), int(S.JOB_STATE_CANCELLING)}
)
# Resource states in which it accepts new jobs (they wait in QUEUED until it is RUNNING).
ACCEPTING_STATES = frozenset({R.PROVISIONING, R.RUNNING, R.UPDATING, R.REBOOTING})
EMPTY = {"@type": "type.googleapis.com/google.protobuf.Empty"}
DEFAULT_DISK: dict[str, str | int] = {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100}


def resource_name(project_number: str, location: str, resource_id: str) -> str:
    return f"{parent_name(project_number, location)}/persistentResources/{resource_id}"


def row_name(row: PersistentResourceRow) -> str:
    return resource_name(row.project_number, row.location, row.resource_id)


def response_type(metadata: Mapping[str, Any]) -> str:
    """The PersistentResource type URL in the API version of the operation (its metadata's version)."""
    version = "v1beta1" if ".v1beta1." in str(metadata.get("@type", "")) else "v1"
    return f"type.googleapis.com/google.cloud.aiplatform.{version}.PersistentResource"


# ------------------------------------------------------------------ capacity (pure)
def job_resource_id(spec: Mapping[str, Any]) -> str:
    return str((spec.get("jobSpec") or {}).get("persistentResourceId") or "")


def on_resource(job: CustomJobRow, key: Key) -> bool:
    return (job.project_number, job.location, job_resource_id(job.spec)) == key


def _disk(spec: Mapping[str, Any] | None) -> dict[str, Any]:
    spec = spec or {}
    return {
        "bootDiskType": spec.get("bootDiskType") or DEFAULT_DISK["bootDiskType"],
        "bootDiskSizeGb": int(spec.get("bootDiskSizeGb") or DEFAULT_DISK["bootDiskSizeGb"]),
    }


def _replicas(worker_pool: Mapping[str, Any]) -> int:
    return int(worker_pool.get("replicaCount", 0) or 0)


def match_pool(worker_pool: Mapping[str, Any], pools: Sequence[Mapping[str, Any]]) -> tuple[str | None, str]:
    """The first resource pool whose machineSpec and diskSpec equal the worker pool's (canonical JSON; an
    absent diskSpec is the default pd-ssd of 100 GB): (its id, ""), else (None, the field that differs)."""
    machine = dict(worker_pool.get("machineSpec") or {})
    disk = _disk(worker_pool.get("diskSpec"))
    same_machine = [p for p in pools if dict(p.get("machineSpec") or {}) == machine]
    for pool in same_machine:
        if _disk(pool.get("diskSpec")) == disk:
            return str(pool["id"]), ""
    return None, "disk_spec" if same_machine else "machine_spec"


def job_demands(job_spec: Mapping[str, Any], pools: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Replicas per resource pool of a job on the resource (worker pools that match no pool are left out)."""
    out: dict[str, int] = {}
    for worker_pool in job_spec.get("workerPoolSpecs", []):
        count = _replicas(worker_pool)
        if count <= 0:
            continue
        pool_id, _ = match_pool(worker_pool, pools)
        if pool_id is not None:
            out[pool_id] = out.get(pool_id, 0) + count
    return out


def used_replicas(
    key: Key, pools: Sequence[Mapping[str, Any]], jobs: Iterable[CustomJobRow], exclude: int | None = None
) -> dict[str, int]:
    """Replicas in use per resource pool: those of the admitted jobs on the resource."""
    used: dict[str, int] = {}
    for job in jobs:
        if job.state not in ADMITTED_JOB_STATES or job.id == exclude or not on_resource(job, key):
            continue
        for pool_id, count in job_demands(job.spec.get("jobSpec") or {}, pools).items():
            used[pool_id] = used.get(pool_id, 0) + count
    return used


def free_replicas(pool: Mapping[str, Any], used: Mapping[str, int]) -> int:
    return replica_bounds(pool) - used.get(str(pool["id"]), 0)


def _machine_text(pool: Mapping[str, Any]) -> str:
    machine = pool.get("machineSpec") or {}
    text = str(machine.get("machineType", "?"))
    if machine.get("acceleratorType"):
        text += f" + {machine.get('acceleratorCount', 0)} x {machine['acceleratorType']}"
    disk = _disk(pool.get("diskSpec"))
    return f"{text}, {disk['bootDiskType']} {disk['bootDiskSizeGb']} GB"


def _operation(
    key: Key, kind: str, metadata_type: str, api_version: str, progress: str | None = None
) -> OperationRow:
    """A resource operation, not yet stored: the store records it with the change it tracks."""
    number, location, resource_id = key
    return OperationService.build(
        number,
        location,
        f"persistentResources/{resource_id}",
        kind,
        metadata_type,
        api_version,
        progress=progress,
    )


# ------------------------------------------------------------------ wire
def resource_wire(row: PersistentResourceRow, used: Mapping[str, int] | None = None) -> dict[str, Any]:
    """Canonical proto3 JSON of a stored resource."""
    out: dict[str, Any] = {"name": row_name(row)}
    spec = copy.deepcopy(row.spec)
    for pool in spec.get("resourcePools", []):
        count = (used or {}).get(str(pool.get("id")), 0)
        if count:
            pool["usedReplicaCount"] = str(count)
    out.update(spec)
    out["state"] = R(row.state).name
    if row.error:
        out["error"] = row.error
    out["createTime"] = format_timestamp(row.create_time)
    if row.start_time:
        out["startTime"] = format_timestamp(row.start_time)
    out["updateTime"] = format_timestamp(row.update_time)
    return out


# ------------------------------------------------------------------ update masks
_MUTABLE = {
    "display_name",
    "labels",
    "resource_pools",
    "resource_pools.replica_count",
    "resource_pools.autoscaling_spec",
    "resource_pools.autoscaling_spec.min_replica_count",
    "resource_pools.autoscaling_spec.max_replica_count",
}
_IMMUTABLE_ROOTS = {
    "name",
    "network",
    "encryption_spec",
    "psc_interface_config",
    "resource_runtime_spec",
    "reserved_ip_ranges",
    "resource_pools.id",
    "resource_pools.machine_spec",
    "resource_pools.disk_spec",
}
_OUTPUT_ROOTS = {
    "state",
    "error",
    "create_time",
    "start_time",
    "update_time",
    "resource_runtime",
    "resource_pools.used_replica_count",
}


_UPDATE_MASK = UpdateMaskRules(
    _MUTABLE,
    _IMMUTABLE_ROOTS,
    _OUTPUT_ROOTS,
    listed_root,
    "PersistentResource",
    "display_name, labels, resource_pools, resource_pools.replica_count or resource_pools.autoscaling_spec",
)


def resource_jobs(jobs: CustomJobService) -> list[CustomJobRow]:
    """The active jobs that run on a persistent resource."""
    return jobs.active_resource_jobs()


class PersistentResourceService(LroResourceService[PersistentResourceRow]):
    what = "PersistentResource"
    collection = "persistentResources"
    longest_id = 63
    name_of = staticmethod(resource_name)
    store: PersistentResourceStore

    def __init__(
        self,
        store: PersistentResourceStore,
        jobs: CustomJobService,
        projects: Projects,
        wake: Callable[[], None] = lambda: None,
        output_buckets: OutputBuckets | None = None,  # bucket ownership of the gs:// places it names
    ) -> None:
        super().__init__(store, projects, wake)
        self.jobs = jobs
        self.output_buckets = output_buckets

    # -------------------------------------------------------------- reading
    def _used(self, rows: Sequence[PersistentResourceRow]) -> dict[Key, dict[str, int]]:
        if not rows:
            return {}
        jobs = resource_jobs(self.jobs)
        return {key_of(r): used_replicas(key_of(r), r.spec.get("resourcePools", []), jobs) for r in rows}

    def wire(self, row: PersistentResourceRow) -> dict[str, Any]:
        return resource_wire(row, self._used([row]).get(key_of(row)))

    def get(self, project: str, location: str, resource_id: str) -> dict[str, Any]:
        return self.wire(self.find(project, location, resource_id))

    def render(self, rows: Sequence[PersistentResourceRow]) -> builtins.list[dict[str, Any]]:
        used = self._used(rows)
        return [resource_wire(r, used.get(key_of(r))) for r in rows]

    # -------------------------------------------------------------- create
    def create(
        self, project: str, location: str, resource_id: str, body: Any, api_version: str = "v1"
    ) -> dict[str, Any]:
        resource = parse_body(PersistentResource, body)
        violations = check_resource_id(resource_id) + validate_resource(resource)
        if violations:
            raise invalid_argument(violations)
        key = self.new_key(project, location, resource_id)
        spec = input_dict(resource)
        spec["resourcePools"] = fill_pools(spec.get("resourcePools", []))
        if self.output_buckets is not None:
            self.output_buckets.admit(project, location, "persistent_resource", spec)
        pools = len(spec["resourcePools"])
        op = _operation(
            key,
            "create_persistent_resource",
            "CreatePersistentResourceOperationMetadata",
            api_version,
            f"Provisioning {pools} resource pool{'s' if pools != 1 else ''}.",
        )
        row = self.new_row(key, resource, R.PROVISIONING, spec, op, now_utc(), generation=0)
        try:
            self.store.insert(row, operation=op)  # together: a crash leaves both or neither
        except DuplicateResource:
            raise self.exists(key) from None
        self.wake()
        return operation_wire(op)

    # -------------------------------------------------------------- update
    def update(
        self,
        project: str,
        location: str,
        resource_id: str,
        body: Any,
        update_mask: str,
        api_version: str = "v1",
    ) -> dict[str, Any]:
        paths = _UPDATE_MASK.parse(update_mask)
        resource = parse_body(PersistentResource, body)
        row = self.find(project, location, resource_id)
        self.require_state(row, [R.RUNNING], "it can be updated only while RUNNING")
        spec = self._updated_spec(row, resource, paths)
        op = _operation(
            key_of(row),
            "update_persistent_resource",
            "UpdatePersistentResourceOperationMetadata",
            api_version,
            "Updating the resource pools.",
        )
        self.start_change(row, [R.RUNNING], op, state=R.UPDATING, pending_spec=spec)
        return operation_wire(op)

    def _updated_spec(
        self, row: PersistentResourceRow, resource: PersistentResource, paths: builtins.list[str]
    ) -> dict[str, Any]:
        spec = copy.deepcopy(row.spec)
        violations: list[FieldViolation] = []
        if "display_name" in paths:
            if len(resource.display_name) > MAX_DISPLAY_NAME:
                violations.append(
                    FieldViolation("display_name", f"must be at most {MAX_DISPLAY_NAME} characters")
                )
            if resource.display_name:
                spec["displayName"] = resource.display_name
            else:
                spec.pop("displayName", None)
        if "labels" in paths:
            violations += check_labels(resource.labels) + check_preload(resource.labels)
            if resource.labels:
                spec["labels"] = dict(resource.labels)
            else:
                spec.pop("labels", None)
        pool_paths = [p for p in paths if p.startswith("resource_pools")]
        if pool_paths:
            violations += self._update_pools(spec, resource, pool_paths)
        if violations:
            raise invalid_argument(violations)
        return spec

    @staticmethod
    def _update_pools(
        spec: dict[str, Any], resource: PersistentResource, paths: builtins.list[str]
    ) -> builtins.list[FieldViolation]:
        pools: list[dict[str, Any]] = spec.get("resourcePools", [])
        by_id = {str(p["id"]): i for i, p in enumerate(pools)}
        whole = "resource_pools" in paths
        counts = whole or "resource_pools.replica_count" in paths
        scaling = whole or any(p.startswith("resource_pools.autoscaling_spec") for p in paths)
        violations: list[FieldViolation] = []
        if not resource.resource_pools:
            return [
                FieldViolation("resource_pools", "the update mask names resource_pools but none were sent")
            ]
        if whole and len(resource.resource_pools) != len(pools):
            violations.append(
                FieldViolation(
                    "resource_pools",
                    f"resource pools cannot be added or removed: the resource has {len(pools)}, "
                    f"the request sent {len(resource.resource_pools)}",
                )
            )
        for i, sent in enumerate(resource.resource_pools):
            path = f"resource_pools[{i}]"
            index = by_id.get(sent.id) if sent.id else (i if i < len(pools) else None)
            if index is None:
                violations.append(
                    FieldViolation(
                        f"{path}.id", f"no resource pool {sent.id!r}; pools cannot be added or removed"
                    )
                )
                continue
            current = pools[index]
            machine = dict(current.get("machineSpec") or {})
            if whole and sent.machine_spec is not None and sent.machine_spec.to_wire() != machine:
                violations.append(
                    FieldViolation(
                        f"{path}.machine_spec",
                        f"the machine spec of resource pool {current['id']!r} is immutable",
                    )
                )
            if (
                whole
                and sent.disk_spec is not None
                and _disk(sent.disk_spec.to_wire()) != _disk(current.get("diskSpec"))
            ):
                violations.append(
                    FieldViolation(
                        f"{path}.disk_spec", f"the disk spec of resource pool {current['id']!r} is immutable"
                    )
                )
            updated = dict(current)
            if counts and sent.replica_count is not None:
                updated["replicaCount"] = str(sent.replica_count)
            if scaling:
                if sent.autoscaling_spec is not None:
                    updated["autoscalingSpec"] = sent.autoscaling_spec.to_wire()
                elif whole or "resource_pools.autoscaling_spec" in paths:
                    updated.pop("autoscalingSpec", None)
            violations += check_pool_counts(ResourcePool.model_validate(updated), path)
            pools[index] = updated
        return violations

    # -------------------------------------------------------------- reboot and delete
    def reboot(
        self, project: str, location: str, resource_id: str, api_version: str = "v1"
    ) -> dict[str, Any]:
        row = self.find(project, location, resource_id)
        self.require_state(row, [R.RUNNING, R.ERROR], "it can be rebooted only while RUNNING or in ERROR")
        op = _operation(
            key_of(row),
            "reboot_persistent_resource",
            "RebootPersistentResourceOperationMetadata",
            api_version,
            "Rebooting: stopping jobs and warm interpreters.",
        )
        moved = self.store.transition(
            key_of(row),
            [R.RUNNING, R.ERROR],
            operation=op,
            state=R.REBOOTING,
            operation_id=op.id,
            pending_spec=None,
        )
        if not moved:
            raise failed_precondition(f"The PersistentResource {row_name(row)} changed meanwhile; try again.")
        self.wake()
        return operation_wire(op)

    def delete(
        self, project: str, location: str, resource_id: str, api_version: str = "v1"
    ) -> dict[str, Any]:
        row = self.find(project, location, resource_id)
        return self.delete_resource(
            row,
            R.STOPPING,
            lambda: _operation(
                key_of(row), "delete_persistent_resource", "DeleteOperationMetadata", api_version
            ),
            lambda: self.delete(project, location, resource_id, api_version),
            pending_spec=None,
        )

    # -------------------------------------------------------------- CustomJobs on a resource
    def check_job(
        self, project_number: str, location: str, spec: CustomJobSpec, path: str
    ) -> builtins.list[FieldViolation]:
        """Create-time checks of a CustomJob with persistentResourceId (the scheduler re-checks capacity)."""
        resource_id = spec.persistent_resource_id
        where = f"{path}.persistent_resource_id"
        if len(resource_id) > 63:
            return [FieldViolation(where, "a persistent resource ID has at most 63 characters")]
        key = (project_number, location, resource_id)
        row = self.store.get(key)
        if row is None:
            return [FieldViolation(where, f"persistent resource {resource_name(*key)} does not exist")]
        state = R(row.state)
        if state not in ACCEPTING_STATES:
            why = "being deleted" if state == R.STOPPING else "in ERROR; reboot or re-create it"
            return [FieldViolation(where, f"persistent resource {row_name(row)} is {state.name} ({why})")]
        pools = row.spec.get("resourcePools", [])
        out: list[FieldViolation] = []
        job_spec = spec.to_wire()
        wanted: dict[str, tuple[int, str]] = {}  # pool id -> replicas, path of the last worker pool asking
        for i, worker_pool in enumerate(job_spec.get("workerPoolSpecs", [])):
            count = _replicas(worker_pool)
            if count <= 0:
                continue
            pool_path = f"{path}.worker_pool_specs[{i}]"
            pool_id, differs = match_pool(worker_pool, pools)
            if pool_id is None:
                choices = "; ".join(f"{p['id']!r}: {_machine_text(p)}" for p in pools)
                what = "machine spec" if differs == "machine_spec" else "disk spec"
                out.append(
                    FieldViolation(
                        f"{pool_path}.{differs}",
                        f"the {what} must exactly match a resource pool of persistent resource "
                        f"{row.resource_id!r} (machine spec and disk spec); its pools are {choices}",
                    )
                )
                continue
            total = wanted.get(pool_id, (0, ""))[0] + count
            wanted[pool_id] = (total, f"{pool_path}.replica_count")
        if spec.network and spec.network != row.spec.get("network", ""):
            out.append(
                FieldViolation(
                    f"{path}.network",
                    f"must be the persistent resource's network ({row.spec.get('network') or 'none'})",
                )
            )
        if out or not wanted:
            return out
        jobs = resource_jobs(self.jobs)
        used = used_replicas(key, pools, jobs)
        for pool in pools:
            asked = wanted.get(str(pool["id"]))
            if asked is None:
                continue
            bound, in_use = replica_bounds(pool), used.get(str(pool["id"]), 0)
            if asked[0] > bound - in_use:
                limit = (
                    "maxReplicaCount"
                    if "maxReplicaCount" in (pool.get("autoscalingSpec") or {})
                    else "replicaCount"
                )
                out.append(
                    FieldViolation(
                        asked[1],
                        f"{asked[0]} replicas requested from resource pool {pool['id']!r} of persistent "
                        f"resource {row.resource_id!r}, which has {max(0, bound - in_use)} free ({limit} "
                        f"{bound}, {in_use} used by other jobs)",
                    )
                )
        return out

    # -------------------------------------------------------------- costs (a UsageSource of services/costs)
    def usages(self, project_number: str, location: str, filter_text: str) -> builtins.list[Any]:
        from trainworks.catalog.billing import BilledInterval, MachineShape, Usage

        live = {r.uid: r for r in self.store.in_location(project_number, location)}
        wanted: set[int] | None = None
        if filter_text.strip():
            where = table_filter(PersistentResourceRow, filter_text, {s.name: int(s) for s in R})
            assert where is not None  # the filter is not blank
            query = select(PersistentResourceRow.uid).where(
                PersistentResourceRow.project_number == project_number,
                PersistentResourceRow.location == location,
                where,
            )
            with self.store.db.session() as session:
                wanted = set(session.scalars(query))
        spans: dict[int, list[Any]] = {}
        for span in self.store.spans(project_number, location):
            spans.setdefault(span.resource_uid, []).append(span)
        for uid in live:
            spans.setdefault(uid, [])
        out = []
        for uid, group in spans.items():
            if wanted is not None and uid not in wanted:
                continue
            row = live.get(uid)
            intervals = tuple(
                BilledInterval(
                    group=span.pool_id,
                    shape=MachineShape.from_machine_spec(span.machine_spec),
                    spot=False,
                    start=span.start_time,
                    end=span.end_time,
                )
                for span in group
                for _ in range(span.machines)
            )
            ends = [s.end_time for s in group if s.end_time is not None]
            out.append(
                Usage(
                    name=resource_name(
                        project_number, location, row.resource_id if row else group[0].resource_id
                    ),
                    display_name=row.display_name if row else group[-1].display_name,
                    state=R(row.state).name if row else "DELETED",
                    intervals=intervals,
                    kind="persistentResource",
                    create_time=row.create_time if row else group[0].start_time,
                    start_time=row.start_time if row else group[0].start_time,
                    end_time=None if row else (max(ends) if ends else None),
                )
            )
        return out
