"""Tests for the throwaway PostgreSQL server used by the test suite (tests/support/postgres.py)."""

from __future__ import annotations

import os
import re
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB

from tests.support import pg_fixtures
from tests.support import postgres as pg_support
from tests.support.postgres import PostgresServer, PostgresUnavailableError

# Make the fixtures available even before tests/conftest.py registers the plugin; registering them
# twice is harmless (pg_fixtures shares one server per process).
postgres_server = pg_fixtures.postgres_server
postgres_url = pg_fixtures.postgres_url
make_postgres_server = pg_fixtures.make_postgres_server

MakeServer = Callable[..., PostgresServer]
URL_RE = re.compile(r"^postgresql\+psycopg://postgres@127\.0\.0\.1:(\d+)/(\w+)$")


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped by init counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.postgres
def test_table_and_json_roundtrip(postgres_url: str) -> None:
    match = URL_RE.match(postgres_url)
    assert match, postgres_url
    metadata = sa.MetaData()
    items = sa.Table(
        "items",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("name", sa.String(100), nullable=False),
        sa.Column("payload", sa.JSON, nullable=False),
        sa.Column("tags", JSONB, nullable=True),
    )
    payload = {"nested": {"list": [1, 2.5, None, True], "text": "grüße ✓"}, "empty": {}}
    engine = sa.create_engine(postgres_url)
    try:
        with engine.begin() as conn:
            assert conn.dialect.name == "postgresql"
            assert conn.scalar(sa.text("SELECT current_database()")) == match.group(2)
            assert conn.dialect.server_version_info >= (15,)
            metadata.create_all(conn)
            conn.execute(items.insert(), [{"name": "first", "payload": payload, "tags": ["a", "b"]}])
        with engine.connect() as conn:
            row = conn.execute(sa.select(items)).one()
            assert row.name == "first"
            assert row.payload == payload
            assert row.tags == ["a", "b"]
            # The JSON is stored as JSON, not as an opaque string.
            assert conn.scalar(sa.text("SELECT payload -> 'nested' ->> 'text' FROM items")) == "grüße ✓"
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_each_test_gets_a_fresh_database(postgres_server: PostgresServer, postgres_url: str) -> None:
    assert URL_RE.match(postgres_server.url or "")
    assert postgres_server.url and postgres_server.url.endswith("/trainworks_test")
    assert postgres_url != postgres_server.url
    engine = sa.create_engine(postgres_url)
    try:
        assert sa.inspect(engine).get_table_names() == []  # the previous test's table is not here
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_stop_terminates_server_and_removes_tmpdir(make_postgres_server: MakeServer) -> None:
    server = make_postgres_server()
    url = server.url
    assert url is not None
    assert server.running and server.pid is not None and server.tmpdir is not None
    pid, tmpdir, port = server.pid, server.tmpdir, server.port
    assert tmpdir.is_dir() and _alive(pid)
    # A connection left open (as a leaked SQLAlchemy pool would) must not block shutdown.
    engine = sa.create_engine(url)
    conn = engine.connect()
    backend_pid = conn.scalar(sa.text("SELECT pg_backend_pid()"))
    children = pg_support.child_pids(pid)
    assert backend_pid in children
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < server.stop_timeout  # stopped by the first signal
    assert not server.running
    assert not _alive(pid)
    assert not [child for child in children if _alive(child)]  # no backend outlived the postmaster
    assert not Path(tmpdir).exists()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(host="127.0.0.1", port=port, user="postgres", dbname="postgres", connect_timeout=2)
    server.stop()  # idempotent
    conn.invalidate()  # the server killed the session; don't try to roll it back
    engine.dispose()


@pytest.mark.postgres
@pytest.mark.slow
def test_stop_escalates_to_sigkill_when_the_server_hangs(make_postgres_server: MakeServer) -> None:
    server = make_postgres_server(stop_timeout=0.5)
    pid = server.pid
    assert pid is not None
    children = pg_support.child_pids(pid)
    os.kill(pid, signal.SIGSTOP)  # a frozen postmaster ignores SIGINT and SIGQUIT
    started = time.monotonic()
    server.stop()
    assert time.monotonic() - started < 5
    assert not _alive(pid)
    deadline = time.monotonic() + 5
    while [child for child in children if _alive(child)] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [child for child in children if _alive(child)]


def test_missing_binaries_give_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pg_support.BINDIR_ENV, raising=False)
    monkeypatch.setattr(pg_support.glob, "glob", lambda pattern: [])
    monkeypatch.setattr(pg_support.shutil, "which", lambda name: None)
    server = PostgresServer()
    with pytest.raises(PostgresUnavailableError, match=r"scripts/install-test-deps\.sh"):
        server.start()
    assert not server.running and server.tmpdir is None
