"""Property-based tests of the replica contract (CLUSTER_SPEC, TF_CONFIG, RANK) against its reader.

For generated pool shapes every replica's environment is read back with trainworks.runtime.topology, the
module training code uses, as the oracle: all replicas see one cluster, each has its own task, and the
ranks it derives agree with RANK and WORLD_SIZE the service sets.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from trainworks.contract.environment import JobContext, ReplicaSlot, replica_environment
from trainworks.runtime.topology import TF_POOLS, topology


@st.composite
def jobs(draw: st.DrawFn) -> JobContext:
    # Vertex's shapes: pool 0 has one replica; pools 1-3 any number, possibly empty in between.
    sizes = [1] + [draw(st.integers(min_value=0, max_value=4)) for _ in range(3)]
    slots = [
        ReplicaSlot(pool, index, f"10.0.{pool}.{index}", 20000 + 10 * pool + index)
        for pool, size in enumerate(sizes)
        for index in range(size)
    ]
    order = draw(st.permutations(slots))  # backends may hand slots over in any order
    trial = draw(st.none() | st.sampled_from(["1", "17"]))
    return JobContext("123", "456", {"workerPoolSpecs": []}, order, trial_id=trial)


@settings(max_examples=200, deadline=None)
@given(ctx=jobs())
def test_every_replica_reads_a_consistent_cluster(ctx: JobContext) -> None:
    training = sorted((s for s in ctx.slots if s.pool in (0, 1)), key=lambda s: (s.pool, s.index))
    seen_tasks: set[tuple[str, int]] = set()
    clusters: set[str] = set()
    for slot in ctx.slots:
        env = replica_environment(ctx, slot)
        where = topology({"CLUSTER_SPEC": env["CLUSTER_SPEC"]})
        assert (where.pool_index, where.replica_index) == (slot.pool, slot.index)
        assert where.cluster[where.role][slot.index] == slot.address
        assert where.world_size == len(training)
        assert where.rank == (training.index(slot) if slot.pool in (0, 1) else None)
        assert where.trial == ctx.trial_id
        assert where.primary_address == training[0].address
        seen_tasks.add((where.role, where.replica_index))
        clusters.add(json.dumps(json.loads(env["CLUSTER_SPEC"])["cluster"], sort_keys=True))
        if len(ctx.slots) == 1:
            assert "TF_CONFIG" not in env and "RANK" not in env
            continue
        # TF_CONFIG read alone names the same place; RANK numbers every node, training workers first.
        tf = topology({"TF_CONFIG": env["TF_CONFIG"]})
        assert (tf.pool_index, tf.replica_index, tf.rank, tf.world_size) == (
            where.pool_index,
            where.replica_index,
            where.rank,
            where.world_size,
        )
        assert "evaluator" not in json.loads(env["TF_CONFIG"])["cluster"]
        assert TF_POOLS[tf.role] == slot.pool
        assert int(env["WORLD_SIZE"]) == len(ctx.slots)
        if where.rank is not None:
            assert int(env["RANK"]) == where.rank
        assert f"{env['MASTER_ADDR']}:{env['MASTER_PORT']}" == where.primary_address
    assert len(seen_tasks) == len(ctx.slots)
    assert len(clusters) == 1
    ranks = sorted(int(replica_environment(ctx, s).get("RANK", "0")) for s in ctx.slots)
    assert len(ctx.slots) == 1 or ranks == list(range(len(ctx.slots)))
