"""How the custom-jobs commands show things: jobs as rich summaries and tables (human), JSON or YAML
on stdout, log lines, and status lines on stderr."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from enum import StrEnum
from typing import Any

import yaml


class OutputFormat(StrEnum):
    human = "human"
    json = "json"
    yaml = "yaml"


def print_status(message: str) -> None:
    """Progress and hints go to stderr, like gcloud, so stdout stays the command's result."""
    sys.stderr.write(message + "\n")
    sys.stderr.flush()


def print_data(data: Any, fmt: OutputFormat) -> None:
    """A result for scripts: YAML for `--format=yaml`, indented JSON otherwise."""
    if fmt == OutputFormat.yaml:
        sys.stdout.write(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    else:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
    sys.stdout.flush()


def print_log_entry(entry: dict[str, Any], fmt: OutputFormat) -> None:
    """One log entry: `[task] text` for humans, a JSON line for json and yaml."""
    out = sys.stdout
    if fmt == OutputFormat.human:
        out.write(f"[{entry.get('task', '')}] {entry.get('text', '')}\n")
    else:
        out.write(json.dumps(entry) + "\n")
    out.flush()


# ====================================================================== human output (rich)
def _console(stderr: bool = False) -> Any:
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    # Not a terminal: $COLUMNS wide, else 200, so piped output is not wrapped at 80 columns.
    width = None if stream.isatty() else int(os.environ.get("COLUMNS", "0") or 0) or 200
    return Console(file=stream, width=width, highlight=False, soft_wrap=False)


def _job_id(name: str) -> str:
    return name.rsplit("/", 1)[-1]


_STATE_STYLE = {
    "JOB_STATE_SUCCEEDED": "green",
    "JOB_STATE_FAILED": "red",
    "JOB_STATE_CANCELLED": "yellow",
    "JOB_STATE_CANCELLING": "yellow",
    "JOB_STATE_RUNNING": "cyan",
}


def _styled_state(state: str) -> str:
    style = _STATE_STYLE.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def _parse_time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _run_time(job: dict[str, Any]) -> str:
    """startTime to endTime as `1h02m03s` / `4m05s` / `6.0s`; empty until the job has ended."""
    start = _parse_time(job.get("startTime"))
    if start is None:
        return ""
    end = _parse_time(job.get("endTime"))
    if end is None:
        return ""
    seconds = max((end - start).total_seconds(), 0.0)
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{seconds:.1f}s"


def _describe_pool(index: int, pool: dict[str, Any]) -> str:
    """A worker pool as `pool N: replicas x machine` plus indented lines for its image or package."""
    if not pool:
        return f"pool {index}: (skipped)"
    machine = pool.get("machineSpec") or {}
    text = f"pool {index}: {pool.get('replicaCount', '0')} x {machine.get('machineType', '?')}"
    if machine.get("acceleratorType"):
        text += f" + {machine.get('acceleratorCount', 1)} x {machine['acceleratorType']}"
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

    console = _console()
    rows: list[tuple[str, str]] = [
        ("Name", escape(job.get("name", ""))),
        ("Display name", escape(job.get("displayName", ""))),
        ("State", _styled_state(job.get("state", "JOB_STATE_UNSPECIFIED"))),
        ("Created", job.get("createTime", "")),
    ]
    rows += _status_rows(status)
    for label, key in (("Started", "startTime"), ("Ended", "endTime"), ("Updated", "updateTime")):
        if job.get(key):
            rows.append((label, job[key]))
    if _run_time(job):
        rows.append(("Run time", _run_time(job)))
    error = job.get("error")
    if error:
        rows.append(
            ("Error", f"[red]code {error.get('code', 0)}: {escape(str(error.get('message', '')))}[/red]")
        )
    if job.get("labels"):
        rows.append(("Labels", escape(", ".join(f"{k}={v}" for k, v in sorted(job["labels"].items())))))
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
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        console.print(f"[bold]{label + ':':<{width}}[/bold]{value}", soft_wrap=True)
    pools = spec.get("workerPoolSpecs") or []
    if pools:
        console.print("[bold]Worker pools:[/bold]")
        for i, pool in enumerate(pools):
            console.print("  " + escape(_describe_pool(i, pool)), soft_wrap=True)


def print_job_table(jobs: list[dict[str, Any]]) -> None:
    """Jobs as a table (ID, display name, state, create time, run time), like `gcloud ... list`."""
    from rich.markup import escape
    from rich.table import Table

    console = _console()
    if not jobs:
        console.print("Listed 0 items.")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("CUSTOM_JOB_ID", no_wrap=True)
    table.add_column("DISPLAY_NAME", overflow="fold")
    table.add_column("STATE", no_wrap=True)
    table.add_column("CREATE_TIME", no_wrap=True)
    table.add_column("RUN_TIME", no_wrap=True)
    for job in jobs:
        table.add_row(
            _job_id(job.get("name", "")),
            escape(job.get("displayName", "")),
            _styled_state(job.get("state", "")),
            job.get("createTime", ""),
            _run_time(job),
        )
    console.print(table)


__all__ = [
    "OutputFormat",
    "print_data",
    "print_job_summary",
    "print_job_table",
    "print_log_entry",
    "print_status",
]


# ====================================================================== persistent resources (human output)
_RESOURCE_STATE_STYLE = {
    "RUNNING": "green",
    "ERROR": "red",
    "STOPPING": "yellow",
    "PROVISIONING": "cyan",
    "UPDATING": "cyan",
    "REBOOTING": "cyan",
}


def _styled_resource_state(state: str) -> str:
    style = _RESOURCE_STATE_STYLE.get(state)
    return f"[{style}]{state}[/{style}]" if style else state


def resource_pool_text(pool: dict[str, Any]) -> str:
    """A resource pool as `2 × n1-standard-4 (1 used)`, with `+ 1 × ACCELERATOR` when it has some."""
    machine = pool.get("machineSpec") or {}
    text = f"{pool.get('replicaCount', '?')} × {machine.get('machineType', '?')}"
    if machine.get("acceleratorType"):
        text += f" + {machine.get('acceleratorCount', 1)} × {machine['acceleratorType']}"
    return text + f" ({pool.get('usedReplicaCount', '0')} used)"


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

    console = _console()
    rows: list[tuple[str, str]] = [
        ("Name", escape(resource.get("name", ""))),
        ("Display name", escape(resource.get("displayName", ""))),
        ("State", _styled_resource_state(resource.get("state", "STATE_UNSPECIFIED"))),
        ("Created", resource.get("createTime", "")),
    ]
    for label, key in (("Started", "startTime"), ("Updated", "updateTime")):
        if resource.get(key):
            rows.append((label, resource[key]))
    error = resource.get("error")
    if error:
        rows.append(
            ("Error", f"[red]code {error.get('code', 0)}: {escape(str(error.get('message', '')))}[/red]")
        )
    if resource.get("labels"):
        rows.append(("Labels", escape(", ".join(f"{k}={v}" for k, v in sorted(resource["labels"].items())))))
    if resource.get("network"):
        rows.append(("Network", escape(resource["network"])))
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        console.print(f"[bold]{label + ':':<{width}}[/bold]{value}", soft_wrap=True)
    pools = resource.get("resourcePools") or []
    if pools:
        console.print("[bold]Resource pools:[/bold]")
        for pool in pools:
            console.print("  " + escape(_resource_pool_detail(pool)), soft_wrap=True)


def print_persistent_resource_table(resources: list[dict[str, Any]]) -> None:
    """Persistent resources as a table (ID, display name, state, pools), like `gcloud ... list`."""
    from rich.markup import escape
    from rich.table import Table

    console = _console()
    if not resources:
        console.print("Listed 0 items.")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("PERSISTENT_RESOURCE_ID", no_wrap=True)
    table.add_column("DISPLAY_NAME", overflow="fold")
    table.add_column("STATE", no_wrap=True)
    table.add_column("RESOURCE_POOLS", overflow="fold")
    for resource in resources:
        table.add_row(
            _job_id(resource.get("name", "")),
            escape(resource.get("displayName", "")),
            _styled_resource_state(resource.get("state", "")),
            escape(", ".join(resource_pool_text(p) for p in resource.get("resourcePools") or [])),
        )
    console.print(table)


__all__ += [
    "print_persistent_resource_summary",
    "print_persistent_resource_table",
    "resource_pool_text",
]
