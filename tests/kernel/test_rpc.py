"""kernel/rpc.py on its own: the official RPC tables, resource names, and an in-process gRPC server whose RPCs
are bound to a REST collection of a recording service, called with the official GAPIC client."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import aiplatform_v1, aiplatform_v1beta1
from google.cloud.aiplatform_v1.services.job_service.transports.grpc import JobServiceGrpcTransport
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2, field_mask_pb2
from google.rpc import error_details_pb2, status_pb2

from trainworks.kernel.errors import ApiError, FieldViolation, invalid_argument, not_found
from trainworks.kernel.request_load import RequestLoad
from trainworks.kernel.routes import Collection, job_methods
from trainworks.kernel.rpc import (
    DETAILS_KEY,
    VERSIONS,
    Binding,
    NameTemplate,
    Route,
    RpcCall,
    RpcServer,
    bind_collection,
    descriptor_service,
    job_routes,
    parse_name,
    peer_address,
    vertex_service,
)
from trainworks.kernel.status import Code

PARENT = "projects/p/locations/l"
ROUTES = {
    "CreateCustomJob": Route("create", body="custom_job"),
    "ListCustomJobs": Route("list_"),
    "GetCustomJob": Route("get"),
    "CancelCustomJob": Route("cancel"),
    "DeleteCustomJob": Route("delete"),
}


# ----------------------------------------------------------------------------------- official RPC tables
@pytest.mark.parametrize("version", VERSIONS)
def test_the_job_service_comes_from_the_published_package(version: str) -> None:
    service = vertex_service(version, "JobService")
    package = aiplatform_v1 if version == "v1" else aiplatform_v1beta1
    assert service.name == f"google.cloud.aiplatform.{version}.JobService"
    create = service.rpcs["CreateCustomJob"]
    assert create.request is package.CreateCustomJobRequest.pb()
    assert create.response is package.CustomJob.pb()
    assert service.rpcs["ListCustomJobs"].response is package.ListCustomJobsResponse.pb()
    assert service.rpcs["DeleteCustomJob"].response is operations_pb2.Operation
    assert service.rpcs["CancelCustomJob"].response is empty_pb2.Empty
    assert "CreateHyperparameterTuningJob" in service.rpcs


def test_the_operations_service_comes_from_its_descriptor() -> None:
    service = descriptor_service(operations_pb2.DESCRIPTOR.services_by_name["Operations"])
    assert service.name == "google.longrunning.Operations"
    assert set(service.rpcs) == {
        "ListOperations",
        "GetOperation",
        "DeleteOperation",
        "CancelOperation",
        "WaitOperation",
    }
    assert service.rpcs["WaitOperation"].request is operations_pb2.WaitOperationRequest
    assert service.rpcs["DeleteOperation"].response is empty_pb2.Empty


# ---------------------------------------------------------------------------------------------- names
def test_name_templates_match_one_segment_per_value() -> None:
    template = NameTemplate("/projects/{project}/locations/{location}/customJobs/{job_id}")
    assert template.match("projects/p/locations/l/customJobs/7") == {
        "project": "p",
        "location": "l",
        "job_id": "7",
    }
    assert template.match("projects/p/locations/l/customJobs/7/operations/1") is None
    assert template.match("projects/p/locations/l/customJobs/") is None
    assert template.match("projects/p.x/locations/l/customJobs/7") is not None  # `.` is no wildcard


@pytest.mark.parametrize(
    ("name", "description"),
    [
        ("", "Required field is not set."),
        ("customJobs/7", "expected a resource name of the form projects/{project}/locations/{location}"),
    ],
)
def test_a_name_of_no_template_is_invalid_argument(name: str, description: str) -> None:
    with pytest.raises(ApiError) as caught:
        parse_name("parent", name, NameTemplate("/projects/{project}/locations/{location}"))
    assert caught.value.code == Code.INVALID_ARGUMENT
    assert caught.value.violations == [FieldViolation("parent", description)]


@pytest.mark.parametrize(
    ("peer", "address"),
    [
        ("ipv4:127.0.0.1:5000", ("127.0.0.1", 5000)),
        ("ipv6:[::1]:5000", ("::1", 5000)),
        ("ipv6:%5B::1%5D:5000", ("::1", 5000)),
        ("unix:/tmp/socket", None),
        ("", None),
    ],
)
def test_peer_addresses(peer: str, address: tuple[str, int] | None) -> None:
    assert peer_address(peer) == address


# -------------------------------------------------------------------------------------------- bindings
class Jobs:
    """A job collection's service that records its calls and answers canned JSON."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def create(self, project: str, location: str, body: Any) -> dict[str, Any]:
        self.calls.append(("create", project, location, body))
        if not body.get("displayName"):
            raise invalid_argument([FieldViolation("display_name", "Required field is not set.")])
        return {"name": f"projects/{project}/locations/{location}/customJobs/1", **body}

    def list(
        self, project: str, location: str, page_size: int, page_token: str, filter_text: str, read_mask: str
    ) -> dict[str, Any]:
        self.calls.append(("list", project, location, page_size, page_token, filter_text, read_mask))
        return {"customJobs": [{"displayName": "a"}], "nextPageToken": "next"}

    def get(self, project: str, location: str, job_id: str) -> dict[str, Any]:
        self.calls.append(("get", project, location, job_id))
        if job_id == "boom":
            raise RuntimeError("a fault of the server")
        if job_id == "extra":
            return {"name": "x", "notAField": 1}  # not a CustomJob: a fault of the server too
        raise not_found(f"CustomJob {job_id!r}")

    def cancel(self, project: str, location: str, job_id: str) -> None:
        self.calls.append(("cancel", project, location, job_id))

    def delete(self, project: str, location: str, job_id: str, api_version: str) -> dict[str, Any]:
        self.calls.append(("delete", project, location, job_id, api_version))
        metadata = f"type.googleapis.com/google.cloud.aiplatform.{api_version}.DeleteOperationMetadata"
        return {
            "name": f"projects/{project}/locations/{location}/customJobs/{job_id}/operations/2",
            "metadata": {"@type": metadata, "genericMetadata": {"createTime": "2024-01-01T00:00:00Z"}},
            "done": True,
            "response": {"@type": "type.googleapis.com/google.protobuf.Empty"},
        }


JOBS = Collection("customJobs", "job_id", lambda request: None, job_methods(Jobs))


def test_a_route_or_field_that_does_not_exist_fails_at_binding() -> None:
    service = vertex_service("v1", "JobService")
    with pytest.raises(KeyError):
        bind_collection(JOBS, Jobs(), service, "v1", {"GetCustomJob": Route("no_such_route")})
    with pytest.raises(ValueError, match="no field 'job'"):
        bind_collection(JOBS, Jobs(), service, "v1", {"CreateCustomJob": Route("create", body="job")})


def test_job_routes_name_the_five_rpcs_of_a_job_collection() -> None:
    assert job_routes("CustomJob", "CustomJobs", body="custom_job") == ROUTES


@pytest.fixture
def jobs() -> Jobs:
    return Jobs()


@pytest.fixture
def calls() -> list[RpcCall]:
    return []


@pytest.fixture
def load() -> RequestLoad:
    return RequestLoad()


@pytest.fixture
def server(jobs: Jobs, calls: list[RpcCall], load: RequestLoad) -> Iterator[RpcServer]:
    def authorize(call: RpcCall) -> ApiError | None:
        calls.append(call)
        if call.path.startswith("/v1/projects/denied/"):
            return ApiError(Code.PERMISSION_DENIED, "Permission denied on project 'denied'.")
        return None

    def unexpected(exc: Exception) -> ApiError:
        return ApiError(Code.INTERNAL, f"unexpected {type(exc).__name__}")

    bindings = [bind_collection(JOBS, jobs, vertex_service(v, "JobService"), v, ROUTES) for v in VERSIONS]
    rpc = RpcServer("127.0.0.1", 0, bindings, authorize, unexpected, max_message_bytes=1 << 20, load=load)
    rpc.start()
    try:
        yield rpc
    finally:
        rpc.stop(grace=0)


@pytest.fixture
def client(server: RpcServer) -> Iterator[aiplatform_v1.JobServiceClient]:
    channel = grpc.insecure_channel(server.address)
    try:
        yield aiplatform_v1.JobServiceClient(transport=JobServiceGrpcTransport(channel=channel))
    finally:
        channel.close()


def test_each_rpc_calls_its_route_method_with_the_route_arguments(
    client: aiplatform_v1.JobServiceClient, jobs: Jobs
) -> None:
    job = aiplatform_v1.CustomJob(
        display_name="j",
        job_spec=aiplatform_v1.CustomJobSpec(
            worker_pool_specs=[aiplatform_v1.WorkerPoolSpec(replica_count=1)]
        ),
    )
    created = client.create_custom_job(parent=PARENT, custom_job=job)
    assert created.name == f"{PARENT}/customJobs/1" and created.display_name == "j"
    # The body is the canonical JSON a REST client sends: camelCase, int64 as a string.
    assert jobs.calls[-1] == (
        "create",
        "p",
        "l",
        {"displayName": "j", "jobSpec": {"workerPoolSpecs": [{"replicaCount": "1"}]}},
    )

    # Absent query parameters are what REST reads for them (0, ""); a field mask is its JSON text.
    page = client.list_custom_jobs(request={"parent": PARENT}).pages.__next__()
    assert [j.display_name for j in page.custom_jobs] == ["a"] and page.next_page_token == "next"
    assert jobs.calls[-1] == ("list", "p", "l", 0, "", "", "")
    mask = field_mask_pb2.FieldMask(paths=["display_name", "job_spec.worker_pool_specs"])
    request = {"parent": PARENT, "page_size": 5, "page_token": "t", "filter": "state=X", "read_mask": mask}
    next(iter(client.list_custom_jobs(request=request).pages))
    assert jobs.calls[-1] == ("list", "p", "l", 5, "t", "state=X", "displayName,jobSpec.workerPoolSpecs")

    assert client.cancel_custom_job(name=f"{PARENT}/customJobs/9") is None
    assert jobs.calls[-1] == ("cancel", "p", "l", "9")

    operation = client.delete_custom_job(name=f"{PARENT}/customJobs/9")
    assert isinstance(operation.result(timeout=10), empty_pb2.Empty)
    assert isinstance(operation.metadata, aiplatform_v1.DeleteOperationMetadata)
    assert jobs.calls[-1] == ("delete", "p", "l", "9", "v1")


def test_the_api_version_is_the_service_package(server: RpcServer, jobs: Jobs) -> None:
    from google.cloud.aiplatform_v1beta1.services.job_service.transports.grpc import (
        JobServiceGrpcTransport as BetaTransport,
    )

    with grpc.insecure_channel(server.address) as channel:
        beta = aiplatform_v1beta1.JobServiceClient(transport=BetaTransport(channel=channel))
        operation = beta.delete_custom_job(name=f"{PARENT}/customJobs/9")
        assert isinstance(operation.metadata, aiplatform_v1beta1.DeleteOperationMetadata)
    assert jobs.calls[-1] == ("delete", "p", "l", "9", "v1beta1")


def _status(error: exceptions.GoogleAPICallError) -> Any:
    """The google.rpc.Status of `grpc-status-details-bin`, checked against the call's own code and message."""
    call = error.response
    found = [value for key, value in call.trailing_metadata() if key == DETAILS_KEY]
    assert len(found) == 1, call.trailing_metadata()
    status = status_pb2.Status.FromString(found[0])
    assert status.code == call.code().value[0]
    assert status.message == call.details()
    return status


def test_an_api_error_is_its_status_with_the_rest_details(client: aiplatform_v1.JobServiceClient) -> None:
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.create_custom_job(parent=PARENT, custom_job=aiplatform_v1.CustomJob())
    assert caught.value.message == "Invalid value for display_name: Required field is not set."
    assert caught.value.reason == "INVALID_ARGUMENT"
    status = _status(caught.value)
    bad_request = error_details_pb2.BadRequest()
    info = error_details_pb2.ErrorInfo()
    assert status.details[0].Unpack(bad_request) and status.details[1].Unpack(info)
    assert [(v.field, v.description) for v in bad_request.field_violations] == [
        ("display_name", "Required field is not set.")
    ]
    assert (info.reason, info.domain) == ("INVALID_ARGUMENT", "trainworks")

    with pytest.raises(exceptions.NotFound) as missing:
        client.get_custom_job(name=f"{PARENT}/customJobs/404")
    assert missing.value.message == "CustomJob '404' not found."
    assert missing.value.reason == "NOT_FOUND"


def test_a_name_the_route_cannot_take_is_invalid_argument(
    client: aiplatform_v1.JobServiceClient, jobs: Jobs
) -> None:
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.get_custom_job(name=f"{PARENT}/trainingPipelines/9")
    fields = [v.field for d in caught.value.details for v in getattr(d, "field_violations", [])]
    assert fields == ["name"]
    assert jobs.calls == []


def test_auth_sees_the_rest_path_metadata_and_addresses(
    client: aiplatform_v1.JobServiceClient, server: RpcServer, calls: list[RpcCall], jobs: Jobs
) -> None:
    client.cancel_custom_job(name=f"{PARENT}/customJobs/9", metadata=[("authorization", "Bearer t0k")])
    call = calls[-1]
    assert call.path == f"/v1/{PARENT}/customJobs/9"
    assert ("authorization", "Bearer t0k") in call.metadata
    assert call.client is not None and call.client[0] == "127.0.0.1"
    assert call.listening == ("127.0.0.1", server.port)

    client.list_custom_jobs(parent=PARENT)
    assert calls[-1].path == f"/v1/{PARENT}"  # a collection's RPC names its parent

    with pytest.raises(exceptions.PermissionDenied) as caught:
        client.cancel_custom_job(name="projects/denied/locations/l/customJobs/9")
    assert caught.value.message == "Permission denied on project 'denied'."
    assert jobs.calls[-1][0] == "list"  # refused before the service


def test_any_other_failure_is_the_answer_of_unexpected(client: aiplatform_v1.JobServiceClient) -> None:
    with pytest.raises(exceptions.InternalServerError) as boom:
        client.get_custom_job(name=f"{PARENT}/customJobs/boom")
    assert boom.value.message == "unexpected RuntimeError"
    assert _status(boom.value).code == Code.INTERNAL
    # An answer that is not the RPC's message is parsed strictly: a fault, not a silently dropped field.
    with pytest.raises(exceptions.InternalServerError) as extra:
        client.get_custom_job(name=f"{PARENT}/customJobs/extra")
    assert extra.value.message == "unexpected ParseError"


def test_a_call_counts_as_an_open_request_while_it_runs(
    server: RpcServer,
    client: aiplatform_v1.JobServiceClient,
    load: RequestLoad,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seen: list[int] = []
    authorize = server.authorize

    def watched(call: RpcCall) -> ApiError | None:
        seen.append(load.open)
        return authorize(call)

    monkeypatch.setattr(server, "authorize", watched)
    for job_id in ("missing", "boom"):  # answered with an error, and failed in the handler
        with pytest.raises(exceptions.GoogleAPICallError):
            client.get_custom_job(name=f"{PARENT}/customJobs/{job_id}")
    assert seen == [1, 1]  # the controllers held off while each ran (kernel/request_load.py) ...
    assert load.open == 0  # ... and not after


def test_a_port_in_use_is_an_error(server: RpcServer) -> None:
    second = RpcServer(
        "127.0.0.1", server.port, [], lambda call: None, lambda exc: ApiError(Code.INTERNAL, ""), 1
    )
    with pytest.raises(RuntimeError, match=f"gRPC cannot listen on 127.0.0.1:{server.port}"):
        second.start()


def test_an_rpc_bound_twice_is_an_error(jobs: Jobs) -> None:
    binding = bind_collection(JOBS, jobs, vertex_service("v1", "JobService"), "v1", ROUTES)
    again = Binding(binding.service, "v1", {"GetCustomJob": binding.handlers["GetCustomJob"]})
    with pytest.raises(ValueError, match="GetCustomJob is bound twice"):
        RpcServer(
            "127.0.0.1", 0, [binding, again], lambda call: None, lambda exc: ApiError(Code.INTERNAL, ""), 1
        )
