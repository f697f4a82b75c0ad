"""`trainworks admin`: operator tools, such as chaos preemption of SPOT jobs."""

from __future__ import annotations

from typing import Annotated

import typer

from trainworks.cli.common import (
    DEFAULT_ENDPOINT,
    ApiKeyOpt,
    EndpointOpt,
    FormatOpt,
    JobArg,
    ProjectOpt,
    RegionOpt,
    handle_errors,
    job_name,
    make_client,
)
from trainworks.cli.render import OutputFormat, print_data, print_status

app = typer.Typer(name="admin", no_args_is_help=True, add_completion=False, help="Operator tools.")


@app.command()
@handle_errors
def preempt(
    custom_job: JobArg,
    replica: Annotated[
        str | None, typer.Option("--replica", help="Only this replica, e.g. workerpool1-0 (default: all).")
    ] = None,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Preempt a running SPOT job as a Spot VM reclaim would: SIGTERM, the notice period, then a restart."""
    name = job_name(custom_job, project, region)
    with make_client(endpoint, api_key) as client:
        result = client.preempt_custom_job(name, replica)
    if format != OutputFormat.human:
        print_data(result, format)
        return
    print_status(f"Preempted {', '.join(result.get('preempted', []))} of [{name}].")
