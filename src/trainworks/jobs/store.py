"""What every job table shares: insert, scoped get, newest-first pages, active rows, compare-and-set."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar, cast

from sqlalchemy import CursorResult, delete, insert, or_, select, update
from sqlalchemy.orm import Session, make_transient_to_detached

from trainworks.jobs.enums import JobState
from trainworks.kernel.changes import record_in
from trainworks.kernel.operation_store import EMPTY_RESPONSE, finish_in
from trainworks.kernel.rows import NewestFirstRows, insert_values
from trainworks.kernel.wire import now_utc
from trainworks.store.crash_points import crash_point
from trainworks.store.tables import OperationRow, job_label_values

ACTIVE_STATES = (
    JobState.JOB_STATE_QUEUED,
    JobState.JOB_STATE_PENDING,
    JobState.JOB_STATE_RUNNING,
    JobState.JOB_STATE_CANCELLING,
)

R = TypeVar("R")
_IN_CHUNK = 500  # ids per IN (...) query


def _as_written(values: dict[str, Any]) -> dict[str, Any]:
    """A state change's column values as stored: the update time set, the state as its number."""
    written = {"update_time": now_utc(), **values}
    if "state" in written:
        written["state"] = int(written["state"])
    return written


class JobRows(NewestFirstRows[R]):
    """Rows of one job table (`row`: a mapped class with id, project_number, location, state, create_time,
    update_time and delete_operation_id). Every state change is a compare-and-set on the row's state, and
    every write records the job in the change feed (kernel/changes.py) in its own transaction."""

    @property
    def kind(self) -> str:
        """The change feed's name for this table's rows."""
        return str(self.row.__tablename__)

    def insert(self, row: R) -> R:
        """Store a new job with its label rows (a Core insert: the ORM's flush of one object costs more than
        the rest of a create), and return it as if it had been read back."""
        values = insert_values(row)
        with self.db.session() as session:
            connection = session.connection()
            connection.execute(insert(self.row), [values])
            labels = job_label_values(row)  # type: ignore[arg-type]
            if labels:
                connection.execute(insert(self.row.labels_row), labels)
            record_in(session, self.kind, [row.id])  # type: ignore[attr-defined]
        make_transient_to_detached(row)
        return row

    def changed(self, job_ids: Iterable[int]) -> list[R]:
        """The jobs among `job_ids` that still exist (those the change feed named)."""
        return self._among(job_ids)

    def _among(self, job_ids: Iterable[int], *where: Any) -> list[R]:
        table = self.row
        ids = list(job_ids)
        found: list[R] = []
        with self.db.session() as session:
            for i in range(0, len(ids), _IN_CHUNK):
                chunk = ids[i : i + _IN_CHUNK]
                found.extend(session.scalars(select(table).where(table.id.in_(chunk), *where)))
        return found

    def get(self, job_id: int, project_number: str | None = None, location: str | None = None) -> R | None:
        """The job, or None when it does not exist or lies in another project or location."""
        with self.db.session() as session:
            found: R | None = session.get(self.row, job_id)
        if found is None:
            return None
        if project_number is not None and found.project_number != project_number:  # type: ignore[attr-defined]
            return None
        if location is not None and found.location != location:  # type: ignore[attr-defined]
            return None
        return found

    def by_label(self, key: str, value: str) -> list[R]:
        """Jobs carrying the label key=value (those a tuning job or a pipeline created)."""
        return self.carrying(key, value)

    def _is_active(self) -> Any:
        table = self.row
        return or_(table.state.in_([int(s) for s in ACTIVE_STATES]), table.delete_operation_id.is_not(None))

    def active(self) -> list[R]:
        """Jobs not finished yet, and finished ones being deleted, oldest first."""
        with self.db.session() as session:
            return list(
                session.scalars(select(self.row).where(self._is_active()).order_by(self.row.create_time))
            )

    def active_among(self, job_ids: Iterable[int]) -> list[R]:
        """The active jobs (as `active` means it) among `job_ids`, oldest first."""
        found = self._among(job_ids, self._is_active())
        return sorted(found, key=lambda job: (job.create_time, job.id))  # type: ignore[attr-defined]

    def active_chunk(self, after: int | None, limit: int) -> list[R]:
        """Up to `limit` of the active jobs by id, those after `after`: a slow resync reads them chunk by
        chunk."""
        table = self.row
        query = select(table).where(self._is_active())
        if after is not None:
            query = query.where(table.id > after)
        with self.db.session() as session:
            return list(session.scalars(query.order_by(table.id).limit(limit)))

    def transition(self, job_id: int, from_states: Iterable[JobState], **values: Any) -> bool:
        """Set values only if the job is still in one of `from_states`; True when it was."""
        with self.db.session() as session:
            return self.transition_in(session, job_id, from_states, **values)

    def transition_in(
        self, session: Session, job_id: int, from_states: Iterable[JobState], **values: Any
    ) -> bool:
        """`transition` inside the caller's transaction (with the rows that change with the job's state)."""
        values = _as_written(values)
        table = self.row
        # On the session's connection, not through the ORM: no object of the session to keep in step,
        # and a third of the cost (jobs change state several times on their way).
        result = session.connection().execute(
            update(table)
            .where(table.id == job_id, table.state.in_([int(s) for s in from_states]))
            .values(**values)
        )
        if not result.rowcount:
            return False
        record_in(session, self.kind, [job_id])
        return True

    def transition_many(
        self, job_ids: Iterable[int], from_states: Iterable[JobState], **values: Any
    ) -> set[int]:
        """`transition` of many jobs to the same values in one transaction; the ids of those that were still
        in one of `from_states` (the others are left as they are)."""
        ids = sorted(set(job_ids))
        if not ids:
            return set()
        values = _as_written(values)
        table = self.row
        states = [int(s) for s in from_states]
        changed: set[int] = set()
        with self.db.session() as session:
            for at in range(0, len(ids), _IN_CHUNK):
                chunk = ids[at : at + _IN_CHUNK]
                statement = (
                    update(table)
                    .where(table.id.in_(chunk), table.state.in_(states))
                    .values(**values)
                    .returning(table.id)
                )
                changed.update(session.connection().execute(statement).scalars())
            record_in(session, self.kind, changed)
        return changed

    def record_delete(self, job_id: int, previous: int | None, operation: OperationRow) -> bool:
        """Store a delete request's operation and link it to the job in one transaction, if the job's delete
        operation is still `previous` (compare-and-set); True when it was. A crash, or a concurrent delete,
        so never leaves an operation that nothing will complete."""
        table = self.row
        link = table.delete_operation_id
        with self.db.session() as session:
            result = session.execute(
                update(table)
                .where(table.id == job_id, link.is_(None) if previous is None else link == previous)
                .values(delete_operation_id=operation.id)
            )
            if not cast(CursorResult[Any], result).rowcount:
                return False
            session.add(operation)
            record_in(session, self.kind, [job_id])
            crash_point("delete-recording")
        return True

    def remove(self, job_id: int, finish_operation: int | None = None) -> None:
        """Remove the job and the rows it owns; complete its delete operation in the same transaction, so a
        crash cannot leave the job gone and its operation never done."""
        with self.db.session() as session:
            self._remove_owned_in(session, job_id)
            session.execute(delete(self.row).where(self.row.id == job_id))
            record_in(session, self.kind, [job_id])
            self.finish_delete_in(session, finish_operation)

    def _remove_owned_in(self, session: Session, job_id: int) -> None:
        """A kind deletes the rows the job owns (replicas, trials) here, first, in the same transaction."""

    @staticmethod
    def finish_delete_in(session: Session, operation_id: int | None) -> None:
        """Complete a delete operation inside the transaction that removes its job: a crash cannot leave the
        job gone and its operation never done."""
        if operation_id is not None:
            crash_point("delete-finishing")
            finish_in(session, operation_id, dict(EMPTY_RESPONSE), None, now_utc())

    def set_fields(self, job_id: int, **values: Any) -> None:
        with self.db.session() as session:
            session.connection().execute(update(self.row).where(self.row.id == job_id).values(**values))
            record_in(session, self.kind, [job_id])
