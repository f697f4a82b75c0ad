"""The change feed controllers act on, instead of reading every active row on every pass.

A writer appends (kind, row id) to the `changes` table in its own transaction (`record_in`), so a change is
recorded exactly when it commits. A consumer keeps a cursor (the last sequence number it read) and asks for
the row ids changed after it (`since`). Once the transaction commits, the kind's subscribers in this process
are woken at once; on PostgreSQL the transaction also sends a NOTIFY, which a listener thread turns into the
same wake-up for writers in other processes. Rows every consumer has read are pruned (`prune`); a consumer
also re-reads everything now and then (its slow resync), the safety net should a wake-up ever be missed.
"""

from __future__ import annotations

import logging
import select
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any, cast

from sqlalchemy import Engine, Table, delete, event, func, insert, literal, text
from sqlalchemy import select as sql_select
from sqlalchemy.orm import Session

from trainworks.kernel.wire import now_utc
from trainworks.store.database import Database
from trainworks.store.tables import ChangeRow

log = logging.getLogger(__name__)

CHANNEL = "trainworks_changes"
_PENDING = "trainworks.changed_kinds"  # session.info key: the kinds this transaction changed
_RECORDED = "trainworks.changed_rows"  # session.info key: the (kind, row id) pairs it recorded
_LISTEN_POLL_SECONDS = 5.0  # how often the listener thread checks that it should still run
_INSERT = insert(cast(Table, ChangeRow.__table__))


def record_in(session: Session, kind: str, row_ids: Iterable[int]) -> None:
    """Record that rows of `kind` changed, inside the writer's transaction (once per row and transaction)."""
    recorded: set[tuple[str, int]] = session.info.setdefault(_RECORDED, set())
    ids = sorted({row_id for row_id in row_ids if (kind, row_id) not in recorded})
    if not ids:
        return
    recorded.update((kind, row_id) for row_id in ids)
    at = now_utc()
    # A Core insert: the ORM's bulk path would flush the session's pending rows first, for nothing.
    session.execute(_INSERT, [{"kind": kind, "row_id": row_id, "at": at} for row_id in ids])
    _pending(session, kind)


def record_select_in(session: Session, kind: str, row_ids: Any) -> None:
    """Record the rows that a SELECT of ids names (e.g. the job of a replica), inside the writer's
    transaction: the ids need not be read first."""
    at = now_utc()
    session.execute(
        insert(ChangeRow).from_select(
            ["kind", "row_id", "at"], sql_select(literal(kind), row_ids.scalar_subquery(), literal(at))
        )
    )
    _pending(session, kind)


def _pending(session: Session, kind: str) -> None:
    kinds: set[str] = session.info.setdefault(_PENDING, set())
    if kind not in kinds and session.get_bind().dialect.name == "postgresql":
        # Delivered by PostgreSQL when (and only if) the transaction commits.
        session.execute(text("SELECT pg_notify(:channel, :kind)"), {"channel": CHANNEL, "kind": kind})
    kinds.add(kind)


# Subscribers per engine: a process may hold several databases (tests do), each with its own controllers.
_subscribers: weakref.WeakKeyDictionary[Engine, dict[str, list[Callable[[], None]]]] = (
    weakref.WeakKeyDictionary()
)
_lock = threading.Lock()


def _wake(engine: Engine, kinds: Iterable[str]) -> None:
    with _lock:
        table = _subscribers.get(engine, {})
        callbacks = [callback for kind in kinds for callback in table.get(kind, ())]
    for callback in callbacks:
        callback()


@event.listens_for(Session, "after_commit")
def _after_commit(session: Session) -> None:
    session.info.pop(_RECORDED, None)
    kinds = session.info.pop(_PENDING, None)
    if kinds:
        bind = session.get_bind()
        _wake(bind if isinstance(bind, Engine) else bind.engine, kinds)


@event.listens_for(Session, "after_rollback")
def _after_rollback(session: Session) -> None:
    session.info.pop(_RECORDED, None)
    session.info.pop(_PENDING, None)


class ChangeFeed:
    """One database's change feed, read by the controllers of one process."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self._cursors: dict[str, int] = {}  # consumer -> the last sequence number it read
        self._listener: threading.Thread | None = None
        self._stop = threading.Event()

    def subscribe(self, kind: str, wake: Callable[[], None]) -> None:
        """Call `wake` after every commit that changed rows of `kind` (in this process, or in another one on
        PostgreSQL)."""
        with _lock:
            _subscribers.setdefault(self.db.engine, {}).setdefault(kind, []).append(wake)
        if self.db.dialect == "postgresql" and self._listener is None:
            self._listener = threading.Thread(target=self._listen, name="change-listener", daemon=True)
            self._listener.start()

    def close(self) -> None:
        self._stop.set()
        with _lock:
            _subscribers.pop(self.db.engine, None)

    # -------------------------------------------------------------- reading
    def head(self, consumer: str) -> int:
        """The newest sequence number: a consumer about to read every row starts its cursor here (read before
        the rows, so a change committed meanwhile is read again rather than missed)."""
        with self.db.session() as session:
            newest = session.scalar(sql_select(func.max(ChangeRow.seq))) or 0
        self._cursors[consumer] = newest
        return newest

    def since(self, consumer: str, cursor: int, kind: str) -> tuple[int, set[int]]:
        """The ids of `kind` changed after `cursor`, and the cursor to read from next time."""
        newest, changed = self.since_kinds(consumer, cursor, (kind,))
        return newest, changed[kind]

    def since_kinds(
        self, consumer: str, cursor: int, kinds: Iterable[str]
    ) -> tuple[int, dict[str, set[int]]]:
        """The ids changed after `cursor`, per kind of `kinds`, and the cursor to read from next time."""
        with self.db.session() as session:
            rows = session.execute(
                sql_select(ChangeRow.seq, ChangeRow.kind, ChangeRow.row_id)
                .where(ChangeRow.seq > cursor)
                .order_by(ChangeRow.seq)
            ).all()
        changed: dict[str, set[int]] = {kind: set() for kind in kinds}
        for _seq, row_kind, row_id in rows:
            if row_kind in changed:
                changed[row_kind].add(row_id)
        newest = rows[-1][0] if rows else cursor
        self._cursors[consumer] = newest
        return newest, changed

    def prune(self) -> int:
        """Delete what every consumer in this process has read; the number of rows deleted."""
        if not self._cursors:
            return 0
        upto = min(self._cursors.values())
        with self.db.session() as session:
            result = session.execute(delete(ChangeRow).where(ChangeRow.seq <= upto))
        return int(getattr(result, "rowcount", 0) or 0)

    # -------------------------------------------------------------- PostgreSQL wake-ups
    def _listen(self) -> None:
        """Turn NOTIFYs (from any process) into wake-ups; reconnects after an outage."""
        while not self._stop.is_set():
            try:
                self._listen_once()
            except Exception as exc:  # the database went away: the controllers' resync covers the gap
                log.debug("change listener: %s; reconnecting", exc)
                self._stop.wait(_LISTEN_POLL_SECONDS)

    def _listen_once(self) -> None:
        raw = self.db.engine.raw_connection()
        try:
            connection: Any = raw.driver_connection
            connection.autocommit = True
            connection.execute(f"LISTEN {CHANNEL}")
            while not self._stop.is_set():
                ready, _, _ = select.select([connection.fileno()], [], [], _LISTEN_POLL_SECONDS)
                if not ready:
                    continue
                kinds = {notify.payload for notify in connection.notifies(timeout=0, stop_after=1000)}
                if kinds:
                    _wake(self.db.engine, kinds)
        finally:
            raw.invalidate()
