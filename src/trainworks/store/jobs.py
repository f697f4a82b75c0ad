"""Repository for custom jobs and their replicas. Every state change is a compare-and-set on the row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, delete, or_, select, update

from trainworks.resources.enums import JobState
from trainworks.resources.wire import now_utc
from trainworks.store.database import Database
from trainworks.store.tables import CustomJobRow, ReplicaRow

ACTIVE_STATES = (
    JobState.JOB_STATE_QUEUED,
    JobState.JOB_STATE_PENDING,
    JobState.JOB_STATE_RUNNING,
    JobState.JOB_STATE_CANCELLING,
)


class JobStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # -------------------------------------------------------------- jobs
    def insert(self, row: CustomJobRow) -> CustomJobRow:
        with self.db.session() as session:
            session.add(row)
        return row

    def get(
        self, job_id: int, project_number: str | None = None, location: str | None = None
    ) -> CustomJobRow | None:
        with self.db.session() as session:
            row = session.get(CustomJobRow, job_id)
        if row is None:
            return None
        if project_number is not None and row.project_number != project_number:
            return None
        if location is not None and row.location != location:
            return None
        return row

    def page(
        self,
        project_number: str,
        location: str,
        where: ColumnElement[bool] | None,
        after: tuple[datetime, int] | None,
        limit: int,
    ) -> list[CustomJobRow]:
        """Newest first; `after` is the (create_time, id) of the last row of the previous page."""
        query = select(CustomJobRow).where(
            CustomJobRow.project_number == project_number, CustomJobRow.location == location
        )
        if where is not None:
            query = query.where(where)
        if after is not None:
            created, job_id = after
            query = query.where(
                or_(
                    CustomJobRow.create_time < created,
                    and_(CustomJobRow.create_time == created, CustomJobRow.id < job_id),
                )
            )
        query = query.order_by(CustomJobRow.create_time.desc(), CustomJobRow.id.desc()).limit(limit)
        with self.db.session() as session:
            return list(session.scalars(query))

    def active(self) -> list[CustomJobRow]:
        with self.db.session() as session:
            return list(
                session.scalars(
                    select(CustomJobRow)
                    .where(
                        or_(
                            CustomJobRow.state.in_([int(s) for s in ACTIVE_STATES]),
                            CustomJobRow.delete_operation_id.is_not(None),
                        )
                    )
                    .order_by(CustomJobRow.create_time)
                )
            )

    def transition(self, job_id: int, from_states: Iterable[JobState], **values: Any) -> bool:
        """Set values only if the job is still in one of `from_states`; True when it was."""
        values.setdefault("update_time", now_utc())
        if "state" in values:
            values["state"] = int(values["state"])
        with self.db.session() as session:
            result = session.execute(
                update(CustomJobRow)
                .where(CustomJobRow.id == job_id, CustomJobRow.state.in_([int(s) for s in from_states]))
                .values(**values)
            )
            return bool(result.rowcount)

    def set_fields(self, job_id: int, **values: Any) -> None:
        with self.db.session() as session:
            session.execute(update(CustomJobRow).where(CustomJobRow.id == job_id).values(**values))

    def remove(self, job_id: int) -> None:
        with self.db.session() as session:
            session.execute(delete(ReplicaRow).where(ReplicaRow.job_id == job_id))
            session.execute(delete(CustomJobRow).where(CustomJobRow.id == job_id))

    # -------------------------------------------------------------- replicas
    def replicas(self, job_id: int, attempt: int | None = None) -> list[ReplicaRow]:
        """Every replica run of the job in CLUSTER_SPEC order; with `attempt`, that attempt's current runs.

        A replica restarted on its own gets a new row (its earlier run keeps its times and exit), so within
        an attempt only the latest row of each (pool, index) is current."""
        query = select(ReplicaRow).where(ReplicaRow.job_id == job_id)
        if attempt is not None:
            query = query.where(ReplicaRow.attempt == attempt)
        query = query.order_by(ReplicaRow.attempt, ReplicaRow.pool, ReplicaRow.replica_index, ReplicaRow.id)
        with self.db.session() as session:
            rows = list(session.scalars(query))
        if attempt is None:
            return rows
        latest = {(r.pool, r.replica_index): r for r in rows}
        return sorted(latest.values(), key=lambda r: (r.pool, r.replica_index))

    def add_replicas(self, rows: Sequence[ReplicaRow]) -> list[ReplicaRow]:
        with self.db.session() as session:
            session.add_all(rows)
        return list(rows)

    def update_replica(self, replica_id: int, **values: Any) -> None:
        with self.db.session() as session:
            session.execute(update(ReplicaRow).where(ReplicaRow.id == replica_id).values(**values))

    def by_label(self, key: str, value: str) -> list[CustomJobRow]:
        """Jobs carrying the label key=value (the CustomJobs backing one tuning job's trials)."""
        with self.db.session() as session:
            return list(
                session.scalars(select(CustomJobRow).where(CustomJobRow.labels[key].as_string() == value))
            )

    def live_replica_dirs(self) -> list[str]:
        with self.db.session() as session:
            return list(session.scalars(select(ReplicaRow.run_dir).where(ReplicaRow.phase == "running")))

    def ports_in_use(self) -> set[int]:
        with self.db.session() as session:
            return set(
                session.scalars(select(ReplicaRow.port).where(ReplicaRow.phase.in_(["planned", "running"])))
            )
