"""How the CLI shows persistent resources to humans: a summary with its pools, and a table."""

from __future__ import annotations

from typing import Any

from trainworks.kernel.render import (
    Column,
    console,
    header_rows,
    machine_text,
    print_lines,
    print_resource_table,
    print_rows,
)

_RESOURCE_STATE_STYLE = {
    "RUNNING": "green",
    "ERROR": "red",
    "STOPPING": "yellow",
    "PROVISIONING": "cyan",
    "UPDATING": "cyan",
    "REBOOTING": "cyan",
}


def resource_pool_text(pool: dict[str, Any]) -> str:
    """A resource pool as `2 × n1-standard-4 (1 used)`, with `+ 1 × ACCELERATOR` when it has some."""
    machine = machine_text(pool.get("machineSpec") or {})
    return f"{pool.get('replicaCount', '?')} × {machine} ({pool.get('usedReplicaCount', '0')} used)"


def _resource_pool_detail(pool: dict[str, Any]) -> str:
    """One line of `describe`: the pool's ID, machines, disk and autoscaling."""
    text = f"{pool.get('id', '?')}: {resource_pool_text(pool)}"
    disk = pool.get("diskSpec") or {}
    if disk:
        text += f"; disk {disk.get('bootDiskType', 'pd-ssd')} {disk.get('bootDiskSizeGb', 100)} GB"
    scaling = pool.get("autoscalingSpec") or {}
    if scaling:
        text += f"; autoscaling {scaling.get('minReplicaCount', '?')}..{scaling.get('maxReplicaCount', '?')}"
    return text


def print_persistent_resource_summary(resource: dict[str, Any]) -> None:
    """One persistent resource as aligned `Label: value` lines, then its resource pools."""
    from rich.markup import escape

    out = console()
    # A persistent resource has no endTime, so the header shows no Ended or Run time row.
    rows = header_rows(resource, _RESOURCE_STATE_STYLE, "STATE_UNSPECIFIED")
    if resource.get("network"):
        rows.append(("Network", escape(resource["network"])))
    print_rows(rows, out)
    pools = resource.get("resourcePools") or []
    if pools:
        print_lines("Resource pools", [_resource_pool_detail(pool) for pool in pools], out)


def print_persistent_resource_table(resources: list[dict[str, Any]]) -> None:
    """Persistent resources as a table (ID, display name, state, pools), like `gcloud ... list`."""
    from rich.markup import escape

    def pools(resource: dict[str, Any]) -> str:
        return escape(", ".join(resource_pool_text(p) for p in resource.get("resourcePools") or []))

    more = [(Column("RESOURCE_POOLS", fold=True), pools)]
    print_resource_table(resources, "PERSISTENT_RESOURCE_ID", _RESOURCE_STATE_STYLE, more)


__all__ = ["print_persistent_resource_summary", "print_persistent_resource_table", "resource_pool_text"]
