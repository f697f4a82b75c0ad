"""A controller loop that acts on the change feed (changes.py), not on every active row each pass.

For kinds whose rows follow other rows (a tuning job its trials' CustomJobs, a pipeline its backing job): a
pass looks at the rows the feed names, directly or through a child the controller follows (`follow`), the
rows that asked to be polled (`poll`: something that changes outside the database, such as a trial's report
file), and the rows in motion (their `reconcile` returned True: looked at again after BUSY_INTERVAL). Every
active row is read on the first pass, after a database failure and on the slow resync (every
`full_resync_seconds`), the safety net should a wake-up ever be missed; a row whose look failed is looked at
again after the resync period. The custom-job controller has a richer form of its own (chunked resyncs,
replica exits, deadlines).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Generic, TypeVar

from trainworks.kernel.changes import ChangeFeed
from trainworks.kernel.loop import BUSY_INTERVAL, ReconcileLoop

RowT = TypeVar("RowT")

POLL_SECONDS = 0.25  # a polled row is looked at this often


class FeedLoop(ReconcileLoop, Generic[RowT]):
    """Subclasses provide `active_rows`, `active_rows_among` and `reconcile` (True: in motion), and say which
    child rows they follow and which rows they poll."""

    logger = logging.getLogger(__name__)
    what = "row"  # names a row in the log: "reconciling <what> <id> failed"

    def __init__(
        self,
        resync_seconds: float,
        full_resync_seconds: float,
        changes: ChangeFeed,
        own_kind: str,
        child_kinds: Iterable[str],
    ) -> None:
        super().__init__(resync_seconds)
        self.full_resync_seconds = full_resync_seconds
        self.changes = changes
        self.own_kind = own_kind
        self.child_kinds = tuple(child_kinds)
        self._cursor: int | None = None  # None: the next pass reads every active row
        self._next_full = 0.0
        self._parents: dict[tuple[str, int], int] = {}  # (child kind, child id) -> the row following it
        self._polled: set[int] = set()
        self._moving: set[int] = set()  # in motion, or its look failed
        self._last_pass = 0.0
        for kind in (own_kind, *self.child_kinds):
            changes.subscribe(kind, self.wake)

    # -------------------------------------------------------------- what a kind provides
    def active_rows(self) -> list[RowT]:
        raise NotImplementedError

    def active_rows_among(self, ids: set[int]) -> list[RowT]:
        raise NotImplementedError

    def row_id(self, row: RowT) -> int:
        return int(row.id)  # type: ignore[attr-defined]

    def reconcile(self, row: RowT) -> bool:
        raise NotImplementedError

    def forgotten(self, row_id: int) -> None:
        """The row ended or is gone: a kind drops what it keeps of it."""

    # -------------------------------------------------------------- what a kind tells
    def follow(self, kind: str, child_id: int, row_id: int) -> None:
        """A change of the child names the row from now on."""
        self._parents[(kind, child_id)] = row_id

    def unfollow(self, kind: str, child_id: int) -> None:
        self._parents.pop((kind, child_id), None)

    def poll(self, row_id: int, polled: bool) -> None:
        """Whether the row is looked at every POLL_SECONDS, changed or not."""
        if polled:
            self._polled.add(row_id)
        else:
            self._polled.discard(row_id)

    # -------------------------------------------------------------- the loop
    def reconcile_once(self) -> bool:
        # Woken by every change of a child kind (a flood of CustomJob creates): one pass per BUSY_INTERVAL.
        time.sleep(max(0.0, self._last_pass + BUSY_INTERVAL - time.monotonic()))
        self._last_pass = time.monotonic()
        try:
            ids = self._work()
            rows = self.active_rows() if ids is None else self.active_rows_among(ids)
        except Exception:
            self._cursor = None  # the database failed: what happened meanwhile is read whole next time
            raise
        if ids is not None:
            for row_id in ids - {self.row_id(row) for row in rows}:
                self._forget(row_id)
        busy = False
        for row in rows:
            row_id = self.row_id(row)
            try:
                moving = self.reconcile(row)
            except Exception:  # one bad row must not starve the others; it is looked at again
                self.logger.exception("reconciling %s %s failed", self.what, row_id)
                self._moving.add(row_id)
                continue
            if moving:
                self._moving.add(row_id)
            else:
                self._moving.discard(row_id)
            busy |= moving
        return busy

    def next_wait(self, busy: bool) -> float:
        if busy:
            return BUSY_INTERVAL
        wait = self._next_full - time.monotonic()
        if self._polled:
            wait = min(wait, POLL_SECONDS)
        if self._moving:  # only rows whose look failed: again after the resync period
            wait = min(wait, self.resync_seconds)
        return max(wait, 0.0)

    def _work(self) -> set[int] | None:
        """The ids of the rows this pass looks at; None for every active row."""
        if self._cursor is None or time.monotonic() >= self._next_full:
            # The cursor first: a change committed while the rows are read is read again, never missed.
            self._cursor = self.changes.head(self.name)
            self._next_full = time.monotonic() + self.full_resync_seconds
            self._parents.clear()  # the pass over every row follows and polls again what it must
            self._polled.clear()
            self._moving.clear()
            return None
        kinds = (self.own_kind, *self.child_kinds)
        self._cursor, changed = self.changes.since_kinds(self.name, self._cursor, kinds)
        named = set(changed[self.own_kind])
        for kind in self.child_kinds:
            named.update(self._parents[(kind, c)] for c in changed[kind] if (kind, c) in self._parents)
        return named | self._polled | self._moving

    def _forget(self, row_id: int) -> None:
        self._polled.discard(row_id)
        self._moving.discard(row_id)
        for key in [key for key, parent in self._parents.items() if parent == row_id]:
            del self._parents[key]
        self.forgotten(row_id)
