"""Where this replica stands in its job: rank, world size, role and the cluster, from the environment.

Training code calls :func:`topology` and :func:`shard`; they read the variables Vertex AI sets (and Trainworks
sets the same way, see ``trainworks.contract.environment``), so the same code runs unchanged on both:

* ``CLUSTER_SPEC`` first (set on every replica): ``{"cluster": {"workerpool0": [...], ...},
  "task": {"type": "workerpool1", "index": 0, "trial": "..."}, "job": ...}``;
* else ``TF_CONFIG`` (set by Vertex only for multi-replica jobs): ``{"cluster": {"chief"|"master": [...],
  "worker": [...], "ps": [...]}, "task": {"type": "worker", "index": 0}}``; evaluators appear only as
  ``task.type``, never under ``cluster``;
* else a single process: rank 0 of a world of 1.

What the numbers mean:

* The **data-parallel world** is the training workers: pool 0 (the primary, ``chief``) then pool 1
  (``worker``). ``rank`` orders them as CLUSTER_SPEC lists them: pool 0's replicas by index, then pool 1's,
  so the primary is rank 0 and ``workerpool1`` replica ``i`` is rank ``len(workerpool0) + i``.
* Parameter servers (pool 2, ``ps``) and evaluators (pool 3, ``evaluator``) are not data-parallel ranks:
  their ``rank`` is None and ``is_worker`` False, while ``world_size`` is still the number of training
  workers (what an evaluator needs to know to read every worker's output). This differs on purpose from the
  ``RANK``/``WORLD_SIZE`` variables, which number every node of the job.

:func:`shard` splits work round-robin: item ``i`` belongs to rank ``i % world_size``, the convention of
``tf.data.Dataset.shard`` and of PyTorch's ``DistributedSampler`` without shuffling. Every item is owned by
exactly one training rank, the split depends only on the item's position and the world size (stable across
runs, no coordinator), and the shards' sizes differ by at most one. Non-training roles own nothing.

Only the standard library is imported: this module runs inside training code.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

POOL_NAMES = ("workerpool0", "workerpool1", "workerpool2", "workerpool3")
# TF_CONFIG's names for the pools; "master" is the older name of "chief".
TF_POOLS = {"chief": 0, "master": 0, "worker": 1, "ps": 2, "evaluator": 3}
TRAINING_POOLS = (0, 1)

SOURCE_CLUSTER_SPEC = "CLUSTER_SPEC"
SOURCE_TF_CONFIG = "TF_CONFIG"
SOURCE_SINGLE = "single-process"

T = TypeVar("T")


@dataclass(frozen=True)
class Topology:
    """This replica's place in its job (see the module docstring for what rank and world size mean)."""

    source: str  # "CLUSTER_SPEC", "TF_CONFIG" or "single-process"
    role: str  # "workerpool0".."workerpool3"; "chief"/"master"/"worker"/"ps"/"evaluator" from TF_CONFIG
    pool_index: int  # 0 primary, 1 workers, 2 parameter servers, 3 evaluators
    replica_index: int  # index inside its pool
    rank: int | None  # data-parallel rank among the training workers; None for parameter servers/evaluators
    world_size: int  # number of training workers (pool 0 + pool 1)
    # pool name (as the source names it) -> addresses "host:port", in index order
    cluster: Mapping[str, tuple[str, ...]] = field(default_factory=dict, hash=False)
    trial: str | None = None  # hyperparameter-tuning trial id, None outside tuning

    @property
    def is_primary(self) -> bool:
        """The primary replica (workerpool0-0, TF's chief 0): the one whose exit 0 ends the job."""
        return self.pool_index == 0 and self.replica_index == 0

    @property
    def is_worker(self) -> bool:
        """A training worker, i.e. a data-parallel rank (pools 0 and 1)."""
        return self.rank is not None

    @property
    def primary_address(self) -> str | None:
        """``host:port`` of the primary replica, where a process group can rendezvous; None alone."""
        for name in ("workerpool0", "chief", "master"):
            addresses = self.cluster.get(name)
            if addresses:
                return addresses[0]
        return None


def topology(env: Mapping[str, str] | None = None) -> Topology:
    """This replica's topology from ``env`` (default: ``os.environ``): CLUSTER_SPEC, else TF_CONFIG, else a
    single process. Raises ValueError naming the variable when one is present but malformed."""
    env = os.environ if env is None else env
    raw = (env.get(SOURCE_CLUSTER_SPEC) or "").strip()
    if raw:
        return _from_document(SOURCE_CLUSTER_SPEC, _load(SOURCE_CLUSTER_SPEC, raw))
    raw = (env.get(SOURCE_TF_CONFIG) or "").strip()
    if raw:
        document = _load(SOURCE_TF_CONFIG, raw)
        if document:  # TF's convention: "{}" means a local, non-distributed run
            return _from_document(SOURCE_TF_CONFIG, document)
    return Topology(
        source=SOURCE_SINGLE, role=POOL_NAMES[0], pool_index=0, replica_index=0, rank=0, world_size=1
    )


def shard(items: Sequence[T], topology: Topology | None = None) -> Sequence[T]:
    """The items this rank owns: ``items[rank::world_size]`` (round-robin); empty for non-training roles.

    ``items`` must support slicing (list, tuple, range, str, NumPy arrays...); the result has its type.
    """
    where = _resolve(topology)
    if where.rank is None:
        return items[0:0]
    return items[where.rank :: where.world_size]


def shard_range(n: int, topology: Topology | None = None) -> range:
    """The indices in ``range(n)`` this rank owns, round-robin as :func:`shard`; empty for non-training
    roles."""
    if n < 0:
        raise ValueError(f"shard_range: n must be >= 0, got {n}")
    where = _resolve(topology)
    if where.rank is None:
        return range(0)
    return range(where.rank, n, where.world_size)


# ------------------------------------------------------------------------------------------ parsing
def _resolve(where: Topology | None) -> Topology:
    return topology() if where is None else where


def _load(variable: str, raw: str) -> dict[str, Any]:
    try:
        document = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{variable} is not valid JSON: {exc}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{variable} must be a JSON object, got {type(document).__name__}")
    return document


def _index(variable: str, value: Any) -> int:
    # Vertex writes an integer; a string of digits is accepted as hand-written configs sometimes have one.
    if isinstance(value, bool):
        value = None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"{variable}: task.index must be a whole number >= 0, got {value!r}")
    return value


def _cluster(variable: str, raw: Any, known: Mapping[str, int]) -> dict[str, tuple[str, ...]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ValueError(f"{variable}: cluster must be an object of pool name -> addresses")
    cluster: dict[str, tuple[str, ...]] = {}
    for name, addresses in raw.items():
        if name not in known:
            raise ValueError(f"{variable}: unknown pool {name!r} in cluster (expected {', '.join(known)})")
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            raise ValueError(f"{variable}: cluster.{name} must be a list of 'host:port' strings")
        cluster[name] = tuple(addresses)
    return cluster


def _from_document(variable: str, document: Mapping[str, Any]) -> Topology:
    known = {name: i for i, name in enumerate(POOL_NAMES)} if variable == SOURCE_CLUSTER_SPEC else TF_POOLS
    cluster = _cluster(variable, document.get("cluster"), known)
    task = document.get("task")
    if not isinstance(task, dict):
        raise ValueError(f"{variable}: missing the 'task' object (its type and index)")
    role = task.get("type")
    if role not in known:
        raise ValueError(f"{variable}: task.type must be one of {', '.join(known)}, got {role!r}")
    pool = known[role]
    index = _index(variable, task.get("index", 0))
    members = cluster.get(role)
    if members is not None and index >= len(members):
        raise ValueError(
            f"{variable}: task {role} {index} is not in cluster.{role}, which lists {len(members)} addresses"
        )
    # Training workers in rank order: pool 0 (chief or master) first, then pool 1.
    sizes = [sum(len(a) for name, a in cluster.items() if known[name] == p) for p in TRAINING_POOLS]
    rank: int | None = None
    if pool in TRAINING_POOLS:
        if members is None:
            raise ValueError(f"{variable}: task.type is {role!r} but cluster has no {role!r} pool")
        rank = index if pool == 0 else sizes[0] + index
    trial = task.get("trial")
    return Topology(
        source=variable,
        role=role,
        pool_index=pool,
        replica_index=index,
        rank=rank,
        world_size=sum(sizes),
        cluster=cluster,
        trial=str(trial) if trial not in (None, "") else None,
    )
