"""`trainworks costs`: machine-hours and approximate cost of jobs, or of persistent resources."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any

import typer

from trainworks.cli.common import (
    DEFAULT_ENDPOINT,
    ApiKeyOpt,
    EndpointOpt,
    FormatOpt,
    ProjectOpt,
    RegionOpt,
    handle_errors,
    make_client,
    require_region,
)
from trainworks.cli.render import OutputFormat, _console, _styled_state, print_data, print_status


class CostsBy(StrEnum):
    job = "job"
    resource = "resource"


def _hours(value: Any) -> str:
    return f"{float(value or 0):,.4f}"


def _usd(value: Any) -> str:
    return f"${float(value or 0):,.4f}"


def _accelerators(hours: dict[str, Any] | None) -> str:
    return ", ".join(f"{name} {_hours(value)}" for name, value in sorted((hours or {}).items()))


def print_costs_table(report: dict[str, Any]) -> None:
    """Rows as a table (ID, display name, state, spot, machine-hours, cost) with a TOTAL line."""
    from rich.markup import escape
    from rich.table import Table

    console = _console()
    by_resource = report.get("by") == "resource"
    rows: list[dict[str, Any]] = report.get("rows") or []
    totals: dict[str, Any] = report.get("totals") or {}
    if not rows:
        what = "persistent resources" if by_resource else "jobs"
        console.print(f"Listed 0 {what}.")
        return
    table = Table(box=None, header_style="bold", pad_edge=False)
    table.add_column("PERSISTENT_RESOURCE_ID" if by_resource else "CUSTOM_JOB_ID", no_wrap=True)
    table.add_column("DISPLAY_NAME", overflow="fold")
    table.add_column("STATE", no_wrap=True)
    table.add_column("SPOT", no_wrap=True)
    table.add_column("MACHINE_HOURS", justify="right", no_wrap=True)
    if by_resource:
        table.add_column("USED_HOURS", justify="right", no_wrap=True)
        table.add_column("JOBS", justify="right", no_wrap=True)
    table.add_column("ACCELERATOR_HOURS", overflow="fold")
    table.add_column("COST_USD", justify="right", no_wrap=True)
    table.add_column("ON_DEMAND_USD", justify="right", no_wrap=True)
    for row in rows:
        cells = [
            str(row.get("name", "")).rsplit("/", 1)[-1],
            escape(str(row.get("displayName", ""))),
            _styled_state(str(row.get("state", ""))),
            "yes" if row.get("spot") else "",
            _hours(row.get("machineHours")),
        ]
        if by_resource:
            cells += [_hours(row.get("usedMachineHours")), str(row.get("jobs", 0))]
        cost = _usd(row.get("costUsd"))
        if row.get("billedTo"):
            cost += "*"
        cells += [_accelerators(row.get("acceleratorHours")), cost, _usd(row.get("onDemandEquivalentUsd"))]
        table.add_row(*cells)
    table.add_section()
    total = [
        "[bold]TOTAL[/bold]",
        f"{totals.get('count', len(rows))} row(s)",
        "",
        "",
        _hours(totals.get("machineHours")),
    ]
    if by_resource:
        total += ["", ""]
    total += [
        _accelerators(totals.get("acceleratorHours")),
        f"[bold]{_usd(totals.get('costUsd'))}[/bold]",
        _usd(totals.get("onDemandEquivalentUsd")),
    ]
    table.add_row(*total)
    console.print(table)
    if any(row.get("billedTo") for row in rows):
        print_status("* runs on a persistent resource, which is billed instead (see --by resource).")
    print_status(
        f"Costs in {report.get('currency', 'USD')}: {report.get('pricing', 'approximate list prices')}"
    )


@handle_errors
def costs(
    by: Annotated[
        CostsBy,
        typer.Option("--by", case_sensitive=False, help="One row per job, or per persistent resource."),
    ] = CostsBy.job,
    filter: Annotated[
        str,
        typer.Option("--filter", help='AIP-160 filter, e.g. state="JOB_STATE_SUCCEEDED" or labels.team=ml.'),
    ] = "",
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Machine-hours and approximate cost (Spot price for SPOT jobs) of a region's jobs or resources."""
    location = require_region(region)
    with make_client(endpoint, api_key) as client:
        report = client.get_costs(f"projects/{project}/locations/{location}", by=by.value, filter=filter)
    if format != OutputFormat.human:
        print_data(report, format)
    else:
        print_costs_table(report)
