"""Pytest fixtures for a real PostgreSQL server.

Register them from ``tests/conftest.py`` with ``pytest_plugins = ["tests.support.pg_fixtures"]`` (or by
importing ``postgres_server`` and ``postgres_url``). Importing them in several places is harmless: all
registrations share one server per test process.

* ``postgres_server`` (session): the running :class:`~tests.support.postgres.PostgresServer`; its
  ``url`` is ``postgresql+psycopg://postgres@127.0.0.1:<port>/trainworks_test``.
* ``postgres_url`` (function): URL of a fresh, empty database, dropped after the test.
* ``make_postgres_server`` (function): factory for additional, separately started servers
  (``make_postgres_server(**PostgresServer kwargs)``), all stopped after the test.

When PostgreSQL cannot be started the tests that use these fixtures ERROR (they are not skipped), so CI
proves PostgreSQL works. Set ``TRAINWORKS_SKIP_POSTGRES=1`` to skip them instead.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.postgres import PostgresServer

SKIP_ENV = "TRAINWORKS_SKIP_POSTGRES"

_shared: PostgresServer | None = None
_users = 0


def _skip_requested() -> bool:
    return os.environ.get(SKIP_ENV, "").strip().lower() in {"1", "true", "yes", "on"}


def _acquire() -> PostgresServer:
    global _shared, _users
    if _shared is None:
        server = PostgresServer()
        server.start()  # raises (-> test error) when PostgreSQL is unavailable
        _shared = server
    _users += 1
    return _shared


def _release() -> None:
    global _shared, _users
    _users -= 1
    if _users <= 0 and _shared is not None:
        _shared.stop()
        _shared, _users = None, 0


def skip_if_postgres_disabled() -> None:
    """``pytest.skip`` the calling test when ``TRAINWORKS_SKIP_POSTGRES=1``; otherwise do nothing."""
    if _skip_requested():
        pytest.skip(f"PostgreSQL tests skipped because {SKIP_ENV} is set")


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """A throwaway PostgreSQL cluster shared by the whole test session."""
    skip_if_postgres_disabled()
    server = _acquire()
    try:
        yield server
    finally:
        _release()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """SQLAlchemy URL of a fresh empty database, dropped (sessions terminated) after the test."""
    url = postgres_server.create_database()
    try:
        yield url
    finally:
        if postgres_server.running:
            postgres_server.drop_database(url.rsplit("/", 1)[1])


@pytest.fixture
def make_postgres_server() -> Iterator[Callable[..., PostgresServer]]:
    """Factory starting extra, independent servers (for tests that stop or break them)."""
    skip_if_postgres_disabled()
    servers: list[PostgresServer] = []

    def make(**kwargs: Any) -> PostgresServer:
        server = PostgresServer(**kwargs)
        servers.append(server)
        server.start()
        return server

    try:
        yield make
    finally:
        for server in servers:
            server.stop()
