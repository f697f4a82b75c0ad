"""The in-job contract: CLUSTER_SPEC, TF_CONFIG, MASTER_*/RANK, AIP_* and $(VAR) expansion."""

from __future__ import annotations

import json

from trainworks.contract.environment import (
    JobContext,
    ReplicaSlot,
    expand,
    expand_env,
    output_directories,
    replica_environment,
)

SPEC = {
    "workerPoolSpecs": [
        {"replicaCount": "1"},
        {"replicaCount": "2"},
        {"replicaCount": "1"},
        {"replicaCount": "1"},
    ]
}


def slots() -> list[ReplicaSlot]:
    return [
        ReplicaSlot(0, 0, "127.0.0.1", 5000),
        ReplicaSlot(1, 0, "127.0.0.1", 5001),
        ReplicaSlot(1, 1, "127.0.0.1", 5002),
        ReplicaSlot(2, 0, "127.0.0.1", 5003),
        ReplicaSlot(3, 0, "127.0.0.1", 5004),
    ]


def context(**kw: object) -> JobContext:
    return JobContext(job_id="42", project_number="123456", job_spec=SPEC, slots=slots(), **kw)  # type: ignore[arg-type]


def test_cluster_spec_lists_every_pool_and_the_task() -> None:
    env = replica_environment(context(), slots()[2])
    spec = json.loads(env["CLUSTER_SPEC"])
    assert spec["cluster"] == {
        "workerpool0": ["127.0.0.1:5000"],
        "workerpool1": ["127.0.0.1:5001", "127.0.0.1:5002"],
        "workerpool2": ["127.0.0.1:5003"],
        "workerpool3": ["127.0.0.1:5004"],
    }
    assert spec["task"] == {"type": "workerpool1", "index": 1, "trial": ""}
    assert spec["environment"] == "cloud"
    assert spec["job"] == SPEC


def test_tf_config_maps_pools_and_keeps_evaluators_out_of_cluster() -> None:
    evaluator = json.loads(replica_environment(context(), slots()[4])["TF_CONFIG"])
    assert evaluator["cluster"] == {
        "chief": ["127.0.0.1:5000"],
        "worker": ["127.0.0.1:5001", "127.0.0.1:5002"],
        "ps": ["127.0.0.1:5003"],
    }
    assert evaluator["task"]["type"] == "evaluator" and evaluator["task"]["index"] == 0
    assert "trial" not in evaluator["task"]
    chief = json.loads(replica_environment(context(), slots()[0])["TF_CONFIG"])
    assert chief["task"]["type"] == "chief"


def test_pytorch_variables_follow_cluster_spec_order() -> None:
    ranks = [replica_environment(context(), s) for s in slots()]
    assert [e["RANK"] for e in ranks] == ["0", "1", "2", "3", "4"]
    assert {e["WORLD_SIZE"] for e in ranks} == {"5"}
    assert {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in ranks} == {("127.0.0.1", "5000")}


def test_single_replica_job_has_no_tf_config_or_master() -> None:
    ctx = JobContext("7", "99", {"workerPoolSpecs": [{}]}, [ReplicaSlot(0, 0, "127.0.0.1", 6000)])
    env = replica_environment(ctx, ctx.slots[0])
    assert "CLUSTER_SPEC" in env
    for absent in ("TF_CONFIG", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK"):
        assert absent not in env
    assert env["CLOUD_ML_JOB_ID"] == "7" and env["CLOUD_ML_PROJECT_ID"] == "99"


def test_trial_id_appears_in_cluster_spec_and_tf_config() -> None:
    env = replica_environment(context(trial_id="3"), slots()[1])
    assert json.loads(env["CLUSTER_SPEC"])["task"]["trial"] == "3"
    assert json.loads(env["TF_CONFIG"])["task"]["trial"] == "3"
    assert env["CLOUD_ML_TRIAL_ID"] == "3"


def test_output_directories_end_in_slash() -> None:
    assert output_directories("gs://b/run") == {
        "AIP_MODEL_DIR": "gs://b/run/model/",
        "AIP_CHECKPOINT_DIR": "gs://b/run/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": "gs://b/run/logs/",
    }
    assert output_directories("gs://b/run/")["AIP_MODEL_DIR"] == "gs://b/run/model/"
    assert output_directories(None) == {}


def test_spec_env_expands_references_escapes_and_unknowns() -> None:
    spec = {**SPEC, "baseOutputDirectory": {"outputUriPrefix": "gs://b/x"}}
    ctx = JobContext("1", "2", spec, slots())
    env = replica_environment(
        ctx,
        slots()[0],
        [("A", "$(AIP_MODEL_DIR)ckpt"), ("B", "$(A)/more"), ("C", "$$(A)"), ("D", "$(NOPE)"), ("E", "$(B)")],
    )
    assert env["A"] == "gs://b/x/model/ckpt"
    assert env["B"] == "gs://b/x/model/ckpt/more"
    assert env["C"] == "$(A)"
    assert env["D"] == "$(NOPE)"
    assert env["E"] == env["B"]


def test_expand_only_uses_earlier_definitions() -> None:
    assert expand_env([("X", "$(Y)"), ("Y", "1")], {}) == {"X": "$(Y)", "Y": "1"}
    assert expand("a$(Z)b", {"Z": "-"}) == "a-b"
