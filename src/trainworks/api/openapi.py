"""The OpenAPI description: the query parameters and JSON bodies routes read by hand, and every response.

Routes take the raw Request (bodies are the proto JSON mapping, validated by the services, not pydantic
models), so FastAPI's generated description lists neither their query parameters nor their bodies, it
promises 422 responses the server never sends (validation errors are 400 google.rpc bodies), and its 200s
have no schema. This fills that in after generation, without touching behaviour, so that clients and the API
fuzzer (tests/system/test_fuzz_api.py) see what each operation takes and answers:

- Vertex bodies, both ways: the official message (CustomJob to create one, ListCustomJobsResponse,
  longrunning Operation, google.protobuf.Empty, ...) translated from its proto descriptor by
  api/proto_schemas.py, of the v1 or v1beta1 package as the path says. Requests are described in the
  canonical form; the services also take what the proto JSON parser takes (snake_case, enum numbers);
- the extensions, /healthz and the Cloud Storage JSON API: hand-written schemas (api/response_schemas.py);
- errors: google.rpc.Status in JSON (or Cloud Storage's error form under /storage).

The description is built on the first request for /openapi.json, in a worker thread (the official types
take seconds to import), and kept. Without google-cloud-aiplatform installed (it is the `vertex` extra),
the Vertex bodies are described as plain JSON objects.
"""

from __future__ import annotations

import copy
import re
import threading
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from trainworks.api import proto_schemas, response_schemas
from trainworks.api.proto_schemas import ref

_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer"}
_OBJ: dict[str, Any] = {"type": "object"}
_LABELS: dict[str, Any] = {"type": "object", "additionalProperties": _STR}

_PAGE = {"pageSize": _INT, "pageToken": _STR}
_LIST = {**_PAGE, "filter": _STR, "readMask": _STR}

_AIP = "google.cloud.aiplatform.{version}."
_CLUSTER = "trainworks.ModelDevelopmentCluster"
_OPERATION = "google.longrunning.Operation"
_EMPTY = "google.protobuf.Empty"

# A schema: a message (a full proto name, `{version}` for v1 or v1beta1 as the path says; `trainworks.` for
# the training cluster wire model), a hand-written schema, or a request message without the fields that travel
# in the path (REST transcoding with `body: "*"`).
_Request = tuple[str, tuple[str, ...]]
_Answer = str | dict[str, Any] | _Request

# The body of a create or patch is the resource itself.
_BODIES: dict[str, _Answer] = {
    "customJobs": _AIP + "CustomJob",
    "hyperparameterTuningJobs": _AIP + "HyperparameterTuningJob",
    "persistentResources": _AIP + "PersistentResource",
    "datasets": _AIP + "Dataset",
    "trainingPipelines": _AIP + "TrainingPipeline",
    "modelDevelopmentClusters": _CLUSTER,
    "models": _AIP + "Model",
}

_COLLECTIONS = "customJobs|hyperparameterTuningJobs|persistentResources|datasets|trainingPipelines"
_COLLECTION_PARAMS = {
    "customJobs": _LIST,
    "hyperparameterTuningJobs": _LIST,
    "trainingPipelines": _LIST,
    "datasets": {**_LIST, "orderBy": _STR},
    "persistentResources": _PAGE,
    "modelDevelopmentClusters": _PAGE,
    "operations": _PAGE,
    "locations": {**_PAGE, "filter": _STR},
}

# (method, path pattern) -> (query parameters, body or None, body required). First match wins.
_Rule = tuple[str, str, dict[str, dict[str, Any]], _Answer | None, bool]
_RULES: list[_Rule] = [
    ("post", r"/persistentResources$", {"persistentResourceId": _STR}, None, True),
    ("post", rf"/({_COLLECTIONS})$", {}, None, True),
    ("post", r"/modelDevelopmentClusters$", {"modelDevelopmentClusterId": _STR}, None, True),
    ("get", r"/(models|models/\{model\}:listVersions)$", {**_LIST, "orderBy": _STR}, None, False),
    ("post", r"/models:upload$", {}, (_AIP + "UploadModelRequest", ("parent",)), True),
    ("post", r"/models:copy$", {}, (_AIP + "CopyModelRequest", ("parent",)), True),
    (
        "post",
        r"/models/\{model\}:mergeVersionAliases$",
        {},
        (_AIP + "MergeVersionAliasesRequest", ("name",)),
        True,
    ),
    ("patch", r"/models/\{model\}$", {"updateMask": _STR}, _BODIES["models"], True),
    ("patch", r"/modelDevelopmentClusters/\{\w+\}$", {"updateMask": _STR, "updateMode": _STR}, None, True),
    ("patch", r"/(persistentResources|datasets)/\{\w+\}$", {"updateMask": _STR}, None, True),
    ("get", r"/datasets/\{\w+\}$", {"readMask": _STR}, None, False),
    ("post", r"/datasets/\{\w+\}:import$", {}, (_AIP + "ImportDataRequest", ("name",)), True),
    ("post", r"/persistentResources/\{\w+\}:reboot$", {}, _OBJ, False),
    (
        "post",
        r"/operations/\{op\}:wait$",
        {"timeout": _STR},
        {"type": "object", "properties": {"timeout": _STR}},
        False,
    ),
    (
        "get",
        r"/customJobs/\{job_id\}/logs$",
        {  # kinds/custom_jobs/logs.py parse_log_query (format=text, plain text, is left undescribed)
            "follow": {"type": "boolean"},
            "task": _STR,
            "severity": {"enum": ["DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL"]},
            "since": _STR,
            "after": {"type": "string", "pattern": r"^[0-9]{19}\.[A-Za-z0-9_.-]+\.([0-9a-f]{12}|dropped)$"},
            "before": {"type": "string", "pattern": r"^[0-9]{19}\.[A-Za-z0-9_.-]+\.([0-9a-f]{12}|dropped)$"},
            "limit": {"type": "integer", "minimum": 1},
            "tail": {"type": "integer", "minimum": 0},
            "q": _STR,
            "download": {"type": "boolean"},
        },
        None,
        False,
    ),
    (
        "post",
        r"/customJobs/\{job_id\}:preempt$",
        {},
        {"type": "object", "properties": {"replica": _STR}},
        False,
    ),
    ("get", r"/costs$", {"by": _STR, "filter": _STR}, None, False),
    ("post", r"^/v2/entries:list$", {}, response_schemas.LOGGING_LIST_REQUEST, True),
    (
        "get",
        r"/capacity$",
        {"machineType": _STR, "acceleratorType": _STR, "acceleratorCount": _STR},
        None,
        False,
    ),
    # The Cloud Storage JSON API subset.
    ("get", r"^/storage/v1/b$", {"project": _STR, "prefix": _STR, "pageToken": _STR}, None, False),
    ("post", r"^/storage/v1/b$", {"project": _STR}, {"type": "object", "properties": {"name": _STR}}, True),
    (
        "get",
        r"^/storage/v1/b/\{bucket\}/o$",
        {
            "prefix": _STR,
            "delimiter": _STR,
            "startOffset": _STR,
            "endOffset": _STR,
            "pageToken": _STR,
            "maxResults": _INT,
        },
        None,
        False,
    ),
    (
        "get",
        r"/o/\{name\}$",
        {"alt": {"type": "string", "enum": ["json", "media"]}, "generation": _INT},
        None,
        False,
    ),
    (
        "patch",
        r"/o/\{name\}$",
        {"generation": _INT},
        {"type": "object", "properties": {"metadata": _LABELS}},
        True,
    ),
    ("delete", r"/o/\{name\}$", {"generation": _INT}, None, False),
    ("post", r"/(rewriteTo|copyTo)/b/\{dest_bucket\}/o/\{dest\}$", {"sourceGeneration": _INT}, _OBJ, False),
    (
        "post",
        r"^/(resumable/)?upload/storage/v1/b/\{bucket\}/o$",
        {"uploadType": {"type": "string", "enum": ["media", "multipart", "resumable"]}, "name": _STR},
        {"type": "object", "properties": {"name": _STR, "metadata": _LABELS}},
        False,
    ),
    ("put", r"^/upload/storage/v1/b/\{bucket\}/o$", {"upload_id": _STR}, None, False),
    ("delete", r"^/upload/storage/v1/b/\{bucket\}/o$", {"upload_id": _STR}, None, False),
]


# ---------------------------------------------------------------- responses
def _list_and_get(*collections: str) -> list[tuple[str, str, _Answer]]:
    """Each collection's List answers `List<Collection>Response` (AIP-132) and its Get the resource, the
    message of its bodies (AIP-131): ListCustomJobsResponse and CustomJob for `customJobs`."""
    rules: list[tuple[str, str, _Answer]] = []
    for collection in collections:
        plural = collection[0].upper() + collection[1:]
        rules.append(("get", rf"/{collection}$", f"{_AIP}List{plural}Response"))
        rules.append(("get", rf"/{collection}/\{{\w+\}}$", _BODIES[collection]))
    return rules


# (method, path pattern) -> the 2xx answer. First match wins.
_RESPONSES: list[tuple[str, str, _Answer]] = [
    # Operations, under /v1, /v1beta1 and /ui (the official client polls there).
    ("get", r"/operations$", "google.longrunning.ListOperationsResponse"),
    ("get", r"/operations/\{op\}$", _OPERATION),
    ("post", r"/operations/\{op\}:wait$", _OPERATION),
    ("post", r"/operations/\{op\}:cancel$", _EMPTY),
    ("delete", r"/operations/\{op\}$", _EMPTY),
    # Locations, under /v1, /v1beta1 and /ui too.
    ("get", r"/projects/\{project\}/locations$", "google.cloud.location.ListLocationsResponse"),
    ("get", r"/projects/\{project\}/locations/\{location\}$", "google.cloud.location.Location"),
    *_list_and_get(
        "customJobs",
        "hyperparameterTuningJobs",
        "trainingPipelines",
        "persistentResources",
        "datasets",
        "models",
    ),
    # Jobs and pipelines: create answers the resource, delete an operation.
    *[
        ("post", rf"/{jobs}$", _BODIES[jobs])
        for jobs in ("customJobs", "hyperparameterTuningJobs", "trainingPipelines")
    ],
    ("post", r"/(customJobs|hyperparameterTuningJobs|trainingPipelines)/\{\w+\}:cancel$", _EMPTY),
    # Persistent resources: every change is an operation. Datasets: create, import and delete are operations,
    # patch answers the dataset.
    ("patch", r"/datasets/\{dataset_id\}$", _AIP + "Dataset"),
    # The model registry.
    ("get", r"/models/\{model\}:listVersions$", _AIP + "ListModelVersionsResponse"),
    ("post", r"/models/\{model\}:mergeVersionAliases$", _AIP + "Model"),
    ("patch", r"/models/\{model\}$", _AIP + "Model"),
    # Training clusters (v1beta1, no published proto: their wire model's schema).
    ("get", r"/modelDevelopmentClusters$", _CLUSTER + "List"),
    ("get", r"/modelDevelopmentClusters/\{cluster_id\}$", _CLUSTER),
    # Every other change of a Vertex resource is a long-running operation.
    ("post", r"^/(v1|v1beta1)/.*(Resources|datasets|Clusters|models:\w+|:import|:reboot)$", _OPERATION),
    ("patch", r"^/(v1|v1beta1)/", _OPERATION),
    ("delete", r"^/(v1|v1beta1)/", _OPERATION),
    # Trainworks extensions.
    ("get", r"^/trainworks/v1/.*/status$", response_schemas.JOB_STATUS),
    ("post", r"^/trainworks/v1/.*:preempt$", response_schemas.PREEMPTED),
    ("get", r"^/trainworks/v1/.*/costs$", response_schemas.COSTS),
    ("get", r"^/trainworks/v1/.*/capacity$", response_schemas.CAPACITY),
    ("get", r"^/trainworks/v1/.*/tensorboard$", response_schemas.TENSORBOARD),
    ("get", r"^/healthz$", response_schemas.HEALTH),
    # The Cloud Logging API.
    ("post", r"^/v2/entries:list$", response_schemas.LOGGING_ENTRIES),
    # The Cloud Storage JSON API.
    ("get", r"^/storage/v1/b$", response_schemas.GCS_BUCKETS),
    ("post", r"^/storage/v1/b$", response_schemas.GCS_BUCKET),
    ("get", r"^/storage/v1/b/\{bucket\}$", response_schemas.GCS_BUCKET),
    ("get", r"^/storage/v1/b/\{bucket\}/storageLayout$", response_schemas.GCS_STORAGE_LAYOUT),
    ("get", r"^/storage/v1/b/\{bucket\}/o$", response_schemas.GCS_OBJECTS),
    ("post", r"/rewriteTo/", response_schemas.GCS_REWRITE),
    ("get", r"^/storage/v1/b/\{bucket\}/o/\{name\}$", response_schemas.GCS_OBJECT),
    ("patch", r"^/storage/v1/b/\{bucket\}/o/\{name\}$", response_schemas.GCS_OBJECT),
    ("post", r"/(copyTo|moveTo)/", response_schemas.GCS_OBJECT),
    ("post", r"^/(resumable/)?upload/storage/v1/b/\{bucket\}/o$", response_schemas.GCS_OBJECT),
    ("put", r"^/upload/storage/v1/b/\{bucket\}/o$", response_schemas.GCS_OBJECT),
]

_NO_CONTENT = {"description": "No content"}
_ANY_MEDIA = {"description": "The object's bytes", "content": {"*/*": {}}}
# Answers besides 200 (or instead of it): an answer with a description replaces the one described before, one
# without adds media types to it. All rules that match apply.
_OTHER_STATUSES: list[tuple[str, str, dict[str, dict[str, Any]]]] = [
    ("delete", r"^/storage/v1/b/", {"204": _NO_CONTENT}),
    ("delete", r"^/upload/storage/v1/b/", {"499": {"description": "The upload session was cancelled"}}),
    ("put", r"^/upload/storage/v1/b/", {"308": {"description": "Resume incomplete: the bytes kept so far"}}),
    (
        "post",
        r"^/(resumable/)?upload/storage/v1/b/",
        {"308": {"description": "Resume incomplete: the bytes kept so far"}},
    ),
    # Conditional reads: ifGenerationNotMatch/ifMetagenerationNotMatch that hold answer 304.
    ("get", r"/o/\{name\}$", {"304": {"description": "Not modified"}}),
    ("get", r"^/storage/v1/b/\{bucket\}/o/\{name\}$", {"200": {"content": {"*/*": {}}}}),  # alt=media
    ("get", r"^/download/storage/v1/b/", {"200": _ANY_MEDIA, "206": _ANY_MEDIA}),
    (
        "get",
        r"^/trainworks/v1/.*/logs$",
        {
            "200": {
                "description": "Log lines, one JSON object per line (NDJSON)",
                "content": {"application/x-ndjson": {"itemSchema": response_schemas.LOG_ENTRY}},
            }
        },
    ),
]


def _answer_schema(answer: _Answer, version: str, components: dict[str, Any]) -> dict[str, Any]:
    """The schema of a body, with the component schemas it refers to added to `components`."""
    if isinstance(answer, dict):
        return answer
    if isinstance(answer, tuple):  # a request message less its path fields, inline
        full_name, in_path = answer
        message = _answer_schema(full_name, version, components)
        if "$ref" not in message:
            return message
        schema = copy.deepcopy(components[message["$ref"].removeprefix(proto_schemas.REF_PREFIX)])
        for name in in_path:
            schema["properties"].pop(name)
        return schema
    if answer.startswith(_CLUSTER):
        components.update(response_schemas.cluster_components())
        cluster = ref(response_schemas.CLUSTER_PREFIX + "ModelDevelopmentCluster")
        if answer.endswith("List"):
            return {
                "type": "object",
                "properties": {
                    "modelDevelopmentClusters": {"type": "array", "items": cluster},
                    "nextPageToken": _STR,
                },
                "additionalProperties": False,
            }
        return cluster
    full_name = answer.format(version=version)
    try:
        components.update(proto_schemas.components([full_name]))
    except ImportError:  # no google-cloud-aiplatform (the `vertex` extra): a JSON object is all we say
        return {"type": "object", "description": f"{full_name} in proto3 JSON"}
    return ref(full_name)


def _describe_responses(
    method: str, path: str, operation: dict[str, Any], components: dict[str, Any]
) -> None:
    responses = operation.setdefault("responses", {})
    version = "v1beta1" if path.startswith("/v1beta1/") else "v1"
    for rule_method, pattern, answer in _RESPONSES:
        if rule_method == method and re.search(pattern, path):
            schema = _answer_schema(answer, version, components)
            responses["200"] = {
                "description": "Success",
                "content": {"application/json": {"schema": schema}},
            }
            break
    for rule_method, pattern, statuses in _OTHER_STATUSES:
        if rule_method == method and re.search(pattern, path):
            for code, response in statuses.items():
                if code in responses and "description" not in response:  # more media types of that answer
                    responses[code].setdefault("content", {}).update(response["content"])
                else:
                    responses[code] = copy.deepcopy(response)
    if "204" in responses or "499" in responses:  # these answer only that
        responses.pop("200", None)


def _collection_of(path: str) -> str | None:
    match = re.search(r"/(\w+)$", path)
    return match.group(1) if match else None


def _describe(method: str, path: str, operation: dict[str, Any], components: dict[str, Any]) -> None:
    params: dict[str, dict[str, Any]] = {}
    body: _Answer | None = None
    required = False
    if method == "get" and (collection := _collection_of(path)) in _COLLECTION_PARAMS:
        params = _COLLECTION_PARAMS[collection]
    for rule_method, pattern, rule_params, rule_body, rule_required in _RULES:
        if rule_method == method and re.search(pattern, path):
            params, required = rule_params, rule_required
            body = rule_body
            break
    if body is None and required:
        # A create or patch of a resource: its body is the resource itself.
        resource = re.search(r"/(\w+)(/\{\w+\})?$", path)
        body = _BODIES.get(resource.group(1), _OBJ) if resource else _OBJ
    if params:
        operation.setdefault("parameters", []).extend(
            {"name": name, "in": "query", "required": False, "schema": schema}
            for name, schema in params.items()
        )
    if body is not None:
        version = "v1beta1" if path.startswith("/v1beta1/") else "v1"
        schema = _answer_schema(body, version, components)
        operation["requestBody"] = {"required": required, "content": {"application/json": {"schema": schema}}}
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)  # request validation answers 400 (api/errors.py), never 422
    if path.startswith(("/storage/", "/upload/", "/download/", "/resumable/")):
        description, error = "An error in the Cloud Storage JSON API's form", response_schemas.GCS_ERROR
    else:
        description, error = "An error: google.rpc.Status in JSON", response_schemas.RPC_ERROR
    responses["4XX"] = {"description": description, "content": {"application/json": {"schema": error}}}


def _fill_in(schema: dict[str, Any]) -> None:
    components: dict[str, Any] = {}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            _describe(method, path, operation, components)
            _describe_responses(method, path, operation, components)
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas.update(components)


def install(app: FastAPI) -> None:
    """Describe the hand-read query parameters, bodies and every response in the app's /openapi.json."""
    generate = app.openapi
    lock = threading.Lock()

    def openapi() -> dict[str, Any]:
        with lock:  # built once, however many first requests arrive together
            if app.openapi_schema is None:
                try:
                    _fill_in(generate())  # FastAPI keeps what it generates as app.openapi_schema
                except BaseException:
                    app.openapi_schema = None  # never serve a half-described API
                    raise
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]
    # FastAPI serves the description from an async route, on the event loop: the first build imports the
    # official types (seconds), so serve it from a plain route, which runs in the thread pool.
    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != app.openapi_url]

    @app.get(app.openapi_url or "/openapi.json", include_in_schema=False)
    def openapi_json(request: Request) -> JSONResponse:
        schema = app.openapi()
        root_path = request.scope.get("root_path", "").rstrip("/")  # behind a proxy, as FastAPI's route does
        if root_path and app.root_path_in_servers:
            servers = schema.get("servers", [])
            if root_path not in {s.get("url") for s in servers}:
                schema = {**schema, "servers": [{"url": root_path}, *servers]}
        return JSONResponse(schema)
