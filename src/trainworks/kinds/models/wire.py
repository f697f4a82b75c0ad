"""Wire models of the model registry (google.cloud.aiplatform.v1): Model, ModelContainerSpec, Probe and the
UploadModel / CopyModel / MergeVersionAliases request bodies.

Field names follow `aiplatform_v1.Model` and friends. Input takes camelCase or snake_case; output is
canonical proto3 JSON. Output-only fields (`versionId`, times, `trainingPipeline`, ...) are accepted and
ignored on input, as Vertex strips them; the service writes its own values.
"""

from __future__ import annotations

from typing import Any

from pydantic import model_validator

from trainworks.kernel.wire import Bool, Duration, Int32, Int64, Timestamp, WireModel, check_oneof
from trainworks.kinds.custom_jobs.wire import EncryptionSpec, EnvVar

# The fields a user sets on upload, as the registry stores them per version (camelCase wire keys).
USER_FIELDS = (
    "displayName",
    "description",
    "versionDescription",
    "predictSchemata",
    "metadataSchemaUri",
    "metadata",
    "pipelineJob",
    "containerSpec",
    "artifactUri",
    "encryptionSpec",
)


class Port(WireModel):
    container_port: Int32 = 0


class ExecAction(WireModel):
    command: list[str] = []


class HttpHeader(WireModel):
    name: str = ""
    value: str = ""


class HttpGetAction(WireModel):
    path: str = ""
    port: Int32 = 0
    host: str = ""
    scheme: str = ""
    http_headers: list[HttpHeader] = []


class GrpcAction(WireModel):
    port: Int32 = 0
    service: str = ""


class TcpSocketAction(WireModel):
    port: Int32 = 0
    host: str = ""


class Probe(WireModel):
    exec: ExecAction | None = None
    http_get: HttpGetAction | None = None
    grpc: GrpcAction | None = None
    tcp_socket: TcpSocketAction | None = None
    period_seconds: Int32 = 0
    timeout_seconds: Int32 = 0
    failure_threshold: Int32 = 0
    success_threshold: Int32 = 0
    initial_delay_seconds: Int32 = 0

    @model_validator(mode="after")
    def _one_action(self) -> Probe:
        # `probe_type` is a oneof: the proto JSON parser rejects two members.
        set_ = [n for n in ("exec", "http_get", "grpc", "tcp_socket") if getattr(self, n) is not None]
        if len(set_) > 1:
            raise ValueError(f"only one of exec, http_get, grpc, tcp_socket may be set, got {set_}")
        return self


class ModelContainerSpec(WireModel):
    image_uri: str = ""
    command: list[str] = []
    args: list[str] = []
    env: list[EnvVar] = []
    ports: list[Port] = []
    predict_route: str = ""
    health_route: str = ""
    invoke_route_prefix: str = ""
    grpc_ports: list[Port] = []
    deployment_timeout: Duration | None = None
    shared_memory_size_mb: Int64 = 0
    startup_probe: Probe | None = None
    health_probe: Probe | None = None
    liveness_probe: Probe | None = None


class PredictSchemata(WireModel):
    instance_schema_uri: str = ""
    parameters_schema_uri: str = ""
    prediction_schema_uri: str = ""


class Model(WireModel):
    """google.cloud.aiplatform.v1.Model as a request body (upload, or the body of a PATCH)."""

    name: str = ""
    version_id: str = ""  # OUT
    version_aliases: list[str] = []
    version_create_time: Timestamp | None = None  # OUT
    version_update_time: Timestamp | None = None  # OUT
    display_name: str = ""
    description: str = ""
    version_description: str = ""
    default_checkpoint_id: str = ""
    predict_schemata: PredictSchemata | None = None
    metadata_schema_uri: str = ""
    metadata: Any = None  # google.protobuf.Value: any JSON
    supported_export_formats: list[dict[str, Any]] = []  # OUT
    training_pipeline: str = ""  # OUT
    pipeline_job: str = ""
    container_spec: ModelContainerSpec | None = None
    artifact_uri: str = ""
    supported_deployment_resources_types: list[Any] = []  # OUT
    supported_input_storage_formats: list[str] = []  # OUT
    supported_output_storage_formats: list[str] = []  # OUT
    create_time: Timestamp | None = None  # OUT
    update_time: Timestamp | None = None  # OUT
    deployed_models: list[dict[str, Any]] = []  # OUT
    explanation_spec: dict[str, Any] | None = None  # not supported: rejected by the rules
    etag: str = ""
    labels: dict[str, str] = {}
    data_stats: dict[str, Any] | None = None  # not supported: rejected by the rules
    encryption_spec: EncryptionSpec | None = None
    model_source_info: dict[str, Any] | None = None  # OUT
    original_model_info: dict[str, Any] | None = None  # OUT
    metadata_artifact: str = ""  # OUT
    base_model_source: dict[str, Any] | None = None  # not supported: rejected by the rules
    satisfies_pzs: Bool = False  # OUT
    satisfies_pzi: Bool = False  # OUT
    checkpoints: list[dict[str, Any]] = []  # OUT

    def user_fields(self) -> dict[str, Any]:
        """The fields a user sets, canonical camelCase, defaults omitted (what the registry stores)."""
        wire = self.to_wire()
        out = {key: wire[key] for key in USER_FIELDS if key in wire}
        if self.metadata is not None:
            out["metadata"] = self.metadata  # a Value is kept even when it is a zero value
        return out


class UploadModelRequest(WireModel):
    parent: str = ""  # in the path; accepted in the body too
    parent_model: str = ""
    model_id: str = ""
    model: Model | None = None
    service_account: str = ""


class CopyModelRequest(WireModel):
    """google.cloud.aiplatform.v1.CopyModelRequest: `destination_model` is a oneof of model_id and
    parent_model."""

    parent: str = ""  # in the path; accepted in the body too
    model_id: str | None = None
    parent_model: str | None = None
    source_model: str = ""
    encryption_spec: EncryptionSpec | None = None
    custom_service_account: str = ""  # accepted: the copy runs as the server

    @model_validator(mode="after")
    def _one_destination(self) -> CopyModelRequest:
        check_oneof(self, ("model_id", "parent_model"), "destination_model")
        return self


class MergeVersionAliasesRequest(WireModel):
    name: str = ""  # in the path
    version_aliases: list[str] = []


__all__ = [
    "USER_FIELDS",
    "CopyModelRequest",
    "MergeVersionAliasesRequest",
    "Model",
    "ModelContainerSpec",
    "PredictSchemata",
    "Probe",
    "UploadModelRequest",
]
