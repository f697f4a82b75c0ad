"""Long-running operations: creation, wire form, get/list/wait/cancel/delete."""

from __future__ import annotations

import base64
import time
from typing import Any

from trainworks.kernel.errors import ApiError, FieldViolation, invalid_argument, not_found
from trainworks.kernel.ids import new_numeric_id
from trainworks.kernel.listing import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
from trainworks.kernel.names import numeric_id, operation_name
from trainworks.kernel.operation_store import Abort, OperationStore
from trainworks.kernel.projects import Projects
from trainworks.kernel.status import Code
from trainworks.kernel.wire import format_timestamp, now_utc, parse_timestamp
from trainworks.store.tables import OperationRow

AIP = "type.googleapis.com/google.cloud.aiplatform.v1."
API_VERSIONS = ("v1", "v1beta1")


def aiplatform_type_url(name: str, api_version: str = "v1") -> str:
    """`type.googleapis.com/google.cloud.aiplatform.{v1|v1beta1}.{name}`.

    A v1beta1 client only registers the v1beta1 types: an Operation whose metadata names a v1 type does not
    even parse there, so operations carry the version of the call that started them.
    """
    if api_version not in API_VERSIONS:
        raise ValueError(f"unknown API version {api_version!r}")
    return f"type.googleapis.com/google.cloud.aiplatform.{api_version}.{name}"


MAX_WAIT_SECONDS = 60.0


def aborted_by_delete(operation_id: int | None, type_name: str, name: str) -> Abort | None:
    """How a delete ends the resource's create or update still running (None when none runs): ABORTED."""
    if operation_id is None:
        return None
    return operation_id, {"code": int(Code.ABORTED), "message": f"The {type_name} {name} is being deleted."}


def _generic_metadata_wire(metadata: dict[str, Any]) -> dict[str, Any]:
    out = dict(metadata)
    generic = dict(out.get("genericMetadata", {}))
    for key in ("createTime", "updateTime"):
        if key in generic:
            generic[key] = format_timestamp(parse_timestamp(generic[key]))
    out["genericMetadata"] = generic
    return out


def operation_wire(row: OperationRow) -> dict[str, Any]:
    out: dict[str, Any] = {
        "name": operation_name(row.project_number, row.location, row.resource, row.id),
        "metadata": _generic_metadata_wire(row.metadata_),
    }
    if row.done:
        out["done"] = True
        if row.error is not None:
            out["error"] = row.error
        else:
            out["response"] = row.response or {"@type": "type.googleapis.com/google.protobuf.Empty"}
    return out


class OperationService:
    def __init__(self, store: OperationStore, projects: Projects) -> None:
        self.store = store
        self.projects = projects

    def create(self, *fields: str) -> OperationRow:
        """Build (from the same positional fields) and store a new operation."""
        return self.store.insert(self.build(*fields))

    @staticmethod
    def build(
        project_number: str,
        location: str,
        resource: str,
        kind: str,
        metadata_type: str,
        api_version: str = "v1",
        *,
        progress: str | None = None,
        response: dict[str, Any] | None = None,
    ) -> OperationRow:
        """A new, not yet stored operation: for a store that records it together with the change it tracks.

        `progress` starts its metadata's progressMessage; with `response` it is born done (a change made
        within the request)."""
        now = now_utc()
        metadata: dict[str, Any] = {
            "@type": aiplatform_type_url(metadata_type, api_version),
            "genericMetadata": {"createTime": now.isoformat(), "updateTime": now.isoformat()},
        }
        if progress:
            metadata["progressMessage"] = progress
        return OperationRow(
            id=new_numeric_id(),
            project_number=project_number,
            location=location,
            resource=resource,
            kind=kind,
            metadata_=metadata,
            done=response is not None,
            response=response,
            error=None,
            create_time=now,
            update_time=now,
        )

    def _find(self, project: str, location: str, resource: str, op_id: str) -> OperationRow:
        """The operation of that ID under `resource` (`customJobs/1`); "" is the location's own form, which
        finds any of the location's operations, whatever they belong to: the location's list shows them all,
        and clients read them there by ID (`gcloud ai operations describe`)."""
        number = self.projects.number(project, location)
        oid = numeric_id(op_id, "Operation")
        row = self.store.get(oid)
        if (
            row is None
            or row.project_number != number
            or row.location != location
            or (resource and row.resource != resource)
        ):
            raise not_found(f"Operation {op_id!r}")
        return row

    def get(self, project: str, location: str, resource: str, op_id: str) -> dict[str, Any]:
        return operation_wire(self._find(project, location, resource, op_id))

    def list(
        self, project: str, location: str, resource: str | None, page_size: int, page_token: str
    ) -> dict[str, Any]:
        number = self.projects.number(project, location)
        after = None
        if page_token:
            try:
                after = int(base64.urlsafe_b64decode(page_token.encode()).decode())
                if not 0 <= after < 2**63:
                    raise ValueError("id out of range")
            except ValueError:
                raise invalid_argument([FieldViolation("page_token", "invalid page token")]) from None
        # A negative size is the default here (operations never refused one), unlike other lists.
        size = DEFAULT_PAGE_SIZE if page_size <= 0 else min(page_size, MAX_PAGE_SIZE)
        rows = self.store.page(number, location, resource, after, size + 1)
        out: dict[str, Any] = {}
        if rows:  # proto3 JSON omits an empty repeated field: an empty page is `{}`
            out["operations"] = [operation_wire(r) for r in rows[:size]]
        if len(rows) > size:
            out["nextPageToken"] = base64.urlsafe_b64encode(str(rows[size - 1].id).encode()).decode()
        return out

    def wait(
        self, project: str, location: str, resource: str, op_id: str, timeout: float | None
    ) -> dict[str, Any]:
        limit = MAX_WAIT_SECONDS if timeout is None else max(0.0, min(timeout, MAX_WAIT_SECONDS))
        deadline = time.monotonic() + limit
        while True:
            row = self._find(project, location, resource, op_id)
            if row.done or time.monotonic() >= deadline:
                return operation_wire(row)
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))

    def cancel(self, project: str, location: str, resource: str, op_id: str) -> None:
        row = self._find(project, location, resource, op_id)
        if row.done:
            return
        # Deletions are short and cannot be undone half-way: cancel is accepted and the deletion completes.

    def delete(self, project: str, location: str, resource: str, op_id: str) -> None:
        row = self._find(project, location, resource, op_id)
        self.store.remove(row.id)


__all__ = ["ApiError", "OperationService", "aborted_by_delete", "operation_wire"]
