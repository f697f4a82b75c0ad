"""The capacity preflight of the REST client (a Trainworks extension) and the shape of its answer (no proto
describes it: TypedDicts of the JSON as it comes)."""

from __future__ import annotations

from typing import NotRequired, cast

# typing's TypedDict is not one pydantic can check on Python 3.11 (the tests check the server's answers).
from typing_extensions import TypedDict

from trainworks.kernel.client import EXTENSIONS, Client, QueryValue


class QuotaUsage(TypedDict):
    limit: int | None  # None: unlimited
    used: int
    free: int | None


class Quota(TypedDict):
    vcpus: QuotaUsage | None
    accelerators: dict[str, QuotaUsage]  # by accelerator type


class MachineCount(TypedDict):
    total: int
    reserved: int
    free: int


class Zone(TypedDict):
    name: str
    elastic: bool
    machines: dict[str, MachineCount] | None  # by machine type; None: elastic


class Shape(TypedDict):
    """How many replicas of one machine shape fit, and what limits them."""

    machineType: str
    acceleratorType: str | None
    acceleratorCount: int
    vcpusPerReplica: int
    acceleratorsPerReplica: dict[str, int]
    quotaReplicas: int | None  # None: unlimited
    capacityReplicas: int | None
    maxReplicas: int | None
    limitedBy: str | None  # STOCKOUT, NOT_SERVED, QUOTA or CAPACITY


class CapacityReport(TypedDict):
    parent: str
    location: str
    region: str | None
    served: bool
    stockout: bool
    asOf: str
    quota: Quota
    zones: list[Zone]
    shape: NotRequired[Shape]  # with a machine type


class CapacityClient(Client):
    """The capacity preflight."""

    def get_capacity(
        self,
        parent: str,
        machine_type: str | None = None,
        accelerator_type: str | None = None,
        accelerator_count: int = 0,
    ) -> CapacityReport:
        """Capacity preflight of `parent`: region, stock-out, the project's quota, free machines per zone and,
        with `machine_type`, `shape` holding that shape's `quotaReplicas`, `capacityReplicas` and
        `maxReplicas` (null: unlimited)."""
        params: dict[str, QueryValue] = {
            "machineType": machine_type,
            "acceleratorType": accelerator_type,
            "acceleratorCount": accelerator_count or None,
        }
        return cast(CapacityReport, self._get_json(parent, "/capacity", api=EXTENSIONS, params=params))


__all__ = ["CapacityClient", "CapacityReport", "MachineCount", "Quota", "QuotaUsage", "Shape", "Zone"]
