"""Cancel and delete, as every kind of job has them: the same states, messages and operation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainworks.jobs.enums import JobState
from trainworks.jobs.store import JobRows
from trainworks.kernel.errors import failed_precondition, not_found
from trainworks.kernel.operations import OperationService, operation_wire

S = JobState
CANCEL_OUTCOME = {"state": int(S.JOB_STATE_CANCELLED), "error": {"code": 1, "message": "CANCELED"}}


def request_cancel(rows: JobRows[Any], find: Callable[[], Any], what: str, job_id: str) -> bool:
    """Move the job to CANCELLING; True when this call did. Cancelling twice is fine, a finished job is not.

    An end already decided (say the primary just succeeded) stands; a pending restart is dropped."""
    while True:
        row = find()
        state = S(row.state)
        if state.terminal:
            raise failed_precondition(
                f"The {what} {job_id} is already finished ({state.name}) and cannot be cancelled."
            )
        if state == S.JOB_STATE_CANCELLING:
            return False
        outcome = row.outcome
        if outcome is None or "restart" in outcome:
            outcome = CANCEL_OUTCOME
        active = [S.JOB_STATE_QUEUED, S.JOB_STATE_PENDING, S.JOB_STATE_RUNNING]
        if rows.transition(row.id, active, state=S.JOB_STATE_CANCELLING, outcome=outcome):
            return True
        # It moved on meanwhile: answer from its new state.


def request_delete(
    rows: JobRows[Any],
    operations: OperationService,
    row: Any,
    what: str,
    job_id: str,
    collection: str,
    api_version: str,
) -> dict[str, Any]:
    """The delete Operation of a finished job (the same one when asked again); its controller completes it."""
    if not S(row.state).terminal:
        raise failed_precondition(
            f"The {what} {job_id} is {S(row.state).name}; cancel it and wait for it to finish before "
            "deleting it."
        )
    while True:
        if row.delete_operation_id is not None:
            existing = operations.store.get(row.delete_operation_id)
            if existing is not None:
                return operation_wire(existing)
        op = operations.build(
            row.project_number,
            row.location,
            f"{collection}/{row.id}",
            f"delete_{collection}",
            "DeleteOperationMetadata",
            api_version,
        )
        if rows.record_delete(row.id, row.delete_operation_id, op):
            return operation_wire(op)
        # A concurrent delete recorded its operation first: answer with that one.
        row = rows.get(row.id)
        if row is None:
            raise not_found(f"{what} {job_id}")
