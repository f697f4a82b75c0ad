"""`trainworks_jobs` counts jobs by state on each job table's state index, never loading a row."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainworks.observability.job_counts import KINDS, state_counts
from trainworks.store.database import Database


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_sqlite_counts_each_state_from_the_state_index_alone(tmp_path: Path, kind: str) -> None:
    db = Database(f"sqlite:///{tmp_path / 'counts.db'}")
    try:
        table = KINDS[kind][0]
        compiled = state_counts(table).compile(db.engine)
        with db.engine.connect() as connection:
            plan = connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}").fetchall()
        assert [str(row[3]) for row in plan] == [
            f"SCAN {table.__tablename__} USING COVERING INDEX ix_{table.__tablename__}_state"
        ]
    finally:
        db.dispose()
