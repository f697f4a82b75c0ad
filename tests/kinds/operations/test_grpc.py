"""google.longrunning.Operations over gRPC (the GAPIC client's operations mixins on its gRPC transport),
against a real server process: get, wait (with the client's timeout), list at the location and under a
resource, cancel, delete; the same operations and pages as REST gives."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator

import grpc
import httpx
import pytest
from google.api_core import exceptions
from google.cloud import aiplatform_v1
from google.longrunning import operations_pb2
from google.protobuf import duration_pb2, json_format

from tests.support.jobs import gapic_job
from tests.support.rpc import fields, grpc_fixtures
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_for
from trainworks.kernel.operation_store import OperationStore
from trainworks.kernel.operations import OperationService
from trainworks.kernel.projects import Projects
from trainworks.store.database import Database

served, server, client = grpc_fixtures("ops", aiplatform_v1.JobServiceClient)


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as opened:
        yield opened


@pytest.fixture(scope="module")
def deleted(client: aiplatform_v1.JobServiceClient, server: ServerProcess) -> tuple[str, str]:
    """(job name, the name of its finished delete operation)."""
    job = gapic_job("ops")
    created = client.create_custom_job(parent=server.parent, custom_job=job)
    wait_for(
        lambda: client.get_custom_job(name=created.name).state.name == "JOB_STATE_SUCCEEDED",
        what="the job to succeed",
    )
    operation = client.delete_custom_job(name=created.name)
    operation.result(timeout=60)
    return str(created.name), str(operation.operation.name)


def wait(client: aiplatform_v1.JobServiceClient, name: str, seconds: float) -> operations_pb2.Operation:
    """WaitOperation through the GAPIC mixin. Its gRPC stub has no response deserializer (a fault of the
    client): it hands back the serialized Operation, parsed here."""
    timeout = duration_pb2.Duration()
    timeout.FromTimedelta(datetime.timedelta(seconds=seconds))
    raw = client.wait_operation(request={"name": name, "timeout": timeout})
    return operations_pb2.Operation.FromString(raw) if isinstance(raw, bytes) else raw


def test_get_wait_and_list(client: aiplatform_v1.JobServiceClient, deleted: tuple[str, str]) -> None:
    job, name = deleted
    got = client.get_operation(request={"name": name})
    assert got.name == name and got.done
    assert got.response.type_url == "type.googleapis.com/google.protobuf.Empty"
    assert got.metadata.type_url == "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata"
    assert wait(client, name, 5) == got

    parent = name.split("/customJobs/")[0]
    assert name in [op.name for op in client.list_operations(request={"name": parent}).operations]
    assert [op.name for op in client.list_operations(request={"name": job}).operations] == [name]


def test_the_same_operations_and_pages_as_rest(
    client: aiplatform_v1.JobServiceClient, http: httpx.Client, deleted: tuple[str, str]
) -> None:
    job, name = deleted
    assert (
        json_format.MessageToDict(client.get_operation(request={"name": name}))
        == http.get(f"/v1/{name}").json()
    )
    parent = name.split("/customJobs/")[0]
    first = client.list_operations(request={"name": parent, "page_size": 1})
    rest = http.get(f"/v1/{parent}/operations", params={"pageSize": 1}).json()
    assert json_format.MessageToDict(first) == rest


def test_cancel_and_delete(client: aiplatform_v1.JobServiceClient, server: ServerProcess) -> None:
    job = f"{server.parent}/customJobs/1"
    op = _pending(server, "customJobs/1")
    name = f"{job}/operations/{op}"
    client.cancel_operation(request={"name": name})  # accepted: a deletion completes anyway
    client.delete_operation(request={"name": name})
    for call in (client.get_operation, client.wait_operation, client.delete_operation):
        with pytest.raises(exceptions.NotFound) as caught:
            call(request={"name": name})
        assert caught.value.message == f"Operation '{op}' not found."


def _pending(server: ServerProcess, resource: str) -> int:
    """An operation nothing will finish, written into the server's database."""
    db = Database(f"sqlite:///{server.home / 'trainworks.db'}", migrate=False)
    try:
        number = Projects(db).number(PROJECT)
        row = OperationService(OperationStore(db), Projects(db)).create(
            number, LOCATION, resource, "delete_custom_job", "DeleteOperationMetadata"
        )
        return int(row.id)
    finally:
        db.dispose()


def test_wait_honours_the_timeout_and_sees_the_end(
    client: aiplatform_v1.JobServiceClient, server: ServerProcess
) -> None:
    op = _pending(server, "customJobs/42")
    name = f"{server.parent}/customJobs/42/operations/{op}"
    assert not client.get_operation(request={"name": name}).done
    started = time.monotonic()
    waited = wait(client, name, 0.3)
    assert not waited.done
    assert 0.3 <= time.monotonic() - started < 20

    db = Database(f"sqlite:///{server.home / 'trainworks.db'}", migrate=False)
    try:
        OperationStore(db).finish(op, response={"@type": "type.googleapis.com/google.protobuf.Empty"})
    finally:
        db.dispose()
    finished = wait(client, name, 30)
    assert finished.done and finished.response.type_url == "type.googleapis.com/google.protobuf.Empty"


@pytest.mark.parametrize(
    "name", ["", "operations/1", f"projects/{PROJECT}/locations/{LOCATION}/customJobs/1/operations"]
)
def test_a_name_of_no_operation_is_invalid_argument(
    client: aiplatform_v1.JobServiceClient, name: str
) -> None:
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.get_operation(request={"name": name})
    assert fields(caught.value) == ["name"]


def test_a_bad_page_token_is_the_rest_error(
    client: aiplatform_v1.JobServiceClient, http: httpx.Client
) -> None:
    parent = f"projects/{PROJECT}/locations/{LOCATION}"
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.list_operations(request={"name": parent, "page_token": "zzz"})
    rest = http.get(f"/v1/{parent}/operations", params={"pageToken": "zzz"}).json()["error"]
    assert caught.value.message == rest["message"]


def test_the_raw_stub_answers_the_official_messages(served: tuple[ServerProcess, grpc.Channel]) -> None:
    """Any gRPC client, not only the GAPIC one: the service by its full name."""
    server, channel = served
    list_operations = channel.unary_unary(
        "/google.longrunning.Operations/ListOperations",
        request_serializer=operations_pb2.ListOperationsRequest.SerializeToString,
        response_deserializer=operations_pb2.ListOperationsResponse.FromString,
    )
    answer = list_operations(operations_pb2.ListOperationsRequest(name=server.parent, page_size=1))
    assert isinstance(answer, operations_pb2.ListOperationsResponse)
