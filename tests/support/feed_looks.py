"""Counting what a change-driven controller (kernel/feed_loop.py) looks at, pass by pass."""

from __future__ import annotations

from typing import Any

from trainworks.kernel.feed_loop import FeedLoop


class Looks:
    """Which rows the controller's passes reconciled, and how often they read every active row."""

    def __init__(self, controller: FeedLoop[Any]) -> None:
        self.controller = controller
        self.rows: list[int] = []
        self.full_reads = 0
        reconcile, active = controller.reconcile, controller.active_rows

        def counted_reconcile(row: Any) -> bool:
            self.rows.append(row.id)
            return reconcile(row)

        def counted_active() -> list[Any]:
            self.full_reads += 1
            return active()

        controller.reconcile = counted_reconcile  # type: ignore[method-assign]
        controller.active_rows = counted_active  # type: ignore[method-assign]

    def passes(self, count: int = 1) -> list[int]:
        """Run passes; the ids of the rows they looked at, once per look."""
        self.rows.clear()
        for _ in range(count):
            self.controller.reconcile_once()
        return list(self.rows)
