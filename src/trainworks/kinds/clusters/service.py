"""Training cluster (v1beta1 modelDevelopmentClusters) rules: create, get, list, update, delete.

Every change is an LRO that the cluster controller (kinds/clusters/controller.py) completes once Slurm has it.
The update semantics (masks, wholesale replacement, update modes, node images) are pure and live in
kinds/clusters/updates.py; this module checks state, stores the accepted change and wakes the controller.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trainworks.catalog.node_images import ImageCatalog
from trainworks.kernel.errors import ApiError, FieldViolation, invalid_argument
from trainworks.kernel.lro_service import LroResourceService
from trainworks.kernel.lro_store import DuplicateResource
from trainworks.kernel.names import parent_name
from trainworks.kernel.operations import OperationService, aiplatform_type_url, operation_wire
from trainworks.kernel.projects import Projects
from trainworks.kernel.status import Code
from trainworks.kernel.wire import format_timestamp, input_dict, now_utc
from trainworks.kernel.wire_errors import parse_body
from trainworks.kinds.clusters.store import ClusterStore
from trainworks.kinds.clusters.updates import initial_realized, plan_update
from trainworks.kinds.clusters.validation import check_cluster_id, fill_defaults, validate_cluster
from trainworks.kinds.clusters.wire import ClusterState, ModelDevelopmentCluster
from trainworks.ports import free_block
from trainworks.slurm.conf import render_slurm_conf
from trainworks.slurm.layout import MAX_NODES_PER_CLUSTER, PORT_BLOCK, build_layout, node_count
from trainworks.store.tables import ClusterRow, OperationRow

C = ClusterState
API_VERSION = "v1beta1"  # the resource exists only in v1beta1
FIRST_SLURM_PORT = 30000
EMPTY = {"@type": "type.googleapis.com/google.protobuf.Empty"}
CLUSTER_TYPE = aiplatform_type_url("ModelDevelopmentCluster", API_VERSION)


def cluster_name(project_number: str, location: str, cluster_id: str) -> str:
    return f"{parent_name(project_number, location)}/modelDevelopmentClusters/{cluster_id}"


def row_name(row: ClusterRow) -> str:
    return cluster_name(row.project_number, row.location, row.cluster_id)


def cluster_wire(row: ClusterRow) -> dict[str, Any]:
    """Canonical proto3 JSON of a stored cluster."""
    out: dict[str, Any] = {"name": row_name(row)}
    out.update(copy.deepcopy(row.spec))
    status: dict[str, Any] = {"state": C(row.state).name}
    if row.detail:
        status["detail"] = row.detail
    if row.error:
        status["error"] = row.error
    if row.nodes:
        status["nodesStatus"] = copy.deepcopy(row.nodes)
    out["clusterStatus"] = status
    if row.events:
        out["clusterEvents"] = copy.deepcopy(row.events)
    out["createTime"] = format_timestamp(row.create_time)
    out["updateTime"] = format_timestamp(row.update_time)
    if row.start_time:
        out["startTime"] = format_timestamp(row.start_time)
    return out


def allocate_port(taken: set[int], nodes: int) -> int:
    """The first block of loopback ports for a cluster's slurmctld and slurmd daemons that no other cluster
    holds and nothing else listens on now."""
    return free_block("127.0.0.1", FIRST_SLURM_PORT, PORT_BLOCK, nodes + 1, taken)


class ClusterService(LroResourceService[ClusterRow]):
    what = "ModelDevelopmentCluster"
    collection = "modelDevelopmentClusters"
    longest_id = 10
    name_of = staticmethod(cluster_name)
    store: ClusterStore

    def __init__(
        self,
        store: ClusterStore,
        projects: Projects,
        images: Callable[[], ImageCatalog],
        clusters_dir: Path,
        wake: Callable[[], None] = lambda: None,
    ) -> None:
        super().__init__(store, projects, wake)
        self.clusters_dir = clusters_dir
        self.images = images  # re-read on every use: operators publish new node images while we run

    # -------------------------------------------------------------- reading
    def get(self, project: str, location: str, cluster_id: str) -> dict[str, Any]:
        return cluster_wire(self.find(project, location, cluster_id))

    def render(self, rows: Sequence[ClusterRow]) -> list[dict[str, Any]]:
        return [cluster_wire(r) for r in rows]

    # -------------------------------------------------------------- create
    def create(self, project: str, location: str, cluster_id: str, body: Any) -> dict[str, Any]:
        cluster = parse_body(ModelDevelopmentCluster, body)
        has_slurm = cluster.orchestrator_spec is not None and cluster.orchestrator_spec.slurm_spec is not None
        violations = check_cluster_id(cluster_id, slurm=has_slurm) + validate_cluster(cluster)
        violations += _check_size(input_dict(cluster))
        if violations:
            raise invalid_argument(violations)
        key = self.new_key(project, location, cluster_id)
        number = key[0]
        spec = fill_defaults(input_dict(cluster), project_number=number)
        now = now_utc()
        realized = initial_realized(spec, self.images(), now)
        check_renderable(spec, realized, cluster_id, self.clusters_dir / ("0" * 19))
        op = _operation(
            number,
            location,
            "create_cluster",
            "CreateModelDevelopmentClusterOperationMetadata",
            "Creating the Slurm controller and nodes.",
        )
        row = self.new_row(
            key,
            cluster,
            C.PROVISIONING,
            spec,
            op,
            now,
            detail="Creating the Slurm controller and nodes.",
            realized=realized,
            nodes=[],
            events=[],
            slurm_port=allocate_port(self.store.ports_in_use(), node_count(spec)),
        )
        for _ in range(3):  # a concurrent create may take the same port block: take the next one
            try:
                self.store.insert(row, operation=op)  # together: a crash leaves both or neither
                break
            except DuplicateResource:
                if self.store.get(key) is not None:
                    raise self.exists(key) from None
                row.slurm_port = allocate_port(self.store.ports_in_use(), node_count(spec))
        else:
            raise ApiError(Code.ABORTED, "Concurrent creates took every port block tried; try again.")
        self.wake()
        return self._operation(op.id)

    def _operation(self, op_id: int) -> dict[str, Any]:
        op = self.store.operations.get(op_id)
        assert op is not None
        return operation_wire(op)

    # -------------------------------------------------------------- update
    def update(
        self,
        project: str,
        location: str,
        cluster_id: str,
        body: Any,
        update_mask: str,
        update_mode: str,
    ) -> dict[str, Any]:
        cluster = parse_body(ModelDevelopmentCluster, body)
        row = self.find(project, location, cluster_id)
        self.require_state(row, [C.RUNNING], "it can be updated only while RUNNING")
        plan = plan_update(
            row.spec, row.realized, cluster, update_mask, update_mode, self.images(), now_utc()
        )
        spec = fill_defaults(plan.spec, project_number=row.project_number)
        violations = _check_size(spec)
        if violations:
            raise invalid_argument(violations)
        check_renderable(spec, plan.realized, row.cluster_id, self.clusters_dir / str(row.uid))
        summary = "; ".join(plan.changes) or "no changes"
        op = _operation(
            row.project_number,
            row.location,
            "update_cluster",
            "UpdateModelDevelopmentClusterOperationMetadata",
            f"Updating: {summary}.",
        )
        pending = {
            "spec": spec,
            "realized": plan.realized,
            "recreate": list(plan.recreate_pools),
            "changes": list(plan.changes),
        }
        self.start_change(row, [C.RUNNING], op, state=C.UPDATING, pending=pending)
        return self._operation(op.id)

    # -------------------------------------------------------------- delete
    def delete(self, project: str, location: str, cluster_id: str) -> dict[str, Any]:
        row = self.find(project, location, cluster_id)
        return self.delete_resource(
            row,
            C.STOPPING,
            lambda: _operation(row.project_number, row.location, "delete_cluster", "DeleteOperationMetadata"),
            lambda: self.delete(project, location, cluster_id),
            detail="Deleting the cluster.",
        )


def _operation(
    project_number: str, location: str, kind: str, metadata_type: str, progress: str | None = None
) -> OperationRow:
    """A cluster operation, not yet stored: the store records it with the change it tracks."""
    return OperationService.build(
        project_number, location, "", kind, metadata_type, API_VERSION, progress=progress
    )


def check_renderable(spec: dict[str, Any], realized: dict[str, Any], cluster_id: str, base: Path) -> None:
    """Fail the request (not the LRO) when the cluster cannot be written as a slurm.conf on this host."""
    try:
        render_slurm_conf(build_layout(cluster_id, base, FIRST_SLURM_PORT, spec, realized, {}).cluster)
    except ValueError as exc:
        raise invalid_argument(
            [FieldViolation("node_pools", f"cannot be realized on this server: {exc}")]
        ) from None


def _check_size(spec: dict[str, Any]) -> list[FieldViolation]:
    """Every compute node is a slurmd on this host: a cluster holds at most MAX_NODES_PER_CLUSTER."""
    total = node_count(spec)
    if total <= MAX_NODES_PER_CLUSTER:
        return []
    return [
        FieldViolation(
            "node_pools",
            f"the compute pools' max_node_count add up to {total} nodes; a cluster on this server has at "
            f"most {MAX_NODES_PER_CLUSTER} (each node is a slurmd daemon on this host)",
        )
    ]


__all__ = ["CLUSTER_TYPE", "EMPTY", "ClusterService", "cluster_wire", "row_name"]
