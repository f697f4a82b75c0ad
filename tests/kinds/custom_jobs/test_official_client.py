"""The official `google-cloud-aiplatform` client, unchanged, against a real Trainworks server process.

Covers the GAPIC REST client (JobServiceClient: customJobs and the operations mixins) and the high-level SDK
(`aiplatform.CustomJob`). See docs in /work/shared/reference/official-client.md for what the client sends.
"""

from __future__ import annotations

import re
import sys
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform, aiplatform_v1
from google.cloud.aiplatform import initializer
from google.cloud.aiplatform import jobs as sdk_jobs
from google.protobuf import duration_pb2, empty_pb2

from tests.support.jobs import gapic_job, wait_for_state
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_for
from trainworks.kernel.operation_store import OperationStore
from trainworks.kernel.operations import OperationService
from trainworks.kernel.projects import Projects
from trainworks.store.database import Database

JobState = aiplatform_v1.JobState
TERMINAL = {JobState.JOB_STATE_SUCCEEDED, JobState.JOB_STATE_FAILED, JobState.JOB_STATE_CANCELLED}
JOB_NAME = re.compile(r"^projects/\d+/locations/us-central1/customJobs/\d+$")
LONG_RUNNING = "import time; time.sleep(600)"


@pytest.fixture(scope="module")
def requested_paths() -> list[str]:
    return []


@pytest.fixture(scope="module")
def client(server: ServerProcess, requested_paths: list[str]) -> aiplatform_v1.JobServiceClient:
    gapic = aiplatform_v1.JobServiceClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": server.url}
    )

    # Record the URLs the client really requests (to see that LRO polls go to /ui/). LRO polls go through
    # the transport's separate operations client, which has a requests session of its own.
    def record(response: Any, *args: Any, **kwargs: Any) -> None:
        requested_paths.append(response.request.url)

    for session in (gapic._transport._session, gapic._transport.operations_client._transport._session):
        session.hooks["response"].append(record)
    return gapic


def wait_state(
    client: aiplatform_v1.JobServiceClient, name: str, states: set[Any] | None = None, timeout: float = 120.0
) -> Any:
    return wait_for_state(client.get_custom_job, name, [s.name for s in states or TERMINAL], timeout)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


# --------------------------------------------------------------------------------------------- GAPIC


def test_create_get_and_follow_to_success(
    client: aiplatform_v1.JobServiceClient, server: ServerProcess
) -> None:
    name = unique("ok")
    created = client.create_custom_job(
        parent=server.parent, custom_job=gapic_job(name, "print('hello')", {"team": "ml"})
    )
    assert JOB_NAME.match(created.name), created.name
    assert created.display_name == name
    assert created.state == JobState.JOB_STATE_QUEUED
    assert created.create_time and created.update_time
    assert dict(created.labels) == {"team": "ml"}
    pool = created.job_spec.worker_pool_specs[0]
    assert pool.machine_spec.machine_type == "n1-standard-4"
    assert pool.replica_count == 1
    assert list(pool.container_spec.command) == [sys.executable, "-c", "print('hello')"]

    got = client.get_custom_job(name=created.name)
    assert got.name == created.name
    assert got.job_spec == created.job_spec

    done = wait_state(client, created.name)
    assert done.state == JobState.JOB_STATE_SUCCEEDED, done.error
    assert done.start_time and done.end_time
    assert done.end_time >= done.start_time >= done.create_time
    assert not done.error.code


def test_env_vars_reach_the_replica(client: aiplatform_v1.JobServiceClient, server: ServerProcess) -> None:
    code = "import os, sys; sys.exit(0 if os.environ['GREETING'] == 'hi' else 5)"
    job = gapic_job(unique("env"), code)
    job.job_spec.worker_pool_specs[0].container_spec.env = [aiplatform_v1.EnvVar(name="GREETING", value="hi")]
    created = client.create_custom_job(parent=server.parent, custom_job=job)
    env = created.job_spec.worker_pool_specs[0].container_spec.env
    assert [(e.name, e.value) for e in env] == [("GREETING", "hi")]
    done = wait_state(client, created.name)
    assert done.state == JobState.JOB_STATE_SUCCEEDED, done.error

    # EnvVar.value is REQUIRED; the client omits an empty one on the wire ({"name": "EMPTY"}), which is
    # answered with a field violation, not a parse error.
    job.job_spec.worker_pool_specs[0].container_spec.env = [aiplatform_v1.EnvVar(name="EMPTY", value="")]
    with pytest.raises(exceptions.BadRequest) as info:
        client.create_custom_job(parent=server.parent, custom_job=job)
    fields = [v["field"] for d in info.value.details for v in d.get("fieldViolations", [])]
    assert fields == ["job_spec.worker_pool_specs[0].container_spec.env[0].value"]


def test_list_filters_and_pagination(client: aiplatform_v1.JobServiceClient, server: ServerProcess) -> None:
    batch = uuid.uuid4().hex[:8]
    names = []
    for i in range(5):
        code = "raise SystemExit(1)" if i == 2 else "pass"
        job = gapic_job(f"list-{batch}-{i}", code, {"batch": batch, "idx": str(i)})
        names.append(client.create_custom_job(parent=server.parent, custom_job=job).name)
    for name in names:
        wait_state(client, name)

    def pages(filter_text: str, page_size: int = 2) -> list[list[str]]:
        request = {"parent": server.parent, "page_size": page_size, "filter": filter_text}
        return [
            [j.display_name for j in page.custom_jobs]
            for page in client.list_custom_jobs(request=request).pages
        ]

    newest_first = [f"list-{batch}-{i}" for i in reversed(range(5))]
    by_name = pages(f'display_name:"list-{batch}-*"')
    assert by_name == [newest_first[0:2], newest_first[2:4], newest_first[4:]]
    assert pages(f"labels.batch={batch}", page_size=3) == [newest_first[0:3], newest_first[3:]]
    assert pages(f'labels.batch="{batch}" AND labels.idx:*', page_size=10) == [newest_first]
    assert pages(f'labels.batch={batch} AND labels.idx="3"') == [[f"list-{batch}-3"]]
    assert pages(f'state="JOB_STATE_FAILED" AND labels.batch={batch}') == [[f"list-{batch}-2"]]
    succeeded = pages(f"state=JOB_STATE_SUCCEEDED AND labels.batch={batch}")
    assert [n for page in succeeded for n in page] == [n for n in newest_first if not n.endswith("-2")]
    assert pages(f'NOT display_name="list-{batch}-0" AND labels.batch={batch}', page_size=10) == [
        newest_first[:4]
    ]
    assert pages(f'display_name:"list-{batch}-*" AND create_time<"2000-01-01T00:00:00Z"') == [[]]

    # Every page but the last carries a token; the pager iterates items across pages too.
    request = {"parent": server.parent, "page_size": 2, "filter": f"labels.batch={batch}"}
    raw_pages = list(client.list_custom_jobs(request=request).pages)
    assert [bool(p.next_page_token) for p in raw_pages] == [True, True, False]
    assert [j.name for j in client.list_custom_jobs(request=request)] == list(reversed(names))


def test_list_rejects_a_bad_filter(client: aiplatform_v1.JobServiceClient, server: ServerProcess) -> None:
    with pytest.raises(exceptions.BadRequest) as info:
        client.list_custom_jobs(request={"parent": server.parent, "filter": "colour=red"})
    fields = [v["field"] for d in info.value.details for v in d.get("fieldViolations", [])]
    assert fields == ["filter"]


def test_cancel_a_running_job(client: aiplatform_v1.JobServiceClient, server: ServerProcess) -> None:
    created = client.create_custom_job(
        parent=server.parent, custom_job=gapic_job(unique("cancel"), LONG_RUNNING)
    )
    wait_state(client, created.name, {JobState.JOB_STATE_RUNNING})

    # A job that is still running cannot be deleted.
    with pytest.raises(exceptions.BadRequest) as info:
        client.delete_custom_job(name=created.name)
    assert info.value.reason == "FAILED_PRECONDITION"

    assert client.cancel_custom_job(name=created.name) is None
    job = wait_state(client, created.name)
    assert job.state == JobState.JOB_STATE_CANCELLED
    assert job.error.code == 1
    assert job.end_time

    # Cancelling a finished job is a failed precondition, which REST reports as 400.
    with pytest.raises(exceptions.BadRequest) as info:
        client.cancel_custom_job(name=created.name)
    assert info.value.code == 400
    assert info.value.reason == "FAILED_PRECONDITION"


def test_cancel_a_succeeded_job_is_a_failed_precondition(
    client: aiplatform_v1.JobServiceClient, server: ServerProcess
) -> None:
    created = client.create_custom_job(parent=server.parent, custom_job=gapic_job(unique("done")))
    assert wait_state(client, created.name).state == JobState.JOB_STATE_SUCCEEDED
    with pytest.raises(exceptions.BadRequest) as info:
        client.cancel_custom_job(name=created.name)
    assert info.value.reason == "FAILED_PRECONDITION"
    assert "JOB_STATE_SUCCEEDED" in info.value.message
    # The job is unchanged.
    assert client.get_custom_job(name=created.name).state == JobState.JOB_STATE_SUCCEEDED


def test_delete_is_an_lro_polled_under_ui(
    client: aiplatform_v1.JobServiceClient, server: ServerProcess, requested_paths: list[str]
) -> None:
    created = client.create_custom_job(parent=server.parent, custom_job=gapic_job(unique("delete")))
    wait_state(client, created.name)

    operation = client.delete_custom_job(name=created.name)
    assert operation.operation.name.startswith(created.name + "/operations/")
    requested_paths.clear()
    result = operation.result(timeout=60)
    assert isinstance(result, empty_pb2.Empty)
    assert operation.done()
    metadata = operation.metadata
    assert isinstance(metadata, aiplatform_v1.DeleteOperationMetadata)
    assert metadata.generic_metadata.create_time
    assert metadata.generic_metadata.update_time >= metadata.generic_metadata.create_time
    # The DELETE answers a pending operation, so .result() polled it, and only ever under /ui/.
    assert requested_paths, "the operation was never polled"
    assert all(f"/ui/{operation.operation.name}" in url for url in requested_paths), requested_paths

    with pytest.raises(exceptions.NotFound):
        client.get_custom_job(name=created.name)
    with pytest.raises(exceptions.NotFound):
        client.delete_custom_job(name=created.name)


def test_v1beta1_client_deletes_with_its_own_metadata_type(server: ServerProcess) -> None:
    from google.cloud import aiplatform_v1beta1 as beta

    client = beta.JobServiceClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": server.url}
    )
    job = gapic_job(unique("beta"), api=beta)
    created = client.create_custom_job(parent=server.parent, custom_job=job)
    wait_for(
        lambda: client.get_custom_job(name=created.name).state == beta.JobState.JOB_STATE_SUCCEEDED,
        what="the v1beta1 job to succeed",
    )
    operation = client.delete_custom_job(name=created.name)
    assert isinstance(operation.result(timeout=60), empty_pb2.Empty)
    # A v1 type here would break op.metadata, and the whole Operation in a process without v1 types.
    assert operation.operation.metadata.type_url.endswith("aiplatform.v1beta1.DeleteOperationMetadata")
    assert isinstance(operation.metadata, beta.DeleteOperationMetadata)


def test_errors_map_to_api_core_exceptions(
    client: aiplatform_v1.JobServiceClient, server: ServerProcess
) -> None:
    unknown = f"{server.parent}/customJobs/123456789"
    for call in (client.get_custom_job, client.cancel_custom_job, client.delete_custom_job):
        with pytest.raises(exceptions.NotFound) as info:
            call(name=unknown)
        assert info.value.code == 404
        assert info.value.reason == "NOT_FOUND"
    with pytest.raises(exceptions.NotFound):
        client.get_custom_job(name=f"{server.parent}/customJobs/not-a-number")

    bad = gapic_job(unique("bad"))
    bad.job_spec.worker_pool_specs[0].machine_spec.machine_type = "n9-imaginary-4"
    with pytest.raises(exceptions.BadRequest) as info:
        client.create_custom_job(parent=server.parent, custom_job=bad)
    error = info.value
    assert error.code == 400
    assert error.reason == "INVALID_ARGUMENT"
    violations = [v for d in error.details for v in d.get("fieldViolations", [])]
    assert [v["field"] for v in violations] == ["job_spec.worker_pool_specs[0].machine_spec.machine_type"]
    assert "n9-imaginary-4" in violations[0]["description"]
    assert "machine_type" in error.message

    # Several problems at once are all reported.
    worse = aiplatform_v1.CustomJob(
        job_spec=aiplatform_v1.CustomJobSpec(
            worker_pool_specs=[aiplatform_v1.WorkerPoolSpec(replica_count=2)]
        )
    )
    with pytest.raises(exceptions.BadRequest) as info:
        client.create_custom_job(parent=server.parent, custom_job=worse)
    fields = {v["field"] for d in info.value.details for v in d.get("fieldViolations", [])}
    assert {"display_name", "job_spec.worker_pool_specs[0].replica_count"} <= fields


# ------------------------------------------------------------------------------- operations mixins


def test_operation_mixins(client: aiplatform_v1.JobServiceClient, server: ServerProcess) -> None:
    created = client.create_custom_job(parent=server.parent, custom_job=gapic_job(unique("ops")))
    wait_state(client, created.name)
    operation = client.delete_custom_job(name=created.name)
    operation.result(timeout=60)
    op_name = operation.operation.name

    got = client.get_operation(request={"name": op_name})
    assert got.name == op_name and got.done
    assert got.response.type_url == "type.googleapis.com/google.protobuf.Empty"
    assert got.metadata.type_url == "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata"

    waited = client.wait_operation(request={"name": op_name, "timeout": duration_pb2.Duration(seconds=5)})
    assert waited == got

    listed = client.list_operations(request={"name": server.parent})
    assert op_name in [op.name for op in listed.operations]
    under_job = client.list_operations(request={"name": created.name})
    assert [op.name for op in under_job.operations] == [op_name]

    client.cancel_operation(request={"name": op_name})  # a finished operation: accepted, nothing changes
    assert client.get_operation(request={"name": op_name}).done
    client.delete_operation(request={"name": op_name})
    with pytest.raises(exceptions.NotFound):
        client.get_operation(request={"name": op_name})
    with pytest.raises(exceptions.NotFound):
        client.wait_operation(request={"name": op_name})


@pytest.fixture
def pending_operation(server: ServerProcess) -> Iterator[tuple[str, OperationStore, int]]:
    """An operation that nothing will finish, written straight into the server's database."""
    db = Database(f"sqlite:///{server.home / 'trainworks.db'}", migrate=False)
    try:
        store = OperationStore(db)
        number = Projects(db).number(PROJECT)
        row = OperationService(store, Projects(db)).create(
            number, LOCATION, "customJobs/42", "delete_custom_job", "DeleteOperationMetadata"
        )
        name = f"projects/{number}/locations/{LOCATION}/customJobs/42/operations/{row.id}"
        yield name, store, row.id
    finally:
        db.dispose()


def test_wait_operation_honours_the_timeout_the_client_sends(
    client: aiplatform_v1.JobServiceClient, pending_operation: tuple[str, OperationStore, int]
) -> None:
    name, store, op_id = pending_operation
    assert not client.get_operation(request={"name": name}).done

    started = time.monotonic()
    waited = client.wait_operation(
        request={"name": name, "timeout": duration_pb2.Duration(nanos=300_000_000)}
    )
    elapsed = time.monotonic() - started
    assert not waited.done
    # The server waits for the timeout (sent as ?timeout=0.300s), not for its own 60 s maximum.
    assert 0.3 <= elapsed < 20, elapsed

    store.finish(op_id, response={"@type": "type.googleapis.com/google.protobuf.Empty"})
    finished = client.wait_operation(request={"name": name, "timeout": duration_pb2.Duration(seconds=30)})
    assert finished.done
    assert finished.response.type_url == "type.googleapis.com/google.protobuf.Empty"


# ----------------------------------------------------------------------------------------------- SDK


@pytest.fixture
def sdk(server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> Any:
    # A fresh SDK configuration per test, restored afterwards. `aiplatform.init` is bound to the config
    # that existed at import time, so the fresh one is initialised directly (with the same arguments).
    monkeypatch.setattr(initializer, "global_config", initializer._Config())
    monkeypatch.setattr(sdk_jobs, "_JOB_WAIT_TIME", 0.1)
    initializer.global_config.init(
        project=PROJECT,
        location=LOCATION,
        api_endpoint=server.url,
        api_transport="rest",
        credentials=AnonymousCredentials(),
        staging_bucket="gs://test-bucket",
    )
    return aiplatform


def sdk_pools(code: str) -> list[dict[str, Any]]:
    return [
        {
            "machine_spec": {"machine_type": "n1-standard-4"},
            "replica_count": 1,
            "container_spec": {"image_uri": "python:3.11", "command": [sys.executable, "-c", code]},
        }
    ]


def test_sdk_run_follows_a_job_to_success(sdk: Any) -> None:
    name = unique("sdk-ok")
    job = sdk.CustomJob(display_name=name, worker_pool_specs=sdk_pools("print('ok')"), labels={"via": "sdk"})
    job.run()
    assert job.state == JobState.JOB_STATE_SUCCEEDED
    assert JOB_NAME.match(job.resource_name)
    assert job.display_name == name
    assert job.labels == {"via": "sdk"}
    # The SDK filled baseOutputDirectory from the staging bucket; the server echoes it.
    prefix = job.gca_resource.job_spec.base_output_directory.output_uri_prefix
    assert prefix.startswith("gs://test-bucket/aiplatform-custom-job-")


def test_sdk_run_raises_when_the_job_fails(sdk: Any) -> None:
    job = sdk.CustomJob(display_name=unique("sdk-fail"), worker_pool_specs=sdk_pools("raise SystemExit(3)"))
    with pytest.raises(RuntimeError, match="non-zero status of 3"):
        job.run()
    assert job.state == JobState.JOB_STATE_FAILED
    assert job.error.code != 0


def test_sdk_list_and_get(sdk: Any) -> None:
    name = unique("sdk-list")
    job = sdk.CustomJob(display_name=name, worker_pool_specs=sdk_pools("pass"))
    job.run()

    listed = sdk.CustomJob.list(filter=f'display_name="{name}"')
    assert [j.resource_name for j in listed] == [job.resource_name]
    assert sdk.CustomJob.list(filter=f'display_name="{name}" AND state="JOB_STATE_FAILED"') == []

    by_name = sdk.CustomJob.get(job.resource_name)
    assert by_name.display_name == name
    assert by_name.state == JobState.JOB_STATE_SUCCEEDED
    by_id = sdk.CustomJob.get(job.name)
    assert by_id.resource_name == job.resource_name


def test_sdk_cancel_and_delete(sdk: Any) -> None:
    job = sdk.CustomJob(display_name=unique("sdk-cancel"), worker_pool_specs=sdk_pools(LONG_RUNNING))
    job.submit()
    job.wait_for_resource_creation()
    wait_for(lambda: job.state == JobState.JOB_STATE_RUNNING, what="the SDK job to run")
    job.cancel()
    wait_for(lambda: job.state == JobState.JOB_STATE_CANCELLED, timeout=120, what="the SDK job to cancel")
    assert job.error.code == 1

    resource_name = job.resource_name
    job.delete()  # an LRO; the SDK waits for it
    with pytest.raises(exceptions.NotFound):
        sdk.CustomJob.get(resource_name)
