"""Optional auth: a bearer token or x-goog-api-key; anything else gets 403 (never 401)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ServerProcess


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("auth"), args=["--api-token", "s3cret"]).start()
    yield proc
    proc.stop()


def test_requests_without_credentials_are_forbidden(locked: ServerProcess) -> None:
    with locked.client() as client:
        response = client.get(f"/v1/{locked.parent}/customJobs")
    assert response.status_code == 403
    assert response.json()["error"]["status"] == "PERMISSION_DENIED"


def test_wrong_token_is_forbidden(locked: ServerProcess) -> None:
    with locked.client(headers={"authorization": "Bearer nope"}) as client:
        assert client.get(f"/v1/{locked.parent}/customJobs").status_code == 403


@pytest.mark.parametrize("headers", [{"authorization": "Bearer s3cret"}, {"x-goog-api-key": "s3cret"}])
def test_token_or_api_key_is_accepted(locked: ServerProcess, headers: dict[str, str]) -> None:
    with locked.client(headers=headers) as client:
        assert client.get(f"/v1/{locked.parent}/customJobs").status_code == 200
        assert client.get(f"/ui/{locked.parent}/operations").status_code == 200


def test_healthz_stays_open(locked: ServerProcess) -> None:
    with locked.client() as client:
        assert client.get("/healthz").status_code == 200


def test_resources_are_scoped_by_project_and_location(locked: ServerProcess, tmp_path: Path) -> None:
    headers = {"x-goog-api-key": "s3cret"}
    body = {
        "displayName": "scoped",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "x", "command": ["true"]},
                }
            ]
        },
    }
    with locked.client(headers=headers) as client:
        name = client.post(f"/v1/{locked.parent}/customJobs", json=body).json()["name"]
        job_id = name.rsplit("/", 1)[-1]
        assert client.get(f"/v1/{name}").status_code == 200
        assert client.get(f"/v1/projects/other/locations/us-central1/customJobs/{job_id}").status_code == 404
        assert (
            client.get(f"/v1/projects/test-project/locations/europe-west4/customJobs/{job_id}").status_code
            == 404
        )
        listed = client.get("/v1/projects/other/locations/us-central1/customJobs").json()
        assert listed.get("customJobs", []) == []
