"""Shared fixtures: a real server process per test module, and PostgreSQL from tests.support."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pg_fixtures import postgres_server, postgres_url  # noqa: F401
from tests.support.server import ServerProcess


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("home")).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path / "home").start()
    try:
        yield proc
    finally:
        proc.stop()
