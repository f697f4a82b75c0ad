"""Requests first: while API requests keep arriving, a controller puts its next piece of work off, for a
bounded time (as slurmctld defers scheduling while RPCs keep it busy).

Why: the controllers and the request path share one interpreter lock, and a controller's piece of work (a
job's launch: its plan, its cgroup, its database rows) holds it for milliseconds at a time, so under a burst
of creates every request waited behind launches. The launches happen either way; with this, a burst of
requests is answered first and the launches follow, one at least every MAX_DEFER_SECONDS meanwhile.

The signal is when the last request started, not how many are open: a long poll or a followed log stream
is open for minutes without working, and must not hold the controllers off.
"""

from __future__ import annotations

import math
import threading
import time

from starlette.types import ASGIApp, Receive, Scope, Send

#: Requests that start within this long of each other are a sequence (a client sending one after another, a
#: poller); after a lone request the controllers go on as soon as it has been answered.
SEQUENCE_SECONDS = 0.01
#: Within a sequence, the API is between requests once none has started or ended for this long (a client
#: sending back to back starts its next one well within it; one polling every few milliseconds leaves gaps).
QUIET_SECONDS = 0.003
#: A request still open counts as work in progress for this long after it started; after that it is taken
#: for a long poll or a stream (open, but not working).
YOUNG_SECONDS = 0.05
#: The longest a controller waits before a piece of work: under a flood, launches still go on.
MAX_DEFER_SECONDS = 0.1


class RequestLoad:
    """Which requests are open, and when the last ones started and ended."""

    def __init__(
        self, quiet: float = QUIET_SECONDS, most: float = MAX_DEFER_SECONDS, young: float = YOUNG_SECONDS
    ) -> None:
        self.quiet, self.most, self.young = quiet, most, young
        self._open = 0
        self._last_start = self._previous_start = self._last_end = -math.inf
        self._lock = threading.Lock()  # gRPC calls begin and end on threads of their own
        self._none_open = threading.Event()
        self._none_open.set()

    @property
    def open(self) -> int:
        """Requests begun and not yet ended."""
        return self._open

    def begin(self) -> None:
        """A request has arrived (HTTP or gRPC)."""
        with self._lock:
            if self._open == 0:
                self._none_open.clear()
            self._open += 1
            self._previous_start, self._last_start = self._last_start, time.monotonic()

    def end(self) -> None:
        with self._lock:
            self._open -= 1
            self._last_end = time.monotonic()
            if self._open == 0:
                self._none_open.set()

    def defer(self) -> float:
        """Wait until the API is quiet (no young request open; in a sequence, none started or ended for
        `quiet` seconds), at most `most` seconds; the seconds waited."""
        began = now = time.monotonic()
        deadline = began + self.most
        while now < deadline:
            with self._lock:
                young_open = self._open > 0 and now - self._last_start < self.young
                sequence = self._last_start - self._previous_start < SEQUENCE_SECONDS
                quiet_at = max(self._last_start, self._last_end) + self.quiet
                grown_up = self._last_start + self.young
            if young_open:
                self._none_open.wait(min(deadline, grown_up) - now)
            elif sequence and quiet_at > now:
                time.sleep(min(quiet_at, deadline) - now)
            else:
                break
            now = time.monotonic()
        return now - began


class MarkRequests:
    """Pure ASGI middleware: each HTTP request is counted open on the server's RequestLoad until the app has
    answered it (WebSockets are not counted: a shell session is not a burst of requests)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        services = getattr(getattr(scope.get("app"), "state", None), "services", None)
        load: RequestLoad | None = getattr(services, "requests", None)
        if scope["type"] != "http" or load is None:
            await self.app(scope, receive, send)
            return
        load.begin()
        try:
            await self.app(scope, receive, send)
        finally:
            load.end()
