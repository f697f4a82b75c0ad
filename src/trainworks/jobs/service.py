"""What the services of the three job kinds share: admitting a new job (output buckets, schedulability, its
row), the common part of its wire form, finding one in its parent, list pages (filter, token, readMask),
cancel and delete (JobKindService). What differs by kind (validation, the wire form's own fields, cancel and
delete of pipelines) stays there."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from sqlalchemy import ColumnElement

from trainworks.jobs.enums import JobState
from trainworks.jobs.lifecycle import request_cancel, request_delete
from trainworks.jobs.store import JobRows
from trainworks.kernel import listing
from trainworks.kernel.errors import ApiError, not_found
from trainworks.kernel.ids import new_numeric_id
from trainworks.kernel.names import numeric_id
from trainworks.kernel.operations import OperationService
from trainworks.kernel.projects import Projects
from trainworks.kernel.rows import Named
from trainworks.kernel.status import Code
from trainworks.kernel.wire import format_timestamp
from trainworks.scheduling.admission import JobRequest, never_fits
from trainworks.scheduling.inventory import Inventory
from trainworks.storage.output_buckets import OutputBuckets
from trainworks.store.tables import JobColumns

R = TypeVar("R", bound=JobColumns)


def refuse_unschedulable(inventory: Inventory, request: JobRequest, what: str) -> None:
    """RESOURCE_EXHAUSTED when `what` (\"The job\", \"The trials\") could never fit the inventory."""
    impossible = never_fits(inventory, request)
    if impossible:
        raise ApiError(
            Code.RESOURCE_EXHAUSTED,
            f"{what} can never be scheduled: {impossible}.",
            reason="RESOURCE_EXHAUSTED",
        )


def add_job_status(out: dict[str, Any], row: JobColumns, state_name: str) -> dict[str, Any]:
    """The fields every job's wire form ends with: state, times and error (in this order)."""
    out["state"] = state_name
    out["createTime"] = format_timestamp(row.create_time)
    if row.start_time:
        out["startTime"] = format_timestamp(row.start_time)
    if row.end_time:
        out["endTime"] = format_timestamp(row.end_time)
    out["updateTime"] = format_timestamp(row.update_time)
    if row.error:
        out["error"] = row.error
    return out


def find_job(
    store: JobRows[R],
    projects: Projects,
    project: str,
    location: str,
    job_id: str,
    kind: str,
    name_of: Callable[[str, str, int], str],
) -> R:
    """The job `job_id` of the parent; NOT_FOUND (with its full name) when the parent has none."""
    jid = numeric_id(job_id, kind)
    number = projects.number(project, location)
    row = store.get(jid, number, location)
    if row is None:
        raise not_found(f"{kind} {name_of(number, location, jid)}")
    return row


def list_jobs(
    store: JobRows[R],
    projects: Projects,
    project: str,
    location: str,
    page: tuple[int, str, str, str],
    where: Callable[[str], ColumnElement[bool] | None],
    key: str,
    wire: Callable[[R], dict[str, Any]],
) -> dict[str, Any]:
    """One page, newest first. `page`: (page_size, page_token, filter, read_mask); `where` compiles the
    filter; `key` names the repeated field; `wire` renders a row."""
    page_size, page_token, filter_text, read_mask = page
    size = listing.page_size(page_size)
    condition = where(filter_text)
    fingerprint = listing.fingerprint(filter_text)
    after = listing.read_page_token(page_token, fingerprint) if page_token else None
    number = projects.number(project, location)
    rows = store.page(number, location, condition, after, size + 1)
    out: dict[str, Any] = {}
    if rows:  # proto3 JSON omits an empty repeated field: an empty page is `{}`
        out[key] = [listing.apply_read_mask(wire(r), read_mask) for r in rows[:size]]
    if len(rows) > size:
        last = rows[size - 1]
        out["nextPageToken"] = listing.page_token(last.create_time, last.id, fingerprint)
    return out


class JobKindService(Generic[R]):
    """Admitting a new job's outputs and storing it; find, list, cancel and delete as every job kind has them.
    A kind's service names itself in the class attributes and defines `where` and `wire`."""

    what: ClassVar[str]  # the kind in messages: "CustomJob"
    collection: ClassVar[str]  # the list's field and the delete operations' resource: "customJobs"
    name_of: ClassVar[staticmethod[[str, str, int], str]]  # a job's full name: staticmethod(custom_job_name)
    outputs_kind: ClassVar[str]  # what the output buckets admit: "custom_job"

    def __init__(
        self,
        store: JobRows[R],
        projects: Projects,
        operations: OperationService,
        wake: Callable[[], None],
        output_buckets: OutputBuckets | None,  # bucket ownership of the gs:// places a job names
    ) -> None:
        self.store = store
        self.projects = projects
        self.operations = operations
        self.wake = wake  # asks the kind's controller for a pass now (set later when they need each other)
        self.output_buckets = output_buckets

    def admit_outputs(self, project: str, location: str, spec: dict[str, Any]) -> None:
        """Check that the project owns the gs:// places the job names (when the server tracks ownership)."""
        if self.output_buckets is not None:
            self.output_buckets.admit(project, location, self.outputs_kind, spec)

    def insert_new(
        self, parent: tuple[str, str], job: Named, spec: dict[str, Any], now: datetime, **own_columns: Any
    ) -> R:
        """Store a new job of the request's `job` (its wire model) in the parent (project number, location):
        QUEUED (PipelineState shares the number), under a fresh id, created and updated `now`."""
        number, location = parent
        row: R = self.store.row(
            id=new_numeric_id(),
            project_number=number,
            location=location,
            display_name=job.display_name,
            state=int(JobState.JOB_STATE_QUEUED),
            spec=spec,
            labels=dict(job.labels),
            create_time=now,
            update_time=now,
            **own_columns,
        )
        self.store.insert(row)
        return row

    def where(self, filter_text: str) -> ColumnElement[bool] | None:
        """The list filter (AIP-160) as SQL."""
        raise NotImplementedError

    def wire(self, row: R) -> dict[str, Any]:
        """A job as list returns it."""
        raise NotImplementedError

    def find(self, project: str, location: str, job_id: str) -> R:
        return find_job(self.store, self.projects, project, location, job_id, self.what, self.name_of)

    def list(
        self, project: str, location: str, page_size: int, page_token: str, filter_text: str, read_mask: str
    ) -> dict[str, Any]:
        page = (page_size, page_token, filter_text, read_mask)
        where, key = self.where, self.collection
        return list_jobs(self.store, self.projects, project, location, page, where, key, self.wire)

    def cancel(self, project: str, location: str, job_id: str) -> None:
        if request_cancel(self.store, lambda: self.find(project, location, job_id), self.what, job_id):
            self.wake()

    def delete(self, project: str, location: str, job_id: str, api_version: str = "v1") -> dict[str, Any]:
        return self._delete(self.find(project, location, job_id), job_id, api_version)

    def _delete(self, row: R, job_id: str, api_version: str) -> dict[str, Any]:
        op = request_delete(self.store, self.operations, row, self.what, job_id, self.collection, api_version)
        self.wake()
        return op
