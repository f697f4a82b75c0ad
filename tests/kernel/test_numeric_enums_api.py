"""Numeric enums over HTTP against a real server: `$alt=json;enum-encoding=int` (what google-gax, the Node.js
client's REST transport, sends on every call) gets every enum of the answer as its number, for each kind's
resources, lists and operations; the same request without it gets names. Each numeric answer is compared
with what the official JSON printer writes of the named one (`use_integers_for_enums=True`), and both parse
strictly into the official message. Errors are the same either way."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.cloud import (
    aiplatform_v1,
    aiplatform_v1beta1,  # noqa: F401 - registers its types, which Any values name
)
from google.cloud.location import locations_pb2
from google.longrunning import operations_pb2
from google.protobuf import json_format

from tests.support.jobs import job, python_pool
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_for, wait_job

ALT = {"$alt": "json;enum-encoding=int"}
PARENT = f"/v1/projects/{PROJECT}/locations/{LOCATION}"
BUCKET = "numeric-enums"
CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
TABULAR = "gs://google-cloud-aiplatform/schema/dataset/metadata/tabular_1.0.0.yaml"
REPORT_METRIC = (
    "import hypertune; hypertune.HyperTune()"
    ".report_hyperparameter_tuning_metric(hyperparameter_metric_tag='score', metric_value=1.5)"
)
TERMINAL_PIPELINE = {"PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED"}


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def strict(body: dict[str, Any], message: Any) -> Any:
    parsed = message.pb()() if hasattr(message, "pb") else message()
    json_format.Parse(json.dumps(body), parsed, ignore_unknown_fields=False)
    return parsed


def assert_numbered(named: dict[str, Any], numeric: dict[str, Any], message: Any) -> None:
    """`numeric` is `named` with each enum as the number the official printer writes for it, and only that:
    both parse strictly into the same message."""
    parsed = strict(named, message)
    assert strict(numeric, message) == parsed
    _same_but_enums(named, numeric, json_format.MessageToDict(parsed, use_integers_for_enums=True), "")


def _same_but_enums(named: Any, numeric: Any, printed: Any, where: str) -> None:
    # `printed` is the official printer's form (numeric enums); it may leave out what `named` writes as a
    # default, so it only says which leaves are enums.
    if isinstance(named, dict):
        assert isinstance(numeric, dict) and numeric.keys() == named.keys(), where
        for key, value in named.items():
            inner = printed.get(key) if isinstance(printed, dict) else None
            _same_but_enums(value, numeric[key], inner, f"{where}.{key}")
    elif isinstance(named, list):
        assert isinstance(numeric, list) and len(numeric) == len(named), where
        inner = printed if isinstance(printed, list) and len(printed) == len(named) else [None] * len(named)
        for i, value in enumerate(named):
            _same_but_enums(value, numeric[i], inner[i], f"{where}[{i}]")
    elif isinstance(named, str) and isinstance(printed, int) and not isinstance(printed, bool):
        assert numeric == printed, f"{where}: {named} came back as {numeric!r}, not {printed}"
    else:
        assert numeric == named, where


def both(http: httpx.Client, path: str, message: Any, **params: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """GET `path` without and with `$alt`; both answers, checked against each other."""
    named = http.get(path, params=params)
    numeric = http.get(path, params={**params, **ALT})
    assert named.status_code == numeric.status_code == 200, (named.text, numeric.text)
    assert_numbered(named.json(), numeric.json(), message)
    return named.json(), numeric.json()


def wait_op(http: httpx.Client, name: str) -> dict[str, Any]:
    return wait_for(
        lambda: (op := http.get(f"/v1/{name}").json()).get("done") and op, what=f"{name} to finish"
    )  # type: ignore[no-any-return]


def test_custom_jobs(http: httpx.Client) -> None:
    body = job(python_pool("pass"), name="numeric-job", scheduling={"strategy": "SPOT"})
    created = http.post(f"{PARENT}/customJobs", json=body, params=ALT)
    assert created.status_code == 200, created.text
    assert created.json()["state"] == aiplatform_v1.JobState.JOB_STATE_QUEUED
    strict(created.json(), aiplatform_v1.CustomJob)
    name = created.json()["name"]
    wait_job(http, name)
    named, numeric = both(http, f"/v1/{name}", aiplatform_v1.CustomJob)
    assert named["state"] == "JOB_STATE_SUCCEEDED"
    assert numeric["state"] == aiplatform_v1.JobState.JOB_STATE_SUCCEEDED
    assert numeric["jobSpec"]["scheduling"]["strategy"] == aiplatform_v1.Scheduling.Strategy.SPOT
    flt = {"filter": 'display_name="numeric-job"'}
    _, listed = both(http, f"{PARENT}/customJobs", aiplatform_v1.ListCustomJobsResponse, **flt)
    assert [j["state"] for j in listed["customJobs"]] == [aiplatform_v1.JobState.JOB_STATE_SUCCEEDED]
    # v1beta1 and the deletion's operation too.
    both(http, f"/v1beta1/{name}", aiplatform_v1beta1.CustomJob)
    deletion = http.delete(f"/v1/{name}", params=ALT).json()
    wait_op(http, deletion["name"])
    both(http, f"/v1/{deletion['name']}", operations_pb2.Operation)


def test_tuning_jobs(http: httpx.Client) -> None:
    body = {
        "displayName": "numeric-tuning",
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "discreteValueSpec": {"values": [2]}}],
            "algorithm": "GRID_SEARCH",
        },
        "maxTrialCount": 1,
        "parallelTrialCount": 1,
        "trialJobSpec": {"workerPoolSpecs": [python_pool(REPORT_METRIC)]},
    }
    created = http.post(f"{PARENT}/hyperparameterTuningJobs", json=body, params=ALT)
    assert created.status_code == 200, created.text
    numeric_created = created.json()
    assert numeric_created["studySpec"]["algorithm"] == aiplatform_v1.StudySpec.Algorithm.GRID_SEARCH
    name = numeric_created["name"]
    wait_job(http, name)
    named, numeric = both(http, f"/v1/{name}", aiplatform_v1.HyperparameterTuningJob)
    assert named["studySpec"]["metrics"][0]["goal"] == "MAXIMIZE"
    assert numeric["studySpec"]["metrics"][0]["goal"] == aiplatform_v1.StudySpec.MetricSpec.GoalType.MAXIMIZE
    assert numeric["trials"][0]["state"] == aiplatform_v1.Trial.State.SUCCEEDED
    both(http, f"{PARENT}/hyperparameterTuningJobs", aiplatform_v1.ListHyperparameterTuningJobsResponse)


def test_persistent_resources_and_their_operations(http: httpx.Client) -> None:
    body = {"resourcePools": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"}]}
    started = http.post(
        f"{PARENT}/persistentResources", json=body, params={"persistentResourceId": "numeric-pr", **ALT}
    )
    assert started.status_code == 200, started.text
    op_name = started.json()["name"]
    done = http.post(f"/v1/{op_name}:wait", json={"timeout": "30s"}, params=ALT).json()
    assert done["done"] and done["response"]["state"] == aiplatform_v1.PersistentResource.State.RUNNING
    named, numeric = both(http, f"/v1/{op_name}", operations_pb2.Operation)
    assert named["response"]["state"] == "RUNNING"
    # The location-level form of the resource's operation, under /v1 and /ui.
    op_id = op_name.rsplit("/", 1)[1]
    for prefix in ("/v1", "/ui"):
        at_location = f"{prefix}/projects/{PROJECT}/locations/{LOCATION}/operations/{op_id}"
        assert both(http, at_location, operations_pb2.Operation)[1] == numeric
    both(http, f"{PARENT}/operations", operations_pb2.ListOperationsResponse)
    resource = f"{PARENT}/persistentResources/numeric-pr"
    both(http, f"{resource}/operations", operations_pb2.ListOperationsResponse)
    _, got = both(http, resource, aiplatform_v1.PersistentResource)
    assert got["state"] == aiplatform_v1.PersistentResource.State.RUNNING
    both(http, f"{PARENT}/persistentResources", aiplatform_v1.ListPersistentResourcesResponse)


def test_datasets(http: httpx.Client, server: ServerProcess) -> None:
    root = server.home / "buckets" / BUCKET / "rows"
    root.mkdir(parents=True, exist_ok=True)
    (root / "part-1.csv").write_text("x,label\n1,a\n2,b\n")
    body = {
        "displayName": "numeric-data",
        "metadataSchemaUri": TABULAR,
        "metadata": {"inputConfig": {"gcsSource": {"uri": [f"gs://{BUCKET}/rows/*.csv"]}}},
    }
    started = http.post(f"{PARENT}/datasets", json=body, params=ALT)
    assert started.status_code == 200, started.text
    done = wait_op(http, started.json()["name"])
    assert "error" not in done, done
    name = done["response"]["name"]
    named, numeric = both(http, f"/v1/{name}", aiplatform_v1.Dataset)
    assert named == numeric  # a Dataset holds no enum
    both(http, f"{PARENT}/datasets", aiplatform_v1.ListDatasetsResponse)


def test_models_and_their_copies(http: httpx.Client, server: ServerProcess) -> None:
    folder = server.home / "buckets" / BUCKET / "model"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.pkl").write_bytes(b"not really a pickle")
    upload = {
        "modelId": "numeric-model",
        "model": {
            "displayName": "m",
            "artifactUri": f"gs://{BUCKET}/model/",
            "containerSpec": {"imageUri": "x"},
        },
    }
    uploaded = http.post(f"{PARENT}/models:upload", json=upload, params=ALT)
    assert uploaded.status_code == 200, uploaded.text
    both(http, f"/v1/{uploaded.json()['name']}", operations_pb2.Operation)
    copy = {
        "sourceModel": f"projects/{PROJECT}/locations/{LOCATION}/models/numeric-model",
        "modelId": "numeric-copy",
    }
    copied = http.post(f"/v1/projects/{PROJECT}/locations/europe-west4/models:copy", json=copy, params=ALT)
    assert copied.status_code == 200, copied.text
    model = copied.json()["response"]["model"]
    named, numeric = both(http, f"/v1/{model}", aiplatform_v1.Model)
    assert named["modelSourceInfo"] == {"sourceType": "CUSTOM", "copy": True}
    custom = aiplatform_v1.ModelSourceInfo.ModelSourceType.CUSTOM
    assert numeric["modelSourceInfo"] == {"sourceType": custom, "copy": True}
    europe = f"/v1/projects/{PROJECT}/locations/europe-west4/models"
    both(http, europe, aiplatform_v1.ListModelsResponse)
    both(http, f"{europe}/numeric-copy:listVersions", aiplatform_v1.ListModelVersionsResponse)


def test_training_pipelines(http: httpx.Client) -> None:
    body = {
        "displayName": "numeric-pipeline",
        "trainingTaskDefinition": CUSTOM_TASK,
        "trainingTaskInputs": {
            "workerPoolSpecs": [python_pool("print('trained')")],
            "baseOutputDirectory": {"outputUriPrefix": f"gs://{BUCKET}/out"},
        },
    }
    created = http.post(f"{PARENT}/trainingPipelines", json=body, params=ALT)
    assert created.status_code == 200, created.text
    assert created.json()["state"] == aiplatform_v1.PipelineState.PIPELINE_STATE_QUEUED
    name = created.json()["name"]
    wait_job(http, name, TERMINAL_PIPELINE, timeout=180)
    named, numeric = both(http, f"/v1/{name}", aiplatform_v1.TrainingPipeline)
    assert numeric["state"] == getattr(aiplatform_v1.PipelineState, named["state"])
    both(http, f"{PARENT}/trainingPipelines", aiplatform_v1.ListTrainingPipelinesResponse)


def test_locations_and_errors(http: httpx.Client) -> None:
    both(http, f"/v1/projects/{PROJECT}/locations", locations_pb2.ListLocationsResponse)
    both(http, f"/v1/projects/{PROJECT}/locations/{LOCATION}", locations_pb2.Location)
    for path, params in ((f"{PARENT}/customJobs/123", {}), (f"{PARENT}/customJobs", {"filter": "bogus=1"})):
        named, numeric = http.get(path, params=params), http.get(path, params={**params, **ALT})
        assert named.status_code == numeric.status_code >= 400
        assert named.json() == numeric.json()
