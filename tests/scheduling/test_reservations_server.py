"""Reservations through a real server with an inventory: SPECIFIC_RESERVATION jobs run in their reservation,
jobs that do not consume reservations wait while only reserved capacity is free, create-time rules."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, wait_for, wait_job

# One zone with 2 a2-highgpu-1g: 1 held by reservation my-res, 1 general. `theirs` belongs to another project.
INVENTORY = """
regions:
  us-central1:
    zones:
      us-central1-a: {machines: {a2-highgpu-1g: 2, n1-standard-4: 2}}
    reservations:
      my-res: {zone: us-central1-a, machine_type: a2-highgpu-1g, count: 1}
      theirs: {zone: us-central1-a, machine_type: n1-standard-4, count: 1, project: "999"}
"""

GATED = (
    "import pathlib, sys, time\n"
    "gate = pathlib.Path(sys.argv[1])\n"
    "deadline = time.time() + 120\n"
    "while not gate.exists() and time.time() < deadline: time.sleep(0.02)\n"
)
KEY = "compute.googleapis.com/reservation-name"
MY_RES = "projects/test-project/zones/us-central1-a/reservations/my-res"
AFFINITY = "job_spec.worker_pool_specs[0].machine_spec.reservation_affinity"


@pytest.fixture
def reserved(tmp_path: Path) -> Iterator[ServerProcess]:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(INVENTORY)
    proc = ServerProcess(home=tmp_path / "home", args=["--inventory", str(inventory)]).start()
    yield proc
    proc.stop()


def gpu_job(gate: Path, affinity: dict[str, Any] | None = None) -> dict[str, Any]:
    pool = copy.deepcopy(python_pool(GATED, args=[str(gate)]))
    pool["machineSpec"] = {
        "machineType": "a2-highgpu-1g",
        "acceleratorType": "NVIDIA_TESLA_A100",
        "acceleratorCount": 1,
    }
    if affinity is not None:
        pool["machineSpec"]["reservationAffinity"] = affinity
    return job(pool)


def specific(name: str = MY_RES) -> dict[str, Any]:
    return {"reservationAffinityType": "SPECIFIC_RESERVATION", "key": KEY, "values": [name]}


def create(client: httpx.Client, server: ServerProcess, body: dict[str, Any]) -> httpx.Response:
    return client.post(f"/v1/{server.parent}/customJobs", json=body)


def status(client: httpx.Client, name: str) -> dict[str, Any]:
    return client.get(f"/trainworks/v1/{name}/status").json()  # type: ignore[no-any-return]


def test_specific_job_runs_in_its_reservation_while_a_no_reservation_job_waits(
    reserved: ServerProcess, tmp_path: Path
) -> None:
    general_gate, waiting_gate, specific_gate = (
        tmp_path / "general",
        tmp_path / "waiting",
        tmp_path / "specific",
    )
    with reserved.client() as client:
        # The one general a2 goes to a job that does not consume reservations.
        general = create(client, reserved, gpu_job(general_gate)).json()
        wait_job(client, general["name"], {"JOB_STATE_RUNNING"})
        # The next such job waits although the reserved a2 is idle: it is not for this job.
        no_res = create(
            client, reserved, gpu_job(waiting_gate, {"reservationAffinityType": "NO_RESERVATION"})
        )
        assert no_res.status_code == 200, no_res.text
        waiting = no_res.json()
        reason = wait_for(
            lambda: status(client, waiting["name"]).get("waitingReason"), what="a waiting reason"
        )
        assert "waiting for 1 × a2-highgpu-1g in us-central1: 0 free" in reason, reason
        assert "1 × a2-highgpu-1g in reservation my-res is free, but not for this job" in reason, reason

        # A job naming the reservation runs in it, while the other one still waits.
        chosen = create(client, reserved, gpu_job(specific_gate, specific())).json()
        wait_job(client, chosen["name"], {"JOB_STATE_RUNNING"})
        assert status(client, chosen["name"])["zone"] == "us-central1-a"
        assert client.get(f"/v1/{waiting['name']}").json()["state"] == "JOB_STATE_QUEUED"
        stored = client.get(f"/v1/{chosen['name']}").json()
        affinity = stored["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["reservationAffinity"]
        assert affinity == specific()

        # A second job naming it (by its bare name) waits for the reservation, not for general capacity.
        second_gate = tmp_path / "second"
        second = create(client, reserved, gpu_job(second_gate, specific("my-res"))).json()
        reason = wait_for(
            lambda: status(client, second["name"]).get("waitingReason"), what="a waiting reason"
        )
        assert reason == "waiting for 1 × a2-highgpu-1g in reservation my-res: 0 free", reason

        # Freeing the general a2 starts the NO_RESERVATION job; freeing the reservation the second one.
        general_gate.write_text("go")
        assert wait_job(client, general["name"])["state"] == "JOB_STATE_SUCCEEDED"
        wait_job(client, waiting["name"], {"JOB_STATE_RUNNING"})
        assert client.get(f"/v1/{second['name']}").json()["state"] == "JOB_STATE_QUEUED"
        specific_gate.write_text("go")
        assert wait_job(client, chosen["name"])["state"] == "JOB_STATE_SUCCEEDED"
        wait_job(client, second["name"], {"JOB_STATE_RUNNING"})
        waiting_gate.write_text("go")
        second_gate.write_text("go")
        assert wait_job(client, waiting["name"])["state"] == "JOB_STATE_SUCCEEDED"
        assert wait_job(client, second["name"])["state"] == "JOB_STATE_SUCCEEDED"


def test_reservations_that_can_never_serve_a_job_are_rejected_at_create(
    reserved: ServerProcess, tmp_path: Path
) -> None:
    gate = tmp_path / "never"
    with reserved.client() as client:
        cases = {
            "reservation 'nope' does not exist in us-central1": specific("nope"),
            "reservation my-res is in zone us-central1-a, not us-central1-b": specific(
                "projects/test-project/zones/us-central1-b/reservations/my-res"
            ),
        }
        for words, affinity in cases.items():
            answer = create(client, reserved, gpu_job(gate, affinity))
            assert answer.status_code == 429, answer.text
            error = answer.json()["error"]
            assert error["status"] == "RESOURCE_EXHAUSTED"
            assert words in error["message"], error["message"]
        too_many = gpu_job(gate, specific())
        too_many["jobSpec"]["workerPoolSpecs"].append(
            {**too_many["jobSpec"]["workerPoolSpecs"][0], "replicaCount": "1"}
        )
        answer = create(client, reserved, too_many)
        assert answer.status_code == 429
        assert (
            "needs 2 × a2-highgpu-1g from reservation my-res, which holds 1"
            in answer.json()["error"]["message"]
        )
        cpu = copy.deepcopy(job(python_pool("pass")))
        cpu["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["reservationAffinity"] = specific("theirs")
        answer = create(client, reserved, cpu)
        assert answer.status_code == 429
        assert "reservation theirs may only be used by project 999" in answer.json()["error"]["message"]


def test_reservation_affinity_is_validated_with_field_paths(reserved: ServerProcess, tmp_path: Path) -> None:
    gate = tmp_path / "invalid"
    with reserved.client() as client:
        cases = [
            ({"reservationAffinityType": "SPECIFIC_RESERVATION", "key": KEY}, f"{AFFINITY}.values"),
            ({"reservationAffinityType": "SPECIFIC_RESERVATION", "values": [MY_RES]}, f"{AFFINITY}.key"),
            ({"reservationAffinityType": "ANY_RESERVATION", "values": [MY_RES]}, f"{AFFINITY}.values"),
            ({"key": KEY, "values": [MY_RES]}, f"{AFFINITY}.reservation_affinity_type"),
        ]
        for affinity, field in cases:
            answer = create(client, reserved, gpu_job(gate, affinity))
            assert answer.status_code == 400, answer.text
            violations = answer.json()["error"]["details"][0]["fieldViolations"]
            assert [v["field"] for v in violations] == [field], violations
