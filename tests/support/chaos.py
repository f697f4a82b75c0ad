"""Helpers for fault-injection tests: a client that tells "no answer" from an answer, a thread that SIGKILLs
and restarts the server at random moments, and a /proc scan for processes carrying a marker variable."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from tests.support.server import ServerProcess

RETRYABLE = {503}  # UNAVAILABLE: the request did not happen, ask again
RETRY_PAUSE = 0.2  # seconds between tries while the server does not answer


class Unanswered(Exception):
    """No definite answer within the deadline."""


class OutcomeClient:
    """An httpx client for a server that may die at any moment.

    `send` makes one try: the response, or None (after a short pause) when the outcome is unknown (the
    connection broke, the server was down, or it answered 503). `answer` tries until it has a definite
    response. Every 5xx other than 503 is kept in `server_errors`: the server must never answer 500, even
    while it is dying."""

    def __init__(self, base_url: str, deadline: float = 240.0) -> None:
        self.client = httpx.Client(base_url=base_url, timeout=30.0)
        self.deadline = deadline
        self.server_errors: list[str] = []
        self.unknown = 0  # tries without a definite answer

    def close(self) -> None:
        self.client.close()

    def send(self, method: str, url: str, **kwargs: Any) -> httpx.Response | None:
        try:
            response = self.client.request(method, url, **kwargs)
        except httpx.TransportError:
            response = None
        if response is None or response.status_code in RETRYABLE:
            self.unknown += 1
            time.sleep(RETRY_PAUSE)  # the server is restarting (or busy): give it a moment before a retry
            return None
        if response.status_code >= 500:
            self.server_errors.append(f"{method} {url}: {response.status_code} {response.text[:500]}")
        return response

    def answer(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """Retry (the same request) until the server gives a definite answer."""
        give_up = time.monotonic() + self.deadline
        while True:
            response = self.send(method, url, **kwargs)
            if response is not None:
                return response
            if time.monotonic() > give_up:
                raise Unanswered(f"{method} {url}: no answer within {self.deadline:.0f}s")

    def get_json(self, url: str, **kwargs: Any) -> dict[str, Any]:
        response = self.answer("GET", url, **kwargs)
        assert response.status_code == 200, f"GET {url}: {response.status_code} {response.text}"
        return response.json()  # type: ignore[no-any-return]

    def list_all(self, url: str, key: str, params: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """Every item of a paged list."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            page = self.get_json(url, params={**(params or {}), "pageSize": "1000", "pageToken": token})
            items.extend(page.get(key, []))
            token = page.get("nextPageToken", "")
            if not token:
                return items


class Killer(threading.Thread):
    """SIGKILLs the server `kills` times and starts it again each time on the same home and port. Kill k
    waits until `ready(k)` (pacing the kills over a workload), then a random time (uniform in `delay`) after
    the server last started. The server is left running; `join()` waits for the last restart."""

    def __init__(
        self,
        server: ServerProcess,
        rng: random.Random,
        kills: int,
        ready: Callable[[int], bool] = lambda _k: True,
        delay: tuple[float, float] = (0.2, 2.0),
    ) -> None:
        super().__init__(name="killer", daemon=True)
        self.server = server
        self.rng = rng
        self.planned = kills
        self.ready = ready
        self.delay = delay
        self.kills = 0
        self.restart_seconds: list[float] = []
        self.error: BaseException | None = None
        self._abort = threading.Event()

    def abort(self) -> None:
        """No more kills (the test failed elsewhere); a restart under way still completes."""
        self._abort.set()

    def finish(self, timeout: float = 600.0) -> None:
        """Wait for the last kill and restart; fail if restarting the server failed."""
        self.join(timeout)
        if self.is_alive():
            raise AssertionError(f"the killer thread did not finish ({self.kills}/{self.planned} kills)")
        if self.error is not None:
            raise AssertionError(f"restarting the server failed: {self.error}") from self.error

    def run(self) -> None:
        try:
            while self.kills < self.planned:
                while not self.ready(self.kills + 1) and not self._abort.is_set():
                    time.sleep(0.01)
                if self._abort.wait(self.rng.uniform(*self.delay)):
                    return
                self.server.stop(signal.SIGKILL)
                self.kills += 1
                began = time.monotonic()
                self.server.start(timeout=180)
                self.restart_seconds.append(time.monotonic() - began)
        except BaseException as exc:  # reported by finish()
            self.error = exc


def processes_with(marker: str) -> dict[int, str]:
    """Live processes (pid -> command line) whose environment holds `marker` (NAME=value), from /proc."""
    found: dict[int, str] = {}
    needle = marker.encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if stat.rsplit(")", 1)[-1].split()[0] == "Z":
            continue  # a zombie has finished; only its parent's wait is missing
        if needle in environ:
            found[int(entry.name)] = cmdline
    return found
