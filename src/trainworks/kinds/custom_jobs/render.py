"""How the CLI shows custom jobs: rich summaries and tables for humans. What every kind of job shows (its
first rows, state colours, log lines) is in `jobs.render`."""

from __future__ import annotations

import json
from typing import Any

from trainworks.jobs.render import JOB_STATE_STYLE, job_rows
from trainworks.kernel.render import (
    CREATE_TIME,
    Column,
    console,
    machine_text,
    print_lines,
    print_resource_table,
    print_rows,
    run_time,
)


def _describe_pool(index: int, pool: dict[str, Any]) -> str:
    """A worker pool as `pool N: replicas x machine` plus indented lines for its image or package."""
    if not pool:
        return f"pool {index}: (skipped)"
    machine = machine_text(pool.get("machineSpec") or {}, times="x")
    text = f"pool {index}: {pool.get('replicaCount', '0')} x {machine}"
    container, package = pool.get("containerSpec"), pool.get("pythonPackageSpec")
    if container:
        text += f"\n      image    {container.get('imageUri', '')}"
        if container.get("command"):
            text += f"\n      command  {json.dumps(container['command'])}"
        if container.get("args"):
            text += f"\n      args     {json.dumps(container['args'])}"
    elif package:
        text += f"\n      executor {package.get('executorImageUri', '')}"
        text += f"\n      module   {package.get('pythonModule', '')}"
        if package.get("packageUris"):
            text += f"\n      packages {', '.join(package['packageUris'])}"
        if package.get("args"):
            text += f"\n      args     {json.dumps(package['args'])}"
    return text


def _status_rows(status: dict[str, Any] | None) -> list[tuple[str, str]]:
    """Scheduling and restarts, from the server's status extension."""
    from rich.markup import escape

    if not status:
        return []
    rows: list[tuple[str, str]] = []
    if status.get("waitingReason"):
        rows.append(("Waiting", f"[yellow]{escape(status['waitingReason'])}[/yellow]"))
    if status.get("zone"):
        rows.append(("Zone", escape(status["zone"])))
    restarts = status.get("restarts") or []
    if restarts:
        rows.append(("Attempt", f"{status.get('attempt', 0) + 1} ({len(restarts)} restart(s))"))
        for entry in restarts:
            rows.append(
                (
                    "  restart",
                    escape(f"{entry.get('time', '')} {entry.get('kind', '')}: {entry.get('reason', '')}"),
                )
            )
    cost = status.get("cost")
    if cost:
        hours = float(cost.get("machineHours", 0))
        text = f"${float(cost.get('costUsd', 0)):,.4f} for {hours:,.4f} machine-hours"
        text += " (SPOT" if cost.get("spot") else " (on-demand"
        if cost.get("spot"):
            text += f"; on-demand ${float(cost.get('onDemandEquivalentUsd', 0)):,.4f}"
        text += ", so far)" if cost.get("running") else ")"
        if cost.get("billedTo"):
            text += f"; billed to {cost['billedTo']}"
        rows.append(("Cost", escape(text)))
        for name, used in sorted((cost.get("acceleratorHours") or {}).items()):
            rows.append(("  accelerators", escape(f"{float(used):,.4f} h of {name}")))
    return rows


def print_job_summary(job: dict[str, Any], status: dict[str, Any] | None = None) -> None:
    """One job as aligned `Label: value` lines, then its worker pools."""
    from rich.markup import escape

    out = console()
    rows = job_rows(job, _status_rows(status))
    spec = job.get("jobSpec") or {}
    timeout = (spec.get("scheduling") or {}).get("timeout")
    if timeout:
        rows.append(("Timeout", timeout))
    output_dir = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if output_dir:
        rows.append(("Output dir", escape(output_dir)))
    for label, key in (("Service account", "serviceAccount"), ("Network", "network")):
        if spec.get(key):
            rows.append((label, escape(spec[key])))
    print_rows(rows, out)
    pools = spec.get("workerPoolSpecs") or []
    if pools:
        print_lines("Worker pools", [_describe_pool(i, pool) for i, pool in enumerate(pools)], out)


def print_job_table(jobs: list[dict[str, Any]]) -> None:
    """Jobs as a table (ID, display name, state, create time, run time), like `gcloud ... list`."""
    print_resource_table(
        jobs, "CUSTOM_JOB_ID", JOB_STATE_STYLE, [CREATE_TIME, (Column("RUN_TIME"), run_time)]
    )


__all__ = ["print_job_summary", "print_job_table"]
