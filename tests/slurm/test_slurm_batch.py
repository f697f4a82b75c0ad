"""Slurm as an executor, the pure parts: the sbatch script, state mapping, squeue parsing, the task's view
of its allocation, backend refs and which jobs go to Slurm. No Slurm here (test_slurm_backend.py runs it)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from trainworks.backends.base import Phase, PlacementRequest
from trainworks.backends.commands import TaskError
from trainworks.slurm.backend import SlurmBackend, SlurmRef, SlurmTarget, replica_status, server_targets
from trainworks.slurm.batch import BatchJob, Component, batch_script, components, job_name, time_limit
from trainworks.slurm.jobs import (
    SlurmJob,
    SlurmPhase,
    find,
    parse_nodes,
    parse_sbatch,
    parse_squeue,
    slurm_phase,
)
from trainworks.slurm.task import Placement, PlacementError, environment, nodelists, placement, slots

POOL = {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": {"imageUri": "x", "command": ["t"]}}


def pools(*counts: int) -> list[dict]:
    return [{**POOL, "replicaCount": str(c)} for c in counts]


def directives(script: str) -> list[str]:
    return [line for line in script.splitlines() if line.startswith("#SBATCH")]


def test_het_job_has_one_component_per_non_empty_pool_with_a_node_per_replica() -> None:
    parts = components(pools(1, 2, 0, 1))
    assert parts == (Component(0, 1), Component(1, 2), Component(3, 1))
    script = batch_script(
        BatchJob(
            name="trainworks-12-a0",
            components=parts,
            task_argv=("/venv/bin/python", "-m", "trainworks.slurm.task", "/jobs/12/slurm-a0.json"),
            output=Path("/jobs/12/slurm-a0.out"),
            workdir=Path("/jobs/12"),
            partition="debug",
            time_limit=timedelta(hours=2, seconds=1),
        )
    )
    assert script.startswith("#!/bin/bash\n")
    lines = directives(script)
    assert lines[:5] == [
        "#SBATCH --job-name=trainworks-12-a0",
        "#SBATCH --output=/jobs/12/slurm-a0.out",
        "#SBATCH --error=/jobs/12/slurm-a0.out",
        "#SBATCH --open-mode=append",
        "#SBATCH --chdir=/jobs/12",
    ]
    per_component = "#SBATCH --partition=debug --time=0-02:01:00 --nodes={} --ntasks-per-node=1 --exclusive"
    assert lines[5:] == [
        per_component.format(1),
        "#SBATCH hetjob",
        per_component.format(2),
        "#SBATCH hetjob",
        per_component.format(1),
    ]
    # Directives come before the first command, or Slurm ignores them.
    body = script.rsplit(lines[-1], 1)[1]
    assert "#SBATCH" not in body
    assert "SLURM_RESTART_COUNT" in body  # a requeued run does not run the replicas again
    assert script.rstrip().endswith(
        "exec srun --het-group=0,1,2 --kill-on-bad-exit=0 --wait=0 -- "
        "/venv/bin/python -m trainworks.slurm.task /jobs/12/slurm-a0.json"
    )


def test_single_pool_job_is_a_plain_job() -> None:
    script = batch_script(
        BatchJob(name="j", components=(Component(0, 2),), task_argv=("t",), output=Path("/o"))
    )
    assert "hetjob" not in script and "--het-group" not in script
    assert "#SBATCH --nodes=2 --ntasks-per-node=1 --exclusive" in directives(script)
    assert script.rstrip().endswith("exec srun --kill-on-bad-exit=0 --wait=0 -- t")


def test_paths_and_names_are_safe_for_sbatch() -> None:
    script = batch_script(
        BatchJob(name="a b/c", components=(Component(0, 1),), task_argv=("t x",), output=Path("/h o/%j.out"))
    )
    assert "#SBATCH --job-name=a_b_c" in script
    assert '#SBATCH --output="/h o/%%j.out"' in script  # quoted, and no %j expansion
    assert "-- 't x'" in script
    with pytest.raises(ValueError):
        batch_script(BatchJob(name="j", components=(Component(0, 1),), task_argv=("t",), output=Path('/a"b')))
    with pytest.raises(ValueError):
        batch_script(BatchJob(name="j", components=(), task_argv=("t",), output=Path("/o")))
    assert job_name("") == "trainworks"


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        (timedelta(seconds=20), "0-00:01:00"),  # Slurm keeps minutes: round up, never to zero
        (timedelta(minutes=90), "0-01:30:00"),
        (timedelta(days=7), "7-00:00:00"),
        (timedelta(days=1, minutes=1, seconds=1), "1-00:02:00"),
    ],
)
def test_time_limit(limit: timedelta, expected: str) -> None:
    assert time_limit(limit) == expected


@pytest.mark.parametrize(
    ("state", "phase"),
    [
        ("PENDING", SlurmPhase.PENDING),
        ("CONFIGURING", SlurmPhase.PENDING),
        ("RUNNING", SlurmPhase.RUNNING),
        ("COMPLETING", SlurmPhase.RUNNING),
        ("RUNNING,COMPLETING", SlurmPhase.RUNNING),
        ("COMPLETED", SlurmPhase.COMPLETED),
        ("FAILED", SlurmPhase.FAILED),
        ("NODE_FAIL", SlurmPhase.FAILED),
        ("OUT_OF_MEMORY", SlurmPhase.FAILED),
        ("CANCELLED", SlurmPhase.CANCELLED),
        ("TIMEOUT", SlurmPhase.TIMEOUT),
        ("DEADLINE", SlurmPhase.TIMEOUT),
        ("PREEMPTED", SlurmPhase.PREEMPTED),
        ("REQUEUED", SlurmPhase.PREEMPTED),
        ("REQUEUE_HOLD", SlurmPhase.PREEMPTED),
    ],
)
def test_slurm_states_map_to_phases(state: str, phase: SlurmPhase) -> None:
    assert slurm_phase(state) == phase
    assert phase.ended == (phase not in (SlurmPhase.PENDING, SlurmPhase.RUNNING))


def test_squeue_json_of_22_05_and_later_releases() -> None:
    old = {
        "jobs": [
            {
                "job_id": 7,
                "het_job_id": 7,
                "het_job_offset": 0,
                "name": "n",
                "job_state": "RUNNING",
                "state_reason": "None",
                "restart_cnt": 0,
                "nodes": "n1",
            },
            {
                "job_id": 8,
                "het_job_id": 7,
                "het_job_offset": 1,
                "name": "n",
                "job_state": "RUNNING",
                "state_reason": "None",
                "restart_cnt": 1,
                "nodes": "n[2-3]",
            },
            {"job_id": 9, "het_job_id": 0, "het_job_offset": 0, "name": "p", "job_state": "PENDING"},
        ]
    }
    jobs = parse_squeue(old)
    assert [(j.leader, j.het_offset, j.display_id) for j in jobs] == [
        (7, 0, "7+0"),
        (7, 1, "7+1"),
        (9, 0, "9"),
    ]
    assert find(jobs, 7, 1) is jobs[1] and find(jobs, 9, 0) is jobs[2]
    assert find(jobs, 9, 1) is None and find(jobs, 8, 0) is None
    new = {
        "jobs": [
            {
                "job_id": 3,
                "het_job_id": {"set": False, "number": 0},
                "het_job_offset": {"set": False, "number": 0},
                "name": "x",
                "job_state": ["PENDING"],
                "state_reason": "Resources",
                "restart_cnt": 2,
            }
        ]
    }
    (job,) = parse_squeue(new)
    assert (job.leader, job.phase, job.reason, job.restart_count) == (3, SlurmPhase.PENDING, "Resources", 2)


def test_sbatch_and_scontrol_output() -> None:
    assert parse_sbatch("42\n") == 42
    assert parse_sbatch("43;cluster\n") == 43
    nodes = "NodeName=n1 Arch=x86_64 NodeAddr=10.0.0.1 NodeHostName=vm\nNodeName=n2 NodeAddr=10.0.0.2\n"
    assert parse_nodes(nodes) == {"n1": "10.0.0.1", "n2": "10.0.0.2"}


def het_environ(procid: int) -> dict[str, str]:
    return {
        "SLURM_PROCID": str(procid),
        "SLURM_HET_SIZE": "2",
        "SLURM_NTASKS_HET_GROUP_0": "1",
        "SLURM_NTASKS_HET_GROUP_1": "2",
        "SLURM_JOB_NODELIST_HET_GROUP_0": "n1",
        "SLURM_JOB_NODELIST_HET_GROUP_1": "n[2-3]",
        "SLURMD_NODENAME": f"n{procid + 1}",
        "SLURM_JOB_ID": "7",
        "UNRELATED": "x",
    }


def test_task_finds_its_replica_from_procid_and_het_group_sizes() -> None:
    assert placement(het_environ(0)) == Placement(0, 0, 0, (1, 2))
    assert placement(het_environ(2)) == Placement(1, 1, 2, (1, 2))
    assert nodelists(het_environ(0), 2) == ["n1", "n[2-3]"]
    plain = {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_NODELIST": "n[1-2]"}
    assert placement(plain) == Placement(0, 1, 1, (2,))
    assert nodelists(plain, 1) == ["n[1-2]"]
    with pytest.raises(PlacementError):
        placement({**plain, "SLURM_PROCID": "2"})
    with pytest.raises(PlacementError):
        placement({})


def manifest() -> dict:
    spec = {
        "workerPoolSpecs": [
            {**POOL, "replicaCount": "1", "containerSpec": {"imageUri": "x", "command": ["t"], "env": []}},
            {
                **POOL,
                "replicaCount": "2",
                "containerSpec": {
                    "imageUri": "x",
                    "command": ["t"],
                    "env": [{"name": "R", "value": "$(RANK)"}],
                },
            },
        ],
        "baseOutputDirectory": {"outputUriPrefix": "gs://b/run"},
    }
    return {
        "version": 1,
        "job": {"job_id": "12", "project_number": "99", "job_spec": spec, "trial_id": None, "region": "r"},
        "components": [{"pool": 0, "replicas": 1}, {"pool": 1, "replicas": 2}],
        "base_port": 5000,
        "members": [
            {"pool": 0, "index": 0, "run_dir": "/r/0", "extra_env": {}},
            {"pool": 1, "index": 0, "run_dir": "/r/1", "extra_env": {"X": "1"}},
            {"pool": 1, "index": 1, "run_dir": "/r/2", "extra_env": {}},
        ],
        "env": {"PATH": "/bin"},
    }


def test_every_task_builds_the_same_cluster_from_the_allocation() -> None:
    nodes = [["n1"], ["n2", "n3"]]
    addresses = {"n1": "10.0.0.1", "n2": "10.0.0.2", "n3": "10.0.0.3"}
    all_slots = slots(manifest(), nodes, addresses)
    assert [s.address for s in all_slots] == ["10.0.0.1:5000", "10.0.0.2:5001", "10.0.0.3:5002"]
    envs = [environment(manifest(), all_slots, rank, het_environ(rank)) for rank in range(3)]
    specs = [json.loads(e["CLUSTER_SPEC"]) for e in envs]
    assert all(s["cluster"] == specs[0]["cluster"] for s in specs)
    assert specs[0]["cluster"] == {
        "workerpool0": ["10.0.0.1:5000"],
        "workerpool1": ["10.0.0.2:5001", "10.0.0.3:5002"],
    }
    assert [(s["task"]["type"], s["task"]["index"]) for s in specs] == [
        ("workerpool0", 0),
        ("workerpool1", 0),
        ("workerpool1", 1),
    ]
    assert [json.loads(e["TF_CONFIG"])["task"]["type"] for e in envs] == ["chief", "worker", "worker"]
    assert [e["RANK"] for e in envs] == ["0", "1", "2"]
    assert {(e["WORLD_SIZE"], e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs} == {
        ("3", "10.0.0.1", "5000")
    }
    assert envs[1]["R"] == "1" and envs[1]["X"] == "1" and "X" not in envs[2]  # pool env, extra env
    assert envs[0]["AIP_MODEL_DIR"] == "gs://b/run/model/" and envs[0]["PATH"] == "/bin"
    assert envs[2]["SLURMD_NODENAME"] == "n3" and "UNRELATED" not in envs[2]
    with pytest.raises(PlacementError):
        slots(manifest(), [["n1"], ["n2"]], addresses)


def test_backend_ref_round_trip() -> None:
    ref = SlurmRef(Path("/etc/a:b/slurm.conf"), 12, 1, 3)
    assert str(ref) == "slurm:/etc/a:b/slurm.conf:12+1:3"
    assert SlurmRef.parse(str(ref)) == ref
    with pytest.raises(ValueError):
        SlurmRef.parse("local:1")


def job_placement(labels: dict[str, str] | None = None, resource: str | None = None) -> PlacementRequest:
    return PlacementRequest("123", "us-central1", labels or {}, resource)


def test_which_jobs_go_to_slurm() -> None:
    conf = Path("/c/slurm.conf")
    label_only = server_targets(conf, "debug")
    assert label_only(job_placement()) is None
    assert label_only(job_placement({"trainworks-executor": "slurm"})) == SlurmTarget(conf, "debug")
    everything = server_targets(conf, None, default_executor="slurm")
    assert everything(job_placement()) == SlurmTarget(conf, None)
    assert everything(job_placement({"trainworks-executor": "local"})) is None
    assert everything(job_placement(resource="pr")) is None  # stays on its resource's machines
    assert server_targets(None, None, "slurm")(job_placement()) is None

    backend = SlurmBackend([label_only])
    assert not backend.accepts(job_placement())
    assert backend.accepts(job_placement({"trainworks-executor": "slurm"}))
    # The hook for training clusters: a resolver in front of the server's own.
    other = SlurmTarget(Path("/clusters/c1/slurm.conf"), "p")
    backend.add_resolver(lambda job: other if (job.labels or {}).get("trainworks-cluster") == "c1" else None)
    assert backend.target(job_placement({"trainworks-cluster": "c1"})) == other
    with pytest.raises(TaskError, match="no Slurm cluster"):
        SlurmBackend([server_targets(None, None)]).accepts(job_placement({"trainworks-executor": "slurm"}))


def squeue(state: str, restarts: int = 0, reason: str = "None") -> list[SlurmJob]:
    return [
        SlurmJob(12, 12, 0, "n", state, reason, restarts, "n1"),
        SlurmJob(13, 12, 1, "n", state, reason, restarts, "n2"),
    ]


def test_replica_status_from_squeue_and_exit_record(tmp_path: Path) -> None:
    ref = SlurmRef(Path("/c"), 12, 1, 0)
    pending = replica_status(ref, tmp_path, squeue("PENDING", reason="Resources"))
    assert pending.phase == Phase.PENDING and "Resources" in pending.detail
    assert replica_status(ref, tmp_path, squeue("RUNNING")).phase == Phase.RUNNING
    assert replica_status(ref, tmp_path, squeue("COMPLETED")).phase == Phase.LOST  # no exit record
    assert replica_status(ref, tmp_path, []).phase == Phase.LOST
    (tmp_path / "exit.json").write_text('{"exit_code": 3, "ended": 1.0, "slurm_job_id": 12}')
    exited = replica_status(ref, tmp_path, squeue("RUNNING"))
    assert (exited.phase, exited.exit_code) == (Phase.EXITED, 3)
    # Preemption, a requeue and the time limit kill replicas too: they win over the exit record.
    assert replica_status(ref, tmp_path, squeue("PENDING", restarts=1)).phase == Phase.PREEMPTED
    assert replica_status(ref, tmp_path, squeue("PREEMPTED")).phase == Phase.PREEMPTED
    assert replica_status(ref, tmp_path, squeue("TIMEOUT")).phase == Phase.TIMEOUT
    # While the time limit kills it, squeue says COMPLETING; the reason tells why.
    assert replica_status(ref, tmp_path, squeue("COMPLETING", reason="TimeLimit")).phase == Phase.TIMEOUT
    # The record of an earlier attempt's Slurm job does not count for this one.
    (tmp_path / "exit.json").write_text('{"exit_code": 143, "signal": 15, "ended": 1.0, "slurm_job_id": 9}')
    assert replica_status(ref, tmp_path, squeue("RUNNING")).phase == Phase.RUNNING
    (tmp_path / "exit.json").write_text('{"exit_code": 143, "signal": 15, "ended": 1.0, "slurm_job_id": 12}')
    killed = replica_status(ref, tmp_path, squeue("CANCELLED"))
    assert (killed.phase, killed.exit_code, killed.detail) == (Phase.EXITED, 143, "killed by signal SIGTERM")
