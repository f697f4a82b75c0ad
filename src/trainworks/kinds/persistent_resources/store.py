"""Repository for persistent resources and their billing spans. State changes are compare-and-set."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from trainworks.kernel.operation_store import OperationStore, finish_in
from trainworks.kernel.wire import now_utc
from trainworks.kinds.persistent_resources.wire import PersistentResourceState
from trainworks.store.crash_points import crash_point
from trainworks.store.database import Database
from trainworks.store.tables import OperationRow, PersistentResourceRow, PersistentResourceSpanRow

Key = tuple[str, str, str]  # project number, location, resource ID


def key_of(row: PersistentResourceRow) -> Key:
    return (row.project_number, row.location, row.resource_id)


def _where(key: Key) -> Any:
    number, location, resource_id = key
    return (
        PersistentResourceRow.project_number == number,
        PersistentResourceRow.location == location,
        PersistentResourceRow.resource_id == resource_id,
    )


class DuplicateResource(Exception):
    """A resource with this ID already exists in the project and location."""


class PersistentResourceStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -------------------------------------------------------------- resources
    def insert(
        self, row: PersistentResourceRow, operation: OperationRow | None = None
    ) -> PersistentResourceRow:
        """Store a new resource, and its create operation in the same transaction."""
        try:
            with self.db.session() as session:
                session.add(row)
                if operation is not None:
                    session.add(operation)
                    crash_point("persistent-resource-operation")
        except IntegrityError:
            raise DuplicateResource(row.resource_id) from None
        return row

    def get(self, key: Key) -> PersistentResourceRow | None:
        with self.db.session() as session:
            return session.get(PersistentResourceRow, key)

    def page(
        self, project_number: str, location: str, after_id: str | None, limit: int
    ) -> list[PersistentResourceRow]:
        """In ID order; `after_id` is the last ID of the previous page."""
        query = select(PersistentResourceRow).where(
            PersistentResourceRow.project_number == project_number,
            PersistentResourceRow.location == location,
        )
        if after_id is not None:
            query = query.where(PersistentResourceRow.resource_id > after_id)
        query = query.order_by(PersistentResourceRow.resource_id).limit(limit)
        with self.db.session() as session:
            return list(session.scalars(query))

    def in_location(self, project_number: str, location: str) -> list[PersistentResourceRow]:
        return self.page(project_number, location, None, 1_000_000)

    def all(self) -> list[PersistentResourceRow]:
        with self.db.session() as session:
            return list(session.scalars(select(PersistentResourceRow).order_by(PersistentResourceRow.uid)))

    def transition(
        self,
        key: Key,
        from_states: Iterable[PersistentResourceState],
        *,
        operation: OperationRow | None = None,
        abort: tuple[int, dict[str, Any]] | None = None,
        reopen_spans: bool = False,
        **values: Any,
    ) -> bool:
        """Set values only if the resource is still in one of `from_states`; True when it was.

        In the same transaction, and only when the change is made: `operation`, the new operation tracking
        it, is stored; `abort` (operation id, error) ends an operation the change leaves unfinished (or that
        failed with it); `reopen_spans` bills the resource's machines as they now are. A crash thus never
        leaves an operation that nothing will complete, nor a change billed as it was."""
        now = now_utc()
        values.setdefault("update_time", now)
        if "state" in values:
            values["state"] = int(values["state"])
        with self.db.session() as session:
            result = session.execute(
                update(PersistentResourceRow)
                .where(*_where(key), PersistentResourceRow.state.in_([int(s) for s in from_states]))
                .values(**values)
            )
            if not result.rowcount:
                return False
            if operation is not None:
                session.add(operation)
                crash_point("persistent-resource-operation")
            if reopen_spans:
                row = session.get(PersistentResourceRow, key)
                if row is not None:
                    _open_spans_in(session, row, row.spec.get("resourcePools", []), now)
            if abort is not None:
                finish_in(session, abort[0], None, abort[1], now)
                crash_point("persistent-resource-operation-ended")
            return True

    def set_fields(self, key: Key, **values: Any) -> None:
        with self.db.session() as session:
            session.execute(update(PersistentResourceRow).where(*_where(key)).values(**values))

    def remove(self, key: Key, now: datetime | None = None) -> None:
        """Delete the resource and close its open billing spans, in one transaction."""
        now = now or now_utc()
        with self.db.session() as session:
            _delete_resource(session, key, now)

    # -------------------------------------------------------------- billing spans
    def spans(self, project_number: str, location: str) -> list[PersistentResourceSpanRow]:
        query = (
            select(PersistentResourceSpanRow)
            .where(
                PersistentResourceSpanRow.project_number == project_number,
                PersistentResourceSpanRow.location == location,
            )
            .order_by(PersistentResourceSpanRow.id)
        )
        with self.db.session() as session:
            return list(session.scalars(query))

    # -------------------------------------------------------------- operations
    def set_progress(self, op_id: int, message: str) -> None:
        OperationStore(self.db).set_progress(op_id, message)

    def finish_operation(
        self,
        key: Key,
        op_id: int,
        response: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        remove: bool = False,
    ) -> None:
        """Complete the resource's operation and, in the same transaction, clear it from the resource (only if
        it is still the resource's operation) or remove the resource (a finished deletion)."""
        now = now_utc()
        with self.db.session() as session:
            finish_in(session, op_id, response, error, now)
            if not remove:
                session.execute(
                    update(PersistentResourceRow)
                    .where(*_where(key), PersistentResourceRow.operation_id == op_id)
                    .values(operation_id=None)
                )
                return
            _delete_resource(session, key, now)


def _delete_resource(session: Session, key: Key, now: datetime) -> None:
    """Delete a resource row and close its open billing spans (inside the caller's transaction)."""
    row = session.get(PersistentResourceRow, key)
    if row is None:
        return
    session.execute(
        update(PersistentResourceSpanRow)
        .where(
            PersistentResourceSpanRow.resource_uid == row.uid, PersistentResourceSpanRow.end_time.is_(None)
        )
        .values(end_time=now)
    )
    session.execute(delete(PersistentResourceRow).where(*_where(key)))


def _open_spans_in(
    session: Session, row: PersistentResourceRow, pools: Sequence[dict[str, Any]], now: datetime
) -> None:
    """Close the resource's open billing spans and open one per pool (inside the caller's transaction)."""
    session.execute(
        update(PersistentResourceSpanRow)
        .where(
            PersistentResourceSpanRow.resource_uid == row.uid, PersistentResourceSpanRow.end_time.is_(None)
        )
        .values(end_time=now)
    )
    for pool in pools:
        machines = int(pool.get("replicaCount", 0) or 0)
        if machines <= 0:
            continue
        session.add(
            PersistentResourceSpanRow(
                project_number=row.project_number,
                location=row.location,
                resource_id=row.resource_id,
                resource_uid=row.uid,
                display_name=row.display_name,
                pool_id=str(pool.get("id", "")),
                machine_spec=dict(pool.get("machineSpec") or {}),
                machines=machines,
                start_time=now,
            )
        )
