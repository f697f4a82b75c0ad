"""Wire models of ModelDevelopmentCluster ("training clusters", Slurm; v1beta1) and its parts.

No proto of this resource is published: the fields follow the docs and the v1beta1 REST schema (Terraform's
ModelDevelopmentCluster). Enum names are those of the docs; their numbers are not published, so the ones here
are ours (only names travel on the wire, and input takes names).
"""

from __future__ import annotations

from typing import Any

from trainworks.kernel.status import Status
from trainworks.kernel.wire import (
    Bool,
    Duration,
    Int32,
    Int64,
    OutputOnly,
    ProtoEnum,
    Timestamp,
    WireModel,
    enum_field,
)
from trainworks.kinds.custom_jobs.wire import DiskSpec, MachineSpec


class ProvisioningModel(ProtoEnum):
    PROVISIONING_MODEL_UNSPECIFIED = 0
    ON_DEMAND = 1
    SPOT = 2
    RESERVATION = 3
    FLEX_START = 4


class ClusterState(ProtoEnum):
    STATE_UNSPECIFIED = 0
    PROVISIONING = 1
    RUNNING = 2
    STOPPING = 3
    ERROR = 4
    UPDATING = 5


class NodeState(ProtoEnum):
    NODE_STATE_UNSPECIFIED = 0
    PREPARING = 1
    RUNNING = 2
    ERROR = 3
    UPDATING = 4


class NodePoolType(ProtoEnum):
    NODE_POOL_TYPE_UNSPECIFIED = 0
    NODE_POOL_TYPE_LOGIN = 1
    NODE_POOL_TYPE_COMPUTE = 2


class EventType(ProtoEnum):
    EVENT_TYPE_UNSPECIFIED = 0
    VM_PROLOG_ERROR = 1
    VM_EPILOG_ERROR = 2
    VM_CONTINUOUS_GPU_ERROR = 3
    VM_SCAN_ERROR = 4
    VM_SLURM_POWER_DOWN = 5
    VM_SLURM_DRAIN = 6
    VM_DELETION = 7
    VM_REPORT_AND_REPLACEMENT = 8
    VM_REBOOT = 9


class UpdateMode(ProtoEnum):
    UPDATE_MODE_UNSPECIFIED = 0
    USER_ONLY = 1
    USER_AND_SERVICE = 2


class ConfidentialInstanceType(ProtoEnum):
    CONFIDENTIAL_INSTANCE_TYPE_UNSPECIFIED = 0
    SEV = 1
    SEV_SNP = 2
    TDX = 3


class DayOfWeek(ProtoEnum):
    """google.type.DayOfWeek."""

    DAY_OF_WEEK_UNSPECIFIED = 0
    MONDAY = 1
    TUESDAY = 2
    WEDNESDAY = 3
    THURSDAY = 4
    FRIDAY = 5
    SATURDAY = 6
    SUNDAY = 7


# ---------------------------------------------------------------- user-settable parts
class ClusterNetwork(WireModel):
    network: str = ""  # projects/P/global/networks/N
    subnetwork: str = ""  # projects/P/regions/R/subnetworks/S


class ScalingSpec(WireModel):
    min_node_count: Int64 = 0
    max_node_count: Int64 = 0


class ConfidentialInstanceConfig(WireModel):
    confidential_instance_type: enum_field(ConfidentialInstanceType) = (  # type: ignore[valid-type]
        ConfidentialInstanceType.CONFIDENTIAL_INSTANCE_TYPE_UNSPECIFIED
    )


class NodePool(WireModel):
    id: str = ""
    machine_spec: MachineSpec | None = None
    provisioning_model: enum_field(ProvisioningModel) = ProvisioningModel.PROVISIONING_MODEL_UNSPECIFIED  # type: ignore[valid-type]
    flex_start_max_duration: Duration | None = None
    effective_flex_start_max_duration: OutputOnly[Duration | None] = None
    scaling_spec: ScalingSpec | None = None
    zone: str = ""
    enable_public_ips: Bool = False
    # Same message and defaults as a worker pool's DiskSpec (bootDiskType, bootDiskSizeGb).
    boot_disk: DiskSpec | None = None
    node_image: str = ""
    startup_script: str = ""
    filestores: list[str] = []
    lustres: list[str] = []
    labels: dict[str, str] = {}
    confidential_instance_config: ConfidentialInstanceConfig | None = None


class SlurmPartition(WireModel):
    id: str = ""
    node_pool_ids: list[str] = []
    config: dict[str, str] = {}


class SlurmNodeSet(WireModel):
    node_pool_id: str = ""
    config: dict[str, str] = {}


class SlurmScheduling(WireModel):
    """Legacy: superseded by slurmSpec.config. Values are slurm.conf strings."""

    priority_type: str = ""
    priority_weight_age: str = ""
    priority_weight_assoc: str = ""
    priority_weight_fairshare: str = ""
    priority_weight_job_size: str = ""
    priority_weight_partition: str = ""
    priority_weight_qos: str = ""
    priority_weight_tres: str = ""
    preempt_type: str = ""
    preempt_mode: str = ""
    preempt_exempt_time: str = ""


class SlurmAccounting(WireModel):
    """Legacy: superseded by slurmSpec.config."""

    accounting_storage_enforce: str = ""


class SlurmSpec(WireModel):
    home_directory_storage: str = ""
    login_node_pool_id: str = ""
    partitions: list[SlurmPartition] = []
    default_partition_id: str = ""
    prolog_bash_scripts: list[str] = []
    epilog_bash_scripts: list[str] = []
    config: dict[str, str] = {}
    node_sets: list[SlurmNodeSet] = []
    scheduling: SlurmScheduling | None = None
    accounting: SlurmAccounting | None = None


class OrchestratorSpec(WireModel):
    slurm_spec: SlurmSpec | None = None


class RuntimeSpec(WireModel):
    service_account: str = ""


class TimeOfDay(WireModel):
    """google.type.TimeOfDay."""

    hours: Int32 = 0
    minutes: Int32 = 0
    seconds: Int32 = 0
    nanos: Int32 = 0


class LustreExportConfig(WireModel):
    destination_bucket: str = ""  # a bucket name, without gs://
    lustres: list[str] = []
    days_of_week: list[enum_field(DayOfWeek)] = []  # type: ignore[valid-type]
    start_time: TimeOfDay | None = None


# ---------------------------------------------------------------- output-only parts
class PhysicalHost(WireModel):
    cluster_name: str = ""
    block_id: str = ""
    subblock_id: str = ""
    host_id: str = ""


class NodeStatus(WireModel):
    node_state: enum_field(NodeState) = NodeState.NODE_STATE_UNSPECIFIED  # type: ignore[valid-type]
    node_pool_id: str = ""
    node_pool_type: enum_field(NodePoolType) = NodePoolType.NODE_POOL_TYPE_UNSPECIFIED  # type: ignore[valid-type]
    instance_name: str = ""
    instance_id: str = ""
    create_time: Timestamp | None = None
    last_update_time: Timestamp | None = None
    detail: str = ""
    physical_host: PhysicalHost | None = None


class ClusterStatus(WireModel):
    state: enum_field(ClusterState) = ClusterState.STATE_UNSPECIFIED  # type: ignore[valid-type]
    detail: str = ""
    error: Status | None = None
    nodes_status: list[NodeStatus] = []


class ClusterEvent(WireModel):
    event_type: enum_field(EventType) = EventType.EVENT_TYPE_UNSPECIFIED  # type: ignore[valid-type]
    event_message: str = ""
    event_time: Timestamp | None = None


class ModelDevelopmentCluster(WireModel):
    name: OutputOnly[str] = ""  # the ID comes from modelDevelopmentClusterId
    display_name: str = ""
    labels: dict[str, str] = {}
    network: ClusterNetwork | None = None
    node_pools: list[NodePool] = []
    orchestrator_spec: OrchestratorSpec | None = None
    runtime_spec: RuntimeSpec | None = None
    lustre_export_config: LustreExportConfig | None = None
    cluster_status: OutputOnly[ClusterStatus | None] = None
    cluster_events: OutputOnly[list[ClusterEvent]] = []
    # {trainingServices[], xmanager{}}; kept loose (camelCase JSON as the service writes it).
    runtime: OutputOnly[dict[str, Any]] = {}
    create_time: OutputOnly[Timestamp | None] = None
    update_time: OutputOnly[Timestamp | None] = None
    start_time: OutputOnly[Timestamp | None] = None


__all__ = [
    "ClusterEvent",
    "ClusterNetwork",
    "ClusterState",
    "ClusterStatus",
    "ConfidentialInstanceConfig",
    "ConfidentialInstanceType",
    "DayOfWeek",
    "EventType",
    "LustreExportConfig",
    "ModelDevelopmentCluster",
    "NodePool",
    "NodePoolType",
    "NodeState",
    "NodeStatus",
    "OrchestratorSpec",
    "PhysicalHost",
    "ProvisioningModel",
    "RuntimeSpec",
    "ScalingSpec",
    "SlurmAccounting",
    "SlurmNodeSet",
    "SlurmPartition",
    "SlurmScheduling",
    "SlurmSpec",
    "TimeOfDay",
    "UpdateMode",
]
