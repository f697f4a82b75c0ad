"""CustomJob rules: create, get, list, cancel and delete."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import ColumnElement

from trainworks.jobs import listing
from trainworks.jobs.enums import JobState
from trainworks.jobs.lifecycle import request_cancel, request_delete
from trainworks.jobs.service import (
    add_job_status,
    admit_outputs,
    find_job,
    insert_new_job,
    list_jobs,
    refuse_unschedulable,
)
from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.names import custom_job_name
from trainworks.kernel.operations import OperationService
from trainworks.kernel.projects import Projects
from trainworks.kernel.wire import now_utc
from trainworks.kernel.wire_errors import parse_body
from trainworks.kinds.custom_jobs.store import JobStore
from trainworks.kinds.custom_jobs.validation import validate_custom_job
from trainworks.kinds.custom_jobs.web_access import wants_web_access, web_access_uris
from trainworks.kinds.custom_jobs.wire import CustomJob, CustomJobSpec, input_dict
from trainworks.scheduling.inventory import Inventory, default_inventory
from trainworks.scheduling.job_requests import job_request
from trainworks.storage.output_buckets import OutputBuckets
from trainworks.store.tables import CustomJobRow

S = JobState


def job_filter(filter_text: str) -> ColumnElement[bool] | None:
    """A customJobs list filter as SQL over the jobs table."""
    return listing.job_filter(CustomJobRow, filter_text)


def job_wire(row: CustomJobRow) -> dict[str, Any]:
    """Canonical proto3 JSON of a stored job."""
    out: dict[str, Any] = {"name": custom_job_name(row.project_number, row.location, row.id)}
    out.update(row.spec)
    return add_job_status(out, row, S(row.state).name)


class CustomJobService:
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
        self.output_buckets = output_buckets
        self.web_access_base = web_access_base
        self.inventory = inventory or default_inventory()
        self.persistent_resources = persistent_resources
        self.jobs = jobs
        self.projects = projects
        self.operations = operations
        self.wake = wake

    def create(self, project: str, location: str, body: Any) -> dict[str, Any]:
        job = parse_body(CustomJob, body)
        violations = validate_custom_job(job, self.persistent_resource_check(project, location))
        if violations:
            raise invalid_argument(violations)
        assert job.job_spec is not None  # validate_custom_job requires it
        number = self.projects.number(project, location)
        now = now_utc()
        spec = input_dict(job)
        admit_outputs(self.output_buckets, project, location, "custom_job", spec)
        request = job_request(0, number, location, spec, job.labels, now)
        # A job on a persistent resource runs on the resource's capacity, not the inventory's.
        if not job.job_spec.persistent_resource_id:
            refuse_unschedulable(self.inventory, request, "The job")
        row = insert_new_job(
            self.jobs,
            CustomJobRow,
            project_number=number,
            location=location,
            display_name=job.display_name,
            state=int(S.JOB_STATE_QUEUED),
            spec=spec,
            labels=job.labels,
            now=now,
            priority=request.priority,
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

    def find(self, project: str, location: str, job_id: str) -> CustomJobRow:
        return find_job(self.jobs, self.projects, project, location, job_id, "CustomJob", custom_job_name)

    def get(self, project: str, location: str, job_id: str) -> dict[str, Any]:
        return self.wire(self.find(project, location, job_id))

    def wire(self, row: CustomJobRow) -> dict[str, Any]:
        """job_wire plus webAccessUris, which only running jobs with enableWebAccess have."""
        out = job_wire(row)
        if self.web_access_base and wants_web_access(row):
            uris = web_access_uris(self.web_access_base, row, self.jobs.replicas(row.id, row.attempt))
            if uris:
                out["webAccessUris"] = uris
        return out

    def list(
        self, project: str, location: str, page_size: int, page_token: str, filter_text: str, read_mask: str
    ) -> dict[str, Any]:
        page = (page_size, page_token, filter_text, read_mask)
        return list_jobs(
            self.jobs, self.projects, project, location, page, job_filter, "customJobs", self.wire
        )

    def cancel(self, project: str, location: str, job_id: str) -> None:
        if request_cancel(self.jobs, lambda: self.find(project, location, job_id), "CustomJob", job_id):
            self.wake()

    def delete(self, project: str, location: str, job_id: str, api_version: str = "v1") -> dict[str, Any]:
        row = self.find(project, location, job_id)
        op = request_delete(self.jobs, self.operations, row, "CustomJob", job_id, "customJobs", api_version)
        self.wake()
        return op
