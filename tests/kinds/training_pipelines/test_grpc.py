"""trainingPipelines over gRPC: the official PipelineServiceClient on its gRPC transport (an insecure loopback
channel) against a real server: a custom-task pipeline run to success through its backing CustomJob, get,
list with filter and paging, cancel, delete as an LRO, v1beta1, NOT_FOUND, FAILED_PRECONDITION and
INVALID_ARGUMENT with field violations; the same pipeline and the same error as REST."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import aiplatform_v1, aiplatform_v1beta1
from google.protobuf import empty_pb2, json_format

from tests.kinds.training_pipelines.test_api import CUSTOM_TASK, PIPELINE_TERMINAL
from tests.support.jobs import python_pool, wait_for_state
from tests.support.rpc import assert_as_rest, fields, gapic, grpc_fixtures, not_found
from tests.support.server import ServerProcess

PipelineState = aiplatform_v1.PipelineState
LONG_RUNNING = "import time; time.sleep(600)"


served, server, pipelines = grpc_fixtures("pipelines-grpc", aiplatform_v1.PipelineServiceClient)


def pipeline(code: str, labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    """A custom-task TrainingPipeline (snake_case, as a GAPIC request takes it) running `code`."""
    return {
        "display_name": "grpc-pipeline",
        "training_task_definition": CUSTOM_TASK,
        "training_task_inputs": {"workerPoolSpecs": [python_pool(code)]},
        "labels": labels or {},
        **extra,
    }


def wait_state(client: Any, name: str, states: set[str] | None = None) -> Any:
    return wait_for_state(client.get_training_pipeline, name, states or PIPELINE_TERMINAL)


def test_a_pipeline_runs_to_success_then_is_deleted(
    pipelines: aiplatform_v1.PipelineServiceClient, server: ServerProcess
) -> None:
    created = pipelines.create_training_pipeline(
        parent=server.parent, training_pipeline=pipeline("print('trained')", {"team": "a"})
    )
    assert created.state == PipelineState.PIPELINE_STATE_QUEUED
    assert created.name.startswith("projects/") and "/trainingPipelines/" in created.name
    done = wait_state(pipelines, created.name)
    assert done.state == PipelineState.PIPELINE_STATE_SUCCEEDED, done.error
    backing = done.training_task_metadata["backingCustomJob"]
    assert "/customJobs/" in backing and done.end_time >= done.start_time

    with server.client() as http:
        rest = http.get(f"/v1/{created.name}").json()
        assert http.get(f"/v1/{backing}").json()["state"] == "JOB_STATE_SUCCEEDED"
    assert json_format.MessageToDict(aiplatform_v1.TrainingPipeline.pb(done)) == rest

    operation = pipelines.delete_training_pipeline(name=created.name)
    assert isinstance(operation.result(timeout=60), empty_pb2.Empty)
    assert isinstance(operation.metadata, aiplatform_v1.DeleteOperationMetadata)
    with pytest.raises(exceptions.NotFound):
        pipelines.get_training_pipeline(name=created.name)


def test_list_filters_pages_and_cancel(
    pipelines: aiplatform_v1.PipelineServiceClient, server: ServerProcess
) -> None:
    batch = uuid.uuid4().hex[:8]
    names = [
        pipelines.create_training_pipeline(
            parent=server.parent, training_pipeline=pipeline(LONG_RUNNING, {"batch": batch})
        ).name
        for _ in range(3)
    ]
    request = {"parent": server.parent, "filter": f"labels.batch={batch}", "page_size": 2}
    pages = list(pipelines.list_training_pipelines(request=request).pages)
    assert [[p.name for p in page.training_pipelines] for page in pages] == [names[:0:-1], names[:1]]
    custom = f'labels.batch={batch} AND training_task_definition="{CUSTOM_TASK}"'
    assert (
        len(list(pipelines.list_training_pipelines(request={"parent": server.parent, "filter": custom}))) == 3
    )

    running = wait_state(pipelines, names[0], {"PIPELINE_STATE_RUNNING"})
    with pytest.raises(exceptions.FailedPrecondition):  # only a finished pipeline can be deleted
        pipelines.delete_training_pipeline(name=running.name)
    for name in names:
        assert pipelines.cancel_training_pipeline(name=name) is None
    for name in names:
        cancelled = wait_state(pipelines, name)
        assert cancelled.state == PipelineState.PIPELINE_STATE_CANCELLED and cancelled.error.code == 1


def test_v1beta1(served: tuple[ServerProcess, grpc.Channel]) -> None:
    server, channel = served
    beta = gapic(aiplatform_v1beta1.PipelineServiceClient, channel)
    created = beta.create_training_pipeline(parent=server.parent, training_pipeline=pipeline("pass"))
    assert wait_state(beta, created.name).state == aiplatform_v1beta1.PipelineState.PIPELINE_STATE_SUCCEEDED
    operation = beta.delete_training_pipeline(name=created.name)
    assert isinstance(operation.result(timeout=60), empty_pb2.Empty)
    assert operation.operation.metadata.type_url.endswith("aiplatform.v1beta1.DeleteOperationMetadata")


def test_not_found(pipelines: aiplatform_v1.PipelineServiceClient, server: ServerProcess) -> None:
    unknown = f"{server.parent}/trainingPipelines/123456789"
    calls = (
        pipelines.get_training_pipeline,
        pipelines.cancel_training_pipeline,
        pipelines.delete_training_pipeline,
    )
    for error in not_found(calls, unknown):
        assert error.message.endswith("/trainingPipelines/123456789 not found."), error.message


def test_invalid_argument_names_the_field(
    pipelines: aiplatform_v1.PipelineServiceClient, server: ServerProcess
) -> None:
    unknown = pipeline("pass")
    unknown["training_task_definition"] = (
        "gs://google-cloud-aiplatform/schema/trainingjob/definition/automl_tables_1.0.0.yaml"
    )
    with pytest.raises(exceptions.InvalidArgument) as caught:
        pipelines.create_training_pipeline(parent=server.parent, training_pipeline=unknown)
    assert fields(caught.value) == ["training_pipeline.training_task_definition"]
    assert "custom_task_1.0.0.yaml" in caught.value.message

    body = json_format.MessageToDict(
        aiplatform_v1.TrainingPipeline.pb(aiplatform_v1.TrainingPipeline(unknown))
    )
    with server.client() as http:
        rest = http.post(f"/v1/{server.parent}/trainingPipelines", json=body).json()["error"]
    assert_as_rest(caught.value, rest)

    with pytest.raises(exceptions.InvalidArgument) as caught:
        pipelines.create_training_pipeline(
            parent=server.parent, training_pipeline={"training_task_definition": CUSTOM_TASK}
        )
    assert fields(caught.value) == [
        "training_pipeline.display_name",
        "training_pipeline.training_task_inputs",
    ]
