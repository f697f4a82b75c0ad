"""Repository base for a resource keyed by (project number, location, resource ID) whose changes are tracked
by long-running operations: each change and its operation are stored in one transaction, so a crash keeps
both or neither and never leaves an operation that nothing will complete.

A kind's store subclasses `LroResourceStore` and names its row class, ID column and crash points; work of its
own inside a change's transaction goes in `_within` (a transition's) or `_delete_in`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar, cast

from sqlalchemy import CursorResult, delete, inspect, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from trainworks.kernel.operation_store import Abort, OperationStore, finish_in
from trainworks.kernel.rows import in_location
from trainworks.kernel.wire import now_utc
from trainworks.store.crash_points import crash_point
from trainworks.store.database import Database
from trainworks.store.tables import Base, OperationRow

Key = tuple[str, str, str]  # project number, location, resource ID
RowT = TypeVar("RowT", bound=Base)
InTransaction = Callable[[Session, datetime], None]  # extra work inside a change's transaction, at `now`


class DuplicateResource(Exception):
    """insert: the resource's ID (or another of its unique columns, say a cluster's port block) is taken."""


def key_of(row: Any) -> Key:
    """A resource row's key: its primary key, (project number, location, resource ID) in every table of
    LroResourceColumns (store/tables.py)."""
    number, location, resource_id = inspect(row).mapper.primary_key_from_instance(row)
    return number, location, resource_id


def record_in(session: Session, operation: OperationRow | None, point: str) -> None:
    """Add the operation tracking a change to the change's transaction: a crash keeps both or neither."""
    if operation is not None:
        session.add(operation)
        crash_point(point)


class LroResourceStore(Generic[RowT]):
    """Rows of one table of LroResourceColumns (store/tables.py), whose primary key is the resource's Key."""

    row_type: ClassVar[type[Any]]
    id_column: ClassVar[str]  # the row attribute holding the resource ID
    operation_point: ClassVar[str]  # crash point: a change and its new operation are being stored
    ended_point: ClassVar[str]  # crash point: a change ends an unfinished operation

    def __init__(self, db: Database) -> None:
        self.db = db
        self.operations = OperationStore(db)

    def _column(self, name: str) -> Any:
        return getattr(self.row_type, name)

    def _where(self, key: Key) -> tuple[Any, ...]:
        number, location, resource_id = key
        return (
            self._column("project_number") == number,
            self._column("location") == location,
            self._column(self.id_column) == resource_id,
        )

    # -------------------------------------------------------------- resources
    def insert(self, row: RowT, operation: OperationRow | None = None) -> RowT:
        """Store a new resource, and its create operation in the same transaction; DuplicateResource when its
        ID (or another unique column) is taken."""
        try:
            with self.db.session() as session:
                session.add(row)
                record_in(session, operation, self.operation_point)
        except IntegrityError:
            raise DuplicateResource(getattr(row, self.id_column)) from None
        return row

    def get(self, key: Key) -> RowT | None:
        with self.db.session() as session:
            row: RowT | None = session.get(self.row_type, key)
            return row

    def page(self, project_number: str, location: str, after_id: str | None, limit: int) -> list[RowT]:
        """In ID order; `after_id` is the last ID of the previous page."""
        resource_id = self._column(self.id_column)
        query = in_location(self.row_type, project_number, location, None)
        if after_id is not None:
            query = query.where(resource_id > after_id)
        with self.db.session() as session:
            return list(session.scalars(query.order_by(resource_id).limit(limit)))

    def all(self) -> list[RowT]:
        with self.db.session() as session:
            return list(session.scalars(select(self.row_type).order_by(self._column("uid"))))

    def transition(
        self,
        key: Key,
        from_states: Iterable[int],
        *,
        operation: OperationRow | None = None,
        abort: Abort | None = None,
        **values: Any,
    ) -> bool:
        """Set values only if the resource is still in one of `from_states`; True when it was.

        In the same transaction, and only when the change is made: `operation`, the new operation tracking
        it, is stored, `abort` (operation id, error) ends an operation the change leaves unfinished (or
        that failed with it), so a crash never leaves an operation that nothing will complete, and the kind
        does the work its own options ask for (`_within`)."""
        within = self._within(key, values)
        now = now_utc()
        values.setdefault("update_time", now)
        if "state" in values:
            values["state"] = int(values["state"])
        states = [int(s) for s in from_states]
        with self.db.session() as session:
            result = cast(
                CursorResult[Any],
                session.execute(
                    update(self.row_type)
                    .where(*self._where(key), self._column("state").in_(states))
                    .values(**values)
                ),
            )
            if not result.rowcount:
                return False
            record_in(session, operation, self.operation_point)
            if within is not None:
                within(session, now)
            if abort is not None:
                finish_in(session, abort[0], None, abort[1], now)
                crash_point(self.ended_point)
            return True

    def apply_update(
        self, key: Key, updating: int, running: int, spec: dict[str, Any], **values: Any
    ) -> bool:
        """An update's end, as `transition` from `updating` to `running`: the resource takes the accepted
        `spec` and the display name and labels it holds, with `values` (the kind's own)."""
        return self.transition(
            key,
            [updating],
            state=running,
            spec=spec,
            display_name=spec.get("displayName", ""),
            labels=dict(spec.get("labels") or {}),
            **values,
        )

    def _within(self, key: Key, values: dict[str, Any]) -> InTransaction | None:
        """The kind's own work inside a transition's transaction, asked for by options of its own that it
        takes out of `values` (the rest are columns); none by default."""
        return None

    def set_fields(self, key: Key, **values: Any) -> None:
        with self.db.session() as session:
            session.execute(update(self.row_type).where(*self._where(key)).values(**values))

    def remove(self, key: Key) -> None:
        with self.db.session() as session:
            self._delete_in(session, key, now_utc())

    def _delete_in(self, session: Session, key: Key, now: datetime) -> None:
        """Delete the resource inside the caller's transaction; a kind ends what the resource held here."""
        session.execute(delete(self.row_type).where(*self._where(key)))

    # -------------------------------------------------------------- operations
    def set_progress(self, op_id: int, message: str) -> None:
        self.operations.set_progress(op_id, message)

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
            if remove:
                self._delete_in(session, key, now)
                return
            session.execute(
                update(self.row_type)
                .where(*self._where(key), self._column("operation_id") == op_id)
                .values(operation_id=None)
            )


__all__ = ["DuplicateResource", "InTransaction", "Key", "LroResourceStore", "key_of", "record_in"]
