"""How the CLI shows persistent resources to humans: a summary with its pools, and a table."""

from __future__ import annotations

from trainworks.kernel.render import (
    Column,
    console,
    has_fields,
    header_rows,
    machine_text,
    print_lines,
    print_resource_table,
    print_rows,
    state_name,
    text_rows,
)
from trainworks.kinds.persistent_resources.wire import PersistentResource, ResourcePool

_RESOURCE_STATE_STYLE = {
    "RUNNING": "green",
    "ERROR": "red",
    "STOPPING": "yellow",
    "PROVISIONING": "cyan",
    "UPDATING": "cyan",
    "REBOOTING": "cyan",
}


def _count(value: int | None) -> str:
    """An `optional int64` count: `?` when unset."""
    return "?" if value is None else str(value)


def resource_pool_text(pool: ResourcePool) -> str:
    """A resource pool as `2 × n1-standard-4 (1 used)`, with `+ 1 × ACCELERATOR` when it has some."""
    machine = machine_text(pool.machine_spec)
    return f"{_count(pool.replica_count)} × {machine} ({pool.used_replica_count} used)"


def _resource_pool_detail(pool: ResourcePool) -> str:
    """One line of `describe`: the pool's ID, machines, disk and autoscaling."""
    text = f"{pool.id or '?'}: {resource_pool_text(pool)}"
    disk = pool.disk_spec
    if has_fields(disk):
        text += f"; disk {disk.boot_disk_type or 'pd-ssd'} {disk.boot_disk_size_gb or 100} GB"
    scaling = pool.autoscaling_spec
    if has_fields(scaling):
        text += f"; autoscaling {_count(scaling.min_replica_count)}..{_count(scaling.max_replica_count)}"
    return text


def print_persistent_resource_summary(resource: PersistentResource) -> None:
    """One persistent resource as aligned `Label: value` lines, then its resource pools."""
    out = console()
    # A persistent resource has no endTime, so the header shows no Ended or Run time row.
    rows = header_rows(resource, _RESOURCE_STATE_STYLE)
    rows += text_rows(("Network", resource.network))
    print_rows(rows, out)
    if resource.resource_pools:
        print_lines("Resource pools", [_resource_pool_detail(pool) for pool in resource.resource_pools], out)


def print_persistent_resource_table(resources: list[PersistentResource]) -> None:
    """Persistent resources as a table (ID, display name, state, pools), like `gcloud ... list`."""
    from rich.markup import escape

    def pools(resource: PersistentResource) -> str:
        return escape(", ".join(resource_pool_text(p) for p in resource.resource_pools))

    more = [(Column("RESOURCE_POOLS", fold=True), pools)]
    print_resource_table(resources, "PERSISTENT_RESOURCE_ID", _RESOURCE_STATE_STYLE, more, state_name)


__all__ = ["print_persistent_resource_summary", "print_persistent_resource_table", "resource_pool_text"]
