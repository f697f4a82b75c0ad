"""CustomJob rules: create, get, list, cancel and delete."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement

from trainworks.catalog.billing import Usage
from trainworks.jobs import listing
from trainworks.jobs.enums import JobState
from trainworks.jobs.service import JobKindService, add_job_status, refuse_unschedulable
from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.names import custom_job_name
from trainworks.kernel.operations import OperationService
from trainworks.kernel.projects import Projects
from trainworks.kernel.wire import input_dict, now_utc
from trainworks.kernel.wire_errors import parse_body
from trainworks.kinds.custom_jobs.store import JobStore
from trainworks.kinds.custom_jobs.usage import job_usage
from trainworks.kinds.custom_jobs.validation import validate_custom_job
from trainworks.kinds.custom_jobs.web_access import wants_web_access, web_access_uris
from trainworks.kinds.custom_jobs.wire import CustomJob, CustomJobSpec
from trainworks.scheduling.inventory import Inventory, default_inventory
from trainworks.scheduling.job_requests import job_request
from trainworks.storage.output_buckets import OutputBuckets
from trainworks.store.tables import CustomJobRow

S = JobState
_USAGE_PAGE = 1000  # jobs read at once for the costs report


def job_filter(filter_text: str) -> ColumnElement[bool] | None:
    """A customJobs list filter as SQL over the jobs table."""
    return listing.job_filter(CustomJobRow, filter_text)


def job_wire(row: CustomJobRow) -> dict[str, Any]:
    """Canonical proto3 JSON of a stored job."""
    out: dict[str, Any] = {"name": custom_job_name(row.project_number, row.location, row.id)}
    out.update(row.spec)
    return add_job_status(out, row, S(row.state).name)


class CustomJobService(JobKindService[CustomJobRow]):
    what = "CustomJob"
    collection = "customJobs"
    name_of = staticmethod(custom_job_name)
    outputs_kind = "custom_job"
    store: JobStore

    def __init__(
        self,
        jobs: JobStore,
        projects: Projects,
        operations: OperationService,
        wake: Callable[[], None] = lambda: None,
        inventory: Inventory | None = None,
        persistent_resources: Any = None,  # PersistentResourceService: jobs with persistentResourceId
        web_access_base: str | None = None,  # the server's own URL, for webAccessUris
        output_buckets: OutputBuckets | None = None,  # bucket ownership of the gs:// places a job names
    ) -> None:
        super().__init__(jobs, projects, operations, wake, output_buckets)
        self.web_access_base = web_access_base
        self.inventory = inventory or default_inventory()
        self.persistent_resources = persistent_resources

    def create(self, project: str, location: str, body: Any) -> dict[str, Any]:
        job = parse_body(CustomJob, body)
        violations = validate_custom_job(job, self.persistent_resource_check(project, location))
        if violations:
            raise invalid_argument(violations)
        assert job.job_spec is not None  # validate_custom_job requires it
        number = self.projects.number(project, location)
        now = now_utc()
        spec = input_dict(job)
        self.admit_outputs(project, location, spec)
        request = job_request(0, number, location, spec, job.labels, now)
        # A job on a persistent resource runs on the resource's capacity, not the inventory's.
        if not job.job_spec.persistent_resource_id:
            refuse_unschedulable(self.inventory, request, "The job")
        row = self.insert_new(
            (number, location),
            job,
            spec,
            now,
            priority=request.priority,
            persistent_resource=job.job_spec.persistent_resource_id or None,
        )
        self.wake()
        return job_wire(row)

    def persistent_resource_check(
        self, project: str, location: str
    ) -> Callable[[CustomJobSpec, str], list[FieldViolation]] | None:
        service = self.persistent_resources
        if service is None:
            return None

        def check(spec: CustomJobSpec, path: str) -> list[FieldViolation]:
            return service.check_job(self.projects.number(project, location), location, spec, path)

        return check

    def get(self, project: str, location: str, job_id: str) -> dict[str, Any]:
        return self.wire(self.find(project, location, job_id))

    def wire(self, row: CustomJobRow) -> dict[str, Any]:
        """job_wire plus webAccessUris, which only running jobs with enableWebAccess have."""
        out = job_wire(row)
        if self.web_access_base and wants_web_access(row):
            uris = web_access_uris(self.web_access_base, row, self.store.replicas(row.id, row.attempt))
            if uris:
                out["webAccessUris"] = uris
        return out

    def where(self, filter_text: str) -> ColumnElement[bool] | None:
        return job_filter(filter_text)

    def job_usages(self, project_number: str, location: str, filter_text: str) -> builtins.list[Usage]:
        """What every job of the parent matching the list filter was billed (the costs report's rows)."""
        where = job_filter(filter_text)
        usages: builtins.list[Usage] = []
        after: tuple[datetime, int] | None = None
        while True:
            page = self.store.page(project_number, location, where, after, _USAGE_PAGE)
            replicas = self.store.replicas_of([job.id for job in page])
            usages += [job_usage(job, replicas.get(job.id, [])) for job in page]
            if len(page) < _USAGE_PAGE:
                return usages
            after = (page[-1].create_time, page[-1].id)

    # ---------------------------------------- for the kinds that run on custom jobs (by ID, any project)
    def job_row(self, job_id: int) -> CustomJobRow | None:
        """The stored job, whatever its project; None when it is gone."""
        return self.store.get(job_id)

    def project_of(self, job_id: int) -> str | None:
        """The project number of the job; None when it is gone."""
        row = self.store.get(job_id)
        return row.project_number if row is not None else None

    def jobs_labelled(self, key: str, value: str) -> builtins.list[CustomJobRow]:
        """The jobs carrying the label key=value (those a tuning job or a pipeline created)."""
        return self.store.by_label(key, value)

    def active_jobs(self) -> builtins.list[CustomJobRow]:
        """Jobs not finished yet, and finished ones being deleted, oldest first."""
        return self.store.active()

    def active_resource_jobs(self) -> builtins.list[CustomJobRow]:
        """The active jobs (as active_jobs) that run on a persistent resource, through its index."""
        return self.store.active_on_resources()

    def remove_job(self, job_id: int) -> None:
        """Remove a finished job and its replicas at once (the job of a deleted tuning job's trial)."""
        self.store.remove(job_id)

    def decide_outcome(self, job_id: int, from_states: Iterable[JobState], outcome: dict[str, Any]) -> bool:
        """Record how the job ends (its controller then stops it), if it is still in one of `from_states`
        (compare-and-set); True when it was."""
        return self.store.transition(job_id, from_states, outcome=outcome)

    def admit_queued(self, job_id: int) -> bool:
        """QUEUED -> PENDING (compare-and-set): the job may start; True when it was still queued."""
        return self.store.transition(
            job_id, [S.JOB_STATE_QUEUED], state=S.JOB_STATE_PENDING, zone=None, waiting_reason=None
        )

    def set_waiting_reason(self, job_id: int, reason: str) -> None:
        """Why the queued job waits (shown on the job)."""
        self.store.set_fields(job_id, waiting_reason=reason)
