"""Every operation by its ID at its location, over REST against a real server: those that belong to a
resource (a persistent resource's, a model's, a job deletion's) are read, waited for, cancelled and deleted
at `projects/P/locations/L/operations/ID` too, as the location's list shows them and as gcloud and the
official clients' operations mixins address them. Through the official Python client (REST transport) and
under /v1, /v1beta1 and /ui with plain HTTP."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1
from google.longrunning import operations_pb2
from google.protobuf import json_format

from tests.support.jobs import job, python_pool
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_job

PARENT = f"/v1/projects/{PROJECT}/locations/{LOCATION}"


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


@pytest.fixture(scope="module")
def jobs(server: ServerProcess) -> aiplatform_v1.JobServiceClient:
    return aiplatform_v1.JobServiceClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": server.url}
    )


def at_location(name: str) -> str:
    """The location-level name of an operation: projects/N/locations/L/operations/ID."""
    parts = name.split("/")
    return "/".join([*parts[:4], "operations", parts[-1]])


def strict(body: dict[str, Any]) -> operations_pb2.Operation:
    parsed = operations_pb2.Operation()
    json_format.Parse(json.dumps(body), parsed, ignore_unknown_fields=False)
    return parsed


def persistent_resource_op(http: httpx.Client, resource_id: str) -> dict[str, Any]:
    body = {"resourcePools": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"}]}
    started = http.post(
        f"{PARENT}/persistentResources", json=body, params={"persistentResourceId": resource_id}
    )
    assert started.status_code == 200, started.text
    return started.json()  # type: ignore[no-any-return]


def test_a_resource_operation_is_read_and_waited_for_at_its_location(
    http: httpx.Client, jobs: aiplatform_v1.JobServiceClient
) -> None:
    op = persistent_resource_op(http, "ops-at-location")
    assert "/persistentResources/ops-at-location/operations/" in op["name"]
    short = at_location(op["name"])
    waited = jobs.wait_operation(request={"name": short, "timeout": {"seconds": 30}})
    assert waited.done and waited.name == op["name"]  # its own name, under the resource
    got = jobs.get_operation(request={"name": short})
    assert got == waited
    for prefix in ("/v1", "/v1beta1", "/ui"):
        answer = http.get(f"{prefix}/{short}")
        assert answer.status_code == 200, (prefix, answer.text)
        assert strict(answer.json()) == got
        waited_here = http.post(f"{prefix}/{short}:wait", json={"timeout": "1s"})
        assert waited_here.status_code == 200 and strict(waited_here.json()) == got
    # The location's list shows it, as before.
    listed = jobs.list_operations(request={"name": f"projects/{PROJECT}/locations/{LOCATION}"})
    assert op["name"] in [o.name for o in listed.operations]


def test_cancel_and_delete_at_the_location(http: httpx.Client, jobs: aiplatform_v1.JobServiceClient) -> None:
    created = http.post(f"{PARENT}/customJobs", json=job(python_pool("pass"), name="ops-deleted"))
    name = created.json()["name"]
    wait_job(http, name)
    deletion = http.delete(f"/v1/{name}").json()
    assert "/customJobs/" in deletion["name"]
    short = at_location(deletion["name"])
    jobs.cancel_operation(request={"name": short})  # accepted: a deletion runs to its end
    assert jobs.wait_operation(request={"name": short, "timeout": {"seconds": 30}}).done
    jobs.delete_operation(request={"name": short})
    with pytest.raises(exceptions.NotFound):
        jobs.get_operation(request={"name": short})
    assert http.get(f"/v1/{deletion['name']}").status_code == 404  # gone under the resource too

    resource_op = persistent_resource_op(http, "ops-deleted-pr")
    answer = http.delete(f"/ui/{at_location(resource_op['name'])}")
    assert answer.status_code == 200 and answer.json() == {}
    assert http.get(f"/v1/{resource_op['name']}").status_code == 404


def test_an_operation_is_found_only_where_it_is(http: httpx.Client) -> None:
    op = persistent_resource_op(http, "ops-elsewhere")
    op_id = op["name"].rsplit("/", 1)[1]
    for path in (
        f"/v1/projects/{PROJECT}/locations/europe-west4/operations/{op_id}",  # another location
        f"/v1/projects/other-project/locations/{LOCATION}/operations/{op_id}",  # another project
        f"{PARENT}/persistentResources/someone-else/operations/{op_id}",  # another resource
        f"{PARENT}/customJobs/1/operations/{op_id}",
        f"{PARENT}/operations/123",
    ):
        answer = http.get(path)
        assert answer.status_code == 404, (path, answer.text)
        assert answer.json()["error"]["status"] == "NOT_FOUND"
        assert http.post(f"{path}:cancel").status_code == 404
        assert http.delete(path).status_code == 404
    assert http.get(f"/v1/{op['name']}").status_code == 200  # all the misses above deleted nothing
