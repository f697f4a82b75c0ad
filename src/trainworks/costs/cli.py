"""`trainworks costs`: machine-hours and approximate cost of jobs, or of persistent resources."""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any

import typer

from trainworks.costs.client import CostsClient, CostsReport
from trainworks.jobs.render import JOB_STATE_STYLE
from trainworks.kernel.cli import Options, command
from trainworks.kernel.render import Column, console, print_status, resource_id, styled, table


class CostsBy(StrEnum):
    job = "job"
    resource = "resource"


def _hours(value: Any) -> str:
    return f"{float(value or 0):,.4f}"


def _usd(value: Any) -> str:
    return f"${float(value or 0):,.4f}"


def _accelerators(hours: dict[str, Any] | None) -> str:
    return ", ".join(f"{name} {_hours(value)}" for name, value in sorted((hours or {}).items()))


def print_costs_table(report: CostsReport) -> None:
    """Rows as a table (ID, display name, state, spot, machine-hours, cost) with a TOTAL line."""
    from rich.markup import escape

    out = console()
    by_resource = report.get("by") == "resource"
    rows = report.get("rows") or []
    totals: Mapping[str, Any] = report.get("totals") or {}
    if not rows:
        what = "persistent resources" if by_resource else "jobs"
        out.print(f"Listed 0 {what}.")
        return
    columns = [
        Column("PERSISTENT_RESOURCE_ID" if by_resource else "CUSTOM_JOB_ID"),
        Column("DISPLAY_NAME", fold=True),
        Column("STATE"),
        Column("SPOT"),
        Column("MACHINE_HOURS", right=True),
    ]
    if by_resource:
        columns += [Column("USED_HOURS", right=True), Column("JOBS", right=True)]
    columns += [
        Column("ACCELERATOR_HOURS", fold=True),
        Column("COST_USD", right=True),
        Column("ON_DEMAND_USD", right=True),
    ]
    result = table(columns)
    for row in rows:
        cells = [
            resource_id(str(row.get("name", ""))),
            escape(str(row.get("displayName", ""))),
            styled(str(row.get("state", "")), JOB_STATE_STYLE),
            "yes" if row.get("spot") else "",
            _hours(row.get("machineHours")),
        ]
        if by_resource:
            cells += [_hours(row.get("usedMachineHours")), str(row.get("jobs", 0))]
        cost = _usd(row.get("costUsd"))
        if row.get("billedTo"):
            cost += "*"
        cells += [_accelerators(row.get("acceleratorHours")), cost, _usd(row.get("onDemandEquivalentUsd"))]
        result.add_row(*cells)
    result.add_section()
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
    result.add_row(*total)
    out.print(result)
    if any(row.get("billedTo") for row in rows):
        print_status("* runs on a persistent resource, which is billed instead (see --by resource).")
    print_status(
        f"Costs in {report.get('currency', 'USD')}: {report.get('pricing', 'approximate list prices')}"
    )


@command()
def costs(
    by: Annotated[
        CostsBy,
        typer.Option("--by", case_sensitive=False, help="One row per job, or per persistent resource."),
    ] = CostsBy.job,
    filter: Annotated[
        str,
        typer.Option("--filter", help='AIP-160 filter, e.g. state="JOB_STATE_SUCCEEDED" or labels.team=ml.'),
    ] = "",
    *,
    opts: Options,
) -> None:
    """Machine-hours and approximate cost (Spot price for SPOT jobs) of a region's jobs or resources."""
    parent = opts.parent()
    with opts.client(CostsClient) as client:
        report = client.get_costs(parent, by=by.value, filter=filter)
    opts.show(report, print_costs_table)
