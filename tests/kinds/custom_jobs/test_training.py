"""Real training: a 2-replica PyTorch DDP job (gloo, CPU) all-reducing with only the contract's variables."""

from __future__ import annotations

import json
import sys

from tests.support.logs import replica_output, service_text
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
    # Both replicas end with identical parameters: the gradients were all-reduced. Each replica ran once per
    # run of the job: a whole-job restart the platform announced (a replica that crashed with a transient
    # status, say) is another run of both, and nothing else is.
    platform = service_text(job_dir)
    runs = 1 + platform.count("The job will be restarted.")
    finals = {
        task: [
            json.loads(line.split("done: ", 1)[1])
            for line in replica_output(job_dir / task).splitlines()
            if "done: " in line
        ]
        for task in ("workerpool0-0", "workerpool1-0")
    }
    told = platform + "".join(replica_output(job_dir / task, "stderr") for task in finals)
    assert [len(ends) for ends in finals.values()] == [runs, runs], told
    assert finals["workerpool0-0"][-1]["weight"] == finals["workerpool1-0"][-1]["weight"]
