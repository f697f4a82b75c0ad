"""entries:list follows project tokens as the rest of the API does: the projects are in the body, and each one
named must be the caller's (403 PERMISSION_DENIED naming the first that is not); an admin token reads all."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, wait_job

FLAG = "flag-admin-" + secrets.token_urlsafe(16)
LOC = "us-central1"


@dataclass
class World:
    server: ServerProcess
    alpha_token: str
    jobs: dict[str, str]  # project -> its job's ID

    def http(self, token: str | None) -> httpx.Client:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        return self.server.client(headers=headers)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    server = ServerProcess(home=tmp_path_factory.mktemp("logs-access"), args=["--api-token", FLAG]).start()
    try:
        made = subprocess.run(
            [sys.executable, "-m", "trainworks.cli.main", "admin", "tokens", "create", "--project", "alpha"]
            + ["--home", str(server.home)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert made.returncode == 0, made.stderr
        jobs = {}
        with server.client(headers={"authorization": f"Bearer {FLAG}"}) as admin:
            names = {}
            for project in ("alpha", "beta"):
                body = job(python_pool(f"print('hello from {project}')"))
                created = admin.post(f"/v1/projects/{project}/locations/{LOC}/customJobs", json=body)
                assert created.status_code == 200, created.text
                names[project] = created.json()["name"]
            for project, name in names.items():
                assert wait_job(admin, name)["state"] == "JOB_STATE_SUCCEEDED"
                jobs[project] = name.rsplit("/", 1)[1]
        yield World(server, made.stdout.strip(), jobs)
    finally:
        server.stop()


def entries_list(http: httpx.Client, projects: list[str], filter_: str = "") -> httpx.Response:
    return http.post(
        "/v2/entries:list", json={"resourceNames": [f"projects/{p}" for p in projects], "filter": filter_}
    )


def lines(answer: dict[str, Any]) -> list[str]:
    return [e["textPayload"] for e in answer.get("entries", []) if e["textPayload"].startswith("hello")]


def test_a_project_token_reads_its_own_project(world: World) -> None:
    with world.http(world.alpha_token) as http:
        answer = entries_list(http, ["alpha"])
    assert answer.status_code == 200, answer.text
    assert lines(answer.json()) == ["hello from alpha"]


def test_another_project_is_refused_by_name(world: World) -> None:
    with world.http(world.alpha_token) as http:
        for projects in (["beta"], ["alpha", "beta"]):
            refused = entries_list(http, projects)
            assert refused.status_code == 403, refused.text
            error = refused.json()["error"]
            assert error["status"] == "PERMISSION_DENIED" and "'beta'" in error["message"]
        # Naming the other project's job under one's own project finds nothing of it.
        hidden = entries_list(http, ["alpha"], f"resource.labels.job_id={world.jobs['beta']}")
        assert hidden.status_code == 200 and hidden.json() == {}


def test_no_token_or_a_wrong_one_is_refused(world: World) -> None:
    for token in (None, "tw_not-a-token"):
        with world.http(token) as http:
            refused = entries_list(http, ["alpha"])
        assert refused.status_code == 403 and refused.json()["error"]["status"] == "PERMISSION_DENIED"


def test_an_admin_token_reads_every_project(world: World) -> None:
    with world.http(FLAG) as http:
        answer = entries_list(http, ["alpha", "beta"], 'textPayload:"hello from"')
    assert answer.status_code == 200
    assert sorted(lines(answer.json())) == ["hello from alpha", "hello from beta"]
