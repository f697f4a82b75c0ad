"""How the CLI shows custom jobs: rich summaries and tables for humans. What every kind of job shows (its
first rows, state colours, log lines) is in `jobs.render`."""

from __future__ import annotations

import json

from trainworks.jobs.render import JOB_STATE_STYLE, job_rows
from trainworks.kernel.render import (
    CREATE_TIME,
    Column,
    console,
    duration_text,
    has_fields,
    machine_text,
    print_lines,
    print_resource_table,
    print_rows,
    run_time,
    state_name,
    text_rows,
)
from trainworks.kinds.custom_jobs.client import JobStatus
from trainworks.kinds.custom_jobs.wire import CustomJob, WorkerPoolSpec


def _listed(values: list[str]) -> str | None:
    return json.dumps(values) if values else None


def _describe_pool(index: int, pool: WorkerPoolSpec) -> str:
    """A worker pool as `pool N: replicas x machine` plus indented lines for its image or package."""
    if not pool.model_fields_set:
        return f"pool {index}: (skipped)"
    machine = machine_text(pool.machine_spec, times="x")
    container, package = pool.container_spec, pool.python_package_spec
    lines: list[tuple[str, str | None]] = []  # (label, value); None: no line
    if has_fields(container):
        lines = [
            ("image", container.image_uri),
            ("command", _listed(container.command)),
            ("args", _listed(container.args)),
        ]
    elif has_fields(package):
        lines = [
            ("executor", package.executor_image_uri),
            ("module", package.python_module),
            ("packages", ", ".join(package.package_uris) or None),
            ("args", _listed(package.args)),
        ]
    text = f"pool {index}: {pool.replica_count} x {machine}"
    return text + "".join(f"\n      {label:<8} {value}" for label, value in lines if value is not None)


def _status_rows(status: JobStatus | None) -> list[tuple[str, str]]:
    """Scheduling and restarts, from the server's status extension."""
    from rich.markup import escape

    if not status:
        return []
    rows: list[tuple[str, str]] = []
    waiting = status.get("waitingReason")
    if waiting:
        rows.append(("Waiting", f"[yellow]{escape(waiting)}[/yellow]"))
    rows += text_rows(("Zone", status.get("zone", "")))
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
            text += f"; billed to {cost.get('billedTo')}"
        rows.append(("Cost", escape(text)))
        for name, used in sorted((cost.get("acceleratorHours") or {}).items()):
            rows.append(("  accelerators", escape(f"{float(used):,.4f} h of {name}")))
    return rows


def print_job_summary(job: CustomJob, status: JobStatus | None = None) -> None:
    """One job as aligned `Label: value` lines, then its worker pools."""
    out = console()
    rows = job_rows(job, _status_rows(status))
    spec = job.job_spec
    if spec is not None:
        if spec.scheduling is not None and spec.scheduling.timeout is not None:
            rows.append(("Timeout", duration_text(spec.scheduling.timeout)))
        output = spec.base_output_directory
        rows += text_rows(
            ("Output dir", output.output_uri_prefix if output is not None else ""),
            ("Service account", spec.service_account),
            ("Network", spec.network),
        )
    print_rows(rows, out)
    pools = spec.worker_pool_specs if spec is not None else []
    if pools:
        print_lines("Worker pools", [_describe_pool(i, pool) for i, pool in enumerate(pools)], out)


def print_job_table(jobs: list[CustomJob]) -> None:
    """Jobs as a table (ID, display name, state, create time, run time), like `gcloud ... list`."""
    run = (Column("RUN_TIME"), lambda job: run_time(job.start_time, job.end_time))
    print_resource_table(jobs, "CUSTOM_JOB_ID", JOB_STATE_STYLE, [CREATE_TIME, run], state_name)


__all__ = ["print_job_summary", "print_job_table"]
