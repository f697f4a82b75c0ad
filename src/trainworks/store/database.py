"""Engine and session factory; runs migrations on open."""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any

import sqlalchemy.exc
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, event, text
from sqlalchemy.engine import Engine
from sqlalchemy.orm import Session, sessionmaker

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
CONNECT_TIMEOUT_SECONDS = 5


def normalise_url(url: str) -> str:
    """Accept plain postgresql:// URLs and pick the psycopg 3 driver for them."""
    for prefix in ("postgresql://", "postgres://"):
        if url.startswith(prefix):
            return "postgresql+psycopg://" + url[len(prefix) :]
    return url


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    # WAL with synchronous=NORMAL, SQLite's standard production pair: a commit appends to the WAL without
    # waiting for fsync (the WAL is synced at each checkpoint). A killed server loses nothing it
    # acknowledged (the chaos tests SIGKILL it); a power loss or OS crash can lose the last transactions
    # acknowledged before it, never corrupt the file. FULL would fsync every commit: ~3 ms each here.
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=10000")
    cursor.close()


def database_unavailable(exc: BaseException) -> str | None:
    """ "busy" or "unavailable" when `exc` (or an exception it was raised from) is a passing condition of the
    database that a retry can get past: SQLite's write lock held past busy_timeout, no free pooled connection,
    or a database server that cannot be reached (stopped, restarting, connection dropped). None otherwise:
    then it is a fault."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, sqlalchemy.exc.TimeoutError):  # every pooled connection stayed checked out
            return "busy"
        if isinstance(current, sqlalchemy.exc.DBAPIError):
            if isinstance(current.orig, sqlite3.Error):  # a file: only its lock is a passing condition
                if "database is locked" in str(current.orig):
                    return "busy"
            elif current.connection_invalidated or isinstance(
                current, sqlalchemy.exc.OperationalError | sqlalchemy.exc.InterfaceError
            ):
                return "unavailable"
        current = current.__cause__ or current.__context__
    return None


def make_engine(url: str) -> Engine:
    url = normalise_url(url)
    if url.startswith("sqlite"):
        # JSON stored unescaped: SQLite 3.40's json_extract does not match a "\u00fc" key to "$.\"ü\"".
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": 30},
            json_serializer=lambda value: json.dumps(value, ensure_ascii=False),
        )
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    # While the database server is down every request must fail fast (a 503, api/errors.py), never hang:
    # connecting gives up after a few seconds, and so does waiting for a pooled connection.
    return create_engine(
        url,
        pool_pre_ping=True,
        pool_size=10,
        max_overflow=20,
        pool_timeout=CONNECT_TIMEOUT_SECONDS,
        connect_args={"connect_timeout": CONNECT_TIMEOUT_SECONDS},
    )


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", normalise_url(url).replace("%", "%%"))
    return config


class Database:
    def __init__(self, url: str, migrate: bool = True) -> None:
        self.url = normalise_url(url)
        self.engine = make_engine(self.url)
        if migrate:
            self.upgrade()
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        # SQLite lets one writer in at a time, and a writer that finds the file locked sleeps in growing
        # steps (busy_timeout) however soon it comes free: under concurrent requests most of a write was
        # that sleep. This process's transactions queue on a lock instead; other processes still wait
        # through busy_timeout.
        self._serial: AbstractContextManager[Any] = (
            threading.RLock() if self.dialect == "sqlite" else nullcontext()
        )

    @property
    def dialect(self) -> str:
        return self.engine.dialect.name

    def upgrade(self) -> None:
        config = alembic_config(self.url)
        with self.engine.begin() as connection:
            config.attributes["connection"] = connection
            command.upgrade(config, "head")

    @contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed on success, rolled back on error."""
        with self._serial, self._sessions() as session, session.begin():
            yield session

    def ping(self) -> str | None:
        """None when the database answers; else why not (for /healthz). Outside the SQLite write queue."""
        try:
            with self.engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except sqlalchemy.exc.SQLAlchemyError as exc:
            return f"{database_unavailable(exc) or 'failing'}: {exc.__class__.__name__}"
        return None

    def dispose(self) -> None:
        self.engine.dispose()
