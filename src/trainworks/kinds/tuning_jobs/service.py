"""HyperparameterTuningJob rules: create, get (with trials), list (without), cancel and delete."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainworks.jobs.enums import JobState
from trainworks.jobs.lifecycle import request_cancel, request_delete
from trainworks.kernel import listing
from trainworks.kernel.errors import (
    ApiError,
    invalid_argument,
    not_found,
)
from trainworks.kernel.ids import new_numeric_id
from trainworks.kernel.names import custom_job_name, numeric_id, parent_name
from trainworks.kernel.operations import OperationService
from trainworks.kernel.projects import Projects
from trainworks.kernel.status import Code
from trainworks.kernel.wire import format_timestamp, now_utc
from trainworks.kernel.wire_errors import parse_body
from trainworks.kinds.tuning_jobs.store import TuningStore
from trainworks.kinds.tuning_jobs.validation import validate_tuning_job
from trainworks.kinds.tuning_jobs.wire import HyperparameterTuningJob, input_dict
from trainworks.scheduling.admission import never_fits
from trainworks.scheduling.inventory import Inventory, default_inventory
from trainworks.scheduling.job_requests import job_request
from trainworks.storage.output_buckets import OutputBuckets
from trainworks.store.tables import TuningJobRow, TuningTrialRow

S = JobState
_TRIAL_STATES = {
    0: "STATE_UNSPECIFIED",
    1: "REQUESTED",
    2: "ACTIVE",
    3: "STOPPING",
    4: "SUCCEEDED",
    5: "INFEASIBLE",
}


def tuning_job_name(project_number: str, location: str, job_id: int) -> str:
    return f"{parent_name(project_number, location)}/hyperparameterTuningJobs/{job_id}"


def trial_wire(row: TuningJobRow, trial: TuningTrialRow) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": str(trial.trial_id),
        "state": _TRIAL_STATES.get(trial.state, "STATE_UNSPECIFIED"),
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
    out["state"] = S(row.state).name
    out["createTime"] = format_timestamp(row.create_time)
    if row.start_time:
        out["startTime"] = format_timestamp(row.start_time)
    if row.end_time:
        out["endTime"] = format_timestamp(row.end_time)
    out["updateTime"] = format_timestamp(row.update_time)
    if row.error:
        out["error"] = row.error
    return out


class TuningJobService:
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
        self.output_buckets = output_buckets
        self.custom_jobs = custom_jobs
        self.store = store
        self.projects = projects
        self.operations = operations
        self.wake = wake
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
        if self.output_buckets is not None:
            self.output_buckets.admit(project, location, "hyperparameter_tuning_job", spec)
        trial = {"jobSpec": spec["trialJobSpec"]}
        # Trials on a persistent resource run on its capacity, not the inventory's.
        on_resource = bool(spec["trialJobSpec"].get("persistentResourceId"))
        impossible = (
            None
            if on_resource
            else never_fits(self.inventory, job_request(0, number, location, trial, {}, now))
        )
        if impossible:
            raise ApiError(
                Code.RESOURCE_EXHAUSTED,
                f"The trials can never be scheduled: {impossible}.",
                reason="RESOURCE_EXHAUSTED",
            )
        row = TuningJobRow(
            id=new_numeric_id(),
            project_number=number,
            location=location,
            display_name=job.display_name,
            state=int(S.JOB_STATE_QUEUED),
            spec=spec,
            labels=dict(job.labels),
            create_time=now,
            update_time=now,
        )
        self.store.insert(row)
        self.wake()
        return tuning_job_wire(row)

    def find(self, project: str, location: str, job_id: str) -> TuningJobRow:
        jid = numeric_id(job_id, "HyperparameterTuningJob")
        number = self.projects.number(project, location)
        row = self.store.get(jid, number, location)
        if row is None:
            raise not_found(f"HyperparameterTuningJob {tuning_job_name(number, location, jid)}")
        return row

    def get(self, project: str, location: str, job_id: str) -> dict[str, Any]:
        row = self.find(project, location, job_id)
        return tuning_job_wire(row, self.store.trials(row.id))

    def list(
        self, project: str, location: str, page_size: int, page_token: str, filter_text: str, read_mask: str
    ) -> dict[str, Any]:
        size = listing.page_size(page_size)
        where = listing.job_filter(TuningJobRow, filter_text)
        fingerprint = listing.fingerprint(filter_text)
        after = listing.read_page_token(page_token, fingerprint) if page_token else None
        number = self.projects.number(project, location)
        rows = self.store.page(number, location, where, after, size + 1)
        out: dict[str, Any] = {}
        if rows:  # list omits trials, as Vertex does
            out["hyperparameterTuningJobs"] = [
                listing.apply_read_mask(tuning_job_wire(r), read_mask) for r in rows[:size]
            ]
        if len(rows) > size:
            last = rows[size - 1]
            out["nextPageToken"] = listing.page_token(last.create_time, last.id, fingerprint)
        return out

    def cancel(self, project: str, location: str, job_id: str) -> None:
        what = "HyperparameterTuningJob"
        if request_cancel(self.store, lambda: self.find(project, location, job_id), what, job_id):
            self.wake()

    def delete(self, project: str, location: str, job_id: str, api_version: str = "v1") -> dict[str, Any]:
        row = self.find(project, location, job_id)
        op = request_delete(
            self.store,
            self.operations,
            row,
            "HyperparameterTuningJob",
            job_id,
            "hyperparameterTuningJobs",
            api_version,
        )
        self.wake()
        return op
