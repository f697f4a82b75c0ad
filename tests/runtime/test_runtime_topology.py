"""trainworks.runtime: topology() over CLUSTER_SPEC, TF_CONFIG and a single process, shard(), and a real
3-replica job whose replicas compute their rank and shard on a real server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, wait_job
from trainworks.contract.environment import (
    POOL_NAMES,
    JobContext,
    ReplicaSlot,
    node_rank,
    replica_environment,
)
from trainworks.runtime import Topology, shard, shard_range, topology
from trainworks.runtime.topology import POOL_NAMES as RUNTIME_POOL_NAMES


def cluster_spec(task_type: str, index: int, **pools: list[str]) -> dict[str, str]:
    document = {
        "cluster": pools,
        "environment": "cloud",
        "task": {"type": task_type, "index": index, "trial": ""},
        "job": {"workerPoolSpecs": []},
    }
    return {"CLUSTER_SPEC": json.dumps(document)}


POOLS = {
    "workerpool0": ["h0:2222"],
    "workerpool1": ["h1:2222", "h2:2222", "h3:2222"],
    "workerpool2": ["ps0:2222"],
    "workerpool3": ["ev0:2222"],
}


# ============================================================================== topology()
def test_single_process_without_any_variable() -> None:
    where = topology({})
    assert where == Topology("single-process", "workerpool0", 0, 0, 0, 1)
    assert where.is_primary and where.is_worker and where.primary_address is None
    assert list(shard(range(5), where)) == [0, 1, 2, 3, 4]


def test_cluster_spec_ranks_pool0_then_pool1_in_index_order() -> None:
    primary = topology(cluster_spec("workerpool0", 0, **POOLS))
    assert primary.source == "CLUSTER_SPEC" and primary.role == "workerpool0"
    assert (primary.rank, primary.world_size, primary.is_primary) == (0, 4, True)
    assert primary.cluster["workerpool1"] == ("h1:2222", "h2:2222", "h3:2222")
    assert primary.primary_address == "h0:2222" and primary.trial is None
    for index in range(3):
        worker = topology(cluster_spec("workerpool1", index, **POOLS))
        assert (worker.pool_index, worker.replica_index) == (1, index)
        assert (worker.rank, worker.world_size, worker.is_primary, worker.is_worker) == (
            1 + index,
            4,
            False,
            True,
        )


@pytest.mark.parametrize("task_type", ["workerpool2", "workerpool3"])
def test_parameter_servers_and_evaluators_are_not_data_parallel_ranks(task_type: str) -> None:
    where = topology(cluster_spec(task_type, 0, **POOLS))
    assert where.rank is None and not where.is_worker and not where.is_primary
    assert where.world_size == 4  # the training workers they serve
    assert where.pool_index == int(task_type[-1])
    assert list(shard(range(10), where)) == [] and shard_range(10, where) == range(0)
    assert shard([1, 2, 3], where) == []


def test_cluster_spec_wins_over_tf_config_and_carries_the_trial() -> None:
    env = cluster_spec("workerpool1", 0, workerpool0=["a:1"], workerpool1=["b:1"])
    document = json.loads(env["CLUSTER_SPEC"])
    document["task"]["trial"] = "7"
    env = {"CLUSTER_SPEC": json.dumps(document), "TF_CONFIG": '{"cluster": {}, "task": {"type": "ps"}}'}
    where = topology(env)
    assert where.source == "CLUSTER_SPEC" and where.rank == 1 and where.trial == "7"


def test_tf_config_alone_uses_tf_role_names() -> None:
    cluster = {"chief": ["c:2222"], "worker": ["w0:2222", "w1:2222"], "ps": ["p:2222"]}

    def tf(task_type: str, index: int) -> Topology:
        document = {"cluster": cluster, "task": {"type": task_type, "index": index}, "environment": "cloud"}
        return topology({"TF_CONFIG": json.dumps(document)})

    chief = tf("chief", 0)
    assert (chief.source, chief.role, chief.rank, chief.world_size, chief.is_primary) == (
        "TF_CONFIG",
        "chief",
        0,
        3,
        True,
    )
    assert chief.primary_address == "c:2222"
    assert (tf("worker", 1).rank, tf("worker", 1).pool_index) == (2, 1)
    assert tf("ps", 0).rank is None
    evaluator = tf("evaluator", 0)  # never listed under cluster, only as task.type
    assert (evaluator.pool_index, evaluator.rank, evaluator.world_size) == (3, None, 3)
    master = topology(
        {
            "TF_CONFIG": json.dumps(
                {"cluster": {"master": ["m:1"], "worker": ["w:1"]}, "task": {"type": "master"}}
            )
        }
    )
    assert (master.role, master.rank, master.world_size, master.is_primary) == ("master", 0, 2, True)
    assert topology({"TF_CONFIG": "{}"}).source == "single-process"


def test_topology_matches_what_trainworks_writes_for_every_replica() -> None:
    slots = [ReplicaSlot(0, 0, "127.0.0.1", 4000)]
    slots += [ReplicaSlot(1, i, "127.0.0.1", 4001 + i) for i in range(2)]
    slots += [ReplicaSlot(2, 0, "127.0.0.1", 4010), ReplicaSlot(3, 0, "127.0.0.1", 4020)]
    ctx = JobContext("42", "123", {"workerPoolSpecs": []}, slots)
    for slot in slots:
        env = replica_environment(ctx, slot)
        from_spec = topology(env)
        from_tf = topology({"TF_CONFIG": env["TF_CONFIG"]})
        assert (from_spec.pool_index, from_spec.replica_index) == (slot.pool, slot.index)
        assert from_spec.role == POOL_NAMES[slot.pool]
        assert (
            (from_tf.rank, from_tf.world_size)
            == (from_spec.rank, from_spec.world_size)
            == ((node_rank(slots, slot), 3) if slot.pool < 2 else (None, 3))
        )
    assert RUNTIME_POOL_NAMES == POOL_NAMES


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("{not json", "CLUSTER_SPEC is not valid JSON"),
        ("[1, 2]", "CLUSTER_SPEC must be a JSON object"),
        ('{"cluster": {"workerpool0": ["a:1"]}}', "CLUSTER_SPEC: missing the 'task'"),
        ('{"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "chief"}}', "CLUSTER_SPEC: task.type"),
        ('{"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "workerpool0", "index": -1}}', "task.index"),
        ('{"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "workerpool0", "index": 1}}', "lists 1"),
        (
            '{"cluster": {"workerpool0": ["a:1"]}, "task": {"type": "workerpool1", "index": 0}}',
            "no 'workerpool1'",
        ),
        ('{"cluster": {"workerpool0": "a:1"}, "task": {"type": "workerpool0"}}', "cluster.workerpool0"),
        ('{"cluster": {"pool9": []}, "task": {"type": "workerpool0"}}', "unknown pool 'pool9'"),
    ],
)
def test_malformed_cluster_spec_is_a_value_error_naming_the_variable(value: str, words: str) -> None:
    with pytest.raises(ValueError, match="CLUSTER_SPEC") as caught:
        topology({"CLUSTER_SPEC": value, "TF_CONFIG": '{"task": {"type": "chief"}}'})
    assert words in str(caught.value)


def test_malformed_tf_config_names_tf_config() -> None:
    with pytest.raises(ValueError, match="TF_CONFIG is not valid JSON"):
        topology({"TF_CONFIG": "{'single': 'quotes'}"})


def test_reads_os_environ_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUSTER_SPEC", cluster_spec("workerpool1", 1, **POOLS)["CLUSTER_SPEC"])
    monkeypatch.delenv("TF_CONFIG", raising=False)
    assert topology().rank == 2
    assert list(shard(range(10))) == [2, 6]
    assert shard_range(10) == range(2, 10, 4)


# ============================================================================== shard()
@pytest.mark.parametrize("world", [1, 2, 3, 4, 7])
@pytest.mark.parametrize("n", [0, 1, 5, 10, 23])
def test_every_item_is_owned_by_exactly_one_training_rank(world: int, n: int) -> None:
    pools = {
        "workerpool0": ["p:1"],
        "workerpool1": [f"w{i}:1" for i in range(world - 1)],
        "workerpool2": ["s:1"],
    }
    ranks = [topology(cluster_spec("workerpool0", 0, **pools))]
    ranks += [topology(cluster_spec("workerpool1", i, **pools)) for i in range(world - 1)]
    assert sorted(t.rank for t in ranks if t.rank is not None) == list(range(world))
    items = [f"item-{i}" for i in range(n)]
    owned = [item for where in ranks for item in shard(items, where)]
    assert sorted(owned) == sorted(items) and len(owned) == n
    indices = [i for where in ranks for i in shard_range(n, where)]
    assert sorted(indices) == list(range(n))
    sizes = [len(shard(items, where)) for where in ranks]
    assert max(sizes) - min(sizes) <= 1
    assert shard(items, topology(cluster_spec("workerpool2", 0, **pools))) == []
    # Stable: the same rank gets the same items on every call, whatever else happened.
    assert [shard(items, where) for where in ranks] == [shard(list(items), where) for where in ranks]


def test_shard_keeps_the_sequence_type() -> None:
    where = topology(cluster_spec("workerpool1", 0, workerpool0=["a:1"], workerpool1=["b:1"]))
    assert shard(range(5), where) == range(1, 5, 2)
    assert shard((10, 11, 12, 13), where) == (11, 13)
    assert shard("abcdef", where) == "bdf"
    with pytest.raises(ValueError, match="n must be >= 0"):
        shard_range(-1, where)


def test_import_stays_light() -> None:
    code = (
        "import sys\n"
        "before = set(sys.modules)\n"
        "import trainworks.runtime\n"
        "new = set(sys.modules) - before\n"
        "print(sorted(m for m in new if m.split('.')[0] not in sys.stdlib_module_names))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.replace("'", '"')) == [
        "trainworks",
        "trainworks.runtime",
        "trainworks.runtime.topology",
    ]


# ============================================================================== a real job
REPLICA = (
    "import json, pathlib, sys, time\n"
    "from trainworks.runtime import shard, topology\n"
    "t = topology()\n"
    "print(json.dumps({'rank': t.rank, 'world': t.world_size, 'role': t.role, 'index': t.replica_index,\n"
    "                  'primary': t.is_primary, 'source': t.source, 'shard': list(shard(range(10)))}),\n"
    "      flush=True)\n"
    "done = pathlib.Path(sys.argv[1])\n"
    "(done / f'rank-{t.rank}').write_text('done')\n"
    "if t.is_primary:  # the job ends when the primary exits: wait until every rank has printed\n"
    "    deadline = time.time() + 60\n"
    "    while len(list(done.iterdir())) < t.world_size and time.time() < deadline:\n"
    "        time.sleep(0.02)\n"
)


def test_replicas_of_a_real_job_partition_the_items(server: ServerProcess, tmp_path: Path) -> None:
    done = tmp_path / "done"
    done.mkdir()
    body = job(python_pool(REPLICA, args=[str(done)]), python_pool(REPLICA, replicas=2, args=[str(done)]))
    with server.client() as client:
        created = client.post(f"/v1/{server.parent}/customJobs", json=body)
        assert created.status_code == 200, created.text
        name = created.json()["name"]
        finished = wait_job(client, name)
        assert finished["state"] == "JOB_STATE_SUCCEEDED", finished
        logs = client.get(f"/trainworks/v1/{name}/logs").text
    printed: dict[str, dict[str, Any]] = {}
    for line in logs.splitlines():
        entry = json.loads(line)
        if entry["task"] != "service" and entry["text"].startswith("{"):
            printed[entry["task"]] = json.loads(entry["text"])
    assert sorted(printed) == ["workerpool0-0", "workerpool1-0", "workerpool1-1"]
    assert [printed[task]["rank"] for task in sorted(printed)] == [0, 1, 2]
    assert {p["world"] for p in printed.values()} == {3}
    assert {p["source"] for p in printed.values()} == {"CLUSTER_SPEC"}
    assert printed["workerpool0-0"]["primary"] and not printed["workerpool1-1"]["primary"]
    assert printed["workerpool1-1"]["role"] == "workerpool1" and printed["workerpool1-1"]["index"] == 1
    shards = [printed[task]["shard"] for task in sorted(printed)]
    assert shards == [[0, 3, 6, 9], [1, 4, 7], [2, 5, 8]]
    assert sorted(i for s in shards for i in s) == list(range(10))
