"""Repository for persistent resources and their billing spans. State changes are compare-and-set; each change
is stored with its operation (kernel/lro_store.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from trainworks.kernel.lro_store import InTransaction, Key, LroResourceStore
from trainworks.store.tables import PersistentResourceRow, PersistentResourceSpanRow


class PersistentResourceStore(LroResourceStore[PersistentResourceRow]):
    row_type = PersistentResourceRow
    id_column = "resource_id"
    operation_point = "persistent-resource-operation"
    ended_point = "persistent-resource-operation-ended"

    # -------------------------------------------------------------- resources
    def in_location(self, project_number: str, location: str) -> list[PersistentResourceRow]:
        return self.page(project_number, location, None, 1_000_000)

    def _within(self, key: Key, values: dict[str, Any]) -> InTransaction | None:
        """A transition with `reopen_spans=True` also bills the resource's machines as they now are, in the
        same transaction: a crash never leaves a change billed as it was."""
        if not values.pop("reopen_spans", False):
            return None

        def reopen(session: Session, now: datetime) -> None:
            row = session.get(PersistentResourceRow, key)
            if row is not None:
                _open_spans_in(session, row, row.spec.get("resourcePools", []), now)

        return reopen

    def _delete_in(self, session: Session, key: Key, now: datetime) -> None:
        """Delete the resource and close its open billing spans (inside the caller's transaction)."""
        row = session.get(PersistentResourceRow, key)
        if row is None:
            return
        _close_spans_in(session, row, now)
        session.execute(delete(PersistentResourceRow).where(*self._where(key)))

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


def _open_spans_in(
    session: Session, row: PersistentResourceRow, pools: Sequence[dict[str, Any]], now: datetime
) -> None:
    """Close the resource's open billing spans and open one per pool (inside the caller's transaction)."""
    _close_spans_in(session, row, now)
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


def _close_spans_in(session: Session, row: PersistentResourceRow, now: datetime) -> None:
    session.execute(
        update(PersistentResourceSpanRow)
        .where(
            PersistentResourceSpanRow.resource_uid == row.uid, PersistentResourceSpanRow.end_time.is_(None)
        )
        .values(end_time=now)
    )
