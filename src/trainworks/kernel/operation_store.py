"""Repository for long-running operations."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, delete, update
from sqlalchemy.orm import Session

from trainworks.kernel.rows import in_location
from trainworks.kernel.wire import now_utc
from trainworks.store.database import Database
from trainworks.store.tables import OperationRow

EMPTY_RESPONSE = {"@type": "type.googleapis.com/google.protobuf.Empty"}  # what a finished deletion answers
Abort = tuple[int, dict[str, Any]]  # (operation id, google.rpc.Status): an operation a change ends unfinished


class OperationStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    def insert(self, row: OperationRow) -> OperationRow:
        with self.db.session() as session:
            session.add(row)
        return row

    def get(self, op_id: int) -> OperationRow | None:
        with self.db.session() as session:
            return session.get(OperationRow, op_id)

    def page(
        self, project_number: str, location: str, resource: str | None, after_id: int | None, limit: int
    ) -> list[OperationRow]:
        of_resource = None if resource is None else OperationRow.resource == resource
        query = in_location(OperationRow, project_number, location, of_resource)
        if after_id is not None:
            query = query.where(OperationRow.id < after_id)
        query = query.order_by(OperationRow.id.desc()).limit(limit)
        with self.db.session() as session:
            return list(session.scalars(query))

    def finish(
        self, op_id: int, response: dict[str, Any] | None = None, error: dict[str, Any] | None = None
    ) -> None:
        with self.db.session() as session:
            finish_in(session, op_id, response, error, now_utc())

    def set_progress(self, op_id: int, message: str) -> None:
        """`progressMessage` of a running operation's metadata (Create/Update/Reboot metadata have one)."""
        with self.db.session() as session:
            row = session.get(OperationRow, op_id)
            if row is None or row.done or row.metadata_.get("progressMessage") == message:
                return
            metadata = dict(row.metadata_)
            metadata["progressMessage"] = message
            session.execute(update(OperationRow).where(OperationRow.id == op_id).values(metadata_=metadata))

    def remove(self, op_id: int) -> bool:
        with self.db.session() as session:
            result = session.execute(delete(OperationRow).where(OperationRow.id == op_id))
            return bool(cast(CursorResult[Any], result).rowcount)


def finish_in(
    session: Session,
    op_id: int,
    response: dict[str, Any] | None,
    error: dict[str, Any] | None,
    now: datetime,
) -> None:
    """Complete an operation inside the caller's transaction (a resource change and its LRO land together)."""
    row = session.get(OperationRow, op_id)
    if row is None or row.done:
        return
    metadata = dict(row.metadata_)
    metadata["genericMetadata"] = {**metadata.get("genericMetadata", {}), "updateTime": now.isoformat()}
    session.execute(
        update(OperationRow)
        .where(OperationRow.id == op_id)
        .values(done=True, response=response, error=error, update_time=now, metadata_=metadata)
    )
