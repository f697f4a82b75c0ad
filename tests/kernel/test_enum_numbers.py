"""kernel/enum_numbers.py without a server: which official message each REST path answers (from the published
REST bindings), and the walk that writes enums as numbers, checked against the official JSON printer."""

from __future__ import annotations

from typing import Any

import pytest
from google.cloud import (
    aiplatform_v1,
    aiplatform_v1beta1,  # noqa: F401 - registers its types, which Any values name
)
from google.longrunning import operations_pb2
from google.protobuf import json_format

from trainworks.kernel.enum_numbers import numbered, response_message

P = "/v1/projects/p/locations/us-central1"


@pytest.mark.parametrize(
    ("method", "path", "message"),
    [
        ("GET", P + "/customJobs/1", "google.cloud.aiplatform.v1.CustomJob"),
        ("GET", P + "/customJobs", "google.cloud.aiplatform.v1.ListCustomJobsResponse"),
        ("POST", P + "/customJobs", "google.cloud.aiplatform.v1.CustomJob"),
        ("POST", P + "/customJobs/1:cancel", "google.protobuf.Empty"),
        ("DELETE", P + "/customJobs/1", "google.longrunning.Operation"),
        # A custom verb is never taken for a resource ID.
        ("GET", P + "/models/m:listVersions", "google.cloud.aiplatform.v1.ListModelVersionsResponse"),
        ("GET", P + "/models/m@2", "google.cloud.aiplatform.v1.Model"),
        ("POST", P + "/models:copy", "google.longrunning.Operation"),
        ("GET", P + "/operations/5", "google.longrunning.Operation"),
        ("GET", P + "/persistentResources/r/operations/5", "google.longrunning.Operation"),
        ("GET", "/ui/projects/p/locations/l/operations", "google.longrunning.ListOperationsResponse"),
        ("GET", "/v1/projects/p/locations", "google.cloud.location.ListLocationsResponse"),
        ("GET", "/v1beta1/projects/p/locations/l", "google.cloud.location.Location"),
        (
            "GET",
            "/v1beta1/projects/p/locations/l/hyperparameterTuningJobs/1",
            "google.cloud.aiplatform.v1beta1.HyperparameterTuningJob",
        ),
    ],
)
def test_the_official_response_of_a_path(method: str, path: str, message: str) -> None:
    found = response_message(method, path)
    assert found is not None and found.full_name == message


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/trainworks/v1/projects/p/locations/l/customJobs/1/status"),
        ("GET", "/storage/v1/b/bucket"),
        ("PUT", P + "/customJobs/1"),
        ("GET", "/v2/projects/p/locations/l/customJobs/1"),
    ],
)
def test_no_official_response_elsewhere(method: str, path: str) -> None:
    assert response_message(method, path) is None


def _as_official(body: dict[str, Any], message: Any) -> dict[str, Any]:
    """What the official JSON printer writes with numeric enums, for `body` parsed as `message`."""
    parsed = json_format.ParseDict(body, message.pb()() if hasattr(message, "pb") else message())
    return json_format.MessageToDict(parsed, use_integers_for_enums=True)


JOB = {
    "name": "projects/1/locations/l/customJobs/2",
    "displayName": "j",
    "state": "JOB_STATE_RUNNING",
    "jobSpec": {
        "workerPoolSpecs": [
            {"machineSpec": {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4"}},
            {"machineSpec": {"machineType": "n1-standard-4"}, "diskSpec": {"bootDiskType": "pd-ssd"}},
        ],
        "scheduling": {"strategy": "SPOT", "timeout": "3600s"},
    },
    "labels": {"state": "JOB_STATE_RUNNING"},  # a map of strings: no enum, whatever it holds
    "createTime": "2024-01-01T00:00:00Z",
}


def test_a_resource_matches_the_official_printer() -> None:
    message = response_message("GET", P + "/customJobs/2")
    assert message is not None
    got = numbered(JOB, message)
    assert got == _as_official(JOB, aiplatform_v1.CustomJob)
    assert got["state"] == aiplatform_v1.JobState.JOB_STATE_RUNNING
    assert got["jobSpec"]["scheduling"]["strategy"] == aiplatform_v1.Scheduling.Strategy.SPOT
    assert got["labels"] == {"state": "JOB_STATE_RUNNING"}
    assert JOB["state"] == "JOB_STATE_RUNNING"  # the route's own object is left as it was


def test_a_list_and_an_operation_holding_any() -> None:
    listed = {"customJobs": [JOB, JOB], "nextPageToken": "t"}
    message = response_message("GET", P + "/customJobs")
    assert message is not None
    assert numbered(listed, message) == _as_official(listed, aiplatform_v1.ListCustomJobsResponse)

    tuning = {
        "name": "projects/1/locations/l/hyperparameterTuningJobs/3",
        "state": "JOB_STATE_SUCCEEDED",
        "studySpec": {
            "metrics": [{"metricId": "m", "goal": "MAXIMIZE"}],
            "algorithm": "GRID_SEARCH",
            "parameters": [{"parameterId": "x", "scaleType": "UNIT_LINEAR_SCALE", "doubleValueSpec": {}}],
        },
        "trials": [{"id": "1", "state": "SUCCEEDED"}],
    }
    operation = {
        "name": "projects/1/locations/l/operations/4",
        "metadata": {
            "@type": "type.googleapis.com/google.cloud.aiplatform.v1beta1.DeleteOperationMetadata",
            "genericMetadata": {"createTime": "2024-01-01T00:00:00Z"},
        },
        "done": True,
        "response": {"@type": "type.googleapis.com/google.cloud.aiplatform.v1beta1.HyperparameterTuningJob"}
        | tuning,
    }
    message = response_message("GET", "/ui/projects/p/locations/l/operations/4")
    assert message is not None
    got = numbered(operation, message)
    assert got == _as_official(operation, operations_pb2.Operation)
    assert got["response"]["studySpec"]["algorithm"] == 2  # GRID_SEARCH


def test_free_form_values_and_unknown_names_are_left_alone() -> None:
    model = {
        "name": "projects/1/locations/l/models/m",
        "metadata": {"state": "JOB_STATE_RUNNING", "nullValue": "NULL_VALUE"},  # a google.protobuf.Value
        "modelSourceInfo": {"sourceType": "CUSTOM", "copy": True},
        "unknownField": {"state": "RUNNING"},
    }
    message = response_message("GET", P + "/models/m")
    assert message is not None
    got = numbered(model, message)
    assert got["metadata"] == model["metadata"]
    assert got["unknownField"] == model["unknownField"]
    assert got["modelSourceInfo"] == {
        "sourceType": aiplatform_v1.ModelSourceInfo.ModelSourceType.CUSTOM,
        "copy": True,
    }
    odd = {"state": "NO_SUCH_STATE"}
    assert numbered(odd, message) == odd
