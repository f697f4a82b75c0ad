"""The request side of the OpenAPI description: the query parameters and JSON bodies routes read by hand.

Routes take the raw Request (bodies are the proto JSON mapping, validated by the services, not pydantic
models), so FastAPI's generated description lists neither their query parameters nor their bodies, and it
promises 422 responses the server never sends (validation errors are 400 google.rpc bodies). This fills that
in after generation, without touching behaviour, so that clients and the API fuzzer (tests/test_fuzz_api.py)
see what each operation takes and what its errors look like.
"""

from __future__ import annotations

import re
from typing import Any

from fastapi import FastAPI

_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer"}
_OBJ: dict[str, Any] = {"type": "object"}
_LABELS: dict[str, Any] = {"type": "object", "additionalProperties": _STR}
# int64 fields travel as JSON strings in the proto JSON mapping; parsers accept numbers too.
_INT64: dict[str, Any] = {"oneOf": [_STR, _INT]}

_PAGE = {"pageSize": _INT, "pageToken": _STR}
_LIST = {**_PAGE, "filter": _STR, "readMask": _STR}

_MACHINE_SPEC = {
    "type": "object",
    "properties": {"machineType": _STR, "acceleratorType": _STR, "acceleratorCount": _INT},
}
_WORKER_POOL = {
    "type": "object",
    "properties": {
        "machineSpec": _MACHINE_SPEC,
        "replicaCount": _INT64,
        "containerSpec": {"type": "object", "properties": {"imageUri": _STR}},
        "pythonPackageSpec": _OBJ,
        "diskSpec": _OBJ,
    },
}
_JOB_SPEC = {
    "type": "object",
    "properties": {
        "workerPoolSpecs": {"type": "array", "items": _WORKER_POOL},
        "scheduling": _OBJ,
        "baseOutputDirectory": {"type": "object", "properties": {"outputUriPrefix": _STR}},
        "persistentResourceId": _STR,
        "enableWebAccess": {"type": "boolean"},
    },
}


def _resource(**properties: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "properties": {"displayName": _STR, "labels": _LABELS, **properties}}


# What each request body is, top-level fields typed: deep enough that generated bodies reach the services'
# field validation, shallow enough that the description cannot drift from the proto types far.
_BODIES: dict[str, dict[str, Any]] = {
    "customJobs": _resource(jobSpec=_JOB_SPEC),
    "hyperparameterTuningJobs": _resource(
        studySpec=_OBJ,
        maxTrialCount=_INT,
        parallelTrialCount=_INT,
        maxFailedTrialCount=_INT,
        trialJobSpec=_JOB_SPEC,
    ),
    "persistentResources": _resource(
        resourcePools={"type": "array", "items": _OBJ}, resourceRuntimeSpec=_OBJ
    ),
    "datasets": _resource(metadataSchemaUri=_STR, metadata=_OBJ, description=_STR),
    "trainingPipelines": _resource(
        trainingTaskDefinition=_STR, trainingTaskInputs=_OBJ, inputDataConfig=_OBJ, modelToUpload=_OBJ
    ),
    "modelDevelopmentClusters": _resource(nodePools={"type": "array", "items": _OBJ}, orchestratorSpec=_OBJ),
    "model": _resource(description=_STR, artifactUri=_STR, containerSpec=_OBJ, versionAliases=_OBJ),
}

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": _INT,
                "message": _STR,
                "status": _STR,
                "details": {"type": "array", "items": _OBJ},
                "errors": {"type": "array", "items": _OBJ},  # the Cloud Storage JSON API's error form
            },
        }
    },
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
}

# (method, path pattern) -> (query parameters, body schema or None, body required). First match wins.
_Rule = tuple[str, str, dict[str, dict[str, Any]], dict[str, Any] | None, bool]
_RULES: list[_Rule] = [
    ("post", r"/persistentResources$", {"persistentResourceId": _STR}, None, True),
    ("post", rf"/({_COLLECTIONS})$", {}, None, True),
    ("post", r"/modelDevelopmentClusters$", {"modelDevelopmentClusterId": _STR}, None, True),
    ("get", r"/(models|models/\{model\}:listVersions)$", {**_LIST, "orderBy": _STR}, None, False),
    ("post", r"/models:upload$", {}, {"type": "object", "properties": {"model": _BODIES["model"]}}, True),
    ("post", r"/models/\{model\}:mergeVersionAliases$", {}, _resource(versionAliases=_OBJ), True),
    ("patch", r"/models/\{model\}$", {"updateMask": _STR}, _BODIES["model"], True),
    ("patch", r"/modelDevelopmentClusters/\{\w+\}$", {"updateMask": _STR, "updateMode": _STR}, None, True),
    ("patch", r"/(persistentResources|datasets)/\{\w+\}$", {"updateMask": _STR}, None, True),
    ("get", r"/datasets/\{\w+\}$", {"readMask": _STR}, None, False),
    (
        "post",
        r"/datasets/\{\w+\}:import$",
        {},
        {"type": "object", "properties": {"importConfigs": _OBJ}},
        True,
    ),
    ("post", r"/persistentResources/\{\w+\}:reboot$", {}, _OBJ, False),
    (
        "post",
        r"/operations/\{op\}:wait$",
        {"timeout": _STR},
        {"type": "object", "properties": {"timeout": _STR}},
        False,
    ),
    ("get", r"/customJobs/\{job_id\}/logs$", {"follow": {"type": "boolean"}, "task": _STR}, None, False),
    (
        "post",
        r"/customJobs/\{job_id\}:preempt$",
        {},
        {"type": "object", "properties": {"replica": _STR}},
        False,
    ),
    ("get", r"/costs$", {"by": _STR, "filter": _STR}, None, False),
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
        r"^/upload/storage/v1/b/\{bucket\}/o$",
        {"uploadType": {"type": "string", "enum": ["media", "multipart", "resumable"]}, "name": _STR},
        {"type": "object", "properties": {"name": _STR, "metadata": _LABELS}},
        False,
    ),
    ("put", r"^/upload/storage/v1/b/\{bucket\}/o$", {"upload_id": _STR}, None, False),
    ("delete", r"^/upload/storage/v1/b/\{bucket\}/o$", {"upload_id": _STR}, None, False),
]


def _collection_of(path: str) -> str | None:
    match = re.search(r"/(\w+)$", path)
    return match.group(1) if match else None


def _describe(method: str, path: str, operation: dict[str, Any]) -> None:
    params: dict[str, dict[str, Any]] = {}
    body: dict[str, Any] | None = None
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
        collection = re.search(r"/(\w+)(/\{\w+\})?$", path)
        body = _BODIES.get(collection.group(1), _OBJ) if collection else _OBJ
    if params:
        operation.setdefault("parameters", []).extend(
            {"name": name, "in": "query", "required": False, "schema": schema}
            for name, schema in params.items()
        )
    if body is not None:
        operation["requestBody"] = {"required": required, "content": {"application/json": {"schema": body}}}
    responses = operation.setdefault("responses", {})
    responses.pop("422", None)  # request validation answers 400 (api/errors.py), never 422
    responses["4XX"] = {
        "description": "An error: google.rpc.Status in JSON (or the Cloud Storage error form under /storage)",
        "content": {"application/json": {"schema": _ERROR}},
    }


def install(app: FastAPI) -> None:
    """Describe the hand-read query parameters and bodies in the app's /openapi.json."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = generate()
            for path, operations in schema.get("paths", {}).items():
                for method, operation in operations.items():
                    _describe(method, path, operation)
            schema.get("components", {}).get("schemas", {}).pop("HTTPValidationError", None)
            schema.get("components", {}).get("schemas", {}).pop("ValidationError", None)
        return app.openapi_schema  # type: ignore[return-value]

    app.openapi = openapi  # type: ignore[method-assign]
