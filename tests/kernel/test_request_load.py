"""Requests first (kernel/request_load.py): when a controller waits for the API, and when it does not."""

from __future__ import annotations

import threading
import time

from trainworks.kernel.request_load import WINDOW_SECONDS, RequestLoad

# The busy share halves in WINDOW_SECONDS * ln 2 once nothing is open: from 1 to below one half, about 14 ms.
DECAY = WINDOW_SECONDS


def deferring(load: RequestLoad) -> tuple[threading.Event, list[float]]:
    """Run load.defer() on a thread; the event is set once it returned (the list then holds its answer)."""
    done, waited = threading.Event(), []

    def run() -> None:
        waited.append(load.defer())
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done, waited


def burst(load: RequestLoad, seconds: float) -> None:
    """A client sending one request after another for `seconds`."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        load.begin()
        time.sleep(0.0005)
        load.end()


def test_a_quiet_api_is_not_waited_for() -> None:
    load = RequestLoad()
    assert load.defer() == 0.0


def test_a_lone_short_request_is_not_waited_for_once_answered() -> None:
    load = RequestLoad()
    load.begin()
    load.end()
    assert load.defer() == 0.0  # a single create: its launch follows at once


def test_an_open_request_is_waited_for_until_it_is_answered() -> None:
    load = RequestLoad(most=60.0, young=60.0)  # only the request's end can let the controller go
    load.begin()
    done, waited = deferring(load)
    assert not done.wait(0.2)  # still open: the controller waits
    load.end()
    assert done.wait(10)
    assert 0.2 <= waited[0] < 30.0


def test_after_a_burst_the_controller_waits_for_the_busy_share_to_fall() -> None:
    load = RequestLoad(most=60.0)
    burst(load, 5 * DECAY)  # nearly all the time busy: the share is near 1
    ended = time.monotonic()
    waited = load.defer()
    assert waited > 0.0
    assert time.monotonic() - ended < 10 * DECAY  # it falls below one half within a few windows


def test_the_wait_is_bounded_under_a_flood() -> None:
    load = RequestLoad(most=0.2, young=60.0)
    load.begin()  # never ends while the controller waits
    started = time.monotonic()
    waited = load.defer()
    assert waited >= 0.2
    assert time.monotonic() - started < 30.0
    load.end()


def test_a_request_open_for_long_is_a_stream_not_load() -> None:
    load = RequestLoad(most=60.0, young=0.1)
    load.begin()  # a followed log stream, a long poll: open, not working
    time.sleep(0.1 + 10 * DECAY)  # past `young`, and long enough for its busy share to have fallen
    assert load.defer() == 0.0
    load.end()


def test_requests_from_threads_keep_the_count() -> None:
    load = RequestLoad(most=60.0, young=60.0)
    barrier = threading.Barrier(8)

    def client() -> None:
        barrier.wait()
        for _ in range(500):
            load.begin()
            load.end()

    threads = [threading.Thread(target=client) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert load.open == 0  # every request ended
    assert load.defer() < 10 * DECAY  # nothing open to wait for: only the share's fall
