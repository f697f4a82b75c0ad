"""Schemathesis against the server's own /openapi.json: every operation, a few thousand generated requests.

A real server process is fuzzed over HTTP in two passes, and every response is checked:

- wide: the description as served, every operation, valid requests (per the description) and, where its
  parameters can be violated, invalid ones. Most of these die at validation, which is what they probe.
- deep: the same description with what this test knows about the server filled in (an OpenAPI document
  may narrow a parameter): path parameters drawn from resources created beforehand (finished, failed and
  running jobs, tuning jobs and pipelines, persistent resources, datasets, a model with three versions
  uploaded from a real artifact folder, a bucket and its objects, upload sessions, operations), query
  parameters from values the routes accept (filters, masks, page sizes) and request bodies from valid
  resources (a CustomJob with a `python -c` replica, a tuning job, a pipeline, ...). Reads run first, then
  writes, then reads again (of what the writes changed), then deletes, each of its own resource.

Checks on every response: no 5xx; status code, content type and body conform to the description (2xx
bodies are the official proto types, translated by api/proto_schemas.py, with unknown fields refused); every
2xx JSON body of a Vertex route parses strictly (`json_format.Parse(..., ignore_unknown_fields=False)`) into
the official message the route answers with, looked up here independently of the description; every 4xx
outside /storage is a google.rpc.Status (details of registered google.rpc types, parsed strictly) whose
code name goes with its HTTP status. Log streams (NDJSON) are checked line by line against their item
schema. Runs are derandomized so CI sees the same cases each time; findings get a plain reproduction in
tests/system/test_fuzz_findings.py.

What is not fuzzed with valid input, and why:
- the replica shell WebSocket: not an HTTP operation, so it is not in the description at all;
- log following (`follow=true`) streams until the job ends: the parameter is pinned to false;
- creating or patching training clusters (modelDevelopmentClusters) starts real daemons: only requests that
  violate the description (which must fail validation with a 4xx) are sent to them;
- operations at the location level (`.../locations/L/operations/OP`): the server makes none of its own
  (every operation belongs to a resource, and is also served there by its ID).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import signal
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import jsonschema_rs
import pytest
import requests
import schemathesis
from google.cloud import aiplatform_v1, aiplatform_v1beta1  # registers both packages' types (Any @type)
from google.cloud.location import locations_pb2
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2, json_format
from google.rpc import error_details_pb2, status_pb2  # noqa: F401  (registers BadRequest, ErrorInfo)
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.core.transport import Response
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.rpc_codes import HTTP_FOR_CODE
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_for

PY = sys.executable
WIDE_EXAMPLES = 6  # per operation and mode
DEEP_EXAMPLES = 18  # per operation; small parameter spaces run out sooner
REREAD_EXAMPLES = 6
MIN_CASES = 2400
MIN_SUCCESS_SHARE = 0.3
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]

BUCKET = "fuzz-data"
OBJECTS = {
    "a.txt": b"hello",
    "dir/b.txt": b"b",
    "move-me.txt": b"m",
    "model/weights.bin": b"\0" * 64,
    "table/iris.csv": b"x,y\n1,2\n",
    "text/items.jsonl": b'{"textContent": "hi", "classificationAnnotation": {"displayName": "a"}}\n',
}
CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
TABULAR = "gs://google-cloud-aiplatform/schema/dataset/metadata/tabular_1.0.0.yaml"
TEXT = "gs://google-cloud-aiplatform/schema/dataset/metadata/text_1.0.0.yaml"
TEXT_IMPORT = "gs://google-cloud-aiplatform/schema/dataset/ioformat/text_classification_single_label_io_format_1.0.0.yaml"
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-3:latest"
SLEEP = "import time; time.sleep(600)"  # a job that runs until it is cancelled


# ------------------------------------------------------------------------------------------ valid bodies
def job_spec(code: str = "print('fuzz')") -> dict[str, Any]:
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": "python:3.11", "command": [PY, "-c", code]},
    }
    return {"workerPoolSpecs": [pool], "baseOutputDirectory": {"outputUriPrefix": f"gs://{BUCKET}/out"}}


def custom_job(name: str, code: str = "print('fuzz')", **spec: Any) -> dict[str, Any]:
    return {"displayName": name, "labels": {"team": "fuzz"}, "jobSpec": {**job_spec(code), **spec}}


def tuning_job(code: str = "print('fuzz')") -> dict[str, Any]:
    return {
        "displayName": "fuzz-tune",
        "studySpec": {
            "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
            "parameters": [{"parameterId": "x", "doubleValueSpec": {"minValue": 0, "maxValue": 1}}],
        },
        "maxTrialCount": 1,
        "parallelTrialCount": 1,
        "trialJobSpec": job_spec(code),
    }


def pipeline(code: str = "print('fuzz')") -> dict[str, Any]:
    return {
        "displayName": "fuzz-pipe",
        "trainingTaskDefinition": CUSTOM_TASK,
        "trainingTaskInputs": job_spec(code),
    }


def persistent_resource() -> dict[str, Any]:
    return {"resourcePools": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"}]}


def dataset() -> dict[str, Any]:
    return {
        "displayName": "fuzz-ds",
        "metadataSchemaUri": TABULAR,
        "metadata": {"inputConfig": {"gcsSource": {"uri": [f"gs://{BUCKET}/table/iris.csv"]}}},
    }


def text_import() -> dict[str, Any]:
    source = {"gcsSource": {"uris": [f"gs://{BUCKET}/text/items.jsonl"]}, "importSchemaUri": TEXT_IMPORT}
    return {"importConfigs": [source]}


def model(model_id: str, parent: str = "") -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": {
            "displayName": "fuzz-model",
            "artifactUri": f"gs://{BUCKET}/model/",
            "containerSpec": {"imageUri": IMAGE},
        }
    }
    if parent:
        body["parentModel"] = parent
    else:
        body["modelId"] = model_id
    return body


# ------------------------------------------------------------------------------------------ the world
@dataclass
class World:
    """What exists on the server before the deep pass, by collection."""

    reads: dict[str, list[str]] = field(default_factory=dict)  # ids any read may name
    deletable: dict[str, list[str]] = field(default_factory=dict)  # [the v1 delete's, the v1beta1 delete's]
    running: dict[str, list[str]] = field(default_factory=dict)  # what the cancels stop
    spot_job: str = ""  # a running SPOT job, to preempt
    operations: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (collection, id) -> ops
    uploads: list[str] = field(default_factory=list)  # resumable sessions: [to finish, to cancel]


def _last(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def _done(http: httpx.Client, operation: dict[str, Any]) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        got = http.get(f"/v1/{operation['name']}").json()
        return got if got.get("done") else None

    done: dict[str, Any] = wait_for(check, timeout=120, what=f"operation {operation['name']}")
    assert "error" not in done, done
    return done


def _state(http: httpx.Client, name: str) -> str:
    return str(http.get(f"/v1/{name}").json()["state"])


def build_world(server: ServerProcess) -> World:
    """Resources of every kind: finished ones to read and delete, running ones to cancel and preempt."""
    world = World()
    parent = f"/v1/{server.parent}"
    with server.client() as http:

        def post(path: str, body: Any, **params: str) -> dict[str, Any]:
            response = http.post(parent + path, json=body, params=params)
            assert response.status_code == 200, response.text
            return response.json()  # type: ignore[no-any-return]

        def created(path: str, body: Any, **params: str) -> str:
            return _last(_done(http, post(path, body, **params))["response"]["name"])

        assert http.post("/storage/v1/b", json={"name": BUCKET}).status_code == 200
        for name, data in OBJECTS.items():
            params = {"uploadType": "media", "name": name}
            assert (
                http.post(f"/upload/storage/v1/b/{BUCKET}/o", params=params, content=data).status_code == 200
            )
        for name in ("session-finished.txt", "session-cancelled.txt"):
            params = {"uploadType": "resumable", "name": name}
            started = http.post(f"/upload/storage/v1/b/{BUCKET}/o", params=params, json={})
            world.uploads.append(started.headers["x-guploader-uploadid"])

        finished = {
            "customJobs": [post("/customJobs", custom_job(f"fuzz-{i}"))["name"] for i in range(2)]
            + [post("/customJobs", custom_job("fuzz-failing", "raise SystemExit(3)"))["name"]],
            "hyperparameterTuningJobs": [
                post("/hyperparameterTuningJobs", tuning_job())["name"] for _ in range(2)
            ],
            "trainingPipelines": [post("/trainingPipelines", pipeline())["name"] for _ in range(2)],
        }
        running = {
            "customJobs": [
                post("/customJobs", custom_job("fuzz-sleeper", SLEEP, enableWebAccess=True))["name"]
            ],
            "hyperparameterTuningJobs": [post("/hyperparameterTuningJobs", tuning_job(SLEEP))["name"]],
            "trainingPipelines": [post("/trainingPipelines", pipeline(SLEEP))["name"]],
        }
        spot = post("/customJobs", custom_job("fuzz-spot", SLEEP, scheduling={"strategy": "SPOT"}))["name"]
        resources = [
            created("/persistentResources", persistent_resource(), persistentResourceId=rid)
            for rid in ("fuzz-pr", "fuzz-pr-del-1", "fuzz-pr-del-2")
        ]
        datasets = [created("/datasets", dataset()) for _ in range(3)]
        text = {"displayName": "fuzz-text", "metadataSchemaUri": TEXT}
        datasets.append(created("/datasets", text))
        models = []
        for model_id in ("fuzz-model", "fuzz-model-del-1", "fuzz-model-del-2"):
            models.append(_last(_done(http, post("/models:upload", model(model_id)))["response"]["model"]))
        for _ in range(2):  # versions 2 and 3, for the deleteVersion calls
            _done(http, post("/models:upload", model("", parent=f"{server.parent}/models/fuzz-model")))

        world.reads = {
            collection: [_last(n) for n in finished[collection] + running[collection]]
            for collection in finished
        }
        world.reads["customJobs"].append(_last(spot))
        world.reads |= {
            "persistentResources": resources[:1],
            "datasets": [datasets[0], datasets[3]],
            "models": ["fuzz-model", "fuzz-model@1", "fuzz-model@default"],
        }
        world.deletable = {collection: [_last(n) for n in names] for collection, names in finished.items()}
        world.deletable |= {
            "persistentResources": resources[1:],
            "datasets": datasets[1:3],
            "models": models[1:],
        }
        world.running = {collection: [_last(n) for n in names] for collection, names in running.items()}
        world.spot_job = _last(spot)
        listed = http.get(f"{parent}/persistentResources/fuzz-pr/operations").json()["operations"]
        world.operations[("persistentResources", "fuzz-pr")] = [_last(op["name"]) for op in listed]

        # Jobs that ran have logs, replicas, costs and an output folder to describe.
        for name in [n for names in finished.values() for n in names]:
            wait_for(lambda n=name: _state(http, n).endswith(("SUCCEEDED", "FAILED")), timeout=180, what=name)
        for name in [*running["customJobs"], spot]:
            wait_for(lambda n=name: _state(http, n) == "JOB_STATE_RUNNING", timeout=180, what=name)
    return world


def stop_jobs(server: ServerProcess, world: World) -> None:
    """Cancel what the run left running (the cancels may have stopped it already) and wait for the end."""
    with server.client() as http:
        names = [f"{server.parent}/customJobs/{world.spot_job}"] + [
            f"{server.parent}/{collection}/{rid}" for collection, ids in world.running.items() for rid in ids
        ]
        for name in names:
            http.post(f"/v1/{name}:cancel")
        for name in names:
            wait_for(
                lambda n=name: _state(http, n).endswith(("CANCELLED", "SUCCEEDED", "FAILED")), timeout=120
            )


def kill_zygotes(home: Path) -> None:
    """Warm interpreters of persistent resources outlive the server by design: stop the ones it started."""
    for record in home.glob("persistent/*/*/*/zygotes/*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            os.killpg(json.loads(record.read_text())["pid"], signal.SIGKILL)


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("fuzz-home")).start()
    try:
        yield proc
    finally:
        proc.stop()
        kill_zygotes(proc.home)


# ------------------------------------------------------------------------------------------ deepening
def _enum(*values: Any) -> dict[str, Any]:
    return {"enum": list(values)}


def _version(path: str) -> int:
    """0 under /v1 (and everything else), 1 under /v1beta1: which of two deletable resources to use."""
    return 1 if path.startswith("/v1beta1/") else 0


def _query_schema(path: str, name: str) -> dict[str, Any] | None:
    """A query parameter narrowed to values the route accepts; None: leave it out (no valid value known)."""
    known: dict[str, dict[str, Any] | None] = {
        "pageSize": {"type": "integer", "minimum": 0, "maximum": 3},
        "pageToken": _enum(""),
        "filter": _enum('display_name="fuzz-0"', 'labels.team="fuzz"', 'create_time>"2020-01-01T00:00:00Z"'),
        "readMask": _enum("displayName", "name,displayName,createTime"),
        "orderBy": _enum("create_time desc", "display_name"),
        "updateMask": _enum("displayName", "labels"),
        "persistentResourceId": _enum(f"fuzz-pr-new-{_version(path)}"),
        "timeout": _enum("0s", "0.2s"),
        "follow": _enum("false"),
        "task": _enum("workerpool0-0"),
        "by": _enum("job", "resource"),
        "machineType": _enum("n1-standard-4"),
        "acceleratorType": _enum("NVIDIA_TESLA_T4"),
        "acceleratorCount": _enum("1"),
        # The Cloud Storage JSON API.
        "project": _enum(PROJECT),
        "prefix": _enum("", "dir/"),
        "delimiter": _enum("/"),
        "startOffset": _enum("a"),
        "endOffset": _enum("z"),
        "maxResults": {"type": "integer", "minimum": 1, "maximum": 5},
        "alt": _enum("json", "media"),
        "uploadType": _enum("media", "resumable"),
        "name": _enum("up/new.txt"),
    }
    return known.get(name)


def _path_values(method: str, path: str, name: str, world: World) -> list[str] | None:
    """Values of a path parameter that name things that exist; None: leave the parameter as described."""
    fixed = {"project": [PROJECT], "location": [LOCATION], "bucket": [BUCKET], "dest_bucket": [BUCKET]}
    if name in fixed:
        return ["fuzz-new"] if method == "DELETE" and path == "/storage/v1/b/{bucket}" else fixed[name]
    if name == "upload_id":
        return None
    if path.startswith("/upload/") or path.startswith("/storage/") or path.startswith("/download/"):
        moving = "/moveTo/" in path
        objects = {
            "name": ["copies/c.txt", "up/new.txt"] if method == "DELETE" else ["a.txt", "dir/b.txt"],
            "source": ["move-me.txt"] if moving else ["a.txt"],
            "dest": ["moved.txt"] if moving else ["copies/c.txt"],
        }
        return objects.get(name)
    # Operations under a resource: one resource and its own operations, so the three agree.
    (collection, resource_id), ops = next(iter(world.operations.items()))
    if name == "collection":
        return [collection]
    if name == "resource_id" and "/{collection}/" in path:
        return [resource_id]
    if name == "op":
        return ops
    match = re.search(r"/(\w+)/\{" + name + r"\}", path)
    if match is None or match.group(1) not in world.reads:
        return None
    collection = match.group(1)
    if path.endswith(":preempt"):
        return [world.spot_job]
    if path.endswith(":cancel"):
        return world.running[collection]
    if path.endswith(":import"):
        return world.reads["datasets"][1:]  # the text dataset
    if path.endswith(":deleteVersion"):
        return [f"fuzz-model@{2 + _version(path)}"]
    if method == "DELETE":
        return [world.deletable[collection][_version(path)]]
    return world.reads[collection]


# Valid request bodies by (method, path pattern); first match wins.
def _deep_bodies() -> list[tuple[str, str, list[Any]]]:
    return [
        ("post", r"/customJobs$", [custom_job("fuzz-deep")]),
        ("post", r"/hyperparameterTuningJobs$", [tuning_job()]),
        ("post", r"/trainingPipelines$", [pipeline()]),
        ("post", r"/persistentResources$", [persistent_resource()]),
        ("post", r"/datasets$", [dataset()]),
        ("post", r":import$", [text_import()]),
        (
            "post",
            r"/models:upload$",
            [model("", parent=f"projects/{PROJECT}/locations/{LOCATION}/models/fuzz-model")],
        ),
        (
            "post",
            r":mergeVersionAliases$",
            [{"versionAliases": ["fuzz-alias"]}, {"versionAliases": ["-fuzz-alias"]}],
        ),
        ("patch", r"/(models|datasets|persistentResources)/\{\w+\}$", [{"displayName": "renamed"}]),
        ("post", r":wait$", [{"timeout": "0s"}]),
        ("post", r":preempt$", [{}]),
        ("post", r"^/storage/v1/b$", [{"name": "fuzz-new"}]),
        ("patch", r"/o/\{name\}$", [{"metadata": {"k": "v"}}]),
        ("post", r"/(rewriteTo|copyTo)/", [{}]),
        ("post", r"^/upload/storage/v1/b/\{bucket\}/o$", [{"metadata": {"k": "v"}}]),
    ]


def deepen(described: dict[str, Any], world: World) -> dict[str, Any]:
    """The description narrowed to what this server accepts and holds (see the module docstring)."""
    deep = copy.deepcopy(described)
    bodies = _deep_bodies()
    for path, operations in deep["paths"].items():
        for method, operation in operations.items():
            kept = []
            for parameter in operation.get("parameters", []):
                name = parameter["name"]
                if parameter["in"] == "path":
                    values = _path_values(method.upper(), path, name, world)
                    if values is not None:
                        parameter["schema"] = _enum(*values)
                elif parameter["in"] == "query":
                    if name == "upload_id" and path.startswith("/upload/") and method != "post":
                        parameter["schema"] = _enum(world.uploads[0 if method == "put" else 1])
                        parameter["required"] = True
                    elif (narrowed := _query_schema(path, name)) is not None:
                        parameter["schema"] = narrowed
                    else:
                        continue  # no value of it is known to be valid here
                kept.append(parameter)
            operation["parameters"] = kept
            content = operation.get("requestBody", {}).get("content", {}).get("application/json")
            if content is not None:
                for rule_method, pattern, valid in bodies:
                    if rule_method == method and re.search(pattern, path):
                        content["schema"] = _enum(*valid)
                        break
    return deep


# ------------------------------------------------------------------------------------------ oracle
def _official(method: str, path: str) -> Any | None:
    """The official message a Vertex route answers with; None for routes outside /v1, /v1beta1 and /ui."""
    version = path.split("/")[1]
    if version not in ("v1", "v1beta1", "ui"):
        return None
    types = aiplatform_v1beta1 if version == "v1beta1" else aiplatform_v1
    if path.endswith("/projects/{project}/locations"):
        return locations_pb2.ListLocationsResponse
    if path.endswith("/projects/{project}/locations/{location}"):
        return locations_pb2.Location
    if "/operations" in path:
        if path.endswith("/operations") and method == "GET":
            return operations_pb2.ListOperationsResponse
        return empty_pb2.Empty if method == "DELETE" or path.endswith(":cancel") else operations_pb2.Operation
    if "modelDevelopmentClusters" in path:
        return None  # no published proto (response_schemas.py describes it from the wire model)
    if path.endswith(":cancel"):
        return empty_pb2.Empty
    singular = {
        "customJobs": types.CustomJob,
        "hyperparameterTuningJobs": types.HyperparameterTuningJob,
        "trainingPipelines": types.TrainingPipeline,
        "persistentResources": types.PersistentResource,
        "datasets": types.Dataset,
        "models": types.Model,
    }
    collection = re.search(r"/locations/\{location\}/(\w+)", path)
    assert collection is not None, path
    name = collection.group(1)
    is_collection = path.endswith("/" + name) or path.endswith(":listVersions")
    if method == "GET":
        if path.endswith(":listVersions"):
            return types.ListModelVersionsResponse
        if is_collection:
            return getattr(types, f"List{name[0].upper()}{name[1:]}Response")
        return singular[name]
    if method == "POST" and path.endswith(("/customJobs", "/hyperparameterTuningJobs", "/trainingPipelines")):
        return singular[name]
    if path.endswith(":mergeVersionAliases") or (method == "PATCH" and name in ("models", "datasets")):
        return singular[name]
    return operations_pb2.Operation  # every other change is a long-running operation


def check_official(method: str, path: str, response: Response) -> None:
    """2xx: the official message the route answers with. 4xx outside /storage: a google.rpc.Status whose
    details are registered google.rpc types, with the code's name and the HTTP status that goes with it."""
    storage = ("/storage/", "/upload/", "/download/", "/resumable/")
    if 400 <= response.status_code < 500 and not path.startswith(storage):
        error = response.json()["error"]
        assert HTTP_FOR_CODE[error["status"]] == response.status_code == error["code"], error
        rpc = {key: value for key, value in error.items() if key != "status"}
        json_format.Parse(json.dumps(rpc), status_pb2.Status(), ignore_unknown_fields=False)
        return
    message_type = _official(method, path)
    if message_type is None or not 200 <= response.status_code < 300:
        return
    message = message_type.pb()() if hasattr(message_type, "pb") else message_type()
    json_format.Parse(response.text, message, ignore_unknown_fields=False)


def check_lines(schema: dict[str, Any] | None, response: Response) -> None:
    """NDJSON: every line is one JSON object conforming to the described item schema."""
    if schema is None or response.status_code != 200:
        return
    validator = jsonschema_rs.validator_for(schema)
    for line in response.text.splitlines():
        validator.validate(json.loads(line))


# ------------------------------------------------------------------------------------------ the run
@dataclass
class Outcome:
    cases: int = 0
    statuses: Counter[int] = field(default_factory=Counter)
    by_pass: Counter[str] = field(default_factory=Counter)
    covered: set[str] = field(default_factory=set)
    succeeded: set[str] = field(default_factory=set)
    per_operation: Counter[tuple[str, str, int]] = field(default_factory=Counter)  # (pass, op, status)
    failures: list[str] = field(default_factory=list)


def _modes(operation: Any, deep: bool) -> tuple[GenerationMode, ...]:
    method, path, raw = operation.method.upper(), operation.path, operation.definition.raw
    if "/modelDevelopmentClusters" in path and method in ("POST", "PATCH"):
        return () if deep else (GenerationMode.NEGATIVE,)
    # Path parameters are free-form strings: with nothing else to violate, negative generation only
    # spends its attempts before giving up.
    violable = "requestBody" in raw or any(p["in"] != "path" for p in raw.get("parameters", []))
    if deep or not violable:
        return (GenerationMode.POSITIVE,)
    return (GenerationMode.POSITIVE, GenerationMode.NEGATIVE)


def _is_resumable_start(case: Any, response: Response) -> bool:
    """A resumable upload session starts with an empty 200 and a Location header, as Cloud Storage answers."""
    return (
        case.method.upper() == "POST"
        and case.operation.path.endswith("/upload/storage/v1/b/{bucket}/o")  # also /resumable/upload/
        and (case.query or {}).get("uploadType") == "resumable"
        and response.status_code == 200
        and not response.content
    )


def _fuzz(
    operation: Any,
    mode: GenerationMode,
    examples: int,
    base_url: str,
    session: requests.Session,
    out: Outcome,
    label: str,
) -> None:
    responses = operation.definition.raw.get("responses", {})
    answers = {code for code in responses if code[0] in "123" or code == "499"}  # a cancelled upload: 499
    item_schema = (
        responses.get("200", {}).get("content", {}).get("application/x-ndjson", {}).get("itemSchema")
    )

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=True,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=operation.as_strategy(generation_mode=mode))
    def run(case: Any) -> None:
        if operation.path.endswith("/logs"):
            case.query = {**(case.query or {}), "follow": "false"}  # never hold a stream open
        response = case.call(base_url=base_url, session=session, timeout=60)
        out.cases += 1
        out.by_pass[label] += 1
        out.statuses[response.status_code] += 1
        out.covered.add(operation.label)
        out.per_operation[(label, operation.label, response.status_code)] += 1
        if 200 <= response.status_code < 300 or str(response.status_code) in answers:
            out.succeeded.add(operation.label)
        try:
            if _is_resumable_start(case, response):
                assert response.headers["location"], response.headers
                case.validate_response(response, checks=[not_a_server_error])
            else:
                case.validate_response(response, checks=CHECKS)
            check_official(case.method.upper(), operation.path, response)
            check_lines(item_schema, response)
        except (Exception, FailureGroup) as exc:  # a check failure or a ParseError: report all at the end
            out.failures.append(
                f"{operation.label} [{label} {mode.value}] {response.status_code}: {exc}\n"
                f"  {case.as_curl_command()}\n  -> {response.text[:600]}"
            )

    # Unsatisfiable: nothing to violate, in an operation whose only parameters are free-form strings.
    with contextlib.suppress(Unsatisfiable):
        run()


WRITES = {"POST", "PUT", "PATCH"}
# The deep pass in steps: reads, writes, reads again (of what the writes changed: renamed, preempted,
# cancelled, rebooted, aliased), then deletes.
DEEP_STEPS = [({"GET"}, DEEP_EXAMPLES), (WRITES, DEEP_EXAMPLES), ({"GET"}, REREAD_EXAMPLES), ({"DELETE"}, 4)]


def _run_pass(
    described: dict[str, Any], base_url: str, out: Outcome, label: str, steps: list[tuple[set[str], int]]
) -> list[Any]:
    schema = schemathesis.openapi.from_dict(described)
    operations = [result.ok() for result in schema.get_all_operations()]
    deep = label == "deep"
    with requests.Session() as session:
        for methods, examples in steps:
            for operation in operations:
                if operation.method.upper() in methods:
                    for mode in _modes(operation, deep):
                        _fuzz(operation, mode, examples, base_url, session, out, label)
    return operations


def test_every_operation_survives_fuzzing(fuzz_server: ServerProcess) -> None:
    started = time.monotonic()
    described = requests.get(fuzz_server.url + "/openapi.json", timeout=120).json()
    world = build_world(fuzz_server)
    out = Outcome()
    try:
        everything = {"GET", "DELETE", *WRITES}
        operations = _run_pass(described, fuzz_server.url, out, "wide", [(everything, WIDE_EXAMPLES)])
        _run_pass(deepen(described, world), fuzz_server.url, out, "deep", DEEP_STEPS)
    finally:
        stop_jobs(fuzz_server, world)
    elapsed = time.monotonic() - started

    report = "\n".join(out.failures[:20])
    assert not out.failures, f"{len(out.failures)} failing cases:\n{report}"
    assert {op.label for op in operations} == out.covered
    assert out.cases >= MIN_CASES, out.cases
    assert not [s for s in out.statuses if s >= 500], out.statuses
    success = sum(n for status, n in out.statuses.items() if 200 <= status < 300)
    assert success >= MIN_SUCCESS_SHARE * out.cases, out.statuses
    # Every read answered 2xx at least once, so its body was checked: all but training clusters (none is
    # created) and location-level operations (every operation here belongs to a resource).
    reads = {
        op.label
        for op in operations
        if op.method.upper() == "GET"
        and "/modelDevelopmentClusters/{" not in op.path
        and not op.path.endswith("/locations/{location}/operations/{op}")
    }
    assert reads <= out.succeeded, sorted(reads - out.succeeded)
    never = sorted(out.covered - out.succeeded)
    print(
        f"fuzzed {len(operations)} operations with {out.cases} cases {dict(out.by_pass)} in {elapsed:.0f} s; "
        f"by status: {dict(sorted(out.statuses.items()))}; {len(out.succeeded)} operations succeeded, "
        f"{len(never)} never: {never}"
    )
    assert fuzz_server.process is not None and fuzz_server.process.poll() is None


def test_description_covers_hand_read_parameters(fuzz_server: ServerProcess) -> None:
    """Routes read bodies and query parameters by hand; the description must still say what they take."""
    described = requests.get(fuzz_server.url + "/openapi.json", timeout=120).json()
    paths = described["paths"]
    jobs = paths["/v1/projects/{project}/locations/{location}/customJobs"]
    assert jobs["post"]["requestBody"]["required"] is True
    assert {p["name"] for p in jobs["get"]["parameters"] if p["in"] == "query"} >= {
        "pageSize",
        "pageToken",
        "filter",
        "readMask",
    }
    for path, operations in paths.items():
        for method, operation in operations.items():
            assert "422" not in operation["responses"], (method, path)  # validation answers 400
            if method in ("post", "patch") and path.endswith(("Jobs", "Resources", "datasets", "Pipelines")):
                assert "requestBody" in operation, (method, path)
    assert "HTTPValidationError" not in described.get("components", {}).get("schemas", {})


def test_description_answers_with_official_types(fuzz_server: ServerProcess) -> None:
    """Every operation describes what it answers; the Vertex ones as the official messages' proto3 JSON."""
    described = requests.get(fuzz_server.url + "/openapi.json", timeout=120).json()
    components = described["components"]["schemas"]
    for path, operations in described["paths"].items():
        for method, operation in operations.items():
            answers = {code: r for code, r in operation["responses"].items() if code != "4XX"}
            assert answers, (method, path)  # a cancelled upload answers 499 alone, as Cloud Storage does
            official = _official(method.upper(), path)
            if official is None:
                continue
            schema = answers["200"]["content"]["application/json"]["schema"]
            full_name = (official.pb() if hasattr(official, "pb") else official).DESCRIPTOR.full_name
            assert schema == {"$ref": f"#/components/schemas/{full_name}"}, (method, path)
    job = components["google.cloud.aiplatform.v1.CustomJob"]
    assert job["additionalProperties"] is False
    assert job["properties"]["createTime"]["type"] == "string"
    assert job["properties"]["state"]["enum"][0] == "JOB_STATE_UNSPECIFIED"
    assert job["properties"]["labels"] == {"type": "object", "additionalProperties": {"type": "string"}}
    pool = components["google.cloud.aiplatform.v1.WorkerPoolSpec"]
    assert pool["properties"]["replicaCount"]["type"] == "string"  # int64
    assert pool["not"] == {"anyOf": [{"required": ["containerSpec", "pythonPackageSpec"]}]}  # the oneof


def test_described_types_refuse_what_the_proto_parser_refuses(fuzz_server: ServerProcess) -> None:
    """A real CustomJob body conforms; each way of writing it that is not canonical proto3 JSON does not."""
    described = requests.get(fuzz_server.url + "/openapi.json", timeout=120).json()
    with fuzz_server.client() as http:
        created = http.post(f"/v1/{fuzz_server.parent}/customJobs", json=custom_job("fuzz-shape"))
        assert created.status_code == 200, created.text
        body = created.json()
        http.post(f"/v1/{body['name']}:cancel")
    ref = {"$ref": "#/components/schemas/google.cloud.aiplatform.v1.CustomJob"}
    validator = jsonschema_rs.validator_for({**ref, "components": described["components"]})
    assert validator.is_valid(body), list(validator.iter_errors(body))

    def pool(**change: Any) -> dict[str, Any]:
        spec = copy.deepcopy(body["jobSpec"])
        spec["workerPoolSpecs"][0].update(change)
        return {**body, "jobSpec": spec}

    wrong = {
        "an unknown field": {**body, "priority": 1},
        "a snake_case name": {**{k: v for k, v in body.items() if k != "displayName"}, "display_name": "x"},
        "int64 as a number": pool(replicaCount=1),
        "an unknown enum name": {**body, "state": "RUNNING"},
        "an enum as a number": {**body, "state": 3},
        "a timestamp without a zone": {**body, "createTime": "2026-01-01T00:00:00"},
        "null for a field": {**body, "error": None},
        "two members of a oneof": pool(pythonPackageSpec={"executorImageUri": "python:3.11"}),
        "a map of numbers": {**body, "labels": {"a": 1}},
    }
    for what, instance in wrong.items():
        assert not validator.is_valid(instance), what


def test_description_builds_without_the_official_types(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """google-cloud-aiplatform is an optional extra of the server: without it, Vertex bodies are objects."""
    from trainworks.api import proto_schemas
    from trainworks.api.app import create_app
    from trainworks.config import Settings

    for module in ("google.cloud.aiplatform_v1", "google.cloud.aiplatform_v1beta1"):
        monkeypatch.setitem(sys.modules, module, None)  # None in sys.modules: importing it raises ImportError
    proto_schemas.descriptor.cache_clear()
    try:
        described = create_app(Settings(home=tmp_path)).openapi()
    finally:
        proto_schemas.descriptor.cache_clear()
    job = described["paths"]["/v1/projects/{project}/locations/{location}/customJobs"]["post"]
    assert job["responses"]["200"]["content"]["application/json"]["schema"]["type"] == "object"
    assert job["requestBody"]["content"]["application/json"]["schema"]["type"] == "object"
    operation = described["paths"]["/ui/projects/{project}/locations/{location}/operations/{op}"]["get"]
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/google.longrunning.Operation"  # googleapis-common-protos is still there
    }
