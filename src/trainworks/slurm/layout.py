"""What Slurm cluster a training cluster becomes (pure): its nodes, partitions, slurm.conf settings, scripts.

Compute pools give Slurm nodes named `<cluster>-<pool>-<i>`: the first min_node_count are static (their slurmd
always runs), the rest up to max_node_count are dynamic (powered up by Slurm when jobs need them). Login pools
give login nodes, which run no slurmd. Every node of the cluster is a daemon on this host with its own port in
the cluster's block: slurmctld on the first port, node i on the first + 1 + i.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainworks.catalog.machines import machine_type
from trainworks.slurm.conf import ClusterDef, NodeDef, PartitionDef
from trainworks.slurm.keys import canonical_key, canonical_node_key, canonical_partition_key, legacy_config

PORT_BLOCK = 100  # ports per cluster
MAX_NODES_PER_CLUSTER = PORT_BLOCK - 2
LOGIN = "NODE_POOL_TYPE_LOGIN"
COMPUTE = "NODE_POOL_TYPE_COMPUTE"


@dataclass(frozen=True)
class NodeSlot:
    name: str  # Slurm node name (compute) or instance name (login)
    pool_id: str
    pool_type: str  # NODE_POOL_TYPE_LOGIN or NODE_POOL_TYPE_COMPUTE
    index: int
    dynamic: bool
    image: str


@dataclass(frozen=True)
class Layout:
    cluster: ClusterDef
    nodes: tuple[NodeSlot, ...]  # login nodes first, then compute nodes in pool order

    def in_pool(self, pool_id: str) -> list[NodeSlot]:
        return [n for n in self.nodes if n.pool_id == pool_id]


def _slurm_spec(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    return (spec.get("orchestratorSpec") or {}).get("slurmSpec") or {}


def _count(value: Any) -> int:
    return int(value or 0)


def node_count(spec: Mapping[str, Any]) -> int:
    """Compute nodes the cluster can have at most (each one a slurmd on this host)."""
    login = _slurm_spec(spec).get("loginNodePoolId")
    return sum(
        _count((p.get("scalingSpec") or {}).get("maxNodeCount"))
        for p in spec.get("nodePools", [])
        if p.get("id") != login
    )


def _feature(text: str) -> str:
    """A Slurm feature name: letters, digits and underscores."""
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def image_feature(image: str) -> str:
    """The feature naming a node's image (its last path element), so `scontrol show node` tells it."""
    return "image_" + _feature(image.rstrip("/").rsplit("/", 1)[-1])


def global_config(slurm_spec: Mapping[str, Any]) -> dict[str, str]:
    """slurm.conf pairs from `config` (keys made canonical), or from the legacy scheduling/accounting."""
    config = slurm_spec.get("config") or {}
    if config:
        return {canonical_key(k) or k: str(v) for k, v in config.items()}
    return legacy_config(slurm_spec)


def build_layout(
    cluster_id: str,
    base_dir: Path,
    port: int,
    spec: Mapping[str, Any],
    realized: Mapping[str, Any],
    service_scripts: Mapping[str, str],
) -> Layout:
    """The Slurm cluster of a training cluster's spec; `realized["images"]` names each pool's image and
    `service_scripts` the service-managed prolog/epilog bodies of the release it runs."""
    slurm = _slurm_spec(spec)
    login_id = str(slurm.get("loginNodePoolId", ""))
    images: Mapping[str, str] = realized.get("images") or {}
    node_sets = {str(s.get("nodePoolId")): dict(s.get("config") or {}) for s in slurm.get("nodeSets") or []}
    slots: list[NodeSlot] = []
    node_defs: list[NodeDef] = []
    by_pool: dict[str, list[str]] = {}
    for pool in spec.get("nodePools", []):
        pool_id = str(pool.get("id"))
        scaling = pool.get("scalingSpec") or {}
        low, high = _count(scaling.get("minNodeCount")), _count(scaling.get("maxNodeCount"))
        image = str(images.get(pool_id, ""))
        if pool_id == login_id:
            for i in range(max(low, high, 1)):  # validation keeps min = max for the login pool
                slots.append(NodeSlot(f"{cluster_id}-{pool_id}-{i}", pool_id, LOGIN, i, False, image))
            continue
        machine = str((pool.get("machineSpec") or {}).get("machineType", ""))
        info = machine_type(machine)
        cpus = info.vcpus if info else 1
        memory = int(info.memory_gib * 1024) if info else 1024
        extra = {canonical_node_key(k) or k: str(v) for k, v in node_sets.get(pool_id, {}).items()}
        features = (f"pool_{_feature(pool_id)}", _feature(machine), image_feature(image) if image else "")
        for i in range(high):
            name = f"{cluster_id}-{pool_id}-{i}"
            dynamic = i >= low
            slots.append(NodeSlot(name, pool_id, COMPUTE, i, dynamic, image))
            node_defs.append(
                NodeDef(
                    name=name,
                    port=port + 1 + len(node_defs),
                    cpus=cpus,
                    real_memory_mb=memory,
                    features=tuple(f for f in features if f),
                    dynamic=dynamic,
                    extra=extra,
                )
            )
            by_pool.setdefault(pool_id, []).append(name)
    partitions = slurm.get("partitions") or []
    default_id = str(slurm.get("defaultPartitionId") or (partitions[0].get("id") if partitions else ""))
    partition_defs = tuple(
        PartitionDef(
            name=str(p.get("id")),
            nodes=tuple(n for pool_id in p.get("nodePoolIds") or [] for n in by_pool.get(str(pool_id), [])),
            default=str(p.get("id")) == default_id,
            extra={canonical_partition_key(k) or k: str(v) for k, v in (p.get("config") or {}).items()},
        )
        for p in partitions
    )
    cluster = ClusterDef(
        cluster_name=cluster_id,
        base_dir=base_dir,
        controller_port=port,
        nodes=tuple(node_defs),
        partitions=partition_defs,
        config=global_config(slurm),
        prolog_scripts=tuple(
            s for s in (service_scripts.get("prolog", ""), *(slurm.get("prologBashScripts") or [])) if s
        ),
        epilog_scripts=tuple(
            s for s in (service_scripts.get("epilog", ""), *(slurm.get("epilogBashScripts") or [])) if s
        ),
    )
    ordered = sorted(slots, key=lambda s: s.pool_type != LOGIN)
    return Layout(cluster=cluster, nodes=tuple(ordered))
