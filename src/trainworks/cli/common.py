"""What every custom-jobs command shares: option types, the REST client, error handling and job names."""

from __future__ import annotations

import functools
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

import typer

from trainworks.cli.render import OutputFormat, print_data, print_status
from trainworks.client.rest import ApiError, TrainworksClient, TrainworksConnectionError
from trainworks.kinds.custom_jobs.pool_specs import FlagError

DEFAULT_ENDPOINT = "http://127.0.0.1:8080"

# ====================================================================== common options
EndpointOpt = Annotated[
    str,
    typer.Option("--endpoint", envvar="TRAINWORKS_ENDPOINT", help="Base URL of the Trainworks server."),
]
ProjectOpt = Annotated[
    str, typer.Option("--project", envvar="TRAINWORKS_PROJECT", help="Project ID or number.")
]
RegionOpt = Annotated[
    str | None,
    typer.Option(
        "--region", envvar="TRAINWORKS_REGION", help="Region (location) of the jobs, e.g. us-central1."
    ),
]
ApiKeyOpt = Annotated[
    str | None,
    typer.Option(
        "--api-key", envvar="TRAINWORKS_API_KEY", help="API key or bearer token.", show_default=False
    ),
]
FormatOpt = Annotated[
    OutputFormat,
    typer.Option("--format", case_sensitive=False, help="human (default), or json / yaml for scripts."),
]
JobArg = Annotated[
    str,
    typer.Argument(metavar="CUSTOM_JOB", help="Job ID, or full name projects/P/locations/L/customJobs/ID."),
]


# ====================================================================== errors
F = TypeVar("F", bound=Callable[..., Any])


def handle_errors(func: F) -> F:
    """API, connection and flag errors become a message on stderr and exit 1 (2 for bad flags)."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except FlagError as exc:
            print_status(f"ERROR: {exc}")
            raise typer.Exit(2) from None
        except ApiError as exc:
            print_status(f"ERROR: {exc.status}: {exc.message}")
            for field, description in exc.violations:
                print_status(f"  - {field}: {description}")
            raise typer.Exit(1) from None
        except TrainworksConnectionError as exc:
            print_status(f"ERROR: {exc}")
            raise typer.Exit(1) from None
        except KeyboardInterrupt:
            print_status("Interrupted.")
            raise typer.Exit(130) from None
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly, as the Python docs recommend.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


# ====================================================================== client and names
def make_client(endpoint: str, api_key: str | None) -> TrainworksClient:
    """A REST client for `endpoint` (the default endpoint when it is empty)."""
    return TrainworksClient(endpoint or DEFAULT_ENDPOINT, api_key=api_key)


def endpoint_flag(endpoint: str) -> str:
    """` --endpoint=URL` for the command hints we print; empty for the default endpoint."""
    return "" if endpoint == DEFAULT_ENDPOINT else f" --endpoint={endpoint}"


def require_region(region: str | None) -> str:
    """The --region value; a FlagError when there is none."""
    if not region:
        raise FlagError("--region", "a region is required (or set TRAINWORKS_REGION)")
    return region


def job_name(value: str, project: str, region: str | None) -> str:
    """A full CustomJob name, from a name or a bare job ID (expanded with --project and --region)."""
    value = value.strip().strip("/")
    if value.startswith("projects/"):
        if "/customJobs/" not in value:
            raise FlagError(
                "CUSTOM_JOB", f"[{value}] is not a CustomJob name (projects/P/locations/L/customJobs/ID)"
            )
        return value
    if "/" in value or not value:
        raise FlagError("CUSTOM_JOB", f"[{value}] is neither a job ID nor a full CustomJob name")
    if not region:
        raise FlagError("--region", f"a region is needed to expand the job ID [{value}]; pass --region")
    return f"projects/{project}/locations/{region}/customJobs/{value}"


__all__ = [
    "DEFAULT_ENDPOINT",
    "ApiKeyOpt",
    "EndpointOpt",
    "FormatOpt",
    "JobArg",
    "ProjectOpt",
    "RegionOpt",
    "endpoint_flag",
    "handle_errors",
    "job_name",
    "make_client",
    "require_region",
]


def poll_until_done(
    fetch: Callable[[], dict[str, Any]],
    what: str,
    timeout: float | None,
    poll_interval: float,
    format: Any,
) -> dict[str, Any]:
    """Poll `fetch` (with growing pauses up to `poll_interval`) until the job is in a terminal state.

    On timeout it prints the job (for json/yaml) and the error, and exits 1."""
    from trainworks.cli.render import OutputFormat, print_data, print_status
    from trainworks.client.rest import TERMINAL_STATES

    deadline = None if timeout is None else time.monotonic() + timeout
    pause = 0.1
    job = fetch()
    while job.get("state") not in TERMINAL_STATES:
        if deadline is not None and time.monotonic() >= deadline:
            if format != OutputFormat.human:
                print_data(job, format)
            print_status(f"ERROR: timed out after {timeout:g}s; {what} is {job.get('state')}.")
            raise typer.Exit(1)
        time.sleep(pause if deadline is None else min(pause, max(deadline - time.monotonic(), 0.0)))
        pause = min(pause * 1.5, poll_interval)
        job = fetch()
    return job


@dataclass(frozen=True)
class OperationTarget:
    """What a resource's create/update/delete LRO is about, for `report_operation`."""

    kind: str  # e.g. "PersistentResource"
    command: str  # its CLI group, e.g. "persistent-resources"
    summary: Callable[[dict[str, Any]], None]  # prints the resource an operation returned
    # The resource's full name from the operation's name and the name the user gave.
    name_from_operation: Callable[[str, str], str]


def report_operation(
    client: TrainworksClient,
    op: dict[str, Any],
    target: OperationTarget,
    *,
    action: str,
    done_verb: str,
    name: str,
    async_: bool,
    timeout: float,
    format: OutputFormat,
    endpoint: str,
) -> None:
    """Wait for a create/update/reboot/delete operation (unless --async) and print its outcome.

    json/yaml print the resource when the operation returned one, else the operation. A failed or
    unfinished operation exits 1.
    """
    human = format == OutputFormat.human
    op_name = op.get("name", "")
    if "/operations/" in op_name:  # the server's name of the resource (with the project number)
        name = target.name_from_operation(op_name, name)
    if not async_ and not op.get("done"):
        if human:
            print_status(f"Waiting for operation [{op_name}] to complete...")
        op = client.wait_operation(op_name, timeout)
    error = op.get("error")
    response = op.get("response") or {}
    has_resource = bool(op.get("done") and not error and "name" in response)
    what = f"{target.kind} [{name}]"
    if not human:
        print_data({k: v for k, v in response.items() if k != "@type"} if has_resource else op, format)
    if error:
        print_status(
            f"ERROR: operation [{op_name}] to {action} {what} failed: "
            f"code {error.get('code', 0)}: {error.get('message', '')}"
        )
        for detail in error.get("details") or []:
            for violation in (detail or {}).get("fieldViolations") or []:
                print_status(f"  - {violation.get('field', '')}: {violation.get('description', '')}")
        raise typer.Exit(1)
    if op.get("done"):
        if human:
            print_status(f"{done_verb} {what}.")
            if has_resource:
                target.summary(response)
        return
    hint = f"trainworks {target.command} describe {name}{endpoint_flag(endpoint)}"
    if async_:
        if human:
            print_status(
                f"Operation [{op_name}] to {action} {what} is submitted.\nCheck its state with:\n  {hint}"
            )
        return
    progress = (op.get("metadata") or {}).get("progressMessage")
    print_status(
        f"ERROR: operation [{op_name}] to {action} {what} is not done after {timeout:g}s"
        f"{f' ({progress})' if progress else ''}; it goes on in the background.\n"
        f"Check it with:\n  {hint}"
    )
    raise typer.Exit(1)


# ====================================================================== operations run in the foreground
def operation_done(client: TrainworksClient, op: dict[str, Any], timeout: float) -> dict[str, Any]:
    """The operation once done, or as it stands after `timeout` seconds."""
    return op if op.get("done") else client.wait_operation(op["name"], timeout)


def exit_unless_succeeded(op: dict[str, Any], what: str, timeout: float) -> None:
    """An operation that failed, or is still running after the wait, prints why and exits 1."""
    error = op.get("error")
    if error:
        print_status(f"ERROR: {what} failed: code {error.get('code', 0)}: {error.get('message', '')}")
        raise typer.Exit(1)
    if not op.get("done"):
        print_status(
            f"ERROR: {what} is not done after {timeout:g}s: operation [{op.get('name', '')}] goes on in "
            "the background."
        )
        raise typer.Exit(1)
