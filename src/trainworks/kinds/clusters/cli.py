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

from trainworks.kernel.cli import (
    AsyncOpt,
    ListFlags,
    OperationTarget,
    OperationTimeoutOpt,
    Options,
    ResourceCommands,
    command,
    group,
    name_argument,
)
from trainworks.kernel.flags import read_config_mapping
from trainworks.kernel.names import NameSpec, parse_name
from trainworks.kernel.render import (
    CREATE_TIME,
    Column,
    console,
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
)
from trainworks.kinds.clusters.client import ClustersClient

app = group(
    "clusters",
    "Create and manage training clusters (v1beta1 modelDevelopmentClusters, run as Slurm clusters).",
)

COLLECTION = "modelDevelopmentClusters"
KIND = "ModelDevelopmentCluster"
CLUSTERS = NameSpec(COLLECTION, "CLUSTER_ID", KIND, "cluster", KIND)

ClusterArg = Annotated[str, name_argument(CLUSTERS)]
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


def parse_update_mask(values: list[str] | None) -> list[str]:
    """Every --update-mask value, split on commas (paths as written: the server takes either spelling)."""
    return [path.strip() for value in values or [] for path in value.split(",") if path.strip()]


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


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _slurm(cluster: dict[str, Any]) -> dict[str, Any]:
    return (cluster.get("orchestratorSpec") or {}).get("slurmSpec") or {}


def _state(cluster: dict[str, Any]) -> str:
    state: str = (cluster.get("clusterStatus") or {}).get("state", "")
    return state


def _pairs(mapping: dict[str, Any] | None) -> str:
    return ", ".join(f"{k}={v}" for k, v in (mapping or {}).items())


def default_partition(cluster: dict[str, Any]) -> str:
    """The default partition: defaultPartitionId, else the first partition (the field then stays empty)."""
    slurm = _slurm(cluster)
    partitions = slurm.get("partitions") or []
    return str(slurm.get("defaultPartitionId") or (partitions[0].get("id", "") if partitions else ""))


def scaling_text(pool: dict[str, Any]) -> str:
    """`2..2 (static)`, `0..4 (dynamic)` or `1..4`: min>0 nodes are static, the rest Slurm scales."""
    scaling = pool.get("scalingSpec") or {}
    low, high = _int(scaling.get("minNodeCount")), _int(scaling.get("maxNodeCount"))
    kind = " (static)" if low == high else " (dynamic)" if low == 0 else ""
    return f"{low}..{high}{kind}"


def node_pool_text(pool: dict[str, Any], login_pool: str) -> str:
    """One node pool of `describe`: ID, machine, scaling, image and the optional settings it has."""
    pool_id = str(pool.get("id", "?"))
    machine = machine_text(pool.get("machineSpec") or {})
    text = f"{pool_id}{' [login]' if pool_id == login_pool else ''}: {machine}"
    text += f"; scaling {scaling_text(pool)}; image {pool.get('nodeImage') or NEVER_UPDATED_IMAGE}"
    if pool.get("provisioningModel"):
        text += f"; {pool['provisioningModel']}"
    if pool.get("zone"):
        text += f"; zone {pool['zone']}"
    return text


def partition_text(partition: dict[str, Any], default: str) -> str:
    partition_id = str(partition.get("id", "?"))
    text = f"{partition_id}{' (default)' if partition_id == default else ''}: "
    text += f"node pools {', '.join(partition.get('nodePoolIds') or []) or '(none)'}"
    if partition.get("config"):
        text += f"; {_pairs(partition['config'])}"
    return text


def partitions_text(cluster: dict[str, Any]) -> str:
    """Partition IDs for `list`, the default one marked with `*`."""
    default = default_partition(cluster)
    ids = [str(p.get("id", "?")) for p in _slurm(cluster).get("partitions") or []]
    return ", ".join(f"{i}*" if i == default else i for i in ids)


def nodes_text(cluster: dict[str, Any]) -> str:
    """`running/total`: total is the nodes reported, or the static nodes the pools ask for if more."""
    nodes = (cluster.get("clusterStatus") or {}).get("nodesStatus") or []
    running = sum(1 for n in nodes if n.get("nodeState") == "RUNNING")
    static = sum(
        _int((p.get("scalingSpec") or {}).get("minNodeCount")) for p in cluster.get("nodePools") or []
    )
    return f"{running}/{max(len(nodes), static)}"


def print_cluster_summary(cluster: dict[str, Any], events: int = 10) -> None:
    """A cluster as aligned `Label: value` lines (status, spec), then its nodes and its last `events`."""
    from rich.markup import escape
    from rich.padding import Padding

    out = console()
    status = cluster.get("clusterStatus") or {}
    slurm = _slurm(cluster)
    rows: list[tuple[str, str]] = [
        ("Name", escape(cluster.get("name", ""))),
        ("Display name", escape(cluster.get("displayName", ""))),
        ("State", styled(status.get("state", "STATE_UNSPECIFIED"), _STATE_STYLE)),
    ]
    if status.get("detail"):
        rows.append(("Detail", escape(status["detail"])))
    if status.get("error"):
        rows.append(("Error", error_text(status["error"])))
    rows.append(("Created", cluster.get("createTime", "")))
    for label, key in (("Started", "startTime"), ("Updated", "updateTime")):
        if cluster.get(key):
            rows.append((label, cluster[key]))
    if cluster.get("labels"):
        rows.append(("Labels", escape(labels_text(cluster["labels"]))))
    network = cluster.get("network") or {}
    for label, key in (("Network", "network"), ("Subnetwork", "subnetwork")):
        if network.get(key):
            rows.append((label, escape(network[key])))
    if slurm.get("homeDirectoryStorage"):
        rows.append(("Home directory", escape(slurm["homeDirectoryStorage"])))
    rows.append(("Slurm config", escape(_pairs(slurm.get("config"))) or "(none)"))
    prolog, epilog = len(slurm.get("prologBashScripts") or []), len(slurm.get("epilogBashScripts") or [])
    rows.append(("Job scripts", f"{prolog} prolog, {epilog} epilog"))
    print_rows(rows, out)

    login_pool = str(slurm.get("loginNodePoolId", ""))
    print_lines(
        "Node pools", [node_pool_text(pool, login_pool) for pool in cluster.get("nodePools") or []], out
    )
    default = default_partition(cluster)
    partitions = [partition_text(partition, default) for partition in slurm.get("partitions") or []]
    print_lines("Partitions", partitions, out)
    if slurm.get("nodeSets"):
        node_sets = [
            f"{node_set.get('nodePoolId', '?')}: {_pairs(node_set.get('config')) or '(no config)'}"
            for node_set in slurm["nodeSets"]
        ]
        print_lines("Node sets", node_sets, out)

    nodes = status.get("nodesStatus") or []
    out.print(f"[bold]Nodes ({len(nodes)}):[/bold]")
    if nodes:
        columns = [Column(c) for c in ("INSTANCE_NAME", "POOL", "TYPE", "STATE", "INSTANCE_ID", "CREATED")]
        node_table = table([*columns, Column("DETAIL", fold=True)])
        for node in nodes:
            node_table.add_row(
                escape(str(node.get("instanceName", ""))),
                escape(str(node.get("nodePoolId", ""))),
                str(node.get("nodePoolType", "")).removeprefix("NODE_POOL_TYPE_"),
                styled(str(node.get("nodeState", "")), _STATE_STYLE),
                escape(str(node.get("instanceId", ""))),
                str(node.get("createTime", "")),
                escape(str(node.get("detail", ""))),
            )
        out.print(Padding(node_table, (0, 0, 0, 2)))

    all_events = sorted(cluster.get("clusterEvents") or [], key=lambda e: str(e.get("eventTime", "")))
    shown = all_events[-events:] if events > 0 else []
    count = f"last {len(shown)} of {len(all_events)}" if len(shown) < len(all_events) else str(len(shown))
    out.print(f"[bold]Events ({count}):[/bold]")
    if shown:
        event_table = table([Column("TIME"), Column("TYPE"), Column("MESSAGE", fold=True)])
        for event in shown:
            event_table.add_row(
                str(event.get("eventTime", "")),
                escape(str(event.get("eventType", ""))),
                escape(str(event.get("eventMessage", ""))),
            )
        out.print(Padding(event_table, (0, 0, 0, 2)))


def print_cluster_table(clusters: list[dict[str, Any]]) -> None:
    """Clusters as a table: ID, display name, state, nodes running/total, partitions, create time."""
    from rich.markup import escape

    more = [
        (Column("NODES", right=True), nodes_text),
        (Column("PARTITIONS", fold=True), lambda cluster: escape(partitions_text(cluster))),
        CREATE_TIME,
    ]
    print_resource_table(clusters, "CLUSTER_ID", _STATE_STYLE, more, _state)


# ====================================================================== operations
TARGET = OperationTarget(
    client_type=ClustersClient,
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
    async_: AsyncOpt = False,
    timeout: OperationTimeoutOpt = 600.0,
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


COMMANDS = ResourceCommands(app, CLUSTERS, ClusterArg, ClustersClient)
COMMANDS.list_(
    "List every training cluster of a project and region (all pages), in ID order.",
    ListFlags(page_size="Clusters per request (0: server default)."),
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
    async_: AsyncOpt = False,
    timeout: OperationTimeoutOpt = 600.0,
    *,
    opts: Options,
) -> None:
    """Update a RUNNING training cluster; FILE is the full cluster, repeated fields and maps are replaced."""
    name = opts.name(CLUSTERS, cluster)
    body, dropped = load_cluster_config(config)
    _report_dropped(dropped)
    mask = parse_update_mask(update_mask)
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
    "parse_update_mask",
    "partitions_text",
    "pools_without_image",
    "print_cluster_summary",
    "print_cluster_table",
]
