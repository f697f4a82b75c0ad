"""HyperparameterTuningJob rules: create, get (with trials), list (without), cancel and delete."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement

from trainworks.jobs import listing
from trainworks.jobs.enums import JobState
from trainworks.jobs.service import JobKindService, add_job_status, refuse_unschedulable
from trainworks.kernel.errors import invalid_argument
from trainworks.kernel.names import custom_job_name, parent_name
from trainworks.kernel.operations import OperationService
from trainworks.kernel.projects import Projects
from trainworks.kernel.wire import format_timestamp, input_dict, now_utc
from trainworks.kernel.wire_errors import parse_body
from trainworks.kinds.tuning_jobs.store import TuningStore
from trainworks.kinds.tuning_jobs.validation import validate_tuning_job
from trainworks.kinds.tuning_jobs.wire import HyperparameterTuningJob, trial_state_name
from trainworks.scheduling.inventory import Inventory, default_inventory
from trainworks.scheduling.job_requests import job_request
from trainworks.storage.output_buckets import OutputBuckets
from trainworks.store.tables import TuningJobRow, TuningTrialRow

S = JobState


def tuning_job_name(project_number: str, location: str, job_id: int) -> str:
    return f"{parent_name(project_number, location)}/hyperparameterTuningJobs/{job_id}"


def trial_wire(row: TuningJobRow, trial: TuningTrialRow) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": str(trial.trial_id),
        "state": trial_state_name(trial.state),
        "parameters": trial.parameters,
    }
    if trial.final_measurement:
        out["finalMeasurement"] = trial.final_measurement
    if trial.start_time:
        out["startTime"] = format_timestamp(trial.start_time)
    if trial.end_time:
        out["endTime"] = format_timestamp(trial.end_time)
    if trial.infeasible_reason:
        out["infeasibleReason"] = trial.infeasible_reason
    if trial.custom_job_id is not None:
        out["customJob"] = custom_job_name(row.project_number, row.location, trial.custom_job_id)
    return out


def tuning_job_wire(row: TuningJobRow, trials: list[TuningTrialRow] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": tuning_job_name(row.project_number, row.location, row.id)}
    out.update(row.spec)
    if trials:
        out["trials"] = [trial_wire(row, t) for t in trials]
    return add_job_status(out, row, S(row.state).name)


class TuningJobService(JobKindService[TuningJobRow]):
    what = "HyperparameterTuningJob"
    collection = "hyperparameterTuningJobs"
    name_of = staticmethod(tuning_job_name)
    outputs_kind = "hyperparameter_tuning_job"
    store: TuningStore

    def __init__(
        self,
        store: TuningStore,
        projects: Projects,
        operations: OperationService,
        wake: Callable[[], None] = lambda: None,
        inventory: Inventory | None = None,
        custom_jobs: Any = None,  # CustomJobService: the persistent-resource check of trial job specs
        output_buckets: OutputBuckets | None = None,  # bucket ownership of the gs:// places a job names
    ) -> None:
        super().__init__(store, projects, operations, wake, output_buckets)
        self.custom_jobs = custom_jobs
        self.inventory = inventory or default_inventory()

    def create(self, project: str, location: str, body: Any) -> dict[str, Any]:
        job = parse_body(HyperparameterTuningJob, body)
        check = self.custom_jobs.persistent_resource_check(project, location) if self.custom_jobs else None
        violations = validate_tuning_job(job, check)
        if violations:
            raise invalid_argument(violations)
        number = self.projects.number(project, location)
        now = now_utc()
        spec = input_dict(job)
        self.admit_outputs(project, location, spec)
        # Trials on a persistent resource run on its capacity, not the inventory's.
        if not spec["trialJobSpec"].get("persistentResourceId"):
            trial = {"jobSpec": spec["trialJobSpec"]}
            refuse_unschedulable(
                self.inventory, job_request(0, number, location, trial, {}, now), "The trials"
            )
        row = self.insert_new((number, location), job, spec, now)
        self.wake()
        return tuning_job_wire(row)

    def get(self, project: str, location: str, job_id: str) -> dict[str, Any]:
        row = self.find(project, location, job_id)
        return tuning_job_wire(row, self.store.trials(row.id))

    def where(self, filter_text: str) -> ColumnElement[bool] | None:
        return listing.job_filter(TuningJobRow, filter_text)

    def wire(self, row: TuningJobRow) -> dict[str, Any]:
        return tuning_job_wire(row)  # without trials: list omits them, as Vertex does

    # ---------------------------------------- for the kinds that run on tuning jobs (by ID, any project)
    def job_row(self, job_id: int) -> TuningJobRow | None:
        """The stored tuning job, whatever its project; None when it is gone."""
        return self.store.get(job_id)

    def jobs_labelled(self, key: str, value: str) -> builtins.list[TuningJobRow]:
        """The tuning jobs carrying the label key=value (the one a pipeline created)."""
        return self.store.by_label(key, value)

    def trials_of(self, job_id: int) -> builtins.list[TuningTrialRow]:
        """The job's trials by trial id."""
        return self.store.trials(job_id)
