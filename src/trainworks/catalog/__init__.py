"""Catalog of Vertex AI custom-training machine types, accelerators and approximate prices."""

from trainworks.catalog.machines import (
    UNSPECIFIED,
    AcceleratorInfo,
    MachineType,
    accelerator,
    check_accelerator,
    hourly_price,
    machine_type,
    machine_types,
    suggest,
)

__all__ = [
    "UNSPECIFIED",
    "AcceleratorInfo",
    "MachineType",
    "accelerator",
    "check_accelerator",
    "hourly_price",
    "machine_type",
    "machine_types",
    "suggest",
]
