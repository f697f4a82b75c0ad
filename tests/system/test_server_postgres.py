"""The whole server on PostgreSQL: a job runs to success and survives a restart of the server."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, wait_job


def test_server_runs_jobs_on_postgresql(postgres_url: str, tmp_path: Path) -> None:
    server = ServerProcess(home=tmp_path / "home", args=["--database-url", postgres_url]).start()
    try:
        with server.client() as client:
            body = job(python_pool("print('pg')"))
            created = client.post(f"/v1/{server.parent}/customJobs", json=body).json()
            assert wait_job(client, created["name"])["state"] == "JOB_STATE_SUCCEEDED"
            labelled = {**job(python_pool("pass")), "labels": {"db": "pg"}}
            client.post(f"/v1/{server.parent}/customJobs", json=labelled)
        server.stop(signal.SIGKILL)
        server.start()
        with server.client() as client:
            listed = client.get(f"/v1/{server.parent}/customJobs", params={"filter": "labels.db=pg"}).json()
            assert [j["labels"] for j in listed["customJobs"]] == [{"db": "pg"}]
            assert client.get(f"/v1/{created['name']}").json()["state"] == "JOB_STATE_SUCCEEDED"
    finally:
        server.stop()
