"""Builds the environment each replica sees: CLUSTER_SPEC, TF_CONFIG, MASTER_*, AIP_* and the spec's env.

Pure functions: no I/O, so every backend (local processes, containers, Slurm) gets the same contract.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

POOL_NAMES = ("workerpool0", "workerpool1", "workerpool2", "workerpool3")
TF_TASK_TYPES = ("chief", "worker", "ps", "evaluator")


def task_name(pool: int, index: int) -> str:
    """workerpool{P}-{i}: a replica's name in logs, run directories, CLUSTER_SPEC and the API."""
    return f"{POOL_NAMES[pool]}-{index}"


@dataclass(frozen=True)
class ReplicaSlot:
    """One replica of a job: its pool, index within the pool, and the address reserved for it."""

    pool: int
    index: int
    host: str
    port: int

    @property
    def task_name(self) -> str:
        return task_name(self.pool, self.index)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True)
class JobContext:
    job_id: str
    project_number: str
    job_spec: Mapping[str, Any]  # canonical CustomJobSpec JSON, as stored
    slots: Sequence[ReplicaSlot]
    trial_id: str | None = None
    region: str | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)


def _cluster(slots: Sequence[ReplicaSlot]) -> dict[str, list[str]]:
    cluster: dict[str, list[str]] = {}
    for slot in sorted(slots, key=lambda s: (s.pool, s.index)):
        cluster.setdefault(POOL_NAMES[slot.pool], []).append(slot.address)
    return cluster


def cluster_spec(ctx: JobContext, slot: ReplicaSlot) -> dict[str, Any]:
    task: dict[str, Any] = {"type": POOL_NAMES[slot.pool], "index": slot.index}
    task["trial"] = ctx.trial_id or ""
    return {
        "cluster": _cluster(ctx.slots),
        "environment": "cloud",
        "task": task,
        "job": dict(ctx.job_spec),
    }


def tf_config(ctx: JobContext, slot: ReplicaSlot) -> dict[str, Any] | None:
    """TF_CONFIG exists only for distributed jobs; evaluators never appear under `cluster`."""
    if len(ctx.slots) <= 1:
        return None
    cluster: dict[str, list[str]] = {}
    for pool_name, addresses in _cluster(ctx.slots).items():
        pool = POOL_NAMES.index(pool_name)
        if pool == 3:
            continue
        cluster[TF_TASK_TYPES[pool]] = addresses
    task: dict[str, Any] = {"type": TF_TASK_TYPES[slot.pool], "index": slot.index}
    if ctx.trial_id:
        task["trial"] = ctx.trial_id
    task["cloud"] = f"trainworks-{ctx.job_id}"
    return {"cluster": cluster, "environment": "cloud", "task": task, "job": dict(ctx.job_spec)}


def node_rank(slots: Sequence[ReplicaSlot], slot: ReplicaSlot) -> int:
    """Rank in CLUSTER_SPEC order: workerpool0 first, then each pool's replicas by index."""
    ordered = sorted(slots, key=lambda s: (s.pool, s.index))
    return ordered.index(slot)


def output_directories(base_output_directory: str | None) -> dict[str, str]:
    """AIP_* directories under the job's base (a tuning trial's base already ends in its trial id)."""
    if not base_output_directory:
        return {}
    base = base_output_directory if base_output_directory.endswith("/") else base_output_directory + "/"
    return {
        "AIP_MODEL_DIR": f"{base}model/",
        "AIP_CHECKPOINT_DIR": f"{base}checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{base}logs/",
    }


_REF = re.compile(r"\$\$\(([A-Za-z_][A-Za-z0-9_]*)\)|\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def expand(value: str, known: Mapping[str, str]) -> str:
    """Kubernetes-style `$(VAR)` expansion: `$$(VAR)` escapes, unknown references stay as they are."""

    def replace(match: re.Match[str]) -> str:
        escaped, name = match.group(1), match.group(2)
        if escaped is not None:
            return f"$({escaped})"
        return known.get(name, match.group(0))

    return _REF.sub(replace, value)


def expand_env(pairs: Iterable[tuple[str, str]], base: Mapping[str, str]) -> dict[str, str]:
    """Each value may refer to the contract's variables and to variables defined earlier in the list."""
    known = dict(base)
    result: dict[str, str] = {}
    for name, value in pairs:
        expanded = expand(value, known)
        known[name] = expanded
        result[name] = expanded
    return result


def replica_environment(
    ctx: JobContext, slot: ReplicaSlot, spec_env: Iterable[tuple[str, str]] = ()
) -> dict[str, str]:
    """The variables the service sets for one replica, with the worker pool's own env applied last."""
    env: dict[str, str] = {
        "CLUSTER_SPEC": json.dumps(cluster_spec(ctx, slot), separators=(",", ":")),
        "CLOUD_ML_JOB_ID": ctx.job_id,
        "CLOUD_ML_PROJECT_ID": ctx.project_number,
    }
    tf = tf_config(ctx, slot)
    if tf is not None:
        env["TF_CONFIG"] = json.dumps(tf, separators=(",", ":"))
        primary = next(s for s in ctx.slots if s.pool == 0 and s.index == 0)
        env["MASTER_ADDR"] = primary.host
        env["MASTER_PORT"] = str(primary.port)
        env["WORLD_SIZE"] = str(len(ctx.slots))
        env["RANK"] = str(node_rank(ctx.slots, slot))
    base_dir = (ctx.job_spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    env.update(output_directories(base_dir))
    if ctx.trial_id:
        env["CLOUD_ML_TRIAL_ID"] = ctx.trial_id
    if ctx.region:
        env["CLOUD_ML_REGION"] = ctx.region
    env.update(ctx.extra_env)
    env.update(expand_env(spec_env, env))
    return env
