"""TrainingPipeline rules: create, get, list, cancel and delete. The controller
(kinds/training_pipelines/controller.py) runs what create stores."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement

from trainworks.jobs import listing
from trainworks.jobs.enums import TERMINAL_PIPELINE_STATES, PipelineState
from trainworks.jobs.service import JobKindService, add_job_status
from trainworks.kernel.errors import FieldViolation, failed_precondition, invalid_argument
from trainworks.kernel.names import custom_job_name, parent_name
from trainworks.kernel.operations import OperationService
from trainworks.kernel.projects import Projects
from trainworks.kernel.wire import input_dict, now_utc
from trainworks.kernel.wire_errors import parse_body
from trainworks.kinds.custom_jobs.service import CustomJobService
from trainworks.kinds.datasets.service import DatasetService
from trainworks.kinds.training_pipelines.store import TrainingPipelineStore
from trainworks.kinds.training_pipelines.validation import validate_training_pipeline
from trainworks.kinds.training_pipelines.wire import TrainingPipeline
from trainworks.kinds.tuning_jobs.service import tuning_job_name
from trainworks.storage.output_buckets import OutputBuckets
from trainworks.store.tables import TrainingPipelineRow

P = PipelineState
STATE_NAMES = {s.name: int(s) for s in PipelineState}
ACTIVE = (P.PIPELINE_STATE_QUEUED, P.PIPELINE_STATE_PENDING, P.PIPELINE_STATE_RUNNING)


def pipeline_name(project_number: str, location: str, pipeline_id: int) -> str:
    return f"{parent_name(project_number, location)}/trainingPipelines/{pipeline_id}"


def backing_name(row: TrainingPipelineRow) -> str | None:
    if row.backing_id is None:
        return None
    if row.backing_kind == "tuning":
        return tuning_job_name(row.project_number, row.location, row.backing_id)
    return custom_job_name(row.project_number, row.location, row.backing_id)


def pipeline_wire(row: TrainingPipelineRow) -> dict[str, Any]:
    """Canonical proto3 JSON of a stored pipeline."""
    out: dict[str, Any] = {"name": pipeline_name(row.project_number, row.location, row.id)}
    out.update(row.spec)
    backing = backing_name(row)
    if backing is not None:
        key = "backingHyperparameterTuningJob" if row.backing_kind == "tuning" else "backingCustomJob"
        out["trainingTaskMetadata"] = {key: backing}
    if row.model and "modelToUpload" in out:
        out["modelToUpload"] = {
            **out["modelToUpload"],
            "name": row.model["name"],
            "versionId": row.model["versionId"],
        }
    return add_job_status(out, row, P(row.state).name)


def pipeline_filter(filter_text: str) -> ColumnElement[bool] | None:
    """A trainingPipelines list filter (AIP-160): the job fields plus `training_task_definition`."""
    table = TrainingPipelineRow
    extra = {"training_task_definition": table.spec["trainingTaskDefinition"].as_string()}
    return listing.job_filter(table, filter_text, STATE_NAMES, extra)


class TrainingPipelineService(JobKindService[TrainingPipelineRow]):
    what = "TrainingPipeline"
    collection = "trainingPipelines"
    name_of = staticmethod(pipeline_name)
    outputs_kind = "training_pipeline"
    store: TrainingPipelineStore

    def __init__(
        self,
        store: TrainingPipelineStore,
        projects: Projects,
        operations: OperationService,
        wake: Callable[[], None] = lambda: None,
        custom_jobs: CustomJobService | None = None,  # the persistent-resource check of the task's job spec
        datasets: DatasetService | None = None,  # checks inputDataConfig
        output_buckets: OutputBuckets | None = None,  # bucket ownership of the gs:// places it names
    ) -> None:
        super().__init__(store, projects, operations, wake, output_buckets)
        self.custom_jobs = custom_jobs
        self.datasets = datasets

    def create(self, project: str, location: str, body: Any) -> dict[str, Any]:
        pipeline = parse_body(TrainingPipeline, body, "training_pipeline")
        number = self.projects.number(project, location)
        check = self.custom_jobs.persistent_resource_check(project, location) if self.custom_jobs else None

        def same_parent(other_project: str, other_location: str) -> bool:
            return other_location == location and self.projects.number(other_project) == number

        checked = validate_training_pipeline(pipeline, check, same_parent)
        if checked.violations:
            raise invalid_argument(checked.violations)
        spec = input_dict(pipeline)
        spec["trainingTaskInputs"] = checked.inputs
        config = spec.get("inputDataConfig")
        if config is not None:
            if self.datasets is None:
                raise invalid_argument(
                    [
                        FieldViolation(
                            "training_pipeline.input_data_config", "managed datasets are not available"
                        )
                    ]
                )
            self.datasets.check_input_data_config(project, location, config)
        self.admit_outputs(project, location, spec)
        row = self.insert_new((number, location), pipeline, spec, now_utc(), backing_kind=checked.kind)
        self.wake()
        return pipeline_wire(row)

    def get(self, project: str, location: str, pipeline_id: str) -> dict[str, Any]:
        return pipeline_wire(self.find(project, location, pipeline_id))

    def where(self, filter_text: str) -> ColumnElement[bool] | None:
        return pipeline_filter(filter_text)

    def wire(self, row: TrainingPipelineRow) -> dict[str, Any]:
        return pipeline_wire(row)

    def cancel(self, project: str, location: str, pipeline_id: str) -> None:
        """CANCELLING now; the controller cancels the backing job and ends the pipeline CANCELLED."""
        while True:
            row = self.find(project, location, pipeline_id)
            state = P(row.state)
            if state in TERMINAL_PIPELINE_STATES:
                raise failed_precondition(
                    f"The TrainingPipeline {pipeline_id} is already finished ({state.name}) and cannot be "
                    "cancelled."
                )
            if state == P.PIPELINE_STATE_CANCELLING:
                return
            if self.store.transition(row.id, ACTIVE, state=P.PIPELINE_STATE_CANCELLING):  # type: ignore[arg-type]
                self.wake()
                return
            # It moved on meanwhile: answer from its new state.

    def delete(
        self, project: str, location: str, pipeline_id: str, api_version: str = "v1"
    ) -> dict[str, Any]:
        row = self.find(project, location, pipeline_id)
        if P(row.state) not in TERMINAL_PIPELINE_STATES:
            raise failed_precondition(
                f"The TrainingPipeline {pipeline_id} is {P(row.state).name}; cancel it and wait for it to "
                "finish before deleting it."
            )
        return self._delete(row, pipeline_id, api_version)
