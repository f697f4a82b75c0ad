"""customJobs over gRPC, with the official GAPIC client's gRPC transport on an insecure loopback channel,
against a real server process (`serve --grpc-port`): create, get, list (filter, paging, read mask), cancel,
delete as an LRO, errors with their status details, v1beta1; and every bad request of a table answered over
gRPC with the same code, message and details as over REST."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import grpc
import httpx
import pytest
from google.api_core import exceptions
from google.cloud import aiplatform_v1, aiplatform_v1beta1
from google.protobuf import empty_pb2, field_mask_pb2, json_format
from google.rpc import error_details_pb2

from tests.kinds.custom_jobs.test_validation import REJECTED, valid
from tests.support.jobs import gapic_job, wait_for_state
from tests.support.rpc import fields, gapic, grpc_fixtures, not_found, status_of
from tests.support.server import LOCATION, PROJECT, ServerProcess

JobState = aiplatform_v1.JobState
TERMINAL = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"}
LONG_RUNNING = "import time; time.sleep(600)"

served, server, client = grpc_fixtures("grpc", aiplatform_v1.JobServiceClient)


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as opened:
        yield opened


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def unique_parent() -> str:
    """A parent under a project of its own, so a list holds exactly this test's jobs."""
    return f"projects/p-{uuid.uuid4().hex[:12]}/locations/{LOCATION}"


def wait_state(client: Any, name: str, states: set[str] | None = None) -> Any:
    return wait_for_state(client.get_custom_job, name, states or TERMINAL)


# ------------------------------------------------------------------------------------------ the methods
def test_create_get_and_follow_to_success(
    client: aiplatform_v1.JobServiceClient, server: ServerProcess
) -> None:
    name = unique("ok")
    created = client.create_custom_job(
        parent=server.parent, custom_job=gapic_job(name, "print('hello')", {"team": "ml"})
    )
    assert created.name.startswith("projects/") and f"/locations/{LOCATION}/customJobs/" in created.name
    assert created.display_name == name
    assert created.state == JobState.JOB_STATE_QUEUED
    assert dict(created.labels) == {"team": "ml"}
    assert created.create_time and created.update_time
    assert list(created.job_spec.worker_pool_specs[0].container_spec.command)[-1] == "print('hello')"

    got = client.get_custom_job(name=created.name)
    assert got.name == created.name and got.job_spec == created.job_spec

    done = wait_state(client, created.name)
    assert done.state == JobState.JOB_STATE_SUCCEEDED, done.error
    assert done.end_time >= done.start_time >= done.create_time


def test_the_same_job_over_grpc_and_rest(
    client: aiplatform_v1.JobServiceClient, http: httpx.Client, server: ServerProcess
) -> None:
    created = client.create_custom_job(parent=server.parent, custom_job=gapic_job(unique("same")))
    wait_state(client, created.name)  # finished: nothing changes between the two reads
    rest = http.get(f"/v1/{created.name}").json()
    assert (
        json_format.MessageToDict(aiplatform_v1.CustomJob.pb(client.get_custom_job(name=created.name)))
        == rest
    )


def test_list_filters_pages_and_masks(client: aiplatform_v1.JobServiceClient) -> None:
    parent = unique_parent()
    names = []
    for i in range(5):
        job = gapic_job(f"list-{i}", "raise SystemExit(1)" if i == 2 else "pass", {"idx": str(i)})
        names.append(client.create_custom_job(parent=parent, custom_job=job).name)
    for name in names:
        wait_state(client, name)

    def pages(filter_text: str, page_size: int = 2) -> list[list[str]]:
        request = {"parent": parent, "page_size": page_size, "filter": filter_text}
        return [
            [j.display_name for j in p.custom_jobs] for p in client.list_custom_jobs(request=request).pages
        ]

    newest_first = [f"list-{i}" for i in reversed(range(5))]
    assert pages("") == [newest_first[0:2], newest_first[2:4], newest_first[4:]]
    assert pages('display_name:"list-*"', page_size=3) == [newest_first[0:3], newest_first[3:]]
    assert pages("state=JOB_STATE_FAILED") == [["list-2"]]
    assert pages('labels.idx="3" OR labels.idx="4"', page_size=10) == [["list-4", "list-3"]]
    raw = list(client.list_custom_jobs(request={"parent": parent, "page_size": 2}).pages)
    assert [bool(p.next_page_token) for p in raw] == [True, True, False]
    assert [j.name for j in client.list_custom_jobs(parent=parent)] == list(reversed(names))

    mask = field_mask_pb2.FieldMask(paths=["display_name", "state"])
    masked = list(client.list_custom_jobs(request={"parent": parent, "read_mask": mask}))
    assert [j.display_name for j in masked] == newest_first
    assert all(not j.name and not j.create_time for j in masked)


def test_cancel_then_delete_as_an_lro(client: aiplatform_v1.JobServiceClient, server: ServerProcess) -> None:
    created = client.create_custom_job(parent=server.parent, custom_job=gapic_job(unique("c"), LONG_RUNNING))
    wait_state(client, created.name, {"JOB_STATE_RUNNING"})
    with pytest.raises(exceptions.FailedPrecondition) as running:
        client.delete_custom_job(name=created.name)
    assert "JOB_STATE_RUNNING" in running.value.message
    assert running.value.reason == "FAILED_PRECONDITION"

    assert client.cancel_custom_job(name=created.name) is None
    cancelled = wait_state(client, created.name)
    assert cancelled.state == JobState.JOB_STATE_CANCELLED and cancelled.error.code == 1

    operation = client.delete_custom_job(name=created.name)
    assert operation.operation.name.startswith(created.name + "/operations/")
    assert isinstance(operation.result(timeout=60), empty_pb2.Empty)
    assert isinstance(operation.metadata, aiplatform_v1.DeleteOperationMetadata)
    assert operation.metadata.generic_metadata.create_time
    with pytest.raises(exceptions.NotFound):
        client.get_custom_job(name=created.name)


def test_v1beta1(served: tuple[ServerProcess, grpc.Channel]) -> None:
    server, channel = served
    beta = gapic(aiplatform_v1beta1.JobServiceClient, channel)
    job = gapic_job(unique("beta"), api=aiplatform_v1beta1)
    created = beta.create_custom_job(parent=server.parent, custom_job=job)
    assert wait_state(beta, created.name).state == aiplatform_v1beta1.JobState.JOB_STATE_SUCCEEDED
    assert [
        j.name for j in beta.list_custom_jobs(request={"parent": server.parent, "filter": "labels.x=y"})
    ] == []
    operation = beta.delete_custom_job(name=created.name)
    assert isinstance(operation.result(timeout=60), empty_pb2.Empty)
    assert operation.operation.metadata.type_url.endswith("aiplatform.v1beta1.DeleteOperationMetadata")
    assert isinstance(operation.metadata, aiplatform_v1beta1.DeleteOperationMetadata)


# ---------------------------------------------------------------------------------------------- errors
def test_not_found(client: aiplatform_v1.JobServiceClient, server: ServerProcess) -> None:
    unknown = f"{server.parent}/customJobs/123456789"
    calls = (client.get_custom_job, client.cancel_custom_job, client.delete_custom_job)
    for error in not_found(calls, unknown):
        assert error.message.endswith("/customJobs/123456789 not found."), error.message
        assert error.reason == "NOT_FOUND"


def test_invalid_argument_with_field_violations(
    client: aiplatform_v1.JobServiceClient, server: ServerProcess
) -> None:
    bad = aiplatform_v1.CustomJob(
        job_spec=aiplatform_v1.CustomJobSpec(
            worker_pool_specs=[aiplatform_v1.WorkerPoolSpec(replica_count=2)]
        )
    )
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.create_custom_job(parent=server.parent, custom_job=bad)
    error = caught.value
    assert error.reason == "INVALID_ARGUMENT"
    named = fields(error)
    assert named[0] == "display_name"
    assert "job_spec.worker_pool_specs[0].replica_count" in named
    # The same violations, read straight from the status details.
    status = status_of(error)
    bad_request = error_details_pb2.BadRequest()
    assert status.details[0].Unpack(bad_request)
    assert [v.field for v in bad_request.field_violations] == named
    assert error.message.startswith("Invalid value for display_name: Required field is not set. (and ")


def test_a_malformed_name_is_invalid_argument(client: aiplatform_v1.JobServiceClient) -> None:
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.get_custom_job(name="customJobs/1")
    assert fields(caught.value) == ["name"]


# ------------------------------------------------------------------ the same bad request, REST and gRPC
@pytest.fixture(scope="module")
def succeeded(client: aiplatform_v1.JobServiceClient, server: ServerProcess) -> str:
    created = client.create_custom_job(parent=server.parent, custom_job=gapic_job(unique("done")))
    assert wait_state(client, created.name).state == JobState.JOB_STATE_SUCCEEDED
    return str(created.name)


# A case: the REST request (method, path under /v1/, query, JSON body) and the same request over gRPC.
Rest = tuple[str, str, dict[str, Any], Any]
Case = tuple[Callable[[str, str], Rest], Callable[[aiplatform_v1.JobServiceClient, str, str], Any]]
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"
UNKNOWN = f"{PARENT}/customJobs/123456789"


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.title() for word in rest)


def _list(**fields: Any) -> Case:
    """A list request: its fields by proto name; REST sends them as query parameters of their JSON names."""
    request = {"parent": PARENT, **fields}
    if "read_mask" in fields:
        request["read_mask"] = field_mask_pb2.FieldMask(paths=fields["read_mask"].split(","))
    query = {_camel(k): v for k, v in fields.items()}
    return (
        lambda _parent, _job: ("GET", f"{PARENT}/customJobs", query, None),
        lambda client, _parent, _job: next(iter(client.list_custom_jobs(request=request).pages)),
    )


def _on(verb: str, name: str | None = None) -> Case:
    """get, cancel or delete of `name` (default: the succeeded job)."""
    method, suffix = {"get": ("GET", ""), "cancel": ("POST", ":cancel"), "delete": ("DELETE", "")}[verb]
    return (
        lambda _parent, job: (method, f"{name or job}{suffix}", {}, {} if method == "POST" else None),
        lambda client, _parent, job: getattr(client, f"{verb}_custom_job")(name=name or job),
    )


def _create(body: dict[str, Any], parent: str = PARENT) -> Case:
    message = json_format.ParseDict(body, aiplatform_v1.CustomJob.pb()())
    return (
        lambda _parent, _job: ("POST", f"{parent}/customJobs", {}, json_format.MessageToDict(message)),
        lambda client, _parent, _job: client.create_custom_job(
            parent=parent, custom_job=aiplatform_v1.CustomJob.wrap(message)
        ),
    )


def _operation(verb: str) -> Case:
    name = f"{PARENT}/operations/123456789"
    method, suffix = {"get": ("GET", ""), "wait": ("POST", ":wait"), "delete": ("DELETE", "")}[verb]
    return (
        lambda _parent, _job: (method, f"{name}{suffix}", {}, {} if method == "POST" else None),
        lambda client, _parent, _job: getattr(client, f"{verb}_operation")(request={"name": name}),
    )


def _representable(body: dict[str, Any]) -> bool:
    """Whether the body is a CustomJob at all (no unknown field, every value of its field's type): only such
    a body can be sent over gRPC."""
    try:
        json_format.ParseDict(body, aiplatform_v1.CustomJob.pb()())
    except (json_format.ParseError, ValueError, TypeError):
        return False
    return True


def _rejected_bodies() -> list[Any]:
    cases = []
    for case_id, mutate, _fields in REJECTED:
        body = valid()
        mutate(body)
        if _representable(body):
            cases.append(pytest.param(_create(body), id=f"create: {case_id}"))
    return cases


CASES = [
    pytest.param(_create({}), id="create: empty"),
    pytest.param(
        _create(valid(), parent=f"projects/{PROJECT}/locations/US-central1"), id="create: bad location"
    ),
    pytest.param(_list(filter="colour=red"), id="list: unknown filter field"),
    pytest.param(_list(filter='display_name="unclosed'), id="list: unclosed quote"),
    pytest.param(_list(page_size=-1), id="list: negative page size"),
    pytest.param(_list(page_token="zzz"), id="list: forged page token"),
    pytest.param(_list(read_mask="display_name", filter="state=JOB_STATE_NOPE"), id="list: unknown state"),
    pytest.param(_on("get", UNKNOWN), id="get: unknown"),
    pytest.param(_on("get", f"{PARENT}/customJobs/not-a-number"), id="get: not a number"),
    pytest.param(
        _on("get", f"projects/{PROJECT}/locations/europe-west4/customJobs/1"), id="get: other place"
    ),
    pytest.param(_on("cancel", UNKNOWN), id="cancel: unknown"),
    pytest.param(_on("delete", UNKNOWN), id="delete: unknown"),
    pytest.param(_on("cancel"), id="cancel: succeeded"),
    pytest.param(_operation("get"), id="operation get: unknown"),
    pytest.param(_operation("wait"), id="operation wait: unknown"),
    pytest.param(_operation("delete"), id="operation delete: unknown"),
    *_rejected_bodies(),
]


@pytest.mark.parametrize("case", CASES)
def test_the_same_bad_request_gets_the_same_answer_over_rest_and_grpc(
    case: Case, client: aiplatform_v1.JobServiceClient, http: httpx.Client, succeeded: str
) -> None:
    rest_request, grpc_call = case
    method, path, query, body = rest_request(PARENT, succeeded)
    response = http.request(method, f"/v1/{path}", params=query, json=body)
    assert response.status_code >= 400, response.text
    rest = response.json()["error"]

    with pytest.raises(exceptions.GoogleAPICallError) as caught:
        grpc_call(client, PARENT, succeeded)
    status = json_format.MessageToDict(status_of(caught.value))
    assert caught.value.grpc_status_code is not None
    assert caught.value.grpc_status_code.name == rest["status"]
    assert status["message"] == rest["message"]
    assert status.get("details", []) == rest["details"]


def test_the_table_covers_many_rejected_bodies() -> None:
    assert len(_rejected_bodies()) >= 40
