"""GPUs: the host's GPUs are shared out through CUDA_VISIBLE_DEVICES; a host without them says so."""

from __future__ import annotations

import sys

from tests.support.jobs import job
from tests.support.logs import replica_output, service_text
from tests.support.server import ServerProcess, wait_job
from trainworks.backends.gpus import Gpu, accelerators_per_replica, detect_gpus, pick

SHOW = "import os; print('CVD=' + os.environ.get('CUDA_VISIBLE_DEVICES', '<unset>'))"


def test_pick_takes_the_lowest_free_indices() -> None:
    gpus = [Gpu(i, "H100") for i in (3, 0, 2, 1)]
    assert pick(gpus, set(), 2) == [0, 1]
    assert pick(gpus, {0, 2}, 2) == [1, 3]
    assert pick(gpus, {0, 1, 2}, 2) is None
    assert pick([], set(), 1) is None


def test_accelerators_per_replica_reads_built_in_and_attached_ones() -> None:
    assert accelerators_per_replica({"machineSpec": {"machineType": "a2-highgpu-2g"}}) == (
        "NVIDIA_TESLA_A100",
        2,
    )
    attached = {"machineType": "n1-standard-8", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 2}
    assert accelerators_per_replica({"machineSpec": attached}) == ("NVIDIA_TESLA_T4", 2)
    assert accelerators_per_replica({"machineSpec": {"machineType": "n1-standard-4"}}) == (None, 0)


def test_job_asking_for_gpus_runs_and_is_told_what_the_host_has(server: ServerProcess) -> None:
    machine = {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1}
    pool = {
        "machineSpec": machine,
        "replicaCount": "1",
        "containerSpec": {"imageUri": "x", "command": [sys.executable, "-c", SHOW]},
    }
    with server.client() as client:
        created = client.post(f"/v1/{server.parent}/customJobs", json=job(pool)).json()
        done = wait_job(client, created["name"])
    assert done["state"] == "JOB_STATE_SUCCEEDED"
    job_dir = server.home / "jobs" / created["name"].rsplit("/", 1)[-1]
    stdout = replica_output(job_dir / "workerpool0-0").strip()
    service = service_text(job_dir)
    if detect_gpus():  # a GPU host: the replica gets one of them
        assert stdout.startswith("CVD=") and stdout != "CVD=" and stdout != "CVD=<unset>"
    else:
        assert stdout == "CVD="  # no GPU to hand out: none visible
        assert "workerpool0-0 asks for 1 × NVIDIA_TESLA_T4 but this host has no GPUs" in service
