"""Scheduling: the capacity inventory and the pure planning core that decides which queued jobs start."""

from trainworks.scheduling.admission import (
    Allocation,
    Decision,
    Demand,
    JobRequest,
    accelerators,
    machines_needed,
    never_fits,
    plan_admissions,
    vcpus,
)
from trainworks.scheduling.inventory import (
    Inventory,
    InventoryError,
    Region,
    Zone,
    default_inventory,
    elastic_region,
    load_inventory,
    parse_inventory,
)

__all__ = [
    "Allocation",
    "Decision",
    "Demand",
    "Inventory",
    "InventoryError",
    "JobRequest",
    "Region",
    "Zone",
    "accelerators",
    "default_inventory",
    "elastic_region",
    "load_inventory",
    "machines_needed",
    "never_fits",
    "parse_inventory",
    "plan_admissions",
    "vcpus",
]
