"""Repository for custom jobs and their replicas. Every state change is a compare-and-set on the row."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, insert, select, update
from sqlalchemy.orm import Session, make_transient_to_detached

from trainworks.jobs.enums import JobState
from trainworks.jobs.store import JobRows
from trainworks.kernel.changes import record_in, record_select_in
from trainworks.kernel.rows import insert_values
from trainworks.kinds.custom_jobs.rules import LIVE_PHASES
from trainworks.store.tables import CustomJobRow, ReplicaRow

_IN_CHUNK = 500  # job ids per IN (...) query


class JobStore(JobRows[CustomJobRow]):
    """Custom jobs and their replicas."""

    row = CustomJobRow

    def active_on_resources(self) -> list[CustomJobRow]:
        """The active jobs on a persistent resource (jobSpec.persistentResourceId), oldest first."""
        table = self.row
        query = select(table).where(table.persistent_resource.is_not(None), self._is_active())
        with self.db.session() as session:
            return list(session.scalars(query.order_by(table.create_time)))

    def _remove_owned_in(self, session: Session, job_id: int) -> None:
        session.execute(delete(ReplicaRow).where(ReplicaRow.job_id == job_id))

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
        """Store new replica rows (a Core insert: the ORM's flush costs more than the rest of a plan) and
        return them as if read back, ids set."""
        if not rows:
            return []
        values = [insert_values(row) for row in rows]
        for row_values in values:
            del row_values["id"]  # the database numbers them
        statement = insert(ReplicaRow).returning(ReplicaRow.id, sort_by_parameter_order=True)
        with self.db.session() as session:
            ids = list(session.connection().execute(statement, values).scalars())
            record_in(session, self.kind, [r.job_id for r in rows])
        for row, row_id in zip(rows, ids, strict=True):
            row.id = row_id
            make_transient_to_detached(row)
        return list(rows)

    def set_waiting_reasons(self, reasons: dict[int, str]) -> None:
        """Record why each of these queued jobs waits, in one transaction (an admission pass may name
        thousands)."""
        if not reasons:
            return
        table = cast(Table, CustomJobRow.__table__)
        statement = (
            update(table).where(table.c.id == bindparam("job_id")).values(waiting_reason=bindparam("why"))
        )
        with self.db.session() as session:
            session.execute(statement, [{"job_id": i, "why": why} for i, why in reasons.items()])
            record_in(session, self.kind, reasons)

    def record_replicas(
        self,
        job_id: int,
        changes: Sequence[tuple[int, dict[str, Any]]],
        from_states: Iterable[JobState] = (),
        **job_values: Any,
    ) -> bool:
        """Record changes to replicas of one job, (replica id, values) each, in one transaction; with
        `from_states`, the job moves in the same transaction (a compare-and-set, as `transition`): the
        replicas launched with the job's RUNNING, an exit with the decision it leads to. True when the job
        moved (or no move was asked for); the replicas' changes are recorded either way."""
        if not changes and not from_states:
            return True
        with self.db.session() as session:
            connection = session.connection()  # Core updates: no ORM objects to keep in step
            for replica_id, values in changes:
                connection.execute(update(ReplicaRow).where(ReplicaRow.id == replica_id).values(**values))
            if changes:
                record_in(session, self.kind, [job_id])
            # A compare-and-set that does not apply writes nothing: the replicas' changes still commit.
            return not from_states or self.transition_in(session, job_id, from_states, **job_values)

    def update_replica(self, replica_id: int, **values: Any) -> None:
        """A replica's change is its job's change (the feed names the job)."""
        with self.db.session() as session:
            statement = update(ReplicaRow).where(ReplicaRow.id == replica_id).values(**values)
            session.connection().execute(statement)
            record_select_in(session, self.kind, select(ReplicaRow.job_id).where(ReplicaRow.id == replica_id))

    def replicas_of(self, job_ids: list[int]) -> dict[int, list[ReplicaRow]]:
        """Every replica row (all attempts) of these jobs, in as few queries as the IN limit allows."""
        out: dict[int, list[ReplicaRow]] = {}
        for i in range(0, len(job_ids), _IN_CHUNK):
            query = select(ReplicaRow).where(ReplicaRow.job_id.in_(job_ids[i : i + _IN_CHUNK]))
            with self.db.session() as session:
                for replica in session.scalars(query):
                    out.setdefault(replica.job_id, []).append(replica)
        return out

    def live_replica_dirs(self) -> list[str]:
        with self.db.session() as session:
            return list(session.scalars(select(ReplicaRow.run_dir).where(ReplicaRow.phase == "running")))

    def ports_in_use(self) -> set[int]:
        with self.db.session() as session:
            return set(session.scalars(select(ReplicaRow.port).where(ReplicaRow.phase.in_(LIVE_PHASES))))
