"""Requests first: while API requests keep the server busy, a controller puts its next piece of work off, for
a bounded time (as slurmctld defers scheduling while RPCs keep it busy).

Why: the controllers and the request path share one interpreter lock, and a controller's piece of work (a
job's launch: its plan, its cgroup, its database rows) holds it for milliseconds at a time, so under a burst
of creates every request waited behind launches. The launches happen either way; with this, a burst of
requests is answered first and the launches follow, one at least every MAX_DEFER_SECONDS meanwhile.

Busy means: a request is open now, or requests were open for most of the last few tens of milliseconds (a
client sending one request after another leaves sub-millisecond gaps between them; one polling every few
milliseconds leaves most of the time free, and a single create is followed at once). A request open for
longer than YOUNG_SECONDS is a long poll or a followed log stream, open without working: it does not count.
"""

from __future__ import annotations

import math
import threading
import time

from starlette.types import ASGIApp, Receive, Scope, Send

#: The time constant of the busy share: requests open over about the last this long count.
WINDOW_SECONDS = 0.02
#: Busier than this share of the window, the API is in a burst and the controllers wait.
BUSY_SHARE = 0.5
#: A request still open counts as work in progress for this long after it started; after that it is taken
#: for a long poll or a stream (open, but not working).
YOUNG_SECONDS = 0.05
#: The longest a controller waits before a piece of work: under a flood, launches still go on.
MAX_DEFER_SECONDS = 0.5
#: How often a waiting controller looks again while no request is open but the share is still high.
RECHECK_SECONDS = 0.001


class RequestLoad:
    """Which requests are open, and the share of recent time during which one was (an exponentially
    weighted average over WINDOW_SECONDS)."""

    def __init__(
        self, most: float = MAX_DEFER_SECONDS, young: float = YOUNG_SECONDS, window: float = WINDOW_SECONDS
    ) -> None:
        self.most, self.young, self.window = most, young, window
        self._open = 0
        self._last_start = -math.inf
        self._share = 0.0  # the busy share as of self._at
        self._at = time.monotonic()
        self._lock = threading.Lock()  # gRPC calls begin and end on threads of their own
        self._none_open = threading.Event()
        self._none_open.set()

    @property
    def open(self) -> int:
        """Requests begun and not yet ended."""
        return self._open

    def _advance(self, now: float) -> float:
        """The busy share brought up to `now` (under the lock): busy while a young request was open."""
        if now > self._at:
            # Busy from self._at until the last request to start grows up (if one is open), idle after.
            busy_until = self._last_start + self.young if self._open > 0 else self._at
            middle = min(now, max(self._at, busy_until))
            self._share = _decayed(self._share, middle - self._at, 1.0, self.window)
            self._share = _decayed(self._share, now - middle, 0.0, self.window)
            self._at = now
        return self._share

    def begin(self) -> None:
        """A request has arrived (HTTP or gRPC)."""
        with self._lock:
            now = time.monotonic()
            self._advance(now)
            if self._open == 0:
                self._none_open.clear()
            self._open += 1
            self._last_start = now

    def end(self) -> None:
        with self._lock:
            self._advance(time.monotonic())
            self._open -= 1
            if self._open == 0:
                self._none_open.set()

    def defer(self) -> float:
        """Wait while the API is busy (a young request open, or the busy share above BUSY_SHARE), at most
        `most` seconds; the seconds waited."""
        began = now = time.monotonic()
        deadline = began + self.most
        while now < deadline:
            with self._lock:
                share = self._advance(now)
                young_open = self._open > 0 and now - self._last_start < self.young
                grown_up = self._last_start + self.young
            if young_open:
                self._none_open.wait(min(deadline, grown_up) - now)
            elif share > BUSY_SHARE:
                # The share halves in window * ln 2 with nothing open; look again soon, in case one opens.
                time.sleep(min(RECHECK_SECONDS, deadline - now))
            else:
                break
            now = time.monotonic()
        return now - began


def _decayed(share: float, seconds: float, value: float, window: float) -> float:
    """An exponentially weighted average moved `seconds` on towards `value`."""
    if seconds <= 0:
        return share
    keep = math.exp(-seconds / window)
    return share * keep + value * (1.0 - keep)


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
