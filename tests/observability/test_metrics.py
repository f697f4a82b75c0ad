"""/metrics on a real server: job gauges from the database, queue wait, scheduling passes, replica restarts,
API latency by route template, and the token rule (--metrics-open)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.support.jobs import job, python_pool
from tests.support.logs import replica_output
from tests.support.server import ServerProcess, wait_for, wait_job

GATED = (
    "import pathlib, sys, time\n"
    "gate = pathlib.Path(sys.argv[1])\n"
    "print('waiting', flush=True)\n"
    "deadline = time.time() + 120\n"
    "while not gate.exists() and time.time() < deadline: time.sleep(0.02)\n"
)
JOB_ROUTE = "/v1/projects/{project}/locations/{location}/customJobs/{job_id}"
TOKEN = "metrics-test-token-5b2f"

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(server: ServerProcess, headers: dict[str, str] | None = None) -> Samples:
    response = httpx.get(server.url + "/metrics", headers=headers or {}, timeout=10)
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def jobs_in(samples: Samples, state: str, kind: str = "custom") -> float:
    return value(samples, "trainworks_jobs", kind=kind, state=f"JOB_STATE_{state}")


def create(server: ServerProcess, body: dict) -> str:
    with server.client() as client:
        response = client.post(f"/v1/{server.parent}/customJobs", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["name"])


def job_dir(server: ServerProcess, name: str) -> Path:
    return server.home / "jobs" / name.rsplit("/", 1)[-1]


def started(server: ServerProcess, name: str, tasks: tuple[str, ...]) -> None:
    for task in tasks:
        run_dir = job_dir(server, name) / task
        wait_for(lambda r=run_dir: "waiting" in replica_output(r), what=f"{task} to start")


@pytest.fixture
def gate(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "gate"
    yield path
    path.write_text("go")  # never leave a replica waiting


def test_process_metrics_and_every_job_kind_and_state_are_exported(server: ServerProcess) -> None:
    samples = scrape(server)
    assert value(samples, "process_resident_memory_bytes") > 0
    assert value(samples, "process_start_time_seconds") > 0
    for kind, prefix in (("custom", "JOB_STATE"), ("tuning", "JOB_STATE"), ("pipeline", "PIPELINE_STATE")):
        for state in ("QUEUED", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"):
            assert ("trainworks_jobs", frozenset({("kind", kind), ("state", f"{prefix}_{state}")})) in samples


def test_job_gauges_move_and_queue_wait_is_observed(server: ServerProcess, gate: Path) -> None:
    before = scrape(server)
    name = create(server, job(python_pool(GATED, args=[str(gate)]), name="metrics-gauge"))

    def counted_running() -> Samples | None:
        # The state is written before the controller observes the wait: wait for both, not just the state.
        samples = scrape(server)
        running = jobs_in(samples, "RUNNING") == jobs_in(before, "RUNNING") + 1
        waits = value(samples, "trainworks_job_queue_wait_seconds_count") - value(
            before, "trainworks_job_queue_wait_seconds_count"
        )
        return samples if running and waits >= 1 else None

    running = wait_for(counted_running, what="trainworks_jobs RUNNING and its queue wait to be counted")
    assert value(running, "trainworks_job_queue_wait_seconds_count") == (
        value(before, "trainworks_job_queue_wait_seconds_count") + 1
    )
    waited = value(running, "trainworks_job_queue_wait_seconds_sum") - value(
        before, "trainworks_job_queue_wait_seconds_sum"
    )
    assert 0 <= waited < 60
    # The job was queued, so at least one admission pass planned it.
    assert value(running, "trainworks_scheduling_pass_seconds_count") >= (
        value(before, "trainworks_scheduling_pass_seconds_count") + 1
    )
    started(server, name, ("workerpool0-0",))
    gate.write_text("go")
    with server.client() as client:
        assert wait_job(client, name)["state"] == "JOB_STATE_SUCCEEDED"
    after = scrape(server)
    assert jobs_in(after, "RUNNING") == jobs_in(before, "RUNNING")
    assert jobs_in(after, "SUCCEEDED") == jobs_in(before, "SUCCEEDED") + 1
    # Counted once: the first entry into RUNNING.
    assert value(after, "trainworks_job_queue_wait_seconds_count") == value(
        running, "trainworks_job_queue_wait_seconds_count"
    )


def test_http_latency_is_labelled_by_route_template(server: ServerProcess) -> None:
    name = create(server, job(python_pool("pass"), name="metrics-routes"))
    job_id = name.rsplit("/", 1)[-1]
    before = scrape(server)
    with server.client() as client:
        for _ in range(3):
            assert client.get(f"/v1/{name}").status_code == 200
        assert client.get(f"/v1/{server.parent}/customJobs/999999999").status_code == 404
        assert client.get("/no/such/path/123").status_code == 404
    after = scrape(server)

    def count(route: str, status: str) -> float:
        key = "trainworks_http_request_duration_seconds_count"
        labels = {"method": "GET", "route": route, "status": status}
        return value(after, key, **labels) - value(before, key, **labels)

    assert count(JOB_ROUTE, "2xx") == 3
    assert count(JOB_ROUTE, "4xx") == 1
    assert count("unmatched", "4xx") == 1
    # Bounded label values: no raw path, job ID or unknown path becomes a label.
    routes = {dict(labels).get("route", "") for (_, labels) in after}
    assert not any(job_id in r or "999999999" in r or "/no/such" in r for r in routes)
    inf = value(
        after,
        "trainworks_http_request_duration_seconds_bucket",
        le="+Inf",
        **{"method": "GET", "route": JOB_ROUTE, "status": "2xx"},
    )
    assert inf == value(
        after, "trainworks_http_request_duration_seconds_count", method="GET", route=JOB_ROUTE, status="2xx"
    )


def _shim_pids(server: ServerProcess, name: str) -> dict[str, int]:
    return {
        p.parent.name: json.loads(p.read_text())["pid"] for p in job_dir(server, name).glob("*/shim.json")
    }


def test_restart_of_the_whole_job_counts_each_replica(server: ServerProcess, gate: Path) -> None:
    """A lost worker with restartJobOnWorkerRestart restarts both replicas of the job."""
    pool = python_pool(GATED, args=[str(gate)])
    body = job(pool, pool, name="metrics-restart", scheduling={"restartJobOnWorkerRestart": True})
    before = scrape(server)
    name = create(server, body)
    with server.client() as client:
        wait_job(client, name, {"JOB_STATE_RUNNING"})
    started(server, name, ("workerpool0-0", "workerpool1-0"))
    os.killpg(_shim_pids(server, name)["workerpool1-0"], signal.SIGKILL)  # dies without an exit record
    with server.client() as client:
        wait_for(
            lambda: client.get(f"/trainworks/v1/{name}/status").json().get("attempt", 0) >= 1,
            what="the job to restart",
        )
    gate.write_text("go")
    with server.client() as client:
        assert wait_job(client, name)["state"] == "JOB_STATE_SUCCEEDED"
    after = scrape(server)
    key = "trainworks_replica_restarts_total"
    assert value(after, key, reason="internal") - value(before, key, reason="internal") == 2
    assert value(after, key, reason="worker") == value(before, key, reason="worker")


def test_lost_worker_restarting_alone_counts_one(server: ServerProcess, gate: Path) -> None:
    pool = python_pool(GATED, args=[str(gate)])
    before = scrape(server)
    name = create(server, job(pool, pool, name="metrics-worker-restart"))
    with server.client() as client:
        wait_job(client, name, {"JOB_STATE_RUNNING"})
    started(server, name, ("workerpool0-0", "workerpool1-0"))
    first = _shim_pids(server, name)
    os.killpg(first["workerpool1-0"], signal.SIGKILL)
    key = "trainworks_replica_restarts_total"
    wait_for(
        lambda: value(scrape(server), key, reason="worker") == value(before, key, reason="worker") + 1,
        what="the worker's restart to be counted",
    )
    wait_for(
        lambda: (p := _shim_pids(server, name).get("workerpool1-0")) and p != first["workerpool1-0"],
        what="the worker to start again",
    )
    gate.write_text("go")
    with server.client() as client:
        assert wait_job(client, name)["state"] == "JOB_STATE_SUCCEEDED"
    assert value(scrape(server), key, reason="internal") == value(before, key, reason="internal")


@pytest.mark.parametrize("metrics_open", [False, True])
def test_metrics_need_a_token_unless_open(tmp_path: Path, metrics_open: bool) -> None:
    args = ["--api-token", TOKEN] + (["--metrics-open"] if metrics_open else [])
    server = ServerProcess(home=tmp_path / "home", args=args).start()
    try:
        anonymous = httpx.get(server.url + "/metrics", timeout=10)
        if metrics_open:
            assert anonymous.status_code == 200
            assert "trainworks_jobs" in anonymous.text
        else:
            assert anonymous.status_code == 403
            assert anonymous.json()["error"]["status"] == "PERMISSION_DENIED"
        before = scrape(server, {"Authorization": f"Bearer {TOKEN}"})
        assert ("trainworks_jobs", frozenset({("kind", "custom"), ("state", "JOB_STATE_QUEUED")})) in before
        # Only /metrics is opened: the API still wants the token.
        listing = httpx.get(f"{server.url}/v1/{server.parent}/customJobs", timeout=10)
        assert listing.status_code == 403
        # Requests the auth middleware refuses never reach the router: they are still timed, under the
        # template of the route they asked for.
        after = scrape(server, {"x-goog-api-key": TOKEN})
        key = "trainworks_http_request_duration_seconds_count"
        labels = {"method": "GET", "route": "/v1/projects/{project}/locations/{location}/customJobs"}
        assert value(after, key, status="4xx", **labels) == value(before, key, status="4xx", **labels) + 1
    finally:
        server.stop()
