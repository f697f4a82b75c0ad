"""`trainworks clusters`: create and manage training clusters (v1beta1 modelDevelopmentClusters, real Slurm
clusters on the server's host).

There is no gcloud command for them: `create` and `update` send a --config file holding the resource exactly
as the REST API takes it (snake_case or camelCase). Every change is a long-running operation that create,
update and delete wait for unless `--async`. The common options, client and error handling are in
`kernel.cli`.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml

from trainworks.kernel import cli
from trainworks.kernel.cli import Options, command
from trainworks.kernel.flags import read_config_mapping
from trainworks.kernel.names import NameSpec, parse_name
from trainworks.kernel.render import (
    CREATE_TIME,
    Column,
    console,
    enum_text,
    error_text,
    labels_text,
    machine_text,
    print_lines,
    print_resource_table,
    print_rows,
    print_status,
    resource_id,
    styled,
    table,
    text_rows,
    time_text,
)
from trainworks.kinds.clusters.client import ClustersClient
from trainworks.kinds.clusters.wire import (
    ClusterNetwork,
    ClusterStatus,
    ModelDevelopmentCluster,
    NodePool,
    NodeState,
    SlurmPartition,
    SlurmSpec,
)

app = cli.group(
    "clusters",
    "Create and manage training clusters (v1beta1 modelDevelopmentClusters, run as Slurm clusters).",
)

COLLECTION = "modelDevelopmentClusters"
KIND = "ModelDevelopmentCluster"
CLUSTERS = NameSpec(COLLECTION, "CLUSTER_ID", KIND, "cluster", KIND)

ClusterArg = Annotated[str, cli.name_argument(CLUSTERS)]
ConfigOpt = Annotated[
    Path,
    typer.Option(
        "--config",
        metavar="FILE",
        help="YAML or JSON file with the ModelDevelopmentCluster, snake_case or camelCase, as the REST API "
        "takes it. Output-only fields (name, clusterStatus, times...) are dropped, so the output of "
        "`describe --format yaml` can be edited and sent back.",
    ),
]


class UpdateMode(StrEnum):
    USER_AND_SERVICE = "USER_AND_SERVICE"
    USER_ONLY = "USER_ONLY"


# ====================================================================== config files and names (no network)
#: Map fields of the resource whose values are strings (labels, and the Slurm `config` maps of the cluster,
#: partitions and node sets). YAML would read `1000` as a number and `NO` as false there.
STRING_MAP_KEYS = frozenset({"labels", "config"})

#: Top-level output-only fields, in both JSON spellings.
OUTPUT_ONLY = (
    "@type",
    "name",
    "clusterStatus",
    "cluster_status",
    "clusterEvents",
    "cluster_events",
    "runtime",
    "createTime",
    "create_time",
    "updateTime",
    "update_time",
    "startTime",
    "start_time",
)
_POOL_OUTPUT_ONLY = ("effectiveFlexStartMaxDuration", "effective_flex_start_max_duration")
_STR_TAG = "tag:yaml.org,2002:str"


def _keep_map_values_as_text(node: yaml.Node) -> None:
    """Tag the scalar keys and values of every string map as str, so they keep the text as written."""
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _keep_map_values_as_text(item)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            is_string_map = isinstance(key, yaml.ScalarNode) and key.value in STRING_MAP_KEYS
            if is_string_map and isinstance(value, yaml.MappingNode):
                for map_key, map_value in value.value:
                    for scalar in (map_key, map_value):
                        if isinstance(scalar, yaml.ScalarNode):
                            scalar.tag = _STR_TAG
            else:
                _keep_map_values_as_text(value)


class _ConfigLoader(yaml.SafeLoader):
    def construct_document(self, node: yaml.Node) -> Any:
        _keep_map_values_as_text(node)
        return super().construct_document(node)


def load_cluster_config(path: Path) -> tuple[dict[str, Any], list[str]]:
    """Read a --config file (YAML or JSON) holding a ModelDevelopmentCluster.

    Returns the body to send (keys as written; values of string maps as text) and the output-only fields
    that were dropped from it."""
    data = read_config_mapping(path, f"a mapping (a {KIND})", _ConfigLoader)
    dropped = [key for key in OUTPUT_ONLY if key in data]
    body = {k: v for k, v in data.items() if k not in OUTPUT_ONLY}
    for key in ("nodePools", "node_pools"):
        for i, pool in enumerate(body.get(key) or []):
            if isinstance(pool, dict):
                for field in _POOL_OUTPUT_ONLY:
                    if pool.pop(field, None) is not None:
                        dropped.append(f"{key}[{i}].{field}")
    return body, dropped


def cluster_name(value: str, project: str, region: str | None) -> str:
    """A full cluster name, from a name or a bare ID (expanded with --project and --region)."""
    return parse_name(CLUSTERS, value, project, region)


def _get(message: dict[str, Any], camel: str) -> Any:
    """A field of a config file in either spelling (the server's answers are always camelCase)."""
    if camel in message:
        return message[camel]
    return message.get("".join("_" + c.lower() if c.isupper() else c for c in camel))


def pools_without_image(body: dict[str, Any]) -> list[str]:
    """IDs of the node pools in `body` that do not pin a node image."""
    pools = _get(body, "nodePools") or []
    return [
        str(p.get("id", i)) for i, p in enumerate(pools) if isinstance(p, dict) and not _get(p, "nodeImage")
    ]


# ====================================================================== human output
_STATE_STYLE = {
    "RUNNING": "green",
    "ERROR": "red",
    "STOPPING": "yellow",
    "PROVISIONING": "cyan",
    "PREPARING": "cyan",
    "UPDATING": "cyan",
}
NEVER_UPDATED_IMAGE = "(default, never updated)"


def _slurm(cluster: ModelDevelopmentCluster) -> SlurmSpec:
    spec = cluster.orchestrator_spec
    return spec.slurm_spec if spec is not None and spec.slurm_spec is not None else SlurmSpec()


def _status(cluster: ModelDevelopmentCluster) -> ClusterStatus:
    return cluster.cluster_status or ClusterStatus()


def _state(cluster: ModelDevelopmentCluster) -> str:
    return enum_text(_status(cluster).state)


def _pairs(mapping: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in mapping.items())


def _min_nodes(pool: NodePool) -> int:
    return pool.scaling_spec.min_node_count if pool.scaling_spec is not None else 0


def default_partition(cluster: ModelDevelopmentCluster) -> str:
    """The default partition: defaultPartitionId, else the first partition (the field then stays empty)."""
    slurm = _slurm(cluster)
    return slurm.default_partition_id or (slurm.partitions[0].id if slurm.partitions else "")


def scaling_text(pool: NodePool) -> str:
    """`2..2 (static)`, `0..4 (dynamic)` or `1..4`: min>0 nodes are static, the rest Slurm scales."""
    low = _min_nodes(pool)
    high = pool.scaling_spec.max_node_count if pool.scaling_spec is not None else 0
    kind = " (static)" if low == high else " (dynamic)" if low == 0 else ""
    return f"{low}..{high}{kind}"


def node_pool_text(pool: NodePool, login_pool: str) -> str:
    """One node pool of `describe`: ID, machine, scaling, image and the optional settings it has."""
    pool_id = pool.id or "?"
    parts = [
        f"{pool_id}{' [login]' if pool_id == login_pool else ''}: {machine_text(pool.machine_spec)}",
        f"scaling {scaling_text(pool)}",
        f"image {pool.node_image or NEVER_UPDATED_IMAGE}",
        enum_text(pool.provisioning_model),
        f"zone {pool.zone}" if pool.zone else "",
    ]
    return "; ".join(part for part in parts if part)


def partition_text(partition: SlurmPartition, default: str) -> str:
    partition_id = partition.id or "?"
    text = f"{partition_id}{' (default)' if partition_id == default else ''}: "
    text += f"node pools {', '.join(partition.node_pool_ids) or '(none)'}"
    if partition.config:
        text += f"; {_pairs(partition.config)}"
    return text


def partitions_text(cluster: ModelDevelopmentCluster) -> str:
    """Partition IDs for `list`, the default one marked with `*`."""
    default = default_partition(cluster)
    ids = [p.id or "?" for p in _slurm(cluster).partitions]
    return ", ".join(f"{i}*" if i == default else i for i in ids)


def nodes_text(cluster: ModelDevelopmentCluster) -> str:
    """`running/total`: total is the nodes reported, or the static nodes the pools ask for if more."""
    nodes = _status(cluster).nodes_status
    running = sum(1 for n in nodes if n.node_state == NodeState.RUNNING)
    static = sum(_min_nodes(pool) for pool in cluster.node_pools)
    return f"{running}/{max(len(nodes), static)}"


def _summary_rows(cluster: ModelDevelopmentCluster) -> list[tuple[str, str]]:
    """Status, times, labels, network and the Slurm settings of `describe`."""
    from rich.markup import escape

    status, slurm = _status(cluster), _slurm(cluster)
    rows: list[tuple[str, str]] = [
        ("Name", escape(cluster.name)),
        ("Display name", escape(cluster.display_name)),
        ("State", styled(status.state.name, _STATE_STYLE)),
        *text_rows(("Detail", status.detail)),
    ]
    if status.error is not None:
        rows.append(("Error", error_text(status.error)))
    rows.append(("Created", time_text(cluster.create_time)))
    for label, value in (("Started", cluster.start_time), ("Updated", cluster.update_time)):
        if value is not None:
            rows.append((label, time_text(value)))
    network = cluster.network or ClusterNetwork()
    rows += text_rows(
        ("Labels", labels_text(cluster.labels)),
        ("Network", network.network),
        ("Subnetwork", network.subnetwork),
        ("Home directory", slurm.home_directory_storage),
    )
    rows.append(("Slurm config", escape(_pairs(slurm.config)) or "(none)"))
    prolog, epilog = len(slurm.prolog_bash_scripts), len(slurm.epilog_bash_scripts)
    rows.append(("Job scripts", f"{prolog} prolog, {epilog} epilog"))
    return rows


def print_cluster_summary(cluster: ModelDevelopmentCluster, events: int = 10) -> None:
    """A cluster as aligned `Label: value` lines (status, spec), then its nodes and its last `events`."""
    from rich.markup import escape
    from rich.padding import Padding

    out = console()
    slurm = _slurm(cluster)
    print_rows(_summary_rows(cluster), out)

    print_lines(
        "Node pools", [node_pool_text(pool, slurm.login_node_pool_id) for pool in cluster.node_pools], out
    )
    default = default_partition(cluster)
    print_lines("Partitions", [partition_text(partition, default) for partition in slurm.partitions], out)
    if slurm.node_sets:
        node_sets = [
            f"{node_set.node_pool_id or '?'}: {_pairs(node_set.config) or '(no config)'}"
            for node_set in slurm.node_sets
        ]
        print_lines("Node sets", node_sets, out)

    nodes = _status(cluster).nodes_status
    out.print(f"[bold]Nodes ({len(nodes)}):[/bold]")
    if nodes:
        columns = [Column(c) for c in ("INSTANCE_NAME", "POOL", "TYPE", "STATE", "INSTANCE_ID", "CREATED")]
        node_table = table([*columns, Column("DETAIL", fold=True)])
        for node in nodes:
            node_table.add_row(
                escape(node.instance_name),
                escape(node.node_pool_id),
                enum_text(node.node_pool_type).removeprefix("NODE_POOL_TYPE_"),
                styled(enum_text(node.node_state), _STATE_STYLE),
                escape(node.instance_id),
                time_text(node.create_time),
                escape(node.detail),
            )
        out.print(Padding(node_table, (0, 0, 0, 2)))

    all_events = sorted(cluster.cluster_events, key=lambda event: time_text(event.event_time))
    shown = all_events[-events:] if events > 0 else []
    count = f"last {len(shown)} of {len(all_events)}" if len(shown) < len(all_events) else str(len(shown))
    out.print(f"[bold]Events ({count}):[/bold]")
    if shown:
        event_table = table([Column("TIME"), Column("TYPE"), Column("MESSAGE", fold=True)])
        for event in shown:
            event_table.add_row(
                time_text(event.event_time), escape(enum_text(event.event_type)), escape(event.event_message)
            )
        out.print(Padding(event_table, (0, 0, 0, 2)))


def print_cluster_table(clusters: list[ModelDevelopmentCluster]) -> None:
    """Clusters as a table: ID, display name, state, nodes running/total, partitions, create time."""
    from rich.markup import escape

    more = [
        (Column("NODES", right=True), nodes_text),
        (Column("PARTITIONS", fold=True), lambda cluster: escape(partitions_text(cluster))),
        CREATE_TIME,
    ]
    print_resource_table(clusters, "CLUSTER_ID", _STATE_STYLE, more, _state)


# ====================================================================== operations
TARGET = cli.OperationTarget(
    client_type=ClustersClient,
    model=ModelDevelopmentCluster,
    kind=KIND,
    command="clusters",
    summary=print_cluster_summary,
    # location-level operations: their parent is the server's (with the project number)
    name_from_operation=lambda op_name, name: (
        f"{op_name.rsplit('/operations/', 1)[0]}/{COLLECTION}/{resource_id(name)}"
    ),
)


def _report_dropped(dropped: list[str]) -> None:
    if dropped:
        print_status(f"Ignoring output-only fields of the config file: {', '.join(dropped)}.")


# ====================================================================== commands
@command(app)
def create(
    cluster_id: Annotated[
        str,
        typer.Argument(
            metavar="CLUSTER_ID",
            help="ID of the new cluster: a lowercase letter, then at most 9 lowercase letters or digits.",
        ),
    ],
    config: ConfigOpt,
    async_: cli.AsyncOpt = False,
    timeout: cli.OperationTimeoutOpt = 600.0,
    *,
    opts: Options,
) -> None:
    """Create a training cluster from a --config file and wait until it is RUNNING (unless --async)."""
    parent = opts.parent()
    body, dropped = load_cluster_config(config)
    _report_dropped(dropped)
    name = f"{parent}/{COLLECTION}/{cluster_id}"
    TARGET.run(
        opts, "create", name, async_, timeout, lambda client: client.create_cluster(parent, cluster_id, body)
    )


@command(app)
def describe(
    cluster: ClusterArg,
    events: Annotated[int, typer.Option("--events", min=0, help="How many of the last events to show.")] = 10,
    *,
    opts: Options,
) -> None:
    """Show a training cluster: status, node pools, partitions, nodes and last events (json/yaml: raw)."""
    name = opts.name(CLUSTERS, cluster)
    opts.show(
        opts.call(ClustersClient, lambda client: client.get_cluster(name)),
        lambda found: print_cluster_summary(found, events),
    )


COMMANDS = cli.ResourceCommands(app, CLUSTERS, ClusterArg, ClustersClient)
COMMANDS.list_(
    "List every training cluster of a project and region (all pages), in ID order.",
    cli.ListFlags(page_size="Clusters per request (0: server default)."),
    lambda client, query: client.list_clusters(query.parent, query.size),
    print_cluster_table,
)


@command(app)
def update(
    cluster: ClusterArg,
    config: ConfigOpt,
    update_mask: Annotated[
        list[str] | None,
        typer.Option(
            "--update-mask",
            metavar="PATH,...",
            help="Fields to change, e.g. node_pools,orchestrator_spec.slurm_spec.partitions. A field named "
            "but left out of FILE is cleared. Without a mask the whole FILE is compared with the cluster.",
        ),
    ] = None,
    update_mode: Annotated[
        UpdateMode,
        typer.Option(
            "--update-mode",
            case_sensitive=False,
            help="USER_ONLY leaves service-managed scripts and node images alone (no nodes recreated); "
            "USER_AND_SERVICE also refreshes them.",
        ),
    ] = UpdateMode.USER_AND_SERVICE,
    async_: cli.AsyncOpt = False,
    timeout: cli.OperationTimeoutOpt = 600.0,
    *,
    opts: Options,
) -> None:
    """Update a RUNNING training cluster; FILE is the full cluster, repeated fields and maps are replaced."""
    name = opts.name(CLUSTERS, cluster)
    body, dropped = load_cluster_config(config)
    _report_dropped(dropped)
    mask = cli.comma_separated(update_mask)  # paths as written: the server takes either spelling
    mode = UpdateMode(update_mode).value
    print_status(f"Update mask: {','.join(mask) if mask else '(none)'}")
    print_status(f"Update mode: {mode}")
    if not mask:
        # The documented behaviour: the server diffs the whole payload against the cluster.
        print_status(
            "WARNING: no --update-mask: the whole config file is compared with the cluster, so every "
            "setting left out of it is cleared."
        )
    unpinned = pools_without_image(body)
    if mode == UpdateMode.USER_AND_SERVICE and unpinned:
        print_status(
            f"NOTE: USER_AND_SERVICE moves node pools without node_image ({', '.join(unpinned)}) to the "
            "newest default image, recreating their nodes when it changed; USER_ONLY keeps their image."
        )
    TARGET.run(
        opts, "update", name, async_, timeout, lambda client: client.update_cluster(name, body, mask, mode)
    )


COMMANDS.operation(
    "delete", "Delete a training cluster and stop its Slurm daemons.", TARGET, ClustersClient.delete_cluster
)


__all__ = [
    "CLUSTERS",
    "NEVER_UPDATED_IMAGE",
    "UpdateMode",
    "app",
    "cluster_name",
    "default_partition",
    "load_cluster_config",
    "nodes_text",
    "partitions_text",
    "pools_without_image",
    "print_cluster_summary",
    "print_cluster_table",
]
