"""`trainworks persistent-resources`: create and manage persistent resources, modelled on
`gcloud ai persistent-resources`.

Every change is a long-running operation: create, update, reboot and delete wait for it unless `--async`.
The common options, client and error handling are in `kernel.cli`, the human output in `render`.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from trainworks.kernel import cli
from trainworks.kernel.cli import Options, command
from trainworks.kernel.flags import disk_spec, machine_spec, parse_dict, parse_dicts
from trainworks.kernel.names import FlagError, NameSpec, parse_name
from trainworks.kinds.persistent_resources.client import PersistentResourcesClient
from trainworks.kinds.persistent_resources.render import (
    print_persistent_resource_summary,
    print_persistent_resource_table,
)
from trainworks.kinds.persistent_resources.wire import PersistentResource

app = cli.group(
    "persistent-resources", "Create and manage persistent resources (like `gcloud ai persistent-resources`)."
)

RESOURCES = NameSpec(
    "persistentResources", "PERSISTENT_RESOURCE", "PersistentResource", "resource", "resource"
)
ResourceArg = Annotated[str, cli.name_argument(RESOURCES)]

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
    return parse_name(RESOURCES, value, project, region)


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
    pool: dict[str, Any] = {"machineSpec": machine_spec(fields)}
    if "replica-count" in fields:
        pool["replicaCount"] = str(fields["replica-count"])
    disk = disk_spec(fields)
    if disk is not None:
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
    return None if values is None else parse_dicts(values, "--labels")


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
TARGET = cli.OperationTarget(
    client_type=PersistentResourcesClient,
    model=PersistentResource,
    kind="PersistentResource",
    command="persistent-resources",
    summary=print_persistent_resource_summary,
    name_from_operation=lambda op_name, _name: op_name.rsplit("/operations/", 1)[0],
)


# ====================================================================== commands
@command(app)
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
    labels: cli.LabelsOpt = None,
    async_: cli.AsyncOpt = False,
    timeout: cli.OperationTimeoutOpt = 600.0,
    *,
    opts: Options,
) -> None:
    """Create a persistent resource and wait until it is RUNNING (unless --async)."""
    parent = opts.parent()
    if not resource_pool_spec:
        raise FlagError(_POOL_FLAG, "at least one --resource-pool-spec is required")
    body: dict[str, Any] = {"resourcePools": [parse_resource_pool_spec(v) for v in resource_pool_spec]}
    if display_name:
        body["displayName"] = display_name
    parsed_labels = parse_labels(labels)
    if parsed_labels:
        body["labels"] = parsed_labels
    name = f"{parent}/persistentResources/{persistent_resource_id}"
    TARGET.run(
        opts,
        "create",
        name,
        async_,
        timeout,
        lambda client: client.create_persistent_resource(parent, persistent_resource_id, body),
    )


COMMANDS = cli.ResourceCommands(app, RESOURCES, ResourceArg, PersistentResourcesClient)
COMMANDS.list_(
    "List the persistent resources of a project and region, in ID order.",
    cli.ListFlags(
        limit="Show at most this many resources.", page_size="Resources per request (0: server default)."
    ),
    lambda client, query: client.list_persistent_resources(query.parent, query.size),
    print_persistent_resource_table,
)
COMMANDS.describe(
    "Show a persistent resource.",
    PersistentResourcesClient.get_persistent_resource,
    print_persistent_resource_summary,
)


@command(app)
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
    async_: cli.AsyncOpt = False,
    timeout: cli.OperationTimeoutOpt = 600.0,
    *,
    opts: Options,
) -> None:
    """Update a RUNNING persistent resource; the update mask names the fields of the flags given."""
    name = opts.name(RESOURCES, persistent_resource)
    body, mask = build_update(display_name, labels, replica_count)
    TARGET.run(
        opts,
        "update",
        name,
        async_,
        timeout,
        lambda client: client.update_persistent_resource(name, body, mask),
    )


COMMANDS.operation(
    "reboot",
    "Reboot a persistent resource (RUNNING or ERROR): its jobs are aborted, its interpreters restarted.",
    TARGET,
    PersistentResourcesClient.reboot_persistent_resource,
)
COMMANDS.operation(
    "delete",
    "Delete a persistent resource; the jobs still running on it fail.",
    TARGET,
    PersistentResourcesClient.delete_persistent_resource,
)


__all__ = [
    "RESOURCES",
    "RESOURCE_POOL_SPEC_KEYS",
    "app",
    "build_update",
    "parse_labels",
    "parse_replica_counts",
    "parse_resource_pool_spec",
    "resource_name",
]
