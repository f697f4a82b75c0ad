"""Requests first (kernel/request_load.py): when a controller waits for the API, and when it does not."""

from __future__ import annotations

import threading
import time

from trainworks.kernel.request_load import RequestLoad


def deferring(load: RequestLoad) -> tuple[threading.Event, list[float]]:
    """Run load.defer() on a thread; the event is set once it returned (the list then holds its answer)."""
    done, waited = threading.Event(), []

    def run() -> None:
        waited.append(load.defer())
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done, waited


def test_a_quiet_api_is_not_waited_for() -> None:
    load = RequestLoad()
    assert load.defer() == 0.0


def test_a_lone_request_is_waited_for_until_it_is_answered_and_no_longer() -> None:
    load = RequestLoad(quiet=30.0, most=60.0, young=60.0)  # only the request's end can let it go
    load.begin()
    done, waited = deferring(load)
    assert not done.wait(0.2)  # still open: the controller waits
    load.end()
    assert done.wait(10), "a lone request answered: no quiet period after it"
    assert 0.2 <= waited[0] < 30.0


def test_within_a_sequence_the_controller_waits_for_a_quiet_moment() -> None:
    load = RequestLoad(quiet=0.3, most=60.0)
    for _ in range(3):  # back to back: a sequence
        load.begin()
        load.end()
    ended = time.monotonic()
    waited = load.defer()
    assert time.monotonic() - ended >= 0.3
    assert 0.0 < waited < 60.0


def test_the_wait_is_bounded_under_a_flood() -> None:
    load = RequestLoad(quiet=60.0, most=0.2, young=60.0)
    load.begin()  # never ends while the controller waits
    started = time.monotonic()
    waited = load.defer()
    assert waited >= 0.2
    assert time.monotonic() - started < 30.0
    load.end()


def test_a_request_open_for_long_is_a_stream_not_load() -> None:
    load = RequestLoad(quiet=0.01, most=60.0, young=0.1)
    load.begin()  # a followed log stream, a long poll: open, not working
    time.sleep(0.15)  # past `young` (a duration to let pass, not a race)
    assert load.defer() == 0.0
    load.end()


def test_requests_from_threads_keep_the_count() -> None:
    load = RequestLoad(quiet=0.0, most=60.0, young=60.0)
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
    assert load.defer() == 0.0  # every request ended: nothing open is left to wait for
