"""Wire models of CustomJob and its parts (google.cloud.aiplatform.v1.CustomJob)."""

from __future__ import annotations

from datetime import datetime, timedelta

from trainworks.catalog.accelerators import AcceleratorType
from trainworks.jobs.enums import JobState, ReservationAffinityType, Strategy
from trainworks.kernel.status import Status
from trainworks.kernel.wire import (
    Bool,
    Duration,
    Int32,
    Int64,
    OutputOnly,
    Timestamp,
    WireModel,
    enum_field,
)


class EnvVar(WireModel):
    # Proto3 has no required fields on the wire: an empty value is omitted (`{"name": "X"}`), so both
    # default to "". Both are REQUIRED, so the validation rules reject an empty name or value (as Vertex
    # does: `...env[0].value; Message: Required field is not set.`).
    name: str = ""
    value: str = ""


class ReservationAffinity(WireModel):
    reservation_affinity_type: enum_field(ReservationAffinityType) = ReservationAffinityType.TYPE_UNSPECIFIED  # type: ignore[valid-type]
    key: str = ""
    values: list[str] = []


class MachineSpec(WireModel):
    machine_type: str = ""
    accelerator_type: enum_field(AcceleratorType) = AcceleratorType.ACCELERATOR_TYPE_UNSPECIFIED  # type: ignore[valid-type]
    accelerator_count: Int32 = 0
    gpu_partition_size: str = ""
    tpu_topology: str = ""
    reservation_affinity: ReservationAffinity | None = None


class DiskSpec(WireModel):
    boot_disk_type: str = ""
    boot_disk_size_gb: Int32 = 0


class NfsMount(WireModel):
    server: str = ""
    path: str = ""
    mount_point: str = ""


class LustreMount(WireModel):
    instance_ip: str = ""
    volume_handle: str = ""
    filesystem: str = ""
    mount_point: str = ""


class ContainerSpec(WireModel):
    image_uri: str = ""
    command: list[str] = []
    args: list[str] = []
    env: list[EnvVar] = []


class PythonPackageSpec(WireModel):
    executor_image_uri: str = ""
    package_uris: list[str] = []
    python_module: str = ""
    args: list[str] = []
    env: list[EnvVar] = []


class WorkerPoolSpec(WireModel):
    container_spec: ContainerSpec | None = None
    python_package_spec: PythonPackageSpec | None = None
    machine_spec: MachineSpec | None = None
    replica_count: Int64 = 0
    nfs_mounts: list[NfsMount] = []
    lustre_mounts: list[LustreMount] = []
    disk_spec: DiskSpec | None = None

    @property
    def is_empty(self) -> bool:
        """`{}` skips a pool. Proto3 scalars have no presence, so `{"replicaCount": "0"}` or `[]` values
        parse to the same empty message: only fields with a non-default value count."""
        return not self.model_dump(exclude_defaults=True)

    @property
    def args(self) -> list[str]:
        task = self.container_spec or self.python_package_spec
        return list(task.args) if task else []

    @property
    def env(self) -> list[EnvVar]:
        task = self.container_spec or self.python_package_spec
        return list(task.env) if task else []


class Scheduling(WireModel):
    timeout: Duration | None = None
    restart_job_on_worker_restart: Bool = False
    strategy: enum_field(Strategy) = Strategy.STRATEGY_UNSPECIFIED  # type: ignore[valid-type]
    disable_retries: Bool = False
    max_wait_duration: Duration | None = None


class GcsDestination(WireModel):
    output_uri_prefix: str = ""


class EncryptionSpec(WireModel):
    kms_key_name: str = ""


class DnsPeeringConfig(WireModel):
    domain: str = ""
    target_project: str = ""
    target_network: str = ""


class PscInterfaceConfig(WireModel):
    network_attachment: str = ""
    dns_peering_configs: list[DnsPeeringConfig] = []


class CustomJobSpec(WireModel):
    persistent_resource_id: str = ""
    worker_pool_specs: list[WorkerPoolSpec] = []
    scheduling: Scheduling | None = None
    service_account: str = ""
    network: str = ""
    reserved_ip_ranges: list[str] = []
    psc_interface_config: PscInterfaceConfig | None = None
    base_output_directory: GcsDestination | None = None
    protected_artifact_location_id: str = ""
    tensorboard: str = ""
    enable_web_access: Bool = False
    enable_dashboard_access: Bool = False
    experiment: str = ""
    experiment_run: str = ""
    models: list[str] = []

    @property
    def timeout(self) -> timedelta:
        if self.scheduling and self.scheduling.timeout is not None:
            return self.scheduling.timeout
        return DEFAULT_TIMEOUT


DEFAULT_TIMEOUT = timedelta(days=7)


class CustomJob(WireModel):
    name: OutputOnly[str] = ""
    display_name: str = ""
    job_spec: CustomJobSpec | None = None
    state: OutputOnly[enum_field(JobState)] = JobState.JOB_STATE_UNSPECIFIED  # type: ignore[valid-type]
    create_time: OutputOnly[Timestamp | None] = None
    start_time: OutputOnly[Timestamp | None] = None
    end_time: OutputOnly[Timestamp | None] = None
    update_time: OutputOnly[Timestamp | None] = None
    error: OutputOnly[Status | None] = None
    labels: dict[str, str] = {}
    encryption_spec: EncryptionSpec | None = None
    web_access_uris: OutputOnly[dict[str, str]] = {}
    satisfies_pzs: OutputOnly[Bool] = False
    satisfies_pzi: OutputOnly[Bool] = False


__all__ = [
    "ContainerSpec",
    "CustomJob",
    "CustomJobSpec",
    "DiskSpec",
    "EnvVar",
    "GcsDestination",
    "MachineSpec",
    "PythonPackageSpec",
    "Scheduling",
    "WorkerPoolSpec",
    "datetime",
]
