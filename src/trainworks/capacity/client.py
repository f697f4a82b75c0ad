"""The capacity preflight of the REST client (a Trainworks extension)."""

from __future__ import annotations

from trainworks.kernel.client import EXTENSIONS, Client, JsonObject, QueryValue


class CapacityClient(Client):
    """The capacity preflight."""

    def get_capacity(
        self,
        parent: str,
        machine_type: str | None = None,
        accelerator_type: str | None = None,
        accelerator_count: int = 0,
    ) -> JsonObject:
        """Capacity preflight of `parent`: region, stock-out, the project's quota, free machines per zone and,
        with `machine_type`, `shape` holding that shape's `quotaReplicas`, `capacityReplicas` and
        `maxReplicas` (null: unlimited)."""
        params: dict[str, QueryValue] = {
            "machineType": machine_type,
            "acceleratorType": accelerator_type,
            "acceleratorCount": accelerator_count or None,
        }
        return self._get(parent, "/capacity", api=EXTENSIONS, params=params)


__all__ = ["CapacityClient"]
