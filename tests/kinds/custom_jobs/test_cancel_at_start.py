"""A cancel sent the moment a job turns RUNNING stops its replica by SIGTERM at once, whatever the replica's
supervisor was doing (its interpreter starting up, the sandbox being built, the command being forked): the
grace before SIGKILL is far longer than the test waits, so a lost SIGTERM fails it. Each replica's exit record
must say it ended by that SIGTERM (not LOST, not SIGKILL)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, wait_for, wait_job

GRACE = 600  # seconds before SIGKILL: far beyond every wait below


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("cancel-at-start") / "home"
    proc = ServerProcess(home=home, args=["--cancel-grace", str(GRACE)]).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.parametrize("attempt", range(6))
def test_a_cancel_as_the_job_turns_running_stops_it_by_sigterm(server: ServerProcess, attempt: int) -> None:
    body = job(python_pool("import time; time.sleep(3600)"), name=f"cancel-at-start-{attempt}")
    with server.client() as client:
        name = client.post(f"/v1/{server.parent}/customJobs", json=body).json()["name"]
        wait_for(
            lambda: client.get(f"/v1/{name}").json()["state"] == "JOB_STATE_RUNNING",
            interval=0.002,
            what="RUNNING",
        )
        assert client.post(f"/v1/{name}:cancel").status_code == 200
        done = wait_job(client, name, timeout=120)
    assert done["state"] == "JOB_STATE_CANCELLED", done
    record = Path(server.home) / "jobs" / name.rsplit("/", 1)[-1] / "workerpool0-0" / "exit.json"
    exit = json.loads(record.read_text())
    assert exit.get("signal") == signal.SIGTERM or exit["exit_code"] == 128 + signal.SIGTERM, exit
    assert exit.get("interrupted") in (True, 1), exit
