"""The operations methods of the REST client (waiting for one is the kernel's `Client.wait_operation`, which
every kind's long-running change needs)."""

from __future__ import annotations

from trainworks.kernel.client import Client
from trainworks.kernel.longrunning import Operation


class OperationsClient(Client):
    """Long-running operations."""

    def get_operation(self, name: str) -> Operation:
        return self._get(Operation, name)


__all__ = ["OperationsClient"]
