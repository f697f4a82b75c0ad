"""Repository for managed datasets: their rows; the data itself lives in files under `<home>/datasets`."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, delete, update

from trainworks.kernel.list_query import OrderedSlice
from trainworks.kernel.lro_store import record_in
from trainworks.kernel.rows import NewestFirstRows, in_location
from trainworks.store.tables import DatasetRow, OperationRow

OPERATION_POINT = "dataset-operation"  # crash point: a change and its finished operation are being stored


class DatasetStore(NewestFirstRows[DatasetRow]):
    row = DatasetRow

    def insert(self, row: DatasetRow, operation: OperationRow | None = None) -> DatasetRow:
        """Store a new dataset, and the operation reporting it in the same transaction."""
        with self.db.session() as session:
            session.add(row)
            record_in(session, operation, OPERATION_POINT)
        return row

    def get(self, dataset_id: int, project_number: str, location: str) -> DatasetRow | None:
        """The dataset, or None when it does not exist or lies in another project or location."""
        with self.db.session() as session:
            row = session.get(DatasetRow, dataset_id)
        if row is None or row.project_number != project_number or row.location != location:
            return None
        return row

    def ordered_page(self, project_number: str, location: str, rows: OrderedSlice) -> list[DatasetRow]:
        """A page in a caller-chosen order (`orderBy`), by offset."""
        query = rows.narrow(in_location(DatasetRow, project_number, location, None), DatasetRow.id.desc())
        with self.db.session() as session:
            return list(session.scalars(query))

    def set_fields(
        self,
        dataset_id: int,
        expected_update: datetime | None = None,
        operation: OperationRow | None = None,
        **values: Any,
    ) -> bool:
        """Update the row; with `expected_update`, only if nobody changed it since (compare-and-set); with
        `operation`, store the operation reporting the change in the same transaction, when it is made."""
        query = update(DatasetRow).where(DatasetRow.id == dataset_id)
        if expected_update is not None:
            query = query.where(DatasetRow.update_time == expected_update)
        with self.db.session() as session:
            if not cast(CursorResult[Any], session.execute(query.values(**values))).rowcount:
                return False
            record_in(session, operation, OPERATION_POINT)
            return True

    def remove(self, dataset_id: int, operation: OperationRow | None = None) -> bool:
        """Delete the row and, in the same transaction when it was there, store `operation`."""
        with self.db.session() as session:
            removed = session.execute(delete(DatasetRow).where(DatasetRow.id == dataset_id))
            if not cast(CursorResult[Any], removed).rowcount:
                return False
            record_in(session, operation, OPERATION_POINT)
            return True
