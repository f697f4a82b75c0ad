"""Real training: a 2-replica PyTorch DDP job (gloo, CPU) all-reducing with only the contract's variables."""

from __future__ import annotations

import json
import sys

from tests.support.logs import assert_ddp_replicas_agree, replica_output, service_text
from tests.support.paths import EXAMPLES
from tests.support.server import ServerProcess, wait_job

EXAMPLE = EXAMPLES / "ddp_train.py"


def test_two_replica_ddp_job_trains_and_agrees(server: ServerProcess) -> None:
    container = {
        "imageUri": "pytorch:cpu",
        "command": [sys.executable, str(EXAMPLE)],
        "args": ["--epochs", "30"],
    }
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": container}
    body = {
        "displayName": "ddp",
        "jobSpec": {
            "workerPoolSpecs": [{**pool, "replicaCount": "1"}, {**pool, "replicaCount": "1"}],
            "baseOutputDirectory": {"outputUriPrefix": "gs://ddp-bucket/run"},
        },
    }
    with server.client() as client:
        created = client.post(f"/v1/{server.parent}/customJobs", json=body).json()
        done = wait_job(client, created["name"], timeout=300)
    job_dir = server.home / "jobs" / created["name"].rsplit("/", 1)[-1]
    assert done["state"] == "JOB_STATE_SUCCEEDED", service_text(job_dir) + replica_output(
        job_dir / "workerpool0-0", "stderr"
    )
    result = json.loads(
        (server.home / "buckets" / "ddp-bucket" / "run" / "model" / "result.json").read_text()
    )
    assert result["world_size"] == 2
    assert abs(result["weight"] - 3.0) < 0.05 and abs(result["bias"] + 2.0) < 0.05
    assert (server.home / "buckets" / "ddp-bucket" / "run" / "model" / "model.pt").stat().st_size > 0
    worker = replica_output(job_dir / "workerpool1-0")
    assert "rank 1 of 2" in worker
    assert_ddp_replicas_agree(job_dir)
