"""Reconciles training pipelines: exports the managed dataset, creates the backing CustomJob or
HyperparameterTuningJob, follows it, uploads the trained model to the registry, and ends the pipeline.

State lives in the database only, and each step is recorded before the next one starts: the export on the
pipeline row, the backing job labelled with the pipeline id (found again by that label after a crash, so a
restart never creates a second one), and the model version tagged with the pipeline's name (so a restart
never registers it twice).
"""

from __future__ import annotations

import contextlib
import copy
import logging
from typing import Any

from trainworks.config import Settings
from trainworks.contract.environment import output_directories
from trainworks.jobs.enums import TERMINAL_PIPELINE_STATES, JobState, PipelineState
from trainworks.kernel.changes import ChangeFeed
from trainworks.kernel.errors import ApiError
from trainworks.kernel.feed_loop import FeedLoop
from trainworks.kernel.names import parent_name
from trainworks.kernel.status import Code, status_dict
from trainworks.kernel.wire import now_utc
from trainworks.kinds.custom_jobs.service import CustomJobService
from trainworks.kinds.datasets.service import DatasetService
from trainworks.kinds.models.service import ModelService
from trainworks.kinds.training_pipelines.service import pipeline_name
from trainworks.kinds.training_pipelines.store import TrainingPipelineStore
from trainworks.kinds.tuning_jobs.service import TuningJobService
from trainworks.kinds.tuning_jobs.wire import TrialState
from trainworks.store.tables import TrainingPipelineRow

log = logging.getLogger(__name__)
P = PipelineState
S = JobState
PIPELINE_LABEL = "trainworks-training-pipeline"
UNFINISHED = (
    P.PIPELINE_STATE_QUEUED,
    P.PIPELINE_STATE_PENDING,
    P.PIPELINE_STATE_RUNNING,
    P.PIPELINE_STATE_CANCELLING,
)
CANCELED = status_dict(Code.CANCELLED, "CANCELED")


def _api_status(exc: ApiError) -> dict[str, Any]:
    return status_dict(exc.code, exc.message, exc.details())


def with_data_env(spec: dict[str, Any], env: dict[str, str]) -> dict[str, Any]:
    """A CustomJobSpec with the dataset's variables added to every worker pool's env (a variable the user
    set on a pool keeps the user's value)."""
    out = copy.deepcopy(spec)
    for pool in out.get("workerPoolSpecs", []):
        task = pool.get("containerSpec") or pool.get("pythonPackageSpec")
        if task is None:
            continue
        own = task.get("env", [])
        names = {var.get("name") for var in own}
        task["env"] = [{"name": k, "value": v} for k, v in env.items() if k not in names] + own
    return out


def best_trial(trials: list[Any], metric_id: str, maximize: bool) -> Any | None:
    """The succeeded trial with the best final value of the study's metric (the lowest trial id on a tie)."""
    best: tuple[float, int, Any] | None = None
    for trial in trials:
        if trial.state != TrialState.SUCCEEDED or not trial.final_measurement:
            continue
        values = [
            float(m.get("value", 0.0))
            for m in trial.final_measurement.get("metrics", [])
            if m.get("metricId") == metric_id
        ]
        if not values:
            continue
        key = (-values[0] if maximize else values[0], trial.trial_id, trial)
        if best is None or key[:2] < best[:2]:
            best = key
    return best[2] if best else None


class TrainingPipelineController(FeedLoop[TrainingPipelineRow]):
    name = "training-pipeline-controller"
    logger = log
    what = "training pipeline"

    def __init__(
        self,
        settings: Settings,
        store: TrainingPipelineStore,
        custom_jobs: CustomJobService,
        tuning_jobs: TuningJobService,
        models: ModelService | None = None,  # None: pipelines with modelToUpload fail with a clear error
        datasets: DatasetService | None = None,  # None: pipelines with inputDataConfig fail likewise
        changes: ChangeFeed | None = None,
    ) -> None:
        self.store = store
        self.custom_jobs = custom_jobs
        self.tuning_jobs = tuning_jobs
        self.models = models
        self.datasets = datasets
        # A pipeline follows its backing job (kernel/feed_loop.py): the job's changes name it.
        super().__init__(
            settings.resync_seconds,
            settings.full_resync_seconds,
            changes or ChangeFeed(store.db),
            store.kind,
            [custom_jobs.store.kind, tuning_jobs.store.kind],
        )

    def active_rows(self) -> list[TrainingPipelineRow]:
        return self.store.active()

    def active_rows_among(self, ids: set[int]) -> list[TrainingPipelineRow]:
        return self.store.active_among(ids)

    def reconcile(self, row: TrainingPipelineRow) -> bool:
        state = P(row.state)
        if row.delete_operation_id is not None and state in TERMINAL_PIPELINE_STATES:
            self._finish_delete(row)
            return False
        if state in (P.PIPELINE_STATE_QUEUED, P.PIPELINE_STATE_PENDING):
            return self._start(row)
        if state == P.PIPELINE_STATE_RUNNING:
            return self._follow(row)
        if state == P.PIPELINE_STATE_CANCELLING:
            return self._wind_down(row)
        return False

    # -------------------------------------------------------------- steps
    def _start(self, row: TrainingPipelineRow) -> bool:
        config = row.spec.get("inputDataConfig")
        if config is not None and row.export is None:
            if self.datasets is None:
                self._end(
                    row, P.PIPELINE_STATE_FAILED, status_dict(Code.UNIMPLEMENTED, "No dataset service.")
                )
                return False
            try:
                # The pipeline's create time names the export folder: a restart redoes the same export.
                export = self.datasets.export(row.project_number, row.location, config, now=row.create_time)
            except ApiError as exc:
                self._end(row, P.PIPELINE_STATE_FAILED, _api_status(exc))
                return False
            row.export = export.to_dict()
            self.store.set_fields(row.id, export=row.export)
        backing = self._find_backing(row)
        if backing is None:
            try:
                created = self._create_backing(row)
            except ApiError as exc:
                self._end(row, P.PIPELINE_STATE_FAILED, _api_status(exc))
                return False
            backing = int(created["name"].rsplit("/", 1)[-1])
        row.backing_id = backing
        self.store.set_fields(row.id, backing_id=backing)
        self.store.transition(
            row.id,
            [S.JOB_STATE_QUEUED, S.JOB_STATE_PENDING],
            state=S.JOB_STATE_RUNNING,
            start_time=now_utc(),
        )
        return True

    def _follow(self, row: TrainingPipelineRow) -> bool:
        backing = self._backing_row(row)
        if backing is None:
            error = status_dict(Code.NOT_FOUND, "The pipeline's backing job was deleted.")
            self._end(row, P.PIPELINE_STATE_FAILED, error)
            return False
        state = S(backing.state)
        if not state.terminal:
            self.follow(self._backing_kind(row), backing.id, row.id)  # its changes name the pipeline
            return False
        self.unfollow(self._backing_kind(row), backing.id)
        if state == S.JOB_STATE_SUCCEEDED:
            if row.spec.get("modelToUpload") is not None and not row.model:
                upload_error = self._upload(row, backing)
                if upload_error is not None:
                    self._end(row, P.PIPELINE_STATE_FAILED, upload_error)
                    return False
            self._end(row, P.PIPELINE_STATE_SUCCEEDED, None)
        elif state == S.JOB_STATE_CANCELLED:
            self._end(row, P.PIPELINE_STATE_CANCELLED, backing.error or CANCELED)
        else:
            error = backing.error or status_dict(Code.INTERNAL, f"The backing job ended {state.name}.")
            self._end(row, P.PIPELINE_STATE_FAILED, error)
        return False

    def _wind_down(self, row: TrainingPipelineRow) -> bool:
        """Cancel the backing job (if one was created) and end CANCELLED once it has stopped."""
        if row.backing_id is None:
            row.backing_id = self._find_backing(row)
            if row.backing_id is not None:
                self.store.set_fields(row.id, backing_id=row.backing_id)
        backing = self._backing_row(row) if row.backing_id is not None else None
        if backing is not None and not S(backing.state).terminal:
            if backing.state != int(S.JOB_STATE_CANCELLING):
                with contextlib.suppress(ApiError):  # it may have finished meanwhile
                    self._backing_service(row).cancel(row.project_number, row.location, str(backing.id))
            self.follow(self._backing_kind(row), backing.id, row.id)  # its end names the pipeline
            return False
        self._end(row, P.PIPELINE_STATE_CANCELLED, CANCELED)
        return False

    def _end(self, row: TrainingPipelineRow, state: PipelineState, error: dict[str, Any] | None) -> None:
        self.store.transition(row.id, UNFINISHED, state=state, error=error, end_time=now_utc())  # type: ignore[arg-type]

    def _finish_delete(self, row: TrainingPipelineRow) -> None:
        self.store.remove(row.id, finish_operation=row.delete_operation_id)

    # -------------------------------------------------------------- the backing job
    def _backing_service(self, row: TrainingPipelineRow) -> CustomJobService | TuningJobService:
        return self.tuning_jobs if row.backing_kind == "tuning" else self.custom_jobs

    def _backing_kind(self, row: TrainingPipelineRow) -> str:
        """The change feed's kind of the pipeline's backing job."""
        return self._backing_service(row).store.kind

    def _find_backing(self, row: TrainingPipelineRow) -> int | None:
        """The backing job recorded on the row, or one created before a crash and found by its label."""
        if row.backing_id is not None:
            return row.backing_id
        found: list[Any] = list(self._backing_service(row).jobs_labelled(PIPELINE_LABEL, str(row.id)))
        return min(found, key=lambda r: (r.create_time, r.id)).id if found else None

    def _backing_row(self, row: TrainingPipelineRow) -> Any | None:
        if row.backing_id is None:
            return None
        return self._backing_service(row).job_row(row.backing_id)

    def _create_backing(self, row: TrainingPipelineRow) -> dict[str, Any]:
        inputs = copy.deepcopy(row.spec["trainingTaskInputs"])
        env = (row.export or {}).get("env") or {}
        body: dict[str, Any] = {
            "displayName": row.display_name,
            "labels": {**row.labels, PIPELINE_LABEL: str(row.id)},
        }
        if "encryptionSpec" in row.spec:
            body["encryptionSpec"] = row.spec["encryptionSpec"]
        if row.backing_kind == "tuning":
            inputs["trialJobSpec"] = with_data_env(inputs["trialJobSpec"], env)
            body.update(inputs)
            return self.tuning_jobs.create(row.project_number, row.location, body)
        body["jobSpec"] = with_data_env(inputs, env)
        return self.custom_jobs.create(row.project_number, row.location, body)

    # -------------------------------------------------------------- the model
    def _model_dir(self, row: TrainingPipelineRow, backing: Any) -> str | None:
        """The AIP_MODEL_DIR the training code saved to: the job's, or under tuning the best trial's."""
        if row.backing_kind != "tuning":
            base = (backing.spec["jobSpec"].get("baseOutputDirectory") or {}).get("outputUriPrefix")
            return output_directories(base).get("AIP_MODEL_DIR")
        base = (backing.spec["trialJobSpec"].get("baseOutputDirectory") or {}).get("outputUriPrefix")
        metric = backing.spec["studySpec"]["metrics"][0]
        trial = best_trial(
            self.tuning_jobs.trials_of(backing.id), metric["metricId"], metric.get("goal") == "MAXIMIZE"
        )
        if trial is None or not base:
            return None
        # As tuning/trial_jobs.py gives each trial its own base: <base>/<trial id>/.
        return output_directories(f"{base.rstrip('/')}/{trial.trial_id}/").get("AIP_MODEL_DIR")

    def _upload(self, row: TrainingPipelineRow, backing: Any) -> dict[str, Any] | None:
        """Registers modelToUpload (once); the error status when that fails."""
        name = pipeline_name(row.project_number, row.location, row.id)
        done = self.store.uploaded_version(name)
        if done is not None:
            model = f"{parent_name(done.project_number, done.location)}/models/{done.model_id}"
            version = str(done.version_id)
        else:
            if self.models is None:
                return status_dict(Code.UNIMPLEMENTED, "No model registry.")
            model_body = dict(row.spec["modelToUpload"])
            if not model_body.get("artifactUri"):
                artifact = self._model_dir(row, backing)
                if artifact is None:
                    return status_dict(
                        Code.FAILED_PRECONDITION,
                        "No trial succeeded with a final measurement: no model to upload.",
                    )
                model_body["artifactUri"] = artifact
            if "encryptionSpec" in row.spec and "encryptionSpec" not in model_body:
                model_body["encryptionSpec"] = row.spec["encryptionSpec"]
            try:
                model, version = self.models.upload_version(
                    row.project_number,
                    row.location,
                    model_body,
                    parent_model=row.spec.get("parentModel") or None,
                    model_id=row.spec.get("modelId") or None,
                    training_pipeline=name,
                )
            except ApiError as exc:
                return _api_status(exc)
        row.model = {"name": model, "versionId": version}
        self.store.set_fields(row.id, model=row.model)
        return None
