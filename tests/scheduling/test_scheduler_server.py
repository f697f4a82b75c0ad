"""Scheduling through a real server with a limited inventory: gang admission, reasons, quotas, durability."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.jobs import job, python_pool
from tests.support.logs import service_text
from tests.support.server import ServerProcess, wait_for, wait_job

INVENTORY = """
regions:
  us-central1:
    cpu_quota: 16
    zones:
      us-central1-a: {machines: {n1-standard-4: 2, a2-highgpu-1g: 1}}
"""

GATED = (
    "import pathlib, sys, time\n"
    "gate = pathlib.Path(sys.argv[1])\n"
    "deadline = time.time() + 120\n"
    "while not gate.exists() and time.time() < deadline: time.sleep(0.02)\n"
)


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[ServerProcess]:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(INVENTORY)
    proc = ServerProcess(home=tmp_path / "home", args=["--inventory", str(inventory)]).start()
    yield proc
    proc.stop()


def gated(gate: Path, replicas: int, **spec: object) -> dict:
    pools = [python_pool(GATED, args=[str(gate)])]
    if replicas > 1:
        pools.append(python_pool(GATED, replicas=replicas - 1, args=[str(gate)]))
    return job(*pools, **spec)


def create(client: httpx.Client, server: ServerProcess, body: dict) -> httpx.Response:
    return client.post(f"/v1/{server.parent}/customJobs", json=body)


def status(client: httpx.Client, name: str) -> dict:
    return client.get(f"/trainworks/v1/{name}/status").json()


def test_gang_admission_waits_with_a_reason_and_survives_a_restart(
    limited: ServerProcess, tmp_path: Path
) -> None:
    first_gate, second_gate = tmp_path / "first", tmp_path / "second"
    with limited.client() as client:
        first = create(client, limited, gated(first_gate, 2)).json()
        wait_job(client, first["name"], {"JOB_STATE_RUNNING"})
        assert status(client, first["name"])["zone"] == "us-central1-a"
        second = create(client, limited, gated(second_gate, 2)).json()
        reason = wait_for(
            lambda: status(client, second["name"]).get("waitingReason"), what="a waiting reason"
        )
        assert "2 × n1-standard-4" in reason and "0 free" in reason
        assert client.get(f"/v1/{second['name']}").json()["state"] == "JOB_STATE_QUEUED"
    limited.stop(signal.SIGKILL)  # nothing about the queue lives only in memory
    limited.start()
    with limited.client() as client:
        assert client.get(f"/v1/{second['name']}").json()["state"] == "JOB_STATE_QUEUED"
        first_gate.write_text("go")
        assert wait_job(client, first["name"])["state"] == "JOB_STATE_SUCCEEDED"
        wait_job(client, second["name"], {"JOB_STATE_RUNNING"})
        assert "waitingReason" not in status(client, second["name"])
        second_gate.write_text("go")
        assert wait_job(client, second["name"])["state"] == "JOB_STATE_SUCCEEDED"
    log = service_text(limited.home / "jobs" / second["name"].rsplit("/", 1)[-1])
    assert "Job is queued: waiting for 2 × n1-standard-4" in log


def test_job_that_can_never_fit_is_rejected_with_the_numbers(limited: ServerProcess, tmp_path: Path) -> None:
    with limited.client() as client:
        too_many = create(client, limited, gated(tmp_path / "g", 3))
        assert too_many.status_code == 429, too_many.text
        error = too_many.json()["error"]
        assert error["status"] == "RESOURCE_EXHAUSTED"
        assert "3 × n1-standard-4" in error["message"] and "2" in error["message"]
        gpu = job(
            {
                "machineSpec": {
                    "machineType": "a2-highgpu-1g",
                    "acceleratorType": "NVIDIA_TESLA_A100",
                    "acceleratorCount": 1,
                },
                "replicaCount": "1",
                "containerSpec": {"imageUri": "x", "command": ["true"]},
            },
            {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "2",
                "containerSpec": {"imageUri": "x", "command": ["true"]},
            },
        )
        over_quota = create(client, limited, gpu)  # 12 + 8 vCPUs against a quota of 16
        assert over_quota.status_code == 429
        assert "16" in over_quota.json()["error"]["message"]
        elsewhere = client.post(
            "/v1/projects/test-project/locations/europe-west4/customJobs", json=job(python_pool("pass"))
        )
        assert elsewhere.status_code == 429
        assert "europe-west4" in elsewhere.json()["error"]["message"]


def test_priority_label_must_be_an_integer(limited: ServerProcess) -> None:
    body = {**job(python_pool("pass")), "labels": {"trainworks-priority": "high"}}
    with limited.client() as client:
        answer = create(client, limited, body)
    assert answer.status_code == 400
    fields = [v["field"] for v in answer.json()["error"]["details"][0]["fieldViolations"]]
    assert fields == ['labels["trainworks-priority"]']


def test_higher_priority_job_is_admitted_first(limited: ServerProcess, tmp_path: Path) -> None:
    blocker_gate, low_gate, high_gate = tmp_path / "b", tmp_path / "low", tmp_path / "high"
    with limited.client() as client:
        blocker = create(client, limited, gated(blocker_gate, 2)).json()
        wait_job(client, blocker["name"], {"JOB_STATE_RUNNING"})
        low = create(client, limited, gated(low_gate, 2)).json()
        high_body = {**gated(high_gate, 2), "labels": {"trainworks-priority": "10"}}
        high = create(client, limited, high_body).json()
        wait_for(lambda: status(client, high["name"]).get("waitingReason"), what="the high job to wait")
        blocker_gate.write_text("go")
        wait_job(client, high["name"], {"JOB_STATE_RUNNING"})
        assert client.get(f"/v1/{low['name']}").json()["state"] == "JOB_STATE_QUEUED"
        high_gate.write_text("go")
        low_gate.write_text("go")
        assert wait_job(client, low["name"])["state"] == "JOB_STATE_SUCCEEDED"
        assert wait_job(client, high["name"])["state"] == "JOB_STATE_SUCCEEDED"


def test_bad_inventory_file_stops_the_server_with_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("regions:\n  r:\n    zones:\n      r-a: {machines: {n1-standrd-4: 2}}\n")
    proc = ServerProcess(home=tmp_path / "home", args=["--inventory", str(bad)])
    with pytest.raises(RuntimeError) as failure:
        proc.start(timeout=30)
    assert "n1-standrd-4" in str(failure.value) and "n1-standard-4" in str(failure.value)
