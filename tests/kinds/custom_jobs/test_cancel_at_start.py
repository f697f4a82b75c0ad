"""A cancel sent the moment a job turns RUNNING stops its replica by SIGTERM at once, whatever the replica's
supervisor was doing (its interpreter starting up, the sandbox being built, the command being forked): the
grace before SIGKILL is far longer than the test waits, so a lost SIGTERM fails it. Each replica's exit record
must say it ended by that SIGTERM (not LOST, not SIGKILL)."""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator

import pytest

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, cancel_when_running

GRACE = 600  # seconds before SIGKILL: far beyond every wait below


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("cancel-at-start") / "home"
    # Every replica started cold, its sandbox built after the submit (a slot's: test_replica_slots.py).
    proc = ServerProcess(home=home, args=["--cancel-grace", str(GRACE), "--replica-slots", "0"]).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.parametrize("attempt", range(6))
def test_a_cancel_as_the_job_turns_running_stops_it_by_sigterm(server: ServerProcess, attempt: int) -> None:
    body = job(python_pool("import time; time.sleep(3600)"), name=f"cancel-at-start-{attempt}")
    done, run_dir = cancel_when_running(server, body)
    assert done["state"] == "JOB_STATE_CANCELLED", done
    record = run_dir / "exit.json"
    exit = json.loads(record.read_text())
    assert exit.get("signal") == signal.SIGTERM or exit["exit_code"] == 128 + signal.SIGTERM, exit
    assert exit.get("interrupted") in (True, 1), exit
