"""Repository for custom jobs and their replicas. Every state change is a compare-and-set on the row."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select, update

from trainworks.jobs.store import ACTIVE_STATES, JobRows
from trainworks.store.tables import CustomJobRow, ReplicaRow

__all__ = ["ACTIVE_STATES", "JobStore"]


class JobStore(JobRows[CustomJobRow]):
    """Custom jobs and their replicas."""

    row = CustomJobRow

    def remove(self, job_id: int, finish_operation: int | None = None) -> None:
        """Remove the job and its replicas; complete its delete operation in the same transaction, so a crash
        cannot leave the job gone and its operation never done."""
        with self.db.session() as session:
            session.execute(delete(ReplicaRow).where(ReplicaRow.job_id == job_id))
            session.execute(delete(CustomJobRow).where(CustomJobRow.id == job_id))
            self.finish_delete_in(session, finish_operation)

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
