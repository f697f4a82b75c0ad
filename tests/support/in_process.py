"""The server's services and controllers (wiring.py) in the test's own process, the controllers not started:
the test takes the custom-job controller's passes one at a time."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from tests.support.server import PROJECT, wait_for
from trainworks.config import Settings
from trainworks.wiring import Services, build_services


@contextlib.contextmanager
def in_process_services(settings: Settings) -> Iterator[Services]:
    """Services built from `settings`; after the test, what it left running is cancelled and driven to its
    end by passes, then everything is stopped."""
    built = build_services(settings)
    try:
        yield built
    finally:
        for row in built.controller.jobs.active():  # stop what a failed test left running
            built.custom_jobs.cancel(PROJECT, row.location, str(row.id))
        with contextlib.suppress(AssertionError):
            wait_for(
                lambda: built.controller.reconcile_once() and False or not built.controller.jobs.active(),
                timeout=30,
                what="cleanup",
            )
        built.stop()
