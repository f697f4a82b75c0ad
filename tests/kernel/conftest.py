"""The kernel's store suites run on both databases: `db` is a fresh SQLite file, then a fresh PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from trainworks.store.database import Database


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    url = (
        f"sqlite:///{tmp_path / 'store.db'}"
        if request.param == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    database = Database(url)
    yield database
    database.dispose()
