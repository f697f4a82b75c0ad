"""`trainworks persistent-resources`: create and manage persistent resources, modelled on
`gcloud ai persistent-resources`.

Every change is a long-running operation: create, update, reboot and delete wait for it unless `--async`.
The shared options, client and error handling are in `common`, the human output in `render`.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from trainworks.cli.common import (
    DEFAULT_ENDPOINT,
    ApiKeyOpt,
    EndpointOpt,
    FormatOpt,
    OperationTarget,
    ProjectOpt,
    RegionOpt,
    handle_errors,
    make_client,
    report_operation,
    require_region,
)
from trainworks.cli.render import (
    OutputFormat,
    print_data,
    print_persistent_resource_summary,
    print_persistent_resource_table,
)
from trainworks.kinds.custom_jobs.pool_specs import FlagError, parse_dict

app = typer.Typer(
    name="persistent-resources",
    no_args_is_help=True,
    add_completion=False,
    help="Create and manage persistent resources (like `gcloud ai persistent-resources`).",
)

ResourceArg = Annotated[
    str,
    typer.Argument(
        metavar="PERSISTENT_RESOURCE",
        help="Resource ID, or full name projects/P/locations/L/persistentResources/ID.",
    ),
]
AsyncOpt = Annotated[
    bool, typer.Option("--async", help="Return at once with the operation instead of waiting for it.")
]
TimeoutOpt = Annotated[
    float, typer.Option("--timeout", min=0.0, help="Seconds to wait for the operation (exit 1 after).")
]

_POOL_FLAG = "--resource-pool-spec"

#: Keys of --resource-pool-spec, as gcloud's persistent-resources create has them.
RESOURCE_POOL_SPEC_KEYS: dict[str, type] = {
    "machine-type": str,
    "replica-count": int,
    "min-replica-count": int,
    "max-replica-count": int,
    "accelerator-type": str,
    "accelerator-count": int,
    "disk-type": str,
    "disk-size": int,
}


# ====================================================================== flag parsing (no network)
def resource_name(value: str, project: str, region: str | None) -> str:
    """A full PersistentResource name, from a name or a bare ID (expanded with --project and --region)."""
    value = value.strip().strip("/")
    if value.startswith("projects/"):
        parts = value.split("/")
        if len(parts) != 6 or parts[2] != "locations" or parts[4] != "persistentResources":
            raise FlagError(
                "PERSISTENT_RESOURCE",
                f"[{value}] is not a PersistentResource name (projects/P/locations/L/persistentResources/ID)",
            )
        return value
    if "/" in value or not value:
        raise FlagError("PERSISTENT_RESOURCE", f"[{value}] is neither a resource ID nor a full resource name")
    if not region:
        raise FlagError("--region", f"a region is needed to expand the resource ID [{value}]; pass --region")
    return f"projects/{project}/locations/{region}/persistentResources/{value}"


def parse_resource_pool_spec(value: str) -> dict[str, Any]:
    """One `--resource-pool-spec` value -> a ResourcePool (camelCase JSON).

    Only the syntax is checked here (keys, integers, machine-type present); the server checks the values
    and names the field of each violation.
    """
    fields = parse_dict(value.strip(), _POOL_FLAG, RESOURCE_POOL_SPEC_KEYS)
    if not fields.get("machine-type"):
        raise FlagError(_POOL_FLAG, "key [machine-type] required in dict arg but not provided")
    if "accelerator-count" in fields and "accelerator-type" not in fields:
        raise FlagError(_POOL_FLAG, "key [accelerator-type] required as [accelerator-count] is specified")
    machine: dict[str, Any] = {"machineType": fields["machine-type"]}
    if fields.get("accelerator-type"):
        machine["acceleratorType"] = fields["accelerator-type"]
        machine["acceleratorCount"] = fields.get("accelerator-count", 1)
    pool: dict[str, Any] = {"machineSpec": machine}
    if "replica-count" in fields:
        pool["replicaCount"] = str(fields["replica-count"])
    if "disk-type" in fields or "disk-size" in fields:
        disk: dict[str, Any] = {}
        if fields.get("disk-type"):
            disk["bootDiskType"] = fields["disk-type"]
        if "disk-size" in fields:
            disk["bootDiskSizeGb"] = fields["disk-size"]
        pool["diskSpec"] = disk
    if "min-replica-count" in fields or "max-replica-count" in fields:
        scaling: dict[str, Any] = {}
        if "min-replica-count" in fields:
            scaling["minReplicaCount"] = str(fields["min-replica-count"])
        if "max-replica-count" in fields:
            scaling["maxReplicaCount"] = str(fields["max-replica-count"])
        pool["autoscalingSpec"] = scaling
    return pool


def parse_labels(values: list[str] | None) -> dict[str, str] | None:
    """Every --labels flag merged; None when there is none (an empty value gives {})."""
    if values is None:
        return None
    labels: dict[str, str] = {}
    for item in values:
        labels.update(parse_dict(item, "--labels"))
    return labels


def parse_replica_counts(values: list[str] | None) -> list[dict[str, Any]]:
    """`--replica-count POOL_ID=N` (repeatable, or comma separated) -> `[{id, replicaCount}]`."""
    pools: dict[str, dict[str, Any]] = {}
    for item in values or []:
        for pool_id, count in parse_dict(item, "--replica-count").items():
            try:
                number = int(count)
            except ValueError:
                raise FlagError(
                    "--replica-count", f"pool [{pool_id}] needs an integer replica count, got [{count}]"
                ) from None
            if pool_id in pools:
                raise FlagError("--replica-count", f"pool [{pool_id}] is given more than once")
            pools[pool_id] = {"id": pool_id, "replicaCount": str(number)}
    return list(pools.values())


def build_update(
    display_name: str | None, labels: list[str] | None, replica_counts: list[str] | None
) -> tuple[dict[str, Any], list[str]]:
    """The PATCH body and its update mask, with one path per flag given."""
    body: dict[str, Any] = {}
    mask: list[str] = []
    if display_name is not None:
        body["displayName"] = display_name
        mask.append("display_name")
    parsed_labels = parse_labels(labels)
    if parsed_labels is not None:
        body["labels"] = parsed_labels
        mask.append("labels")
    pools = parse_replica_counts(replica_counts)
    if pools:
        body["resourcePools"] = pools
        mask.append("resource_pools.replica_count")
    if not mask:
        raise FlagError(
            "--display-name, --labels, --replica-count", "nothing to update: give at least one of them"
        )
    return body, mask


# ====================================================================== operations
TARGET = OperationTarget(
    kind="PersistentResource",
    command="persistent-resources",
    summary=lambda resource: print_persistent_resource_summary(resource),
    name_from_operation=lambda op_name, _name: op_name.rsplit("/operations/", 1)[0],
)


# ====================================================================== commands
@app.command()
@handle_errors
def create(
    persistent_resource_id: Annotated[
        str,
        typer.Option(
            "--persistent-resource-id",
            help="ID of the new resource: lowercase letters, digits and hyphens, at most 63 characters.",
        ),
    ],
    resource_pool_spec: Annotated[
        list[str] | None,
        typer.Option(
            _POOL_FLAG,
            metavar="RESOURCE_POOL_SPEC",
            help="Repeatable, one per pool. Keys: machine-type (required), replica-count, accelerator-type, "
            "accelerator-count, disk-type, disk-size, min-replica-count, max-replica-count.",
        ),
    ] = None,
    display_name: Annotated[str | None, typer.Option("--display-name", help="Display name.")] = None,
    labels: Annotated[list[str] | None, typer.Option("--labels", metavar="KEY=VALUE,...")] = None,
    async_: AsyncOpt = False,
    timeout: TimeoutOpt = 600.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Create a persistent resource and wait until it is RUNNING (unless --async)."""
    location = require_region(region)
    if not resource_pool_spec:
        raise FlagError(_POOL_FLAG, "at least one --resource-pool-spec is required")
    body: dict[str, Any] = {"resourcePools": [parse_resource_pool_spec(v) for v in resource_pool_spec]}
    if display_name:
        body["displayName"] = display_name
    parsed_labels = parse_labels(labels)
    if parsed_labels:
        body["labels"] = parsed_labels
    parent = f"projects/{project}/locations/{location}"
    name = f"{parent}/persistentResources/{persistent_resource_id}"
    with make_client(endpoint, api_key) as client:
        op = client.create_persistent_resource(parent, persistent_resource_id, body)
        report_operation(
            client,
            op,
            TARGET,
            action="create",
            done_verb="Created",
            name=name,
            async_=async_,
            timeout=timeout,
            format=format,
            endpoint=endpoint,
        )


@app.command("list")
@handle_errors
def list_(
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Show at most this many resources.")
    ] = None,
    page_size: Annotated[
        int, typer.Option("--page-size", min=0, help="Resources per request (0: server default).")
    ] = 0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """List the persistent resources of a project and region, in ID order."""
    location = require_region(region)
    resources: list[dict[str, Any]] = []
    with make_client(endpoint, api_key) as client:
        size = page_size or (min(limit, 1000) if limit else 0)
        for resource in client.list_persistent_resources(f"projects/{project}/locations/{location}", size):
            resources.append(resource)
            if limit is not None and len(resources) >= limit:
                break
    if format != OutputFormat.human:
        print_data(resources, format)
    else:
        print_persistent_resource_table(resources)


@app.command()
@handle_errors
def describe(
    persistent_resource: ResourceArg,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Show a persistent resource."""
    name = resource_name(persistent_resource, project, region)
    with make_client(endpoint, api_key) as client:
        resource = client.get_persistent_resource(name)
    if format != OutputFormat.human:
        print_data(resource, format)
    else:
        print_persistent_resource_summary(resource)


@app.command()
@handle_errors
def update(
    persistent_resource: ResourceArg,
    display_name: Annotated[str | None, typer.Option("--display-name", help="New display name.")] = None,
    labels: Annotated[
        list[str] | None,
        typer.Option("--labels", metavar="KEY=VALUE,...", help="Replace all labels (--labels= clears them)."),
    ] = None,
    replica_count: Annotated[
        list[str] | None,
        typer.Option(
            "--replica-count",
            metavar="POOL_ID=N",
            help="Repeatable: the new replica count of a resource pool, by its ID.",
        ),
    ] = None,
    async_: AsyncOpt = False,
    timeout: TimeoutOpt = 600.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Update a RUNNING persistent resource; the update mask names the fields of the flags given."""
    name = resource_name(persistent_resource, project, region)
    body, mask = build_update(display_name, labels, replica_count)
    with make_client(endpoint, api_key) as client:
        op = client.update_persistent_resource(name, body, mask)
        report_operation(
            client,
            op,
            TARGET,
            action="update",
            done_verb="Updated",
            name=name,
            async_=async_,
            timeout=timeout,
            format=format,
            endpoint=endpoint,
        )


@app.command()
@handle_errors
def reboot(
    persistent_resource: ResourceArg,
    async_: AsyncOpt = False,
    timeout: TimeoutOpt = 600.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Reboot a persistent resource (RUNNING or ERROR): its jobs are aborted, its interpreters restarted."""
    name = resource_name(persistent_resource, project, region)
    with make_client(endpoint, api_key) as client:
        op = client.reboot_persistent_resource(name)
        report_operation(
            client,
            op,
            TARGET,
            action="reboot",
            done_verb="Rebooted",
            name=name,
            async_=async_,
            timeout=timeout,
            format=format,
            endpoint=endpoint,
        )


@app.command()
@handle_errors
def delete(
    persistent_resource: ResourceArg,
    async_: AsyncOpt = False,
    timeout: TimeoutOpt = 600.0,
    region: RegionOpt = None,
    project: ProjectOpt = "default",
    endpoint: EndpointOpt = DEFAULT_ENDPOINT,
    api_key: ApiKeyOpt = None,
    format: FormatOpt = OutputFormat.human,
) -> None:
    """Delete a persistent resource; the jobs still running on it fail."""
    name = resource_name(persistent_resource, project, region)
    with make_client(endpoint, api_key) as client:
        op = client.delete_persistent_resource(name)
        report_operation(
            client,
            op,
            TARGET,
            action="delete",
            done_verb="Deleted",
            name=name,
            async_=async_,
            timeout=timeout,
            format=format,
            endpoint=endpoint,
        )


__all__ = [
    "RESOURCE_POOL_SPEC_KEYS",
    "app",
    "build_update",
    "parse_labels",
    "parse_replica_counts",
    "parse_resource_pool_spec",
    "resource_name",
]
