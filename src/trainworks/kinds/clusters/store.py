"""Repository for training clusters (modelDevelopmentClusters). State changes are compare-and-set."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError

from trainworks.kernel.operation_store import OperationStore, finish_in
from trainworks.kernel.wire import now_utc
from trainworks.store.crash_points import crash_point
from trainworks.store.database import Database
from trainworks.store.tables import ClusterRow, OperationRow

Key = tuple[str, str, str]  # project number, location, cluster ID
MAX_EVENTS = 100  # clusterEvents keeps the last 100


def key_of(row: ClusterRow) -> Key:
    return (row.project_number, row.location, row.cluster_id)


def _where(key: Key) -> Any:
    number, location, cluster_id = key
    return (
        ClusterRow.project_number == number,
        ClusterRow.location == location,
        ClusterRow.cluster_id == cluster_id,
    )


class DuplicateCluster(Exception):
    """A cluster with this ID (or this port block) already exists."""


class ClusterStore:
    def __init__(self, db: Database) -> None:
        self.db = db
        self.operations = OperationStore(db)

    def insert(self, row: ClusterRow, operation: OperationRow | None = None) -> ClusterRow:
        """Store a new cluster, and its create operation in the same transaction."""
        try:
            with self.db.session() as session:
                session.add(row)
                if operation is not None:
                    session.add(operation)
                    crash_point("cluster-operation")
        except IntegrityError:
            raise DuplicateCluster(row.cluster_id) from None
        return row

    def get(self, key: Key) -> ClusterRow | None:
        with self.db.session() as session:
            return session.get(ClusterRow, key)

    def page(self, project_number: str, location: str, after_id: str | None, limit: int) -> list[ClusterRow]:
        """In ID order; `after_id` is the last ID of the previous page."""
        query = select(ClusterRow).where(
            ClusterRow.project_number == project_number, ClusterRow.location == location
        )
        if after_id is not None:
            query = query.where(ClusterRow.cluster_id > after_id)
        with self.db.session() as session:
            return list(session.scalars(query.order_by(ClusterRow.cluster_id).limit(limit)))

    def all(self) -> list[ClusterRow]:
        with self.db.session() as session:
            return list(session.scalars(select(ClusterRow).order_by(ClusterRow.uid)))

    def ports_in_use(self) -> set[int]:
        with self.db.session() as session:
            return set(session.scalars(select(ClusterRow.slurm_port)))

    def count(self) -> int:
        with self.db.session() as session:
            return int(session.scalar(select(func.count()).select_from(ClusterRow)) or 0)

    def transition(
        self,
        key: Key,
        from_states: Iterable[int],
        *,
        operation: OperationRow | None = None,
        abort: tuple[int, dict[str, Any]] | None = None,
        **values: Any,
    ) -> bool:
        """Set values only if the cluster is still in one of `from_states`; True when it was.

        In the same transaction, and only when the change is made: `operation`, the new operation tracking
        it, is stored, and `abort` (operation id, error) ends an operation the change leaves unfinished, so a
        crash never leaves an operation that nothing will complete."""
        values.setdefault("update_time", now_utc())
        if "state" in values:
            values["state"] = int(values["state"])
        with self.db.session() as session:
            result = session.execute(
                update(ClusterRow)
                .where(*_where(key), ClusterRow.state.in_([int(s) for s in from_states]))
                .values(**values)
            )
            if not result.rowcount:
                return False
            if operation is not None:
                session.add(operation)
                crash_point("cluster-operation")
            if abort is not None:
                finish_in(session, abort[0], None, abort[1], now_utc())
                crash_point("cluster-operation-ended")
            return True

    def set_fields(self, key: Key, **values: Any) -> None:
        with self.db.session() as session:
            session.execute(update(ClusterRow).where(*_where(key)).values(**values))

    def add_events(self, key: Key, events: list[dict[str, Any]]) -> None:
        """Append cluster events, keeping the newest MAX_EVENTS."""
        if not events:
            return
        with self.db.session() as session:
            row = session.get(ClusterRow, key)
            if row is None:
                return
            kept = [*(row.events or []), *events][-MAX_EVENTS:]
            session.execute(update(ClusterRow).where(*_where(key)).values(events=kept))

    def remove(self, key: Key) -> None:
        with self.db.session() as session:
            session.execute(delete(ClusterRow).where(*_where(key)))

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
        """Complete the cluster's operation and, in the same transaction, clear it from the cluster (while it
        is still the cluster's operation) or remove the cluster (a finished deletion)."""
        with self.db.session() as session:
            finish_in(session, op_id, response, error, now_utc())
            if remove:
                session.execute(delete(ClusterRow).where(*_where(key)))
            else:
                session.execute(
                    update(ClusterRow)
                    .where(*_where(key), ClusterRow.operation_id == op_id)
                    .values(operation_id=None)
                )
