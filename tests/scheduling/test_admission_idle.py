"""The admission pass reuses its decision while nothing it reads has changed.

With jobs waiting on capacity and nothing happening, the controller still runs every second, but the
planning pass (counted by trainworks_scheduling_pass_seconds_count at /metrics) must not run again: its
inputs are the same. It must run again when a job arrives, leaves the queue or frees capacity, and the
time-based FLEX_START expiry must still fire while the decision is reused.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, wait_for, wait_job

# One machine: a running job holds it, every other job waits.
INVENTORY = """
regions:
  us-central1:
    zones:
      us-central1-a: {machines: {n1-standard-4: 1}}
"""
GATED = (
    "import pathlib, sys, time\n"
    "gate = pathlib.Path(sys.argv[1])\n"
    "deadline = time.time() + 120\n"
    "while not gate.exists() and time.time() < deadline: time.sleep(0.02)\n"
)
PASSES = "trainworks_scheduling_pass_seconds_count"


@pytest.fixture
def one_machine(tmp_path: Path) -> Iterator[ServerProcess]:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(INVENTORY)
    proc = ServerProcess(home=tmp_path / "home", args=["--inventory", str(inventory)]).start()
    yield proc
    proc.stop()


def passes(client: httpx.Client) -> int:
    """Real planning passes so far."""
    for line in client.get("/metrics").text.splitlines():
        if line.startswith(PASSES + " "):
            return int(float(line.split()[1]))
    raise AssertionError(f"{PASSES} missing from /metrics")


def waiting_reason(client: httpx.Client, name: str) -> str | None:
    return client.get(f"/trainworks/v1/{name}/status").json().get("waitingReason")


def flex(max_wait: str) -> dict:
    return job(python_pool("pass"), scheduling={"strategy": "FLEX_START", "maxWaitDuration": max_wait})


def test_idle_queue_is_not_replanned_until_something_changes(
    one_machine: ServerProcess, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    jobs = f"/v1/{one_machine.parent}/customJobs"
    with one_machine.client() as client:
        holder = client.post(jobs, json=job(python_pool(GATED, args=[str(gate)]))).json()
        wait_job(client, holder["name"], {"JOB_STATE_RUNNING"})
        waiter = client.post(jobs, json=job(python_pool("pass"))).json()["name"]
        # Two FLEX_START jobs whose waits run out at different times: each expiry proves that passes ran
        # (and checked the clock) in between.
        early = client.post(jobs, json=flex("3s")).json()["name"]
        late = client.post(jobs, json=flex("6s")).json()["name"]
        for name in (waiter, early, late):
            wait_for(lambda n=name: waiting_reason(client, n), what=f"{name} to wait for capacity")
        start = passes(client)

        # The early job expires during passes that reuse the decision; its leaving the queue is one change.
        failed = wait_job(client, early, timeout=30)
        assert failed["state"] == "JOB_STATE_FAILED"
        assert "maxWaitDuration (3s)" in failed["error"]["message"]
        wait_for(lambda: passes(client) >= start + 1, what="a planning pass once the early job left")

        # Between the two expiries (about three seconds of passes) nothing changed: no planning pass ran.
        failed = wait_job(client, late, timeout=30)
        assert failed["state"] == "JOB_STATE_FAILED"
        assert "maxWaitDuration (6s)" in failed["error"]["message"]
        assert passes(client) in (start + 1, start + 2)  # +2 only once the pass after the expiry has run
        wait_for(lambda: passes(client) >= start + 2, what="a planning pass once the late job left")
        settled = passes(client)
        assert settled == start + 2

        # A new job arrives: planned again, and it waits too.
        newcomer = client.post(jobs, json=job(python_pool("pass"))).json()["name"]
        wait_for(lambda: waiting_reason(client, newcomer), what="the new job to wait for capacity")
        assert passes(client) > settled
        arrived = passes(client)

        # Capacity frees: planned again, and the waiting jobs run (one after the other on the one machine).
        gate.write_text("go")
        assert wait_job(client, holder["name"])["state"] == "JOB_STATE_SUCCEEDED"
        assert wait_job(client, waiter)["state"] == "JOB_STATE_SUCCEEDED"
        assert wait_job(client, newcomer)["state"] == "JOB_STATE_SUCCEEDED"
        assert passes(client) > arrived
