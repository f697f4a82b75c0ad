"""Auth over gRPC (api/rpc_guard.py): a call is judged as the REST request for the same resource, with its
metadata for headers: no credentials, a wrong one, or another project's token get the same PERMISSION_DENIED
and message as over REST; a bearer token or `x-goog-api-key` in the metadata is accepted."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.api_core import exceptions
from google.cloud import aiplatform_v1
from google.cloud.aiplatform_v1.services.job_service.transports.grpc import JobServiceGrpcTransport

from tests.support.server import LOCATION, ServerProcess, free_port

FLAG = "flag-" + secrets.token_urlsafe(12)


@pytest.fixture(scope="module")
def grpc_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory, grpc_port: int) -> Iterator[ServerProcess]:
    args = ["--api-token", FLAG, "--grpc-port", str(grpc_port)]
    proc = ServerProcess(home=tmp_path_factory.mktemp("rpc-auth"), args=args).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def alpha_token(locked: ServerProcess) -> str:
    """A stored token for project alpha, made with the real CLI on the server's home."""
    made = subprocess.run(
        [sys.executable, "-m", "trainworks.cli.main", "admin", "tokens", "create", "--project", "alpha"]
        + ["--home", str(locked.home)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert made.returncode == 0, made.stderr
    return made.stdout.strip()


@pytest.fixture(scope="module")
def client(locked: ServerProcess, grpc_port: int) -> Iterator[aiplatform_v1.JobServiceClient]:
    with grpc.insecure_channel(f"127.0.0.1:{grpc_port}") as channel:
        yield aiplatform_v1.JobServiceClient(transport=JobServiceGrpcTransport(channel=channel))


def parent(project: str) -> str:
    return f"projects/{project}/locations/{LOCATION}"


def rest_error(locked: ServerProcess, path: str, headers: dict[str, str]) -> dict[str, Any]:
    response = httpx.get(f"{locked.url}/v1/{path}", headers=headers, timeout=30)
    assert response.status_code == 403, response.text
    return response.json()["error"]  # type: ignore[no-any-return]


Metadata = list[tuple[str, str]]


def list_alpha(client: aiplatform_v1.JobServiceClient, metadata: Metadata) -> Any:
    return client.list_custom_jobs(parent=parent("alpha"), metadata=metadata)


def list_beta(client: aiplatform_v1.JobServiceClient, metadata: Metadata) -> Any:
    return client.list_custom_jobs(parent=parent("beta"), metadata=metadata)


def get_beta_operation(client: aiplatform_v1.JobServiceClient, metadata: Metadata) -> Any:
    return client.get_operation(request={"name": f"{parent('beta')}/operations/1"}, metadata=metadata)


Call = Callable[[aiplatform_v1.JobServiceClient, Metadata], Any]


@pytest.mark.parametrize(
    ("call", "path", "credentials"),
    [
        pytest.param(list_alpha, f"{parent('alpha')}/customJobs", {}, id="none"),
        pytest.param(
            list_alpha, f"{parent('alpha')}/customJobs", {"authorization": "Bearer nope"}, id="wrong"
        ),
        pytest.param(
            list_beta, f"{parent('beta')}/customJobs", {"x-goog-api-key": "alpha"}, id="other project"
        ),
        pytest.param(
            get_beta_operation, f"{parent('beta')}/operations/1", {"x-goog-api-key": "alpha"}, id="operation"
        ),
    ],
)
def test_refusals_are_the_rest_ones(
    locked: ServerProcess,
    client: aiplatform_v1.JobServiceClient,
    alpha_token: str,
    call: Call,
    path: str,
    credentials: dict[str, str],
) -> None:
    headers = {key: alpha_token if value == "alpha" else value for key, value in credentials.items()}
    rest = rest_error(locked, path, headers)
    with pytest.raises(exceptions.PermissionDenied) as caught:
        call(client, list(headers.items()))
    assert caught.value.message == rest["message"]
    assert caught.value.reason == "PERMISSION_DENIED"


@pytest.mark.parametrize("key", ["authorization", "x-goog-api-key"])
def test_a_token_in_the_metadata_is_accepted(
    client: aiplatform_v1.JobServiceClient, alpha_token: str, key: str
) -> None:
    for token in (FLAG, alpha_token):
        value = f"Bearer {token}" if key == "authorization" else token
        assert list(list_alpha(client, [(key, value)])) == []
    admin = [(key, f"Bearer {FLAG}" if key == "authorization" else FLAG)]
    assert list(list_beta(client, admin)) == []
