"""FLEX_START: every replica starts together, the wait is bounded by maxWaitDuration, one machine shape."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, wait_for, wait_job

INVENTORY = """
regions:
  us-central1:
    zones:
      us-central1-a: {machines: {n1-standard-4: 2}}
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


def flex(max_wait: str | None, *pools: dict) -> dict:
    scheduling = {"strategy": "FLEX_START"}
    if max_wait is not None:
        scheduling["maxWaitDuration"] = max_wait
    return job(*pools, scheduling=scheduling)


def test_flex_start_fails_clearly_after_max_wait(limited: ServerProcess, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    with limited.client() as client:
        blocker = client.post(
            f"/v1/{limited.parent}/customJobs",
            json=job(python_pool(GATED, args=[str(gate)]), python_pool(GATED, args=[str(gate)])),
        ).json()
        wait_job(client, blocker["name"], {"JOB_STATE_RUNNING"})
        waiting = client.post(
            f"/v1/{limited.parent}/customJobs", json=flex("1s", python_pool("pass"), python_pool("pass"))
        ).json()
        done = wait_job(client, waiting["name"], timeout=60)
        gate.write_text("go")
        wait_job(client, blocker["name"])
    assert done["state"] == "JOB_STATE_FAILED"
    assert done["error"]["code"] == 8
    assert "maxWaitDuration (1s)" in done["error"]["message"]
    assert "2 × n1-standard-4" in done["error"]["message"]
    assert "startTime" not in done


def test_flex_start_starts_all_replicas_together_once_capacity_frees(
    limited: ServerProcess, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    with limited.client() as client:
        blocker = client.post(
            f"/v1/{limited.parent}/customJobs", json=job(python_pool(GATED, args=[str(gate)]))
        ).json()
        wait_job(client, blocker["name"], {"JOB_STATE_RUNNING"})
        waiting = client.post(
            f"/v1/{limited.parent}/customJobs", json=flex("0s", python_pool("pass"), python_pool("pass"))
        ).json()
        wait_for(
            lambda: client.get(f"/trainworks/v1/{waiting['name']}/status").json().get("waitingReason"),
            what="the flex-start job to wait for both machines",
        )
        gate.write_text("go")
        assert wait_job(client, waiting["name"])["state"] == "JOB_STATE_SUCCEEDED"


def test_flex_start_needs_one_machine_shape_and_at_most_seven_days(limited: ServerProcess) -> None:
    other = python_pool("pass")
    other["machineSpec"] = {"machineType": "n1-standard-8"}
    with limited.client() as client:
        mixed = client.post(f"/v1/{limited.parent}/customJobs", json=flex(None, python_pool("pass"), other))
        body = flex(None, python_pool("pass"))
        body["jobSpec"]["scheduling"]["timeout"] = "700000s"
        too_long = client.post(f"/v1/{limited.parent}/customJobs", json=body)
    fields = [v["field"] for v in mixed.json()["error"]["details"][0]["fieldViolations"]]
    assert mixed.status_code == 400 and fields == ["job_spec.worker_pool_specs[1].machine_spec"]
    fields = [v["field"] for v in too_long.json()["error"]["details"][0]["fieldViolations"]]
    assert too_long.status_code == 400 and fields == ["job_spec.scheduling.timeout"]
