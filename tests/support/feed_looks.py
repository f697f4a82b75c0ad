"""Counting what an event-driven controller (the custom-job controller, those on kernel/feed_loop.py) looks
at, pass by pass, with the server's services in the test's own process and a stocked-out region where every
job waits QUEUED."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tests.support.in_process import in_process_services
from trainworks.config import Settings
from trainworks.wiring import Services

STOCKED_OUT = "europe-west1"
INVENTORY = f"""
regions:
  {STOCKED_OUT}:
    stockout: true
    zones:
      {STOCKED_OUT}-b: {{elastic: true}}
"""


@contextlib.contextmanager
def stocked_out_services(folder: Path) -> Iterator[Services]:
    """Services whose only region is stocked out: jobs created there stay QUEUED."""
    inventory = folder / "inventory.yaml"
    inventory.write_text(INVENTORY)
    with in_process_services(Settings(home=folder / "home", inventory_path=inventory)) as built:
        yield built


class Looks:
    """Which rows the controller's passes reconciled, and how often they read every active row (`reads_all`:
    the object and the name of the method that does; a FeedLoop's own `active_rows` by default)."""

    def __init__(self, controller: Any, reads_all: tuple[Any, str] | None = None) -> None:
        self.controller = controller
        self.rows: list[int] = []
        self.full_reads = 0
        owner, name = reads_all or (controller, "active_rows")
        reconcile, active = controller.reconcile, getattr(owner, name)

        def counted_reconcile(row: Any) -> bool:
            self.rows.append(row.id)
            return reconcile(row)

        def counted_active() -> list[Any]:
            self.full_reads += 1
            return active()

        controller.reconcile = counted_reconcile
        setattr(owner, name, counted_active)

    def passes(self, count: int = 1) -> list[int]:
        """Run passes; the ids of the rows they looked at, once per look."""
        self.rows.clear()
        for _ in range(count):
            self.controller.reconcile_once()
        return list(self.rows)


def assert_idle(looks: Looks) -> None:
    """With nothing changed, passes look at no row and read no table whole."""
    reads = looks.full_reads
    assert looks.passes(5) == []
    assert looks.full_reads == reads


def assert_resync_reads_all(looks: Looks, row_ids: list[int]) -> None:
    """The slow resync, once due, looks at every active row, then nothing again."""
    reads = looks.full_reads
    looks.controller._next_full = time.monotonic()
    assert sorted(looks.passes()) == sorted(row_ids)
    assert looks.full_reads == reads + 1
    assert looks.passes() == []
