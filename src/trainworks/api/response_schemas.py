"""JSON Schemas of the responses that are not official proto messages, written by hand after their code.

- the Trainworks extensions under /trainworks/v1 (job status and preemption, costs, capacity, TensorBoard
  log directory, log lines), and /healthz;
- the Cloud Storage JSON API subset under /storage/v1 and /upload/storage/v1: the Object, Bucket, Buckets,
  Objects, StorageLayout and RewriteResponse resources in the shapes storage/object_model.py and
  kinds/storage_objects/routes.py write (the documented GCS resources, the fields this server fills);
- the Cloud Logging API's entries:list under /v2: its request, and LogEntry as kinds/log_entries/wire.py
  writes it;
- errors: google.rpc.Status as api/errors.py writes it, and Cloud Storage's error form under /storage;
- ModelDevelopmentCluster (v1beta1 training clusters), which has no published proto: the schema comes from
  its wire model (kinds/clusters/wire.py) as pydantic describes its serialized JSON.

Objects list the fields their code writes and no others (`additionalProperties: false`), so that a renamed
or stray field fails the API fuzzer (tests/system/test_fuzz_api.py) as it does for the proto-typed routes.
The storage routes also honour `fields=` (google-cloud-storage asks `fields=name` to test that a bucket
exists), which trims an answer to the fields named; the description leaves that parameter out.
"""

from __future__ import annotations

import functools
from typing import Any

from google.rpc import code_pb2

from trainworks.kinds.clusters.wire import ModelDevelopmentCluster
from trainworks.kinds.log_entries.wire import SEVERITIES

_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer"}
_NUM: dict[str, Any] = {"type": "number"}
_BOOL: dict[str, Any] = {"type": "boolean"}
_STRINGS: dict[str, Any] = {"type": "object", "additionalProperties": _STR}
_COUNT_OR_UNLIMITED: dict[str, Any] = {"type": ["integer", "null"]}  # null: unlimited
# kernel/wire.py format_timestamp and storage/object_model.py rfc3339: UTC with Z.
_TIME: dict[str, Any] = {
    "type": "string",
    "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{3}|\.[0-9]{6})?Z$",
}
_DECIMAL: dict[str, Any] = {"type": "string", "pattern": r"^[0-9]+$"}  # GCS int64/uint64 fields


def _object(optional: dict[str, Any] | None = None, /, **fields: Any) -> dict[str, Any]:
    """A closed object: `fields`, always present, plus `optional` ones."""
    return _object_requiring(list(fields), optional, **fields)


def _object_requiring(
    required: list[str], optional: dict[str, Any] | None = None, **fields: Any
) -> dict[str, Any]:
    """A closed object: `fields` plus `optional` ones, where `required` lists the fields always present in
    an order of its own."""
    properties = {**fields, **(optional or {})}
    return {"type": "object", "required": required, "properties": properties, "additionalProperties": False}


# ---------------------------------------------------------------- extensions
_HOURS: dict[str, Any] = {"type": "object", "additionalProperties": _NUM}  # accelerator type -> hours
_TOTALS = {"machineHours": _NUM, "acceleratorHours": _HOURS, "costUsd": _NUM, "onDemandEquivalentUsd": _NUM}
_TOTALS_REQUIRED = list(_TOTALS)
_BILLED_TO: dict[str, Any] = {"anyOf": [_STR, {"type": "array", "items": _STR}]}


def _group(key: str) -> dict[str, Any]:
    """costs/service.py _group_wire: a machine shape of a pool (`pool`) or resource pool (`resourcePool`)."""
    return _object(
        {
            "acceleratorType": _STR,
            "acceleratorCount": _INT,
            "running": _INT,
            "priced": {"const": False},
            "hourlyPriceUsd": _NUM,
            "coveredUsd": _NUM,
        },
        **{key: _STR, "machineType": _STR, "spot": _BOOL, "intervals": _INT, **_TOTALS},
    )


_JOB_COST = _object_requiring(
    ["currency", "spot", *_TOTALS_REQUIRED, "running", "asOf", "pools"],
    {"coveredUsd": _NUM, "billedTo": _BILLED_TO},
    currency={"const": "USD"},
    spot=_BOOL,
    running=_BOOL,
    asOf=_TIME,
    pools={"type": "array", "items": _group("pool")},
    **_TOTALS,
)
_COST_ROW = _object_requiring(
    ["name", "kind", "displayName", "state", "spot", *_TOTALS_REQUIRED, "running"],
    {
        "createTime": _TIME,
        "startTime": _TIME,
        "endTime": _TIME,
        "coveredUsd": _NUM,
        "billedTo": _BILLED_TO,
        "pools": {"type": "array", "items": _group("pool")},
        "groups": {"type": "array", "items": _group("resourcePool")},
        "usedMachineHours": _NUM,
        "jobs": _INT,
    },
    name=_STR,
    kind={"enum": ["customJob", "persistentResource"]},
    displayName=_STR,
    state=_STR,
    spot=_BOOL,
    running=_BOOL,
    **_TOTALS,
)
COSTS = _object(
    by={"enum": ["job", "resource"]},
    currency={"const": "USD"},
    asOf=_TIME,
    pricing=_STR,
    rows={"type": "array", "items": _COST_ROW},
    totals=_object({"coveredUsd": _NUM}, count=_INT, **_TOTALS),
)

_REPLICA = _object(
    {
        "pid": _INT,
        "exitCode": _INT,
        "detail": _STR,
        "preempted": {"const": True},
        "startTime": _TIME,
        "endTime": _TIME,
    },
    task={"type": "string", "pattern": r"^workerpool[0-9]+-[0-9]+$"},
    attempt=_INT,
    phase=_STR,
    address=_STR,
    restarts=_INT,
)
_RESTART = _object(attempt=_INT, kind=_STR, reason=_STR, time=_TIME)
JOB_STATUS = _object(
    {"zone": _STR, "waitingReason": _STR},
    name={"type": "string", "pattern": r"^projects/[^/]+/locations/[^/]+/customJobs/[0-9]+$"},
    state={"type": "string", "pattern": "^JOB_STATE_[A-Z_]+$"},
    attempt=_INT,
    priority=_INT,
    restarts={"type": "array", "items": _RESTART},
    replicas={"type": "array", "items": _REPLICA},
    cost=_JOB_COST,
)
PREEMPTED = _object(preempted={"type": "array", "items": _STR})
TENSORBOARD = _object({"localPath": _STR}, name=_STR, logDir=_STR)
# kinds/custom_jobs/logs.py LogStream.line: one line of the logs extension (NDJSON).
LOG_ENTRY = _object(
    {
        "stream": {"enum": ["stdout", "stderr"]},
        "json": {"type": "object"},
        "more": {"const": True},
        "dropped": _object(lines=_INT, bytes=_INT),
        "trialId": _STR,
    },
    time={"type": "string", "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z$"},
    insertId=_STR,
    task=_STR,
    severity={
        "enum": ["DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY"]
    },
    text=_STR,
)

_QUOTA = _object(limit=_COUNT_OR_UNLIMITED, used=_INT, free=_COUNT_OR_UNLIMITED)
_MACHINES = _object(total=_INT, reserved=_INT, free=_INT)
CAPACITY = _object(
    {
        "shape": _object(
            machineType=_STR,
            acceleratorType={"type": ["string", "null"]},
            acceleratorCount=_INT,
            vcpusPerReplica=_INT,
            acceleratorsPerReplica={"type": "object", "additionalProperties": _INT},
            quotaReplicas=_COUNT_OR_UNLIMITED,
            capacityReplicas=_COUNT_OR_UNLIMITED,
            maxReplicas=_COUNT_OR_UNLIMITED,
            limitedBy={"enum": ["STOCKOUT", "NOT_SERVED", "QUOTA", "CAPACITY", None]},
        )
    },
    parent=_STR,
    location=_STR,
    region={"type": ["string", "null"]},
    served=_BOOL,
    stockout=_BOOL,
    asOf=_TIME,
    quota=_object(
        vcpus={"anyOf": [_QUOTA, {"type": "null"}]},
        accelerators={"type": "object", "additionalProperties": _QUOTA},
    ),
    zones={
        "type": "array",
        "items": _object(
            name=_STR,
            elastic=_BOOL,
            machines={"anyOf": [{"type": "object", "additionalProperties": _MACHINES}, {"type": "null"}]},
        ),
    },
)
# ---------------------------------------------------------------- errors
# api/errors.py: `{"error": {code, message, status, details}}`, google.rpc.Status with the code's name.
RPC_ERROR = _object(
    error=_object(
        {"details": {"type": "array", "items": {"type": "object", "required": ["@type"]}}},
        code={"type": "integer", "minimum": 400, "maximum": 599},  # the HTTP status
        message=_STR,
        status={"enum": list(code_pb2.Code.keys())},
    ),
)
# kinds/storage_objects/routes.py gcs_error (and api/limits.py under /storage): Cloud Storage's error form.
GCS_ERROR = _object(
    error=_object(
        code={"type": "integer", "minimum": 400, "maximum": 599},
        message=_STR,
        errors={
            "type": "array",
            "items": _object(message=_STR, domain=_STR, reason=_STR),
        },
    ),
)

HEALTH = _object(status={"const": "ok"}, version=_STR, containerRuntime=_STR)

# ---------------------------------------------------------------- the Cloud Storage JSON API
_OBJECT_FIXED = {
    "cacheControl": _STR,
    "contentDisposition": _STR,
    "contentEncoding": _STR,
    "contentLanguage": _STR,
    "customTime": _STR,
}
GCS_OBJECT = _object(
    {"md5Hash": _STR, "crc32c": _STR, "metadata": _STRINGS, **_OBJECT_FIXED},
    kind={"const": "storage#object"},
    id=_STR,
    selfLink=_STR,
    mediaLink=_STR,
    name=_STR,
    bucket=_STR,
    generation=_DECIMAL,
    metageneration=_DECIMAL,
    contentType=_STR,
    storageClass=_STR,
    size=_DECIMAL,
    etag=_STR,
    timeCreated=_TIME,
    updated=_TIME,
    timeStorageClassUpdated=_TIME,
    timeFinalized=_TIME,
)
GCS_BUCKET = _object(
    {"projectNumber": _DECIMAL, "labels": _STRINGS},
    kind={"const": "storage#bucket"},
    id=_STR,
    selfLink=_STR,
    name=_STR,
    metageneration=_DECIMAL,
    location=_STR,
    locationType=_STR,
    storageClass=_STR,
    etag=_STR,
    timeCreated=_TIME,
    updated=_TIME,
    iamConfiguration=_object(
        uniformBucketLevelAccess=_object(enabled=_BOOL),
        publicAccessPrevention=_STR,
    ),
    rpo=_STR,
)
GCS_STORAGE_LAYOUT = _object(
    kind={"const": "storage#storageLayout"},
    bucket=_STR,
    location=_STR,
    locationType=_STR,
    hierarchicalNamespace=_object(enabled=_BOOL),
)
GCS_BUCKETS = _object(
    {"items": {"type": "array", "items": GCS_BUCKET}, "nextPageToken": _STR},
    kind={"const": "storage#buckets"},
)
GCS_OBJECTS = _object(
    {
        "items": {"type": "array", "items": GCS_OBJECT},
        "prefixes": {"type": "array", "items": _STR},
        "nextPageToken": _STR,
    },
    kind={"const": "storage#objects"},
)
GCS_REWRITE = _object(
    kind={"const": "storage#rewriteResponse"},
    totalBytesRewritten=_DECIMAL,
    objectSize=_DECIMAL,
    done={"const": True},
    resource=GCS_OBJECT,
)


# ---------------------------------------------------------------- the Cloud Logging API (v2 entries:list)
# kinds/log_entries/wire.py to_log_entry: a LogEntry as that module writes it, timestamps with nanoseconds.
_NS_TIME: dict[str, Any] = {
    "type": "string",
    "pattern": r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{9}Z$",
}
LOGGING_ENTRY = _object_requiring(
    ["insertId", "resource", "timestamp", "logName", "receiveTimestamp"],
    {
        "textPayload": _STR,
        "jsonPayload": {"type": "object"},
        "severity": {"enum": [name for name in SEVERITIES if name != "DEFAULT"]},
        "labels": _STRINGS,
        "split": _object_requiring(["uid"], {"index": _INT}, uid=_STR),
    },
    insertId=_STR,
    resource=_object_requiring(
        ["type", "labels"],
        type={"const": "ml_job"},
        labels=_object_requiring(
            ["job_id", "task_name", "project_id"], job_id=_STR, task_name=_STR, project_id=_STR
        ),
    ),
    timestamp=_NS_TIME,
    logName=_STR,
    receiveTimestamp=_NS_TIME,
)
LOGGING_ENTRIES = _object_requiring(
    [], {"entries": {"type": "array", "items": LOGGING_ENTRY}, "nextPageToken": _STR}
)
# ListLogEntriesRequest as kinds/log_entries/service.py parse_request takes it (also the snake_case names and
# the deprecated projectIds, which this leaves out).
LOGGING_LIST_REQUEST = _object_requiring(
    ["resourceNames"],
    {
        "filter": _STR,
        "orderBy": {"enum": ["timestamp asc", "timestamp desc"]},
        "pageSize": {"type": "integer", "minimum": 0, "maximum": 1000},
        "pageToken": _STR,
    },
    resourceNames={
        "type": "array",
        "items": {"type": "string", "pattern": "^projects/[^/]+$"},
        "minItems": 1,
        "maxItems": 100,
    },
)


# ---------------------------------------------------------------- training clusters
CLUSTER_PREFIX = "trainworks.ModelDevelopmentCluster."


@functools.cache
def cluster_components() -> dict[str, dict[str, Any]]:
    """The ModelDevelopmentCluster wire model's serialized JSON as component schemas (CLUSTER_PREFIX...)."""
    schema = ModelDevelopmentCluster.model_json_schema(
        by_alias=True,
        mode="serialization",
        ref_template="#/components/schemas/" + CLUSTER_PREFIX + "{model}",
    )
    out = {CLUSTER_PREFIX + name: body for name, body in schema.pop("$defs", {}).items()}
    out[CLUSTER_PREFIX + "ModelDevelopmentCluster"] = schema
    return out
