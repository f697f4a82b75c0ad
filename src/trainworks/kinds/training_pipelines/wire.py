"""Wire models of TrainingPipeline and InputDataConfig (google.cloud.aiplatform.v1).

Field names follow `aiplatform_v1.TrainingPipeline` and `aiplatform_v1.InputDataConfig`. The task inputs
(`trainingTaskInputs`, a google.protobuf.Value) are kept as JSON here and parsed by the definition's own
model (CustomJobSpec, or the tuning task's fields) in kinds/training_pipelines/validation.py.
`modelToUpload` is a Model: it is kept as JSON with its keys in canonical camelCase and handed to the model
registry, which checks it.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import PlainSerializer, field_validator, model_validator
from pydantic.alias_generators import to_camel

from trainworks.jobs.enums import PipelineState
from trainworks.kernel.status import Status
from trainworks.kernel.wire import OutputOnly, Timestamp, WireModel, check_oneof, enum_field
from trainworks.kinds.custom_jobs.wire import EncryptionSpec
from trainworks.kinds.datasets import wire as datasets_wire

CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
TUNING_TASK = (
    "gs://google-cloud-aiplatform/schema/trainingjob/definition/hyperparameter_tuning_task_1.0.0.yaml"
)
TASK_DEFINITIONS = {CUSTOM_TASK: "custom", TUNING_TASK: "tuning"}


class InputDataConfig(datasets_wire.InputDataConfig):
    """The datasets' InputDataConfig, with the proto JSON parser's check of its two oneofs."""

    @model_validator(mode="after")
    def _one_split_one_destination(self) -> InputDataConfig:
        check_oneof(self, datasets_wire.SPLIT_FIELDS, "split")
        check_oneof(self, datasets_wire.DESTINATION_FIELDS, "destination")
        return self


# Model fields whose values are maps or free JSON: their keys are data, never field names.
_OPAQUE_MODEL_FIELDS = frozenset({"labels", "metadata", "parameters", "instance", "fields"})


def camel_keys(value: Any, opaque: frozenset[str] = _OPAQUE_MODEL_FIELDS) -> Any:
    """Proto JSON keys in canonical lowerCamelCase (snake_case is accepted on input); the contents of maps
    and Values are left as they are."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            name = to_camel(key) if isinstance(key, str) and key[:1].islower() else key
            out[name] = item if name in opaque or key in opaque else camel_keys(item, opaque)
        return out
    if isinstance(value, list):
        return [camel_keys(item, opaque) for item in value]
    return value


# A Model kept as JSON, written with its keys in canonical camelCase.
ModelJson = Annotated[dict[str, Any], PlainSerializer(lambda model: camel_keys(model), when_used="json")]


class TrainingPipeline(WireModel):
    name: OutputOnly[str] = ""
    display_name: str = ""
    input_data_config: InputDataConfig | None = None
    training_task_definition: str = ""
    training_task_inputs: Any = None
    training_task_metadata: OutputOnly[Any] = None
    model_to_upload: ModelJson | None = None
    model_id: str = ""
    parent_model: str = ""
    state: OutputOnly[enum_field(PipelineState)] = PipelineState.PIPELINE_STATE_UNSPECIFIED  # type: ignore[valid-type]
    error: OutputOnly[Status | None] = None
    create_time: OutputOnly[Timestamp | None] = None
    start_time: OutputOnly[Timestamp | None] = None
    end_time: OutputOnly[Timestamp | None] = None
    update_time: OutputOnly[Timestamp | None] = None
    labels: dict[str, str] = {}
    encryption_spec: EncryptionSpec | None = None

    @field_validator("model_to_upload", mode="before")
    @classmethod
    def _model_is_an_object(cls, value: Any) -> Any:
        if value is not None and not isinstance(value, dict):
            raise ValueError("expected a Model (a JSON object)")
        return value


__all__ = [
    "CUSTOM_TASK",
    "InputDataConfig",
    "TASK_DEFINITIONS",
    "TUNING_TASK",
    "TrainingPipeline",
    "camel_keys",
]
