"""PostgreSQL stopped under a running server: every request gets a fast 503 UNAVAILABLE in google.rpc form,
the controllers wait it out with one readable warning, /healthz says the database is unavailable; once the
database is back on the same port and data (no server restart) the running jobs finish, and no job created
before or during the outage is lost or duplicated."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.jobs import job, python_pool
from tests.support.logs import replica_output
from tests.support.pg_fixtures import make_postgres_server  # noqa: F401 - the fixture
from tests.support.postgres import PostgresServer
from tests.support.server import ServerProcess, wait_for, wait_job

GATED = (
    "import pathlib, sys, time\n"
    "gate = pathlib.Path(sys.argv[1])\n"
    "print('waiting', flush=True)\n"
    "deadline = time.time() + 120\n"
    "while not gate.exists() and time.time() < deadline: time.sleep(0.02)\n"
)
FAST = 5.0  # seconds: no request may hang longer while the database is down
CONTROLLERS = (
    "custom-job-controller",
    "tuning-job-controller",
    "persistent-resource-controller",
    "cluster-controller",
    "training-pipeline-controller",
)


def labelled(body: dict[str, Any], run: str, kind: str) -> tuple[str, dict[str, Any]]:
    label = uuid.uuid4().hex
    return label, {**body, "labels": {"outage-run": run, "outage-kind": kind, "outage-attempt": label}}


class Creator(threading.Thread):
    """Creates jobs back to back, so that some are in flight when the database goes away; records each
    create's label with its answer (an HTTP status, or None when there was none)."""

    def __init__(self, server: ServerProcess, run: str) -> None:
        super().__init__(name="creator", daemon=True)
        self.server = server
        self.run_id = run
        self.answers: list[tuple[str, int | None]] = []
        self.refused = threading.Event()  # it got a 503: the outage has begun for it
        self.stop_asked = threading.Event()

    def run(self) -> None:
        with self.server.client() as client:
            while not self.stop_asked.is_set() and len(self.answers) < 200:
                label, body = labelled(job(python_pool("pass")), self.run_id, "in-flight")
                try:
                    status: int | None = client.post(
                        f"/v1/{self.server.parent}/customJobs", json=body
                    ).status_code
                except httpx.TransportError:
                    status = None
                self.answers.append((label, status))
                if status == 503:
                    self.refused.set()


def timed(call: Callable[[], httpx.Response]) -> httpx.Response:
    began = time.monotonic()
    response = call()
    elapsed = time.monotonic() - began
    assert elapsed < FAST, f"{response.request.method} {response.request.url} took {elapsed:.1f}s"
    return response


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, f"{response.request.url}: {response.status_code} {response.text}"
    error = response.json()["error"]
    assert error["code"] == 503 and error["status"] == "UNAVAILABLE", error
    assert "database" in error["message"] and "Retry" in error["message"], error


@pytest.mark.postgres
def test_postgres_stopped_and_started_under_the_server(
    make_postgres_server: Callable[..., PostgresServer],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    pg = make_postgres_server()
    assert pg.url is not None
    run = uuid.uuid4().hex[:12]
    gate = tmp_path / "gate"
    server = ServerProcess(home=tmp_path / "home", args=["--database-url", pg.url]).start()
    assert server.process is not None
    pid = server.process.pid
    try:
        with server.client() as client:
            jobs_url = f"/v1/{server.parent}/customJobs"
            running: dict[str, str] = {}  # label -> name of a job running through the outage
            for _ in range(3):
                label, body = labelled(job(python_pool(GATED, args=[str(gate)])), run, "running")
                running[label] = client.post(jobs_url, json=body).json()["name"]
            for name in running.values():
                wait_job(client, name, {"JOB_STATE_RUNNING"}, timeout=60)
                replica = server.home / "jobs" / name.rsplit("/", 1)[-1] / "workerpool0-0"
                wait_for(lambda r=replica: "waiting" in replica_output(r), what="the replica")
            before: dict[str, str] = {}  # label -> name of a job created just before the outage
            for _ in range(3):
                label, body = labelled(job(python_pool("pass")), run, "before")
                before[label] = client.post(jobs_url, json=body).json()["name"]

            creator = Creator(server, run)
            creator.start()
            wait_for(lambda: len(creator.answers) >= 3, timeout=60, what="creates under way")
            outage_began = time.monotonic()
            pg.halt()
            assert creator.refused.wait(timeout=60), f"no create was refused: {creator.answers[-5:]}"
            creator.stop_asked.set()
            creator.join(timeout=60)
            assert not creator.is_alive()

            # While the database is down: fast 503s in google.rpc form, never a 500 or a hang.
            some = next(iter(running.values()))
            for call in (
                lambda: client.get(f"/v1/{some}"),
                lambda: client.get(jobs_url),
                lambda: client.post(jobs_url, json=labelled(job(python_pool("pass")), run, "refused")[1]),
                lambda: client.post(f"/v1/{some}:cancel", json={}),
                lambda: client.delete(f"/v1/{some}"),
                lambda: client.get(f"/v1/{server.parent}/operations"),
            ):
                assert_unavailable(timed(call))
            assert_unavailable(timed(lambda: client.get("/healthz")))

            # The replicas finish while the database is down; the controllers say so once, and wait.
            gate.write_text("go")
            for name in running.values():
                record = server.home / "jobs" / name.rsplit("/", 1)[-1] / "workerpool0-0" / "exit.json"
                wait_for(record.exists, timeout=60, what=f"{name}'s replica to finish")
            log = server.log_path
            wait_for(
                lambda: all(f"{c}: the database is unavailable" in log.read_text() for c in CONTROLLERS),
                timeout=30,
                what="every controller's warning",
            )
            outage_seconds = time.monotonic() - outage_began

            pg.resume()
            recovered = time.monotonic()
            wait_for(
                lambda: client.get("/healthz").status_code == 200, timeout=30, what="/healthz to recover"
            )
            recovery_seconds = time.monotonic() - recovered
            for name in [*running.values(), *before.values()]:
                done = wait_job(client, name, timeout=60)
                assert done["state"] == "JOB_STATE_SUCCEEDED", done
            wait_for(  # every controller's loop lived through the outage
                lambda: all(f"{c}: the database answers again" in log.read_text() for c in CONTROLLERS),
                timeout=30,
                what="every controller to resume",
            )

            listed = []
            token = ""
            while True:
                page = client.get(
                    jobs_url,
                    params={"filter": f"labels.outage-run={run}", "pageSize": 1000, "pageToken": token},
                ).json()
                listed += page.get("customJobs", [])
                token = page.get("nextPageToken", "")
                if not token:
                    break
        assert server.process is not None and server.process.pid == pid  # never restarted

        made = Counter(j["labels"]["outage-attempt"] for j in listed)
        names = {j["labels"]["outage-attempt"]: j["name"] for j in listed}
        assert all(count == 1 for count in made.values()), made.most_common(3)
        for label, name in {**running, **before}.items():
            assert names.get(label) == name, f"{name} is lost"
        acknowledged = [label for label, status in creator.answers if status == 200]
        for label, status in creator.answers:
            assert status in (200, 503, None), (label, status)  # never a 500
            if status == 200:
                assert label in made, f"an acknowledged create was lost: {label}"
        assert not any(j["labels"]["outage-kind"] == "refused" for j in listed)
        text = log.read_text()
        assert "Internal error" not in text and "reconcile pass failed" not in text
        print(
            "postgres outage:",
            json.dumps(
                {
                    "outage_s": round(outage_seconds, 1),
                    "recovery_s": round(recovery_seconds, 2),
                    "in_flight_creates": len(creator.answers),
                    "acknowledged": len(acknowledged),
                    "refused": sum(1 for _, s in creator.answers if s == 503),
                    "jobs": len(listed),
                }
            ),
        )
    finally:
        server.stop()
