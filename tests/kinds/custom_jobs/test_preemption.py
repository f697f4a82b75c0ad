"""SPOT preemption with real training code: restarts resume from checkpoints; past 6 restarts it fails."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.jobs import job, python_pool
from tests.support.logs import replica_output
from tests.support.paths import EXAMPLES
from tests.support.server import ServerProcess, wait_for, wait_job

TRAIN = EXAMPLES / "checkpointed_train.py"


@pytest.fixture(scope="module")
def spot_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("spot"), args=["--preemption-notice", "2"]).start()
    yield proc
    proc.stop()


def training_job(run: str, spot: bool) -> dict:
    container = {
        "imageUri": "pytorch:cpu",
        "command": [sys.executable, str(TRAIN)],
        "args": ["--steps", "40", "--checkpoint-every", "5", "--step-seconds", "0.05"],
    }
    spec: dict = {"baseOutputDirectory": {"outputUriPrefix": f"gs://spot-bucket/{run}"}}
    if spot:
        spec["scheduling"] = {"strategy": "SPOT"}
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1", "containerSpec": container}
    return {"displayName": run, "jobSpec": {"workerPoolSpecs": [pool], **spec}}


def status(client: httpx.Client, name: str) -> dict:
    response = client.get(f"/trainworks/v1/{name}/status")
    assert response.status_code == 200, response.text
    return response.json()


def result(server: ServerProcess, run: str) -> dict:
    return json.loads((server.home / "buckets" / "spot-bucket" / run / "model" / "result.json").read_text())


def checkpoints(run_dir: Path, attempt: int) -> int:
    """The checkpoints attempt `attempt` has printed since it started (each attempt starts with "fresh start"
    or "resumed from step N"): what an earlier attempt printed in its notice period does not count."""
    runs = re.split(r"^(?:fresh start|resumed from step \d+)$", replica_output(run_dir), flags=re.MULTILINE)
    return runs[attempt + 1].count("checkpoint ") if len(runs) > attempt + 1 else 0


def test_preempted_three_times_ends_exactly_like_an_uninterrupted_run(spot_server: ServerProcess) -> None:
    with spot_server.client() as client:
        plain = client.post(f"/v1/{spot_server.parent}/customJobs", json=training_job("plain", False)).json()
        spot = client.post(f"/v1/{spot_server.parent}/customJobs", json=training_job("spot", True)).json()
        replica = spot_server.home / "jobs" / spot["name"].rsplit("/", 1)[-1] / "workerpool0-0"
        for attempt in range(3):
            wait_for(
                lambda a=attempt: (
                    (s := status(client, spot["name"]))["attempt"] == a and s["state"] == "JOB_STATE_RUNNING"
                ),
                what=f"attempt {attempt + 1} to run",
            )
            # Preempt only after this attempt has saved a checkpoint of its own: progress is kept.
            wait_for(lambda a=attempt: checkpoints(replica, a) > 0, what="a new checkpoint", timeout=120)
            answer = client.post(f"/trainworks/v1/{spot['name']}:preempt", json={})
            assert answer.status_code == 200, answer.text
            assert answer.json() == {"preempted": ["workerpool0-0"]}
        done = wait_job(client, spot["name"], timeout=300)
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        assert wait_job(client, plain["name"], timeout=300)["state"] == "JOB_STATE_SUCCEEDED"
        history = status(client, spot["name"])["restarts"]
    assert [h["kind"] for h in history] == ["preemption"] * 3
    assert replica_output(replica).count("resumed from step") == 3
    assert result(spot_server, "spot") == result(spot_server, "plain")  # bit for bit


def test_seventh_preemption_fails_the_job_with_a_stockout(spot_server: ServerProcess) -> None:
    body = job(python_pool("import time; time.sleep(120)"), scheduling={"strategy": "SPOT"})
    with spot_server.client() as client:
        name = client.post(f"/v1/{spot_server.parent}/customJobs", json=body).json()["name"]
        for attempt in range(7):
            wait_for(
                lambda a=attempt: (
                    (s := status(client, name))["attempt"] == a and s["state"] == "JOB_STATE_RUNNING"
                ),
                what=f"attempt {attempt + 1} to run",
            )
            assert (
                client.post(f"/trainworks/v1/{name}:preempt", json={"replica": "workerpool0-0"}).status_code
                == 200
            )
        done = wait_job(client, name, timeout=120)
        history = status(client, name)["restarts"]
    assert done["state"] == "JOB_STATE_FAILED"
    assert done["error"]["code"] == 8
    assert "STOCKOUT" in done["error"]["message"] and "restarted 6 times" in done["error"]["message"]
    assert len(history) == 6


def test_only_running_spot_jobs_are_preemptible(spot_server: ServerProcess) -> None:
    with spot_server.client() as client:
        standard = client.post(f"/v1/{spot_server.parent}/customJobs", json=job(python_pool("pass"))).json()
        answer = client.post(f"/trainworks/v1/{standard['name']}:preempt", json={})
        assert answer.status_code == 400 and answer.json()["error"]["status"] == "FAILED_PRECONDITION"
        body = job(python_pool("import time; time.sleep(60)"), scheduling={"strategy": "SPOT"})
        spot = client.post(f"/v1/{spot_server.parent}/customJobs", json=body).json()
        wait_job(client, spot["name"], {"JOB_STATE_RUNNING"})
        answer = client.post(f"/trainworks/v1/{spot['name']}:preempt", json={"replica": "workerpool1-7"})
        assert answer.status_code == 400
        assert answer.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "replica"
        # Aimed at an attempt the job is not on (it restarted meanwhile): refused, nothing preempted.
        answer = client.post(f"/trainworks/v1/{spot['name']}:preempt", json={"attempt": 1})
        assert answer.status_code == 400 and answer.json()["error"]["status"] == "FAILED_PRECONDITION"
        assert "runs attempt 0, not 1" in answer.json()["error"]["message"]
        for bad in ("0", -1, True, 1.5):
            answer = client.post(f"/trainworks/v1/{spot['name']}:preempt", json={"attempt": bad})
            assert answer.status_code == 400, bad
            assert answer.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "attempt"
        assert status(client, spot["name"])["restarts"] == []
        answer = client.post(f"/trainworks/v1/{spot['name']}:preempt", json={"attempt": 0})
        assert answer.status_code == 200 and answer.json()["preempted"] == ["workerpool0-0"]
        client.post(f"/v1/{spot['name']}:cancel", json={})
        assert wait_job(client, spot["name"])["state"] == "JOB_STATE_CANCELLED"


def test_cli_admin_preempt(spot_server: ServerProcess) -> None:
    import subprocess

    body = job(python_pool("import time; time.sleep(60)"), scheduling={"strategy": "SPOT"})
    with spot_server.client() as client:
        name = client.post(f"/v1/{spot_server.parent}/customJobs", json=body).json()["name"]
        wait_job(client, name, {"JOB_STATE_RUNNING"})
        run = subprocess.run(
            [
                sys.executable,
                "-m",
                "trainworks.cli.main",
                "admin",
                "preempt",
                name,
                "--endpoint",
                spot_server.url,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert run.returncode == 0, run.stderr
        assert "Preempted workerpool0-0" in run.stderr + run.stdout
        wait_for(lambda: status(client, name)["attempt"] == 1, what="the restart")
        described = subprocess.run(
            [
                sys.executable,
                "-m",
                "trainworks.cli.main",
                "custom-jobs",
                "describe",
                name,
                "--endpoint",
                spot_server.url,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert "preemption" in described.stdout, described.stdout
        client.post(f"/v1/{name}:cancel", json={})
        wait_job(client, name)


def test_preemption_chance_follows_the_rate() -> None:
    from trainworks.kinds.custom_jobs.rules import preemption_chance

    assert preemption_chance(0.0, 3600) == 0.0
    assert abs(preemption_chance(1.0, 3600) - (1 - 2.718281828459045**-1)) < 1e-9
    assert preemption_chance(3600.0, 10) > 0.9999  # one per second on average: ten seconds is near certain
    assert preemption_chance(5.0, -1) == 0.0


def test_random_preemption_rate_of_the_region_restarts_spot_jobs(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("regions:\n  us-central1:\n    elastic: true\n    preemption_rate_per_hour: 36000\n")
    server = ServerProcess(
        home=tmp_path / "home", args=["--inventory", str(inventory), "--preemption-notice", "1"]
    ).start()
    try:
        body = job(python_pool("import time; time.sleep(60)"), scheduling={"strategy": "SPOT"})
        standard = job(python_pool("import time; time.sleep(1)"))
        with server.client() as client:
            name = client.post(f"/v1/{server.parent}/customJobs", json=body).json()["name"]
            steady = client.post(f"/v1/{server.parent}/customJobs", json=standard).json()["name"]
            wait_for(lambda: status(client, name)["attempt"] >= 1, what="a random preemption", timeout=60)
            assert status(client, name)["restarts"][0]["kind"] == "preemption"
            assert wait_job(client, steady)["state"] == "JOB_STATE_SUCCEEDED"  # STANDARD jobs are never hit
            assert status(client, steady)["restarts"] == []
            client.post(f"/v1/{name}:cancel", json={})
            wait_job(client, name, timeout=60)
    finally:
        server.stop()
