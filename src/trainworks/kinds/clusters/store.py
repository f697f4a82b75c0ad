"""Repository for training clusters (modelDevelopmentClusters). State changes are compare-and-set; each change
is stored with its operation (kernel/lro_store.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update

from trainworks.kernel.lro_store import Key, LroResourceStore
from trainworks.store.tables import ClusterRow

MAX_EVENTS = 100  # clusterEvents keeps the last 100


class ClusterStore(LroResourceStore[ClusterRow]):
    row_type = ClusterRow
    id_column = "cluster_id"
    operation_point = "cluster-operation"
    ended_point = "cluster-operation-ended"

    def ports_in_use(self) -> set[int]:
        with self.db.session() as session:
            return set(session.scalars(select(ClusterRow.slurm_port)))

    def count(self) -> int:
        with self.db.session() as session:
            return int(session.scalar(select(func.count()).select_from(ClusterRow)) or 0)

    def add_events(self, key: Key, events: list[dict[str, Any]]) -> None:
        """Append cluster events, keeping the newest MAX_EVENTS."""
        if not events:
            return
        with self.db.session() as session:
            row = session.get(ClusterRow, key)
            if row is None:
                return
            kept = [*(row.events or []), *events][-MAX_EVENTS:]
            session.execute(update(ClusterRow).where(*self._where(key)).values(events=kept))


__all__ = ["MAX_EVENTS", "ClusterStore"]
