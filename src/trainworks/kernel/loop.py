"""The loop every controller runs: a pass over the database, then wait for a wake-up or the resync period."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import TypeVar

from trainworks.store.database import database_unavailable

log = logging.getLogger(__name__)

BUSY_INTERVAL = 0.05  # while something is changing, look again soon enough to notice it promptly

RowT = TypeVar("RowT")


def reconcile_each(
    rows: Iterable[RowT],
    reconcile: Callable[[RowT], bool],
    logger: logging.Logger,
    failed: str,
    label: Callable[[RowT], object],
) -> bool:
    """Reconcile every row; True while one is in motion. A row that fails is logged on the controller's own
    `logger` as `failed % label(row)` and the pass goes on with the next one."""
    busy = False
    for row in rows:
        try:
            busy |= reconcile(row)
        except Exception:  # one bad row must not starve the others
            logger.exception(failed, label(row))
    return busy


class ReconcileLoop:
    """Runs `reconcile_once` on a thread of its own; `wake` asks for a pass now."""

    name = "controller"

    def __init__(self, resync_seconds: float) -> None:
        self.resync_seconds = resync_seconds
        self.wake_event = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def reconcile_once(self) -> bool:
        """One pass; True while something is in motion."""
        raise NotImplementedError

    def next_wait(self, busy: bool) -> float:
        """How long to sleep after a pass that went through, unless woken."""
        return BUSY_INTERVAL if busy else self.resync_seconds

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self.wake_event.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def wake(self) -> None:
        self.wake_event.set()

    def _run(self) -> None:
        database_down = False
        while not self._stop.is_set():
            self.wake_event.clear()
            try:
                busy = self.reconcile_once()
                wait = self.next_wait(busy)
                if database_down:
                    log.info("%s: the database answers again; reconciling resumes", self.name)
                    database_down = False
            except Exception as exc:  # keep reconciling: one bad pass must not stop the loop
                passing = database_unavailable(exc)
                if passing is None:
                    log.exception("%s: reconcile pass failed", self.name)
                elif not database_down:  # once per outage: the state is in the database, nothing is lost
                    log.warning(
                        "%s: the database is %s (%s); retrying every %gs",
                        self.name,
                        passing,
                        exc.__class__.__name__,
                        self.resync_seconds,
                    )
                    database_down = True
                wait = self.resync_seconds
            self.wake_event.wait(wait)
