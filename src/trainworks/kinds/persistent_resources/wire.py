"""Wire models of PersistentResource and its parts (google.cloud.aiplatform.v1.PersistentResource)."""

from __future__ import annotations

from trainworks.kernel.status import Status
from trainworks.kernel.wire import Bool, Int64, OutputOnly, ProtoEnum, Timestamp, WireModel, enum_field
from trainworks.kinds.custom_jobs.wire import DiskSpec, EncryptionSpec, MachineSpec, PscInterfaceConfig


class PersistentResourceState(ProtoEnum):
    STATE_UNSPECIFIED = 0
    PROVISIONING = 1
    RUNNING = 3
    STOPPING = 4
    ERROR = 5
    REBOOTING = 6
    UPDATING = 7


class AutoscalingSpec(WireModel):
    # Both are proto3 `optional int64`: presence matters, so None (absent) differs from "0".
    min_replica_count: Int64 | None = None
    max_replica_count: Int64 | None = None


class ResourcePool(WireModel):
    id: str = ""
    machine_spec: MachineSpec | None = None
    replica_count: Int64 | None = None  # `optional int64`
    disk_spec: DiskSpec | None = None
    used_replica_count: OutputOnly[Int64] = 0
    autoscaling_spec: AutoscalingSpec | None = None


class ServiceAccountSpec(WireModel):
    enable_custom_service_account: Bool = False
    service_account: str = ""


class RayMetricSpec(WireModel):
    disabled: Bool = False


class RayLogsSpec(WireModel):
    disabled: Bool = False


class RaySpec(WireModel):
    image_uri: str = ""
    resource_pool_images: dict[str, str] = {}
    head_node_resource_pool_id: str = ""
    ray_metric_spec: RayMetricSpec | None = None
    ray_logs_spec: RayLogsSpec | None = None


class ResourceRuntimeSpec(WireModel):
    service_account_spec: ServiceAccountSpec | None = None
    ray_spec: RaySpec | None = None


class ResourceRuntime(WireModel):
    access_uris: dict[str, str] = {}


class PersistentResource(WireModel):
    # IMMUTABLE rather than OUTPUT_ONLY, but the ID comes from `persistentResourceId`: a name sent on create
    # is ignored like the output-only fields.
    name: OutputOnly[str] = ""
    display_name: str = ""
    resource_pools: list[ResourcePool] = []
    state: OutputOnly[enum_field(PersistentResourceState)] = PersistentResourceState.STATE_UNSPECIFIED  # type: ignore[valid-type]
    error: OutputOnly[Status | None] = None
    create_time: OutputOnly[Timestamp | None] = None
    start_time: OutputOnly[Timestamp | None] = None
    update_time: OutputOnly[Timestamp | None] = None
    labels: dict[str, str] = {}
    network: str = ""
    psc_interface_config: PscInterfaceConfig | None = None
    encryption_spec: EncryptionSpec | None = None
    resource_runtime_spec: ResourceRuntimeSpec | None = None
    resource_runtime: OutputOnly[ResourceRuntime | None] = None
    reserved_ip_ranges: list[str] = []


__all__ = [
    "AutoscalingSpec",
    "PersistentResource",
    "PersistentResourceState",
    "ResourcePool",
    "ResourceRuntimeSpec",
]
