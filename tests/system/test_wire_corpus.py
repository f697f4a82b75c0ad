"""The wire corpus: a scripted sequence of HTTP requests over every route the server serves, replayed against
a real server process and compared, response by response, with the exchanges recorded in wire_corpus.json.

The corpus is the proof that a change meant to keep behaviour (a restructure of the source tree, say) kept
it: same status codes, headers, bodies, error messages, field violations, list orders and paging.
Volatile values (server-assigned IDs, timestamps, etags, page tokens, ports, PIDs, measured machine-hours,
temporary paths) are replaced by placeholders in one place, `WireNormalizer`, applied alike to what was
recorded and to what the live server answers; IDs are numbered by first appearance (`<id1>`, `<id2>`, ...)
so references between responses (an operation naming its job, a list naming what was created) stay checked.

Every request is sent at a point where its answer is fixed: long-running work (jobs, operations) is first
waited for with unrecorded polls, and only then is its state recorded.

Run `TRAINWORKS_RECORD_CORPUS=1 pytest tests/system/test_wire_corpus.py` to record the corpus again from
the current code (review the diff of wire_corpus.json before committing it).
"""

from __future__ import annotations

import base64
import contextlib
import difflib
import hashlib
import json
import os
import re
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect as ws_connect

from tests.support.server import LOCATION, ServerProcess, wait_for, wait_job

CORPUS = Path(__file__).with_name("wire_corpus.json")
RECORD = os.environ.get("TRAINWORKS_RECORD_CORPUS", "") == "1"
FORMAT = 1

MACHINE = {"machineType": "n1-standard-4"}
TABULAR = "gs://google-cloud-aiplatform/schema/dataset/metadata/tabular_1.0.0.yaml"
TEXT = "gs://google-cloud-aiplatform/schema/dataset/metadata/text_1.0.0.yaml"
TEXT_IMPORT = "gs://google-cloud-aiplatform/schema/dataset/ioformat/text_classification_single_label_io_format_1.0.0.yaml"
CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
MODEL_IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-3:latest"
REPORT_METRIC = (
    "import hypertune; hypertune.HyperTune()"
    ".report_hyperparameter_tuning_metric(hyperparameter_metric_tag='score', metric_value=1.5)"
)
TERMINAL_PIPELINE = {"PIPELINE_STATE_SUCCEEDED", "PIPELINE_STATE_FAILED", "PIPELINE_STATE_CANCELLED"}
TERMINAL_JOB = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"}


# ====================================================================================== normalisation
_TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)")
_HTTP_DATE = re.compile(
    r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun), \d\d (?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) \d{4} "
    r"\d\d:\d\d:\d\d GMT"
)
# Server-assigned numeric IDs (jobs, operations, datasets, storage generations): time-based, 15 to 19 digits.
# Project numbers (12 digits, derived from the project ID) and version IDs are deterministic and kept.
_NUMERIC_ID = re.compile(r"(?<!\d)\d{15,19}(?!\d)")
_LOOPBACK_PORT = re.compile(r"\b(127\.0\.0\.1|localhost):\d+")
_HEX_ETAG = re.compile(r"[0-9a-f]{16,64}")
_DURATION = re.compile(
    r"\d+(?:\.\d+)?s"
)  # a measured google.protobuf.Duration, under a key ending in Duration
# Keys whose values are opaque and server-chosen: each distinct value gets a numbered placeholder of its kind.
_OPAQUE_KEYS = {
    "nextPageToken": "token",
    "pageToken": "token",
    "page_token": "token",
    "uid": "uid",
    "insertId": "insert",
    "x-guploader-uploadid": "upload",
    "upload_id": "upload",
}
# Keys whose values are measured, not computed: wall-clock machine-hours and the prices derived from them,
# process IDs.
_MEASURED_KEYS = {
    "machineHours",
    "usedMachineHours",
    "acceleratorHours",
    "costUsd",
    "onDemandEquivalentUsd",
    "pid",
}
# Response headers that vary per request and say nothing about behaviour.
_DROPPED_HEADERS = {"date", "server"}


class WireNormalizer:
    """Replaces every volatile value of a request or response by a placeholder, and nothing else.

    One instance normalises one run, in order: numbered placeholders (`<id3>`, `<token1>`, ...) are assigned
    by first appearance, so two runs that make the same references get the same placeholders. Timestamps
    become `<time>`, HTTP dates `<http-date>`, the server's base URL `<server>`, its home directory `<home>`,
    the test's Python `<python>`, loopback ports `<port>`, measured quantities `<measured>` and durations
    `<duration>`. Storage etags
    that are base64 of a generation are decoded, normalised and shown as `<base64:...>`.
    """

    def __init__(self, environment: dict[str, str]) -> None:
        # Literal -> placeholder, for values of this environment (URLs, paths) and values learnt by key.
        self._literals: dict[str, str] = {}
        for literal, placeholder in environment.items():
            self._literals[literal] = placeholder
        self._counts: dict[str, int] = {}

    # ------------------------------------------------------------------ placeholders
    def _placeholder(self, kind: str, literal: str) -> str:
        known = self._literals.get(literal)
        if known is not None:
            return known
        self._counts[kind] = self._counts.get(kind, 0) + 1
        placeholder = f"<{kind}{self._counts[kind]}>"
        self._literals[literal] = placeholder
        return placeholder

    def learn(self, value: Any, key: str = "") -> None:
        """Registers the opaque values of a response (page tokens, upload IDs, hash etags) by their keys,
        before any string is rewritten: they may also appear inside other strings (a Location header)."""
        if isinstance(value, dict):
            for k, v in value.items():
                self.learn(v, str(k))
        elif isinstance(value, list):
            for item in value:
                self.learn(item, key)
        elif isinstance(value, str) and value:
            kind = _OPAQUE_KEYS.get(key)
            if kind is not None:
                self._placeholder(kind, value)
            elif key == "etag" and _HEX_ETAG.fullmatch(value.strip('"')):
                self._placeholder("etag", value)

    # ------------------------------------------------------------------ values
    def text(self, value: str) -> str:
        for literal in sorted(self._literals, key=len, reverse=True):
            if literal in value:
                value = value.replace(literal, self._literals[literal])
        value = _TIMESTAMP.sub("<time>", value)
        value = _HTTP_DATE.sub("<http-date>", value)
        value = _NUMERIC_ID.sub(lambda m: self._placeholder("id", m.group(0)), value)
        return _LOOPBACK_PORT.sub(r"\1:<port>", value)

    def value(self, value: Any, key: str = "") -> Any:
        if key in _MEASURED_KEYS:
            if isinstance(value, dict):
                return {k: "<measured>" for k in value}
            return "<measured>" if isinstance(value, int | float) and not isinstance(value, bool) else value
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v, str(k)) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(item, key) for item in value]
        if isinstance(value, str):
            if key == "etag":
                return self._etag(value)
            if key.endswith("Duration") and _DURATION.fullmatch(value):
                return "<duration>"
            return self.text(value)
        return value

    def _etag(self, etag: str) -> str:
        """Storage etags are base64 of `generation/metageneration`: normalise what they encode."""
        try:
            decoded = base64.b64decode(etag.strip('"'), validate=True).decode("ascii")
        except (ValueError, UnicodeDecodeError):
            return self.text(etag)
        if not decoded.isprintable():
            return self.text(etag)
        normalized = self.text(decoded)
        return f"<base64:{normalized}>" if normalized != decoded else etag

    # ------------------------------------------------------------------ exchanges
    def request(
        self,
        method: str,
        path: str,
        query: dict[str, Any] | None,
        body: Any,
        content: bytes | None,
        headers: dict[str, str] | None,
    ) -> dict[str, Any]:
        out: dict[str, Any] = {"method": method, "path": self.text(path)}
        if query:
            out["query"] = self.value({k: str(v) for k, v in query.items()})
        if headers:
            out["headers"] = self.value(headers)
        if body is not _NO_BODY:
            out["json"] = self.value(body)
        if content is not None:
            out["content"] = _content_view(content, self.text)
        return out

    def response(self, response: httpx.Response, view: Callable[[str], Any] | None = None) -> dict[str, Any]:
        headers = {k: v for k, v in response.headers.items() if k not in _DROPPED_HEADERS}
        content_type = headers.get("content-type", "")
        body: Any = None
        if view is not None:
            body = view(response.text)
        elif response.content:
            body = _decode_body(response.content, content_type)
        if isinstance(body, dict | list) or "ndjson" in content_type:
            headers.pop("content-length", None)  # follows the lengths of IDs and timestamps
        self.learn(headers)
        self.learn(body)
        out: dict[str, Any] = {"status": response.status_code, "headers": self.value(headers)}
        if body is not None:
            out["body"] = self.value(body)
        return out


def _decode_body(content: bytes, content_type: str) -> Any:
    if "ndjson" in content_type:
        return [json.loads(line) for line in content.decode().splitlines() if line.strip()]
    if "json" in content_type:
        try:
            return json.loads(content)
        except ValueError:
            pass
    return _content_view(content, None)


def _content_view(content: bytes, normalize: Callable[[str], str] | None) -> Any:
    """Text as text (normalised); long or binary content by its size and digest."""
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError:
        return {"bytes": len(content), "sha256": hashlib.sha256(content).hexdigest()}
    if normalize is not None:
        text = normalize(text)
    if len(text) > 4000:
        return {"chars": len(text), "sha256": hashlib.sha256(text.encode()).hexdigest()}
    return text


def logs_view(text: str) -> list[Any]:
    """The logs extension's NDJSON lines grouped by task, each task's lines in their order: the order across
    tasks follows the moment each line was read, which a replay cannot repeat (tests/kinds/custom_jobs/
    test_logs.py checks that order)."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    return sorted(lines, key=lambda line: str(line.get("task", "")) if isinstance(line, dict) else "")


def entries_view(text: str) -> Any:
    """entries:list's answer with its entries grouped by task, as logs_view (tests/kinds/log_entries checks
    the order across tasks)."""
    body = json.loads(text)
    if isinstance(body, dict) and isinstance(body.get("entries"), list):
        body["entries"] = sorted(
            body["entries"],
            key=lambda entry: str(entry.get("resource", {}).get("labels", {}).get("task_name")),
        )
    return body


def openapi_view(text: str) -> dict[str, Any]:
    """/openapi.json: every operation with its ID, tags, parameters and response codes, the schema names, and
    a digest of the whole document (the document itself is most of a megabyte)."""
    document = json.loads(text)
    operations: dict[str, Any] = {}
    for path, methods in document.get("paths", {}).items():
        for method, operation in methods.items():
            operations[f"{method.upper()} {path}"] = {
                "operationId": operation.get("operationId"),
                "tags": operation.get("tags"),
                "parameters": [f"{p.get('in')}:{p.get('name')}" for p in operation.get("parameters", [])],
                "requestBody": "requestBody" in operation,
                "responses": sorted(operation.get("responses", {})),
            }
    canonical = json.dumps(document, sort_keys=True, ensure_ascii=False).encode()
    return {
        "info": document.get("info"),
        "operations": operations,
        "schemas": sorted(document.get("components", {}).get("schemas", {})),
        "sha256": hashlib.sha256(canonical).hexdigest(),
    }


def metric_names(text: str) -> list[str]:
    """/metrics: the metric families and their types (the samples are counters of this very run)."""
    return sorted({line for line in text.splitlines() if line.startswith("# TYPE ")})


# ====================================================================================== the recorder
class _NoBody:
    def __repr__(self) -> str:
        return "<no body>"


_NO_BODY: Any = _NoBody()


class Wire:
    """Sends requests, recording each normalised exchange; `poll` sends unrecorded ones (waits)."""

    def __init__(self, client: httpx.Client, normalizer: WireNormalizer) -> None:
        self.client = client
        self.normalizer = normalizer
        self.exchanges: list[dict[str, Any]] = []

    def call(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = _NO_BODY,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        view: Callable[[str], Any] | None = None,
    ) -> httpx.Response:
        request = self.normalizer.request(method, path, query, body, content, headers)
        kwargs: dict[str, Any] = {"params": query, "headers": headers}
        if body is not _NO_BODY:
            kwargs["json"] = body
        if content is not None:
            kwargs["content"] = content
        response = self.client.request(method, path, **kwargs)
        exchange = {"request": request, "response": self.normalizer.response(response, view)}
        self.exchanges.append(exchange)
        return response

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.call("GET", path, **kwargs)

    def post(self, path: str, body: Any = _NO_BODY, **kwargs: Any) -> httpx.Response:
        return self.call("POST", path, body=body, **kwargs)

    def patch(self, path: str, body: Any = _NO_BODY, **kwargs: Any) -> httpx.Response:
        return self.call("PATCH", path, body=body, **kwargs)

    def put(self, path: str, body: Any = _NO_BODY, **kwargs: Any) -> httpx.Response:
        return self.call("PUT", path, body=body, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.call("DELETE", path, **kwargs)

    def websocket(self, path: str, query: dict[str, str] | None = None) -> None:
        """Opens a WebSocket (the replica shell) and records how the server refused it, or that it did not."""
        request = self.normalizer.request("WEBSOCKET", path, query, _NO_BODY, None, None)
        url = str(self.client.base_url.copy_with(scheme="ws", path=path.split("?")[0], params=query or {}))
        response: dict[str, Any]
        try:
            with ws_connect(url, open_timeout=30):
                response = {"accepted": True}
        except InvalidStatus as refused:
            body = _decode_body(
                bytes(refused.response.body), refused.response.headers.get("content-type", "")
            )
            self.normalizer.learn(body)
            response = {"status": refused.response.status_code, "body": self.normalizer.value(body)}
        self.exchanges.append({"request": request, "response": response})

    # ------------------------------------------------------------------ unrecorded waits
    def poll(self, path: str) -> dict[str, Any]:
        response = self.client.get(path)
        assert response.status_code == 200, response.text
        return response.json()  # type: ignore[no-any-return]

    def wait_operation(self, name: str) -> dict[str, Any]:
        return wait_for(  # type: ignore[no-any-return]
            lambda: (op := self.poll(f"/v1/{name}")).get("done") and op, timeout=60, what=f"operation {name}"
        )

    def wait_state(self, name: str, states: set[str], prefix: str = "/v1") -> dict[str, Any]:
        return wait_for(  # type: ignore[no-any-return]
            lambda: (got := self.poll(f"{prefix}/{name}")).get("state") in states and got,
            timeout=90,
            what=f"{name} to reach {sorted(states)}",
        )

    def created(self, response: httpx.Response) -> str:
        assert response.status_code == 200, response.text
        return str(response.json()["name"])


def parent(project: str, version: str = "v1") -> str:
    return f"/{version}/projects/{project}/locations/{LOCATION}"


def pool(*command: str, replicas: int = 1) -> dict[str, Any]:
    container = {"imageUri": "python:3.11", "command": list(command)}
    return {"machineSpec": MACHINE, "replicaCount": str(replicas), "containerSpec": container}


def custom_job(display_name: str, *command: str, **spec: Any) -> dict[str, Any]:
    return {"displayName": display_name, "jobSpec": {"workerPoolSpecs": [pool(*command)], **spec}}


def multipart(metadata: dict[str, Any], data: bytes, boundary: str = "w1re") -> tuple[bytes, dict[str, str]]:
    body = (
        (
            f"--{boundary}\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n{json.dumps(metadata)}\r\n"
            f"--{boundary}\r\ncontent-type: text/plain\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--".encode()
    )
    return body, {"content-type": f'multipart/related; boundary="{boundary}"'}


# ====================================================================================== the script
def script_basics(w: Wire) -> None:
    w.get("/healthz")
    w.get("/openapi.json", view=openapi_view)
    w.get("/docs")
    w.get("/metrics", view=metric_names)
    w.get("/console")
    w.get("/console/")
    w.get("/console/jobs/anything")
    w.get("/console/assets/app.js")
    w.get("/console/assets/style.css")
    w.get("/console/assets/missing.js")
    w.get("/nope")
    w.get("/v2/projects/p/locations/us-central1/customJobs")
    w.post("/healthz", body={})
    w.delete("/openapi.json")
    w.put(parent("wire-basics") + "/customJobs", body={})
    w.delete(parent("wire-basics") + "/customJobs")
    w.get(parent("wire-basics") + "/unknownCollection")
    w.get(parent("wire-basics") + "/customJobs/1/unknown")
    w.get("/v1/projects/bad_project!/locations/us-central1/customJobs")
    w.get("/v1/projects/wire-basics/locations/nowhere!/customJobs")
    w.get("/v1/projects/12345678901234567890/locations/us-central1/customJobs")
    w.get("/v1/projects/42/locations/us-central1/customJobs")
    w.post(parent("wire-basics") + "/customJobs", content=b"{", headers={"content-type": "application/json"})
    w.post(parent("wire-basics") + "/customJobs", content=b"[]", headers={"content-type": "application/json"})
    w.post(parent("wire-basics") + "/customJobs", content=b"", headers={"content-type": "application/json"})
    w.post(parent("wire-basics") + "/customJobs", content=b"\xff\xfe", headers={"content-type": "text/plain"})


def script_custom_jobs(w: Wire) -> None:
    base = parent("wire-jobs") + "/customJobs"
    good = pool("sh", "-c", "echo hello")
    invalid: list[Any] = [
        {},
        {"displayName": "no-spec"},
        {"displayName": "no-pools", "jobSpec": {"workerPoolSpecs": []}},
        {"displayName": "no-machine", "jobSpec": {"workerPoolSpecs": [{**good, "machineSpec": {}}]}},
        {"displayName": "zero", "jobSpec": {"workerPoolSpecs": [{**good, "replicaCount": "0"}]}},
        {
            "displayName": "bad-machine",
            "jobSpec": {"workerPoolSpecs": [{**good, "machineSpec": {"machineType": "bogus-1"}}]},
        },
        {"displayName": "no-container", "jobSpec": {"workerPoolSpecs": [{"machineSpec": MACHINE}]}},
        {"displayName": "labels", "labels": {"Bad Key": "x"}, "jobSpec": {"workerPoolSpecs": [good]}},
        {"displayName": "x" * 200, "jobSpec": {"workerPoolSpecs": [good]}},
        {"displayName": "unknown", "colour": "blue", "jobSpec": {"workerPoolSpecs": [good]}},
        {"displayName": "types", "jobSpec": {"workerPoolSpecs": "nope"}},
        {
            "displayName": "gpu",
            "jobSpec": {
                "workerPoolSpecs": [
                    {
                        **good,
                        "machineSpec": {**MACHINE, "acceleratorType": "NVIDIA_NOPE", "acceleratorCount": 1},
                    }
                ]
            },
        },
        {
            "displayName": "strategy",
            "jobSpec": {"workerPoolSpecs": [good], "scheduling": {"strategy": "NOPE"}},
        },
        {
            "displayName": "output",
            "jobSpec": {"workerPoolSpecs": [good], "baseOutputDirectory": {"outputUriPrefix": "s3://x"}},
        },
    ]
    for body in invalid:
        w.post(base, body)

    ok = w.created(
        w.post(
            base,
            custom_job(
                "ok",
                "sh",
                "-c",
                "echo hello; echo oops >&2",
                baseOutputDirectory={"outputUriPrefix": "gs://wire-out/ok"},
            )
            | {"labels": {"team": "wire"}},
        )
    )
    wait_job(w.client, ok)
    w.get(f"/v1/{ok}")
    w.get(f"/v1beta1/{ok}")

    failed = w.created(w.post(base, custom_job("failing", "sh", "-c", "echo bye; exit 3")))
    wait_job(w.client, failed)
    w.get(f"/v1/{failed}")

    # A SPOT job held running: preemption's errors, a delete refused while it runs, then cancel.
    spot = w.created(w.post(base, custom_job("spot", "sleep", "60", scheduling={"strategy": "SPOT"})))
    wait_job(w.client, spot, {"JOB_STATE_RUNNING"})
    ext = "/trainworks/v1/" + spot
    w.post(ext + ":preempt", {"replica": "workerpool0-9"})
    w.post(ext + ":preempt", {"replica": 5})
    w.websocket(ext + ":shell", {"replica": "workerpool1-0"})
    w.websocket(ext + ":shell", {"cols": "0"})
    w.websocket(ext + ":shell", {"tty": "maybe"})
    w.delete(f"/v1/{spot}")
    w.post(f"/v1/{spot}:cancel", {})
    wait_job(w.client, spot)
    w.get(f"/v1/{spot}")
    w.post(f"/v1/{spot}:cancel", {})
    w.post(ext + ":preempt", {})

    beta = w.created(w.post(parent("wire-jobs", "v1beta1") + "/customJobs", custom_job("beta", "true")))
    wait_job(w.client, beta)
    w.get(f"/v1beta1/{beta}")

    # Names that are not there, or not names.
    for job_id in ("123", "abc", "-1", "99999999999999999999999"):
        w.get(f"{base}/{job_id}")
    w.post(f"{base}/123:cancel", {})
    w.delete(f"{base}/123")
    w.get(parent("wire-jobs-other") + "/customJobs/" + ok.rsplit("/", 1)[1])

    # Lists: all, paged, filtered, masked, and their errors.
    w.get(base)
    first = w.get(base, query={"pageSize": 3}).json()
    w.get(base, query={"page_size": 3, "page_token": first["nextPageToken"]})
    w.get(base, query={"filter": 'state="JOB_STATE_SUCCEEDED"'})
    w.get(base, query={"filter": "display_name=ok OR display_name=failing"})
    w.get(base, query={"filter": "labels.team=wire"})
    w.get(base, query={"filter": 'create_time>"2020-01-01T00:00:00Z"', "pageSize": 1})
    w.get(base, query={"readMask": "displayName,state"})
    w.get(base, query={"filter": "bogus(("})
    w.get(base, query={"filter": "nosuchfield=1"})
    w.get(base, query={"pageToken": "garbage"})
    w.get(base, query={"pageSize": "ten"})
    w.get(base, query={"pageSize": -1})
    w.get(base, query={"readMask": "nosuchfield"})
    w.get(parent("wire-jobs", "v1beta1") + "/customJobs", query={"pageSize": 2, "readMask": "displayName"})
    w.get(parent("wire-jobs-empty") + "/customJobs")

    # Extensions: logs, status, TensorBoard, preemption of a job that is not SPOT.
    tw = "/trainworks/v1/"
    w.get(tw + ok + "/logs", view=logs_view)
    w.get(tw + ok + "/logs", query={"task": "workerpool0-0"}, view=logs_view)
    w.get(tw + failed + "/logs", query={"task": "workerpool0-7"}, view=logs_view)
    w.get(tw + ok + "/logs", query={"severity": "ERROR", "tail": 5}, view=logs_view)
    w.get(tw + ok + "/logs", query={"severity": "LOUD"})
    w.get(tw + ok + "/logs", query={"since": "yesterday"})

    # Cloud Logging's entries:list: the job's entries as gcloud asks for them, a filtered page, errors.
    jobs_filter = f'resource.type="ml_job" AND resource.labels.job_id="{ok.rsplit("/", 1)[1]}"'
    entries = {"resourceNames": ["projects/wire-jobs"], "filter": jobs_filter}
    w.post("/v2/entries:list", {**entries, "orderBy": "timestamp asc", "pageSize": 1000}, view=entries_view)
    errors_only = {**entries, "filter": jobs_filter + " AND severity>=ERROR", "orderBy": "timestamp desc"}
    w.post("/v2/entries:list", {**errors_only, "pageSize": 1}, view=entries_view)
    w.post("/v2/entries:list", {"resourceNames": ["projects/wire-jobs"], "filter": "bogus(("})
    w.post("/v2/entries:list", {"resourceNames": [], "filter": jobs_filter})
    w.post("/v2/entries:list", {**entries, "pageToken": "garbage"})
    w.post("/v2/entries:list", {**entries, "pageSize": 5000})
    w.get(tw + ok + "/status")
    w.get(tw + failed + "/status")
    w.get(tw + ok + "/tensorboard")
    w.get(tw + failed + "/tensorboard")
    w.post(tw + ok + ":preempt", {})
    w.post(tw + ok + ":preempt", content=b"[1]", headers={"content-type": "application/json"})
    for path in ("/logs", "/status", "/tensorboard"):
        w.get(tw + f"projects/wire-jobs/locations/{LOCATION}/customJobs/123" + path)
    w.post(tw + f"projects/wire-jobs/locations/{LOCATION}/customJobs/123:preempt", {})
    w.websocket(tw + f"projects/wire-jobs/locations/{LOCATION}/customJobs/123:shell")
    w.websocket(tw + ok + ":shell")

    # Delete: a long-running operation, pollable under every prefix and at the resource and location level.
    op = w.delete(f"/v1/{ok}").json()
    done = w.wait_operation(op["name"])
    assert "error" not in done, done
    for prefix in ("/v1", "/v1beta1", "/ui"):
        w.get(f"{prefix}/{op['name']}")
    w.get(f"/v1/{ok}/operations")
    w.get(f"/v1/{ok}")
    w.delete(f"/v1/{ok}")
    beta_op = w.delete(f"/v1beta1/{beta}").json()
    w.wait_operation(beta_op["name"])
    w.get(f"/v1beta1/{beta_op['name']}")
    w.get(base)


def script_operations(w: Wire) -> None:
    """Operations of their own: list, get, wait, cancel and delete, at the location and resource level."""
    base = parent("wire-ops") + "/customJobs"
    jobs = [w.created(w.post(base, custom_job(f"op-{i}", "true"))) for i in range(3)]
    for name in jobs:
        wait_job(w.client, name)
    ops: list[str] = []
    for name in jobs:
        ops.append(w.delete(f"/v1/{name}").json()["name"])
        # Done before the next is made: operation IDs are time-ordered, and lists are ordered by them.
        w.wait_operation(ops[-1])
    location = parent("wire-ops")
    for prefix in ("/v1", "/v1beta1", "/ui"):
        loc = location.replace("/v1", prefix, 1)
        w.get(loc + "/operations")
        w.get(f"{prefix}/{jobs[0]}/operations")
    page = w.get(location + "/operations", query={"pageSize": 2}).json()
    w.get(location + "/operations", query={"pageSize": 2, "pageToken": page["nextPageToken"]})
    w.get(location + "/operations", query={"pageToken": "garbage"})
    w.get(location + "/operations", query={"pageSize": "x"})
    w.get(f"/v1/{jobs[1]}/operations", query={"pageSize": 1})

    op_id = ops[0].rsplit("/", 1)[1]
    # The location-level form of a resource's operation, and operations that are not there.
    w.get(f"{location}/operations/{op_id}")
    w.get(f"{location}/operations/123")
    w.get(f"{location}/operations/abc")
    w.get(f"/v1/{jobs[0]}/operations/123")
    w.get(f"{location}/datasets/123/operations")
    w.get(f"{location}/nonsense/123/operations/456")
    for prefix in ("/v1", "/v1beta1", "/ui"):
        w.post(f"{prefix}/{ops[0]}:wait", {})
    w.post(f"/v1/{ops[0]}:wait", {"timeout": "1.5s"})
    w.post(f"/v1/{ops[0]}:wait", query={"timeout": "2s"})
    w.post(f"/v1/{ops[0]}:wait", {"timeout": "soon"})
    w.post(f"/v1/{ops[0]}:wait")
    w.post(f"{location}/operations/{op_id}:wait", {"timeout": "1s"})
    w.post(f"{location}/operations/123:wait", {"timeout": "1s"})
    w.post(f"/v1/{ops[0]}:cancel", {})
    w.post(f"/ui/{ops[1]}:cancel")
    w.post(f"{location}/operations/{op_id}:cancel", {})
    w.post(f"{location}/operations/123:cancel", {})
    w.delete(f"/v1/{ops[1]}")
    w.get(f"/v1/{ops[1]}")
    w.delete(f"/v1beta1/{ops[1]}")
    w.delete(f"{location}/operations/{ops[2].rsplit('/', 1)[1]}")
    w.delete(f"/ui/{location.removeprefix('/v1/')}/operations/123")
    w.get(location + "/operations")
    w.put(f"/v1/{ops[0]}", body={})
    w.get(f"/v1/{ops[0]}:wait")


def script_persistent_resources(w: Wire) -> None:
    base = parent("wire-pr") + "/persistentResources"
    one = {"machineSpec": MACHINE, "replicaCount": "1"}
    invalid: list[tuple[str, Any]] = [
        ("ok-id", {}),
        ("ok-id", {"resourcePools": []}),
        ("Bad_ID", {"resourcePools": [one]}),
        ("", {"resourcePools": [one]}),
        ("ok-id", {"resourcePools": [{"machineSpec": {"machineType": "bogus"}, "replicaCount": "1"}]}),
        ("ok-id", {"resourcePools": [{**one, "replicaCount": "0"}]}),
        ("ok-id", {"resourcePools": [one], "resourceRuntimeSpec": {"raySpec": {}}}),
        ("ok-id", {"resourcePools": [one], "labels": {"trainworks-preload": "torch-Numpy"}}),
        ("ok-id", {"resourcePools": [{**one, "id": "a"}, {**one, "id": "a"}]}),
    ]
    for resource_id, body in invalid:
        query = {"persistentResourceId": resource_id} if resource_id else None
        w.post(base, body, query=query)

    body = {"displayName": "wire", "resourcePools": [{**one, "id": "main", "replicaCount": "2"}]}
    op = w.post(base, body, query={"persistentResourceId": "wire-one"}).json()
    w.wait_operation(op["name"])
    name = f"projects/wire-pr/locations/{LOCATION}/persistentResources/wire-one"
    w.get(f"/v1/{op['name']}")
    w.get(f"/v1/{name}")
    w.post(base, body, query={"persistentResourceId": "wire-one"})  # taken

    beta = parent("wire-pr", "v1beta1") + "/persistentResources"
    beta_op = w.post(beta, {"resourcePools": [one]}, query={"persistent_resource_id": "wire-two"}).json()
    w.wait_operation(beta_op["name"])
    w.get(f"/v1beta1/{beta_op['name']}")
    w.get(f"{beta}/wire-two")
    w.get(beta)

    w.get(base)
    page = w.get(base, query={"pageSize": 1}).json()
    w.get(base, query={"pageSize": 1, "pageToken": page["nextPageToken"]})
    w.get(base, query={"pageToken": "garbage"})
    w.get(f"{base}/missing")
    w.get(f"{base}/Bad_ID")

    # Updates: the mask rules, then a valid change through its operation.
    w.patch(f"{base}/wire-one", {"displayName": "x"})
    w.patch(f"{base}/wire-one", {"displayName": "x"}, query={"updateMask": "colour"})
    w.patch(f"{base}/wire-one", {"network": "n"}, query={"updateMask": "network"})
    w.patch(f"{base}/wire-one", {}, query={"updateMask": "resourcePools.machineSpec"})
    w.patch(
        f"{base}/wire-one",
        {
            "resourcePools": [
                {"id": "main", "machineSpec": {"machineType": "n1-standard-8"}, "replicaCount": "2"}
            ]
        },
        query={"updateMask": "resource_pools"},
    )
    w.patch(
        f"{base}/wire-one",
        {"resourcePools": [{"id": "main", "replicaCount": "0"}]},
        query={"updateMask": "resource_pools.replica_count"},
    )
    w.patch(
        f"{base}/wire-one",
        {"resourcePools": [{"id": "nope", "replicaCount": "1"}]},
        query={"updateMask": "resource_pools"},
    )
    w.patch(f"{base}/missing", {"displayName": "x"}, query={"updateMask": "displayName"})
    update = w.patch(
        f"{base}/wire-one",
        {
            "displayName": "scaled",
            "resourcePools": [
                {"id": "main", "autoscalingSpec": {"minReplicaCount": "1", "maxReplicaCount": "3"}}
            ],
        },
        query={"updateMask": "displayName,resourcePools.autoscalingSpec"},
    ).json()
    w.wait_operation(update["name"])
    w.get(f"/v1/{update['name']}")
    w.get(f"{base}/wire-one")

    # A job on the resource, then reboot.
    jobs = parent("wire-pr") + "/customJobs"
    w.post(jobs, custom_job("on-missing", "true", persistentResourceId="missing"))
    w.post(
        jobs,
        {
            "displayName": "too-big",
            "jobSpec": {"workerPoolSpecs": [pool("true", replicas=5)], "persistentResourceId": "wire-one"},
        },
    )
    on = w.created(w.post(jobs, custom_job("on-resource", "true", persistentResourceId="wire-one")))
    wait_job(w.client, on)
    w.get(f"/v1/{on}")
    reboot = w.post(f"{base}/wire-one:reboot", {}).json()
    w.wait_operation(reboot["name"])
    w.get(f"/v1/{reboot['name']}")
    w.get(f"{base}/wire-one")
    w.post(f"{base}/missing:reboot", {})
    w.get(f"/v1/projects/wire-pr/locations/{LOCATION}/persistentResources/wire-one/operations")

    for path in (f"{base}/wire-one", f"{beta}/wire-two"):
        gone = w.delete(path).json()
        w.wait_operation(gone["name"])
        w.get(f"/v1/{gone['name']}")
        w.get(path)
    w.delete(f"{base}/missing")
    w.get(base)


def script_tuning_jobs(w: Wire) -> None:
    base = parent("wire-tuning") + "/hyperparameterTuningJobs"
    trial = {"workerPoolSpecs": [pool(sys.executable, "-c", REPORT_METRIC)]}
    study = {
        "metrics": [{"metricId": "score", "goal": "MAXIMIZE"}],
        "parameters": [{"parameterId": "x", "discreteValueSpec": {"values": [2]}}],
        "algorithm": "GRID_SEARCH",
    }
    valid = {
        "displayName": "tune",
        "studySpec": study,
        "maxTrialCount": 1,
        "parallelTrialCount": 1,
        "trialJobSpec": trial,
    }
    invalid: list[Any] = [
        {},
        {**valid, "studySpec": {}},
        {**valid, "maxTrialCount": 0},
        {**valid, "parallelTrialCount": -1},
        {**valid, "studySpec": {**study, "metrics": []}},
        {**valid, "studySpec": {**study, "parameters": [{"parameterId": "x"}]}},
        {**valid, "studySpec": {**study, "algorithm": "NOPE"}},
        {**valid, "trialJobSpec": {}},
    ]
    for body in invalid:
        w.post(base, body)

    tuned = w.created(w.post(base, valid))
    w.wait_state(tuned, TERMINAL_JOB)
    w.get(f"/v1/{tuned}")
    w.get(f"/v1beta1/{tuned}")
    w.get(parent("wire-tuning") + "/customJobs", query={"readMask": "displayName,state"})
    w.get(parent("wire-tuning", "v1beta1") + "/hyperparameterTuningJobs")

    # A trial gets its parameters as arguments (--x=2.0): `python -c` ignores them, `sleep` would not.
    sleeper = pool(sys.executable, "-c", "import time; time.sleep(60)")
    slow = {**valid, "displayName": "slow", "trialJobSpec": {"workerPoolSpecs": [sleeper]}}
    held = w.created(w.post(parent("wire-tuning", "v1beta1") + "/hyperparameterTuningJobs", slow))
    w.wait_state(held, {"JOB_STATE_RUNNING"})

    def trial_running() -> bool:
        trials = w.poll(parent("wire-tuning") + "/customJobs").get("customJobs", [])
        return any(j["displayName"].startswith("slow") and j["state"] == "JOB_STATE_RUNNING" for j in trials)

    wait_for(trial_running, timeout=60, what="the slow trial to run")
    w.post(f"/v1/{held}:cancel", {})
    w.wait_state(held, TERMINAL_JOB)
    w.wait_state(held, {"JOB_STATE_CANCELLED"})
    w.get(f"/v1/{held}")

    w.get(base)
    page = w.get(base, query={"pageSize": 1}).json()
    w.get(base, query={"pageSize": 1, "pageToken": page["nextPageToken"]})
    w.get(base, query={"filter": 'state="JOB_STATE_CANCELLED"'})
    w.get(base, query={"filter": "bogus(("})
    w.get(base, query={"pageToken": "garbage"})
    w.get(f"{base}/123")
    w.get(f"{base}/abc")
    w.post(f"{base}/123:cancel", {})
    w.post(f"/v1/{tuned}:cancel", {})
    w.delete(f"{base}/123")
    op = w.delete(f"/v1/{tuned}").json()
    w.wait_operation(op["name"])
    w.get(f"/v1/{op['name']}")
    w.get(f"/v1/{tuned}")
    w.get(base)


def script_storage(w: Wire) -> None:
    """The Cloud Storage JSON API: buckets, the three upload kinds, reads, listings, copies and deletes."""
    w.post("/storage/v1/b", {"name": "wire-bucket"}, query={"project": "wire-storage"})
    w.post("/storage/v1/b", {"name": "wire-bucket"}, query={"project": "wire-storage"})
    w.post("/storage/v1/b", {"name": "Bad_Bucket!"}, query={"project": "wire-storage"})
    w.post("/storage/v1/b", {}, query={"project": "wire-storage"})
    w.post("/storage/v1/b", content=b"{", headers={"content-type": "application/json"})
    w.post("/storage/v1/b", {"name": "wire-other"}, query={"project": "wire-storage"})
    w.get("/storage/v1/b/wire-bucket")
    w.get("/storage/v1/b/wire-bucket", query={"fields": "name,location"})
    w.get("/storage/v1/b/wire-missing")
    w.get("/storage/v1/b", query={"project": "wire-storage"})
    w.get("/storage/v1/b", query={"project": "wire-storage", "maxResults": 1})
    w.get("/storage/v1/b", query={"project": "wire-storage-none"})
    w.get("/storage/v1/b", query={"prefix": "wire-o"})
    w.get("/storage/v1/b", query={"maxResults": 0})

    up = "/upload/storage/v1/b/wire-bucket/o"
    w.post(
        up,
        query={"uploadType": "media", "name": "dir/a.txt"},
        content=b"alpha\n",
        headers={"content-type": "text/plain"},
    )
    w.post(up, query={"uploadType": "media", "name": "dir/sub/b.txt"}, content=b"beta\n")
    w.post(up, query={"name": "top.txt"}, content=b"top\n")
    body, headers = multipart(
        {"name": "dir/c.txt", "metadata": {"k": "v"}, "contentType": "text/csv"}, b"c,d\n"
    )
    w.post(up, query={"uploadType": "multipart"}, content=body, headers=headers)
    body, headers = multipart({"name": "bad.txt", "md5Hash": "AAAAAAAAAAAAAAAAAAAAAA=="}, b"x")
    w.post(up, query={"uploadType": "multipart"}, content=body, headers=headers)
    w.post(up, query={"uploadType": "multipart"}, content=b"garbage", headers={"content-type": "text/plain"})
    w.post(up, query={"uploadType": "chunked"}, content=b"x")
    w.post(up, query={"uploadType": "media"}, content=b"x")
    w.post(up, query={"uploadType": "media", "name": "x", "ifGenerationMatch": "0"}, content=b"x")
    w.post(up, query={"uploadType": "media", "name": "x", "ifGenerationMatch": "0"}, content=b"x")
    w.post("/upload/storage/v1/b/wire-missing/o", query={"uploadType": "media", "name": "x"}, content=b"x")

    # Resumable: start, send part, ask where it stands, finish; and a cancelled session.
    started = w.post(
        up,
        {"name": "big.bin", "contentType": "application/octet-stream"},
        query={"uploadType": "resumable"},
        headers={"x-upload-content-length": "10"},
    )
    upload_id = started.headers["x-guploader-uploadid"]
    w.put(
        up,
        query={"uploadType": "resumable", "upload_id": upload_id},
        content=b"01234",
        headers={"content-range": "bytes 0-4/10"},
    )
    w.put(
        up, query={"uploadType": "resumable", "upload_id": upload_id}, headers={"content-range": "bytes */10"}
    )
    w.put(
        up,
        query={"uploadType": "resumable", "upload_id": upload_id},
        content=b"9",
        headers={"content-range": "bytes 9-9/10"},
    )
    w.put(
        up,
        query={"uploadType": "resumable", "upload_id": upload_id},
        content=b"56789",
        headers={"content-range": "bytes 5-9/10"},
    )
    w.put(
        up, query={"uploadType": "resumable", "upload_id": upload_id}, headers={"content-range": "bytes */10"}
    )
    dropped = w.post(up, {"name": "dropped.bin"}, query={"uploadType": "resumable"})
    dropped_id = dropped.headers["x-guploader-uploadid"]
    w.delete(up, query={"upload_id": dropped_id})
    w.put(up, query={"upload_id": dropped_id}, headers={"content-range": "bytes */*"})
    w.put(up, content=b"x")
    w.delete(up)
    w.post(up, query={"uploadType": "resumable"}, headers={"x-upload-content-length": "ten"})

    # Reads.
    obj = "/storage/v1/b/wire-bucket/o/"
    w.get(obj + "dir%2Fa.txt")
    w.get(obj + "dir%2Fa.txt", query={"alt": "media"})
    w.get(obj + "dir%2Fa.txt", query={"alt": "xml"})
    w.get(obj + "dir%2Fa.txt", query={"fields": "name,size"})
    w.get(obj + "big.bin", query={"alt": "media"}, headers={"range": "bytes=2-5"})
    w.get(obj + "big.bin", query={"alt": "media"}, headers={"range": "bytes=20-"})
    w.get("/download/storage/v1/b/wire-bucket/o/dir%2Fc.txt", query={"alt": "media"})
    w.get("/download/storage/v1/b/wire-bucket/o/nothing", query={"alt": "media"})
    w.get(obj + "nothing")
    w.get(obj + "dir%2Fa.txt", query={"generation": "abc"})
    w.get(obj + "dir%2Fa.txt", query={"ifGenerationMatch": "1"})

    # Listings.
    olist = "/storage/v1/b/wire-bucket/o"
    w.get(olist)
    w.get(olist, query={"prefix": "dir/"})
    w.get(olist, query={"prefix": "dir/", "delimiter": "/"})
    w.get(olist, query={"delimiter": "/"})
    page = w.get(olist, query={"maxResults": 2}).json()
    w.get(olist, query={"maxResults": 2, "pageToken": page["nextPageToken"]})
    w.get(olist, query={"startOffset": "dir/b", "endOffset": "top"})
    w.get(olist, query={"maxResults": "many"})
    w.get(olist, query={"pageToken": "garbage"})
    w.get("/storage/v1/b/wire-missing/o")

    # Metadata, copies, moves.
    w.patch(obj + "dir%2Fa.txt", {"metadata": {"colour": "blue"}, "contentType": "text/markdown"})
    w.patch(obj + "dir%2Fa.txt", content=b"nope", headers={"content-type": "application/json"})
    w.patch(obj + "nothing", {"metadata": {}})
    w.post(obj + "dir%2Fa.txt/copyTo/b/wire-other/o/copied.txt", {})
    w.post(obj + "dir%2Fa.txt/rewriteTo/b/wire-other/o/rewritten.txt", {"contentType": "text/plain"})
    w.post(obj + "nothing/copyTo/b/wire-other/o/x")
    w.post(obj + "top.txt/moveTo/o/moved.txt")
    w.post(obj + "top.txt/moveTo/o/again.txt")
    w.get("/storage/v1/b/wire-other/o")

    # Deletes.
    w.delete("/storage/v1/b/wire-other")
    for name in ("copied.txt", "rewritten.txt"):
        w.delete(f"/storage/v1/b/wire-other/o/{name}")
    w.delete("/storage/v1/b/wire-other/o/copied.txt")
    w.delete("/storage/v1/b/wire-other")
    w.get("/storage/v1/b/wire-other")
    w.delete("/storage/v1/b/wire-missing")
    w.get("/storage/v1/b", query={"project": "wire-storage"})
    w.put("/storage/v1/b/wire-bucket", body={})
    w.get("/storage/v1/nothing")


def script_datasets(w: Wire) -> None:
    up = "/upload/storage/v1/b/wire-data/o"
    w.post("/storage/v1/b", {"name": "wire-data"}, query={"project": "wire-data"})
    w.post(up, query={"uploadType": "media", "name": "iris/part-1.csv"}, content=b"x,y,label\n1,2,a\n3,4,b\n")
    w.post(up, query={"uploadType": "media", "name": "iris/part-2.csv"}, content=b'x,y,label\n5,6,"c, d"\n')
    lines = [
        {"textContent": "good", "classificationAnnotation": {"displayName": "pos"}},
        {"textContent": "bad", "classificationAnnotation": {"displayName": "neg"}},
    ]
    w.post(
        up,
        query={"uploadType": "media", "name": "text/items.jsonl"},
        content="".join(json.dumps(x) + "\n" for x in lines).encode(),
    )

    base = parent("wire-data") + "/datasets"
    tabular = {
        "displayName": "iris",
        "metadataSchemaUri": TABULAR,
        "metadata": {"inputConfig": {"gcsSource": {"uri": ["gs://wire-data/iris/*.csv"]}}},
        "labels": {"team": "ml"},
    }
    invalid: list[Any] = [
        {},
        {"displayName": "no-schema"},
        {**tabular, "metadataSchemaUri": "gs://nope/schema.yaml"},
        {**tabular, "metadata": {"inputConfig": {"gcsSource": {"uri": ["gs://wire-data/missing/*.csv"]}}}},
        {**tabular, "displayName": ""},
        {**tabular, "labels": {"Bad": "x"}},
    ]
    for body in invalid:
        w.post(base, body)
    created = w.post(base, tabular).json()
    done = w.wait_operation(created["name"])
    w.get(f"/v1/{created['name']}")
    tabular_name = done.get("response", {}).get("name", "")

    text_op = w.post(
        parent("wire-data", "v1beta1") + "/datasets", {"displayName": "text", "metadataSchemaUri": TEXT}
    ).json()
    text_done = w.wait_operation(text_op["name"])
    text_name = text_done.get("response", {}).get("name", "")
    imported = w.post(
        f"/v1/{text_name}:import",
        {
            "importConfigs": [
                {"gcsSource": {"uris": ["gs://wire-data/text/items.jsonl"]}, "importSchemaUri": TEXT_IMPORT}
            ]
        },
    ).json()
    w.wait_operation(imported["name"])
    w.get(f"/v1/{imported['name']}")
    w.post(f"/v1/{text_name}:import", {"importConfigs": []})
    w.post(
        f"/v1/{text_name}:import",
        {
            "importConfigs": [
                {"gcsSource": {"uris": ["gs://wire-data/none.jsonl"]}, "importSchemaUri": TEXT_IMPORT}
            ]
        },
    )
    w.post(f"{base}/123:import", {"importConfigs": []})

    got = w.get(f"/v1/{tabular_name}").json()
    w.get(f"/v1beta1/{text_name}")
    w.get(parent("wire-data", "v1beta1") + "/datasets", query={"readMask": "displayName"})
    w.get(f"/v1/{tabular_name}", query={"readMask": "displayName,labels"})
    w.get(f"{base}/123")
    w.get(f"{base}/abc")
    w.get(base)
    page = w.get(base, query={"pageSize": 1}).json()
    w.get(base, query={"pageSize": 1, "pageToken": page["nextPageToken"]})
    w.get(base, query={"filter": "labels.team=ml"})
    w.get(base, query={"filter": 'display_name="text"'})
    w.get(base, query={"orderBy": "display_name"})
    w.get(base, query={"orderBy": "display_name desc"})
    w.get(base, query={"orderBy": "colour"})
    w.get(base, query={"filter": "bogus(("})
    w.get(base, query={"pageToken": "garbage"})

    w.patch(f"/v1/{tabular_name}", {"displayName": "renamed"})
    w.patch(f"/v1/{tabular_name}", {"displayName": "renamed"}, query={"updateMask": "colour"})
    w.patch(f"/v1/{tabular_name}", {"metadataSchemaUri": TEXT}, query={"updateMask": "metadataSchemaUri"})
    w.patch(
        f"/v1/{tabular_name}",
        {"displayName": "renamed", "etag": "stale"},
        query={"updateMask": "displayName"},
    )
    w.patch(
        f"/v1/{tabular_name}",
        {"displayName": "renamed", "labels": {"team": "data"}, "etag": got.get("etag", "")},
        query={"updateMask": "displayName,labels"},
    )
    w.patch(f"{base}/123", {"displayName": "x"}, query={"updateMask": "displayName"})
    w.get(f"/v1/{tabular_name}")

    for name in (tabular_name, text_name):
        op = w.delete(f"/v1/{name}").json()
        w.wait_operation(op["name"])
        w.get(f"/v1/{op['name']}")
        w.get(f"/v1/{name}")
    w.delete(f"{base}/123")
    w.get(base)


def script_models(w: Wire) -> None:
    up = "/upload/storage/v1/b/wire-models/o"
    w.post("/storage/v1/b", {"name": "wire-models"}, query={"project": "wire-models"})
    w.post(up, query={"uploadType": "media", "name": "v1/model.pkl"}, content=b"\x80\x04K\x01.")
    w.post(up, query={"uploadType": "media", "name": "v2/model.pkl"}, content=b"\x80\x04K\x02.")

    base = parent("wire-models") + "/models"
    model = {
        "displayName": "churn",
        "artifactUri": "gs://wire-models/v1/",
        "containerSpec": {"imageUri": MODEL_IMAGE},
    }
    invalid: list[Any] = [
        {},
        {"model": {}},
        {"model": {**model, "displayName": ""}},
        {"model": {**model, "artifactUri": "gs://wire-models/nothing/"}},
        {"model": {**model, "containerSpec": {}}},
        {"model": model, "parentModel": f"projects/wire-models/locations/{LOCATION}/models/does-not-exist"},
        {"model": {**model, "versionAliases": ["Bad Alias"]}},
    ]
    for body in invalid:
        w.post(base + ":upload", body)
    first = w.post(
        base + ":upload", {"model": {**model, "labels": {"team": "ml"}, "description": "d1"}}
    ).json()
    first_done = w.wait_operation(first["name"])
    w.get(f"/v1/{first['name']}")
    name = first_done.get("response", {}).get("model", "")
    second = w.post(
        parent("wire-models", "v1beta1") + "/models:upload",
        {
            "model": {**model, "artifactUri": "gs://wire-models/v2/", "versionAliases": ["candidate"]},
            "parentModel": name,
        },
    ).json()
    w.wait_operation(second["name"])
    w.get(f"/v1beta1/{second['name']}")
    other = w.post(
        base + ":upload", {"model": {**model, "displayName": "alpha"}, "modelId": "alpha-model"}
    ).json()
    w.wait_operation(other["name"])
    w.get(f"/v1/{other['name']}")

    w.get(f"/v1/{name}")
    w.get(f"/v1/{name}@1")
    w.get(f"/v1/{name}@2")
    w.get(f"/v1/{name}@candidate")
    w.get(f"/v1/{name}@default")
    w.get(f"/v1/{name}@9")
    w.get(f"/v1/{name}@nope")
    w.get(f"{base}/123")
    w.get(f"/v1beta1/{name}")
    w.get(f"/v1/{name}:listVersions")
    w.get(f"/v1beta1/{name}:listVersions", query={"readMask": "versionAliases"})
    w.get(f"/v1/{name}:listVersions", query={"pageSize": 1})
    w.get(f"/v1/{name}:listVersions", query={"orderBy": "version_id desc"})
    w.get(f"{base}/123:listVersions")
    w.get(base)
    page = w.get(base, query={"pageSize": 1}).json()
    w.get(base, query={"pageSize": 1, "pageToken": page["nextPageToken"]})
    w.get(base, query={"filter": "display_name=alpha"})
    w.get(base, query={"filter": "labels.team=ml"})
    w.get(base, query={"orderBy": "display_name"})
    w.get(base, query={"orderBy": "colour"})
    w.get(base, query={"filter": "bogus(("})
    w.get(base, query={"pageToken": "garbage"})
    w.get(base, query={"readMask": "displayName"})
    w.get(parent("wire-models", "v1beta1") + "/models", query={"orderBy": "create_time desc"})

    w.post(f"/v1/{name}@1:mergeVersionAliases", {"versionAliases": ["prod", "-candidate"]})
    w.post(f"/v1/{name}@2:mergeVersionAliases", {"versionAliases": ["prod"]})
    w.post(f"/v1/{name}@1:mergeVersionAliases", {"versionAliases": ["Bad Alias"]})
    w.post(f"/v1/{name}@1:mergeVersionAliases", {"versionAliases": ["-default"]})
    w.post(f"/v1/{name}:mergeVersionAliases", {})
    w.post(f"{base}/123@1:mergeVersionAliases", {"versionAliases": ["x"]})
    w.post(f"{base}/123@1:mergeVersionAliases", {"versionAliases": ["xx"]})
    w.get(f"/v1/{name}:listVersions")

    w.patch(f"/v1/{name}", {"displayName": "x"})
    w.patch(f"/v1/{name}", {"displayName": "x"}, query={"updateMask": "colour"})
    w.patch(f"/v1/{name}", {"artifactUri": "gs://x/"}, query={"updateMask": "artifactUri"})
    w.patch(f"/v1/{name}", {}, query={"updateMask": "versionAliases"})
    w.patch(
        f"/v1/{name}",
        {"displayName": "churn-2", "labels": {"team": "data"}},
        query={"updateMask": "displayName,labels"},
    )
    w.patch(f"/v1/{name}@2", {"versionDescription": "second"}, query={"updateMask": "versionDescription"})
    w.patch(f"{base}/123", {"displayName": "x"}, query={"updateMask": "displayName"})

    w.delete(f"/v1/{name}@1:deleteVersion")
    w.delete(f"/v1/{name}:deleteVersion")
    removed = w.delete(f"/v1/{name}@2:deleteVersion").json()
    w.wait_operation(removed["name"])
    w.get(f"/v1/{removed['name']}")
    w.delete(f"/v1/{name}")
    w.post(f"/v1/{name}@1:mergeVersionAliases", {"versionAliases": ["-prod"]})
    gone = w.delete(f"/v1/{name}").json()
    if "name" in gone:
        w.wait_operation(gone["name"])
        w.get(f"/v1/{gone['name']}")
    w.get(f"/v1/{name}")
    beta_gone = w.delete(f"/v1beta1/{base.removeprefix('/v1/')}/alpha-model").json()
    if "name" in beta_gone:
        w.wait_operation(beta_gone["name"])
        w.get(f"/v1beta1/{beta_gone['name']}")
    w.delete(f"{base}/123")
    w.delete(f"{base}/123:deleteVersion")
    w.get(base)


def script_training_pipelines(w: Wire) -> None:
    base = parent("wire-pipe") + "/trainingPipelines"
    inputs = {
        "workerPoolSpecs": [pool("sh", "-c", "echo trained")],
        "baseOutputDirectory": {"outputUriPrefix": "gs://wire-pipe/out"},
    }
    valid = {"displayName": "plain", "trainingTaskDefinition": CUSTOM_TASK, "trainingTaskInputs": inputs}
    invalid: list[Any] = [
        {},
        {**valid, "trainingTaskDefinition": "gs://nope/task.yaml"},
        {**valid, "trainingTaskInputs": {}},
        {**valid, "displayName": ""},
        {**valid, "inputDataConfig": {"datasetId": "123"}},
    ]
    for body in invalid:
        w.post(base, body)
    # A model to upload that names no container: the training runs, the upload fails the pipeline.
    with_model = w.created(
        w.post(base, {**valid, "displayName": "with-model", "modelToUpload": {"displayName": "m"}})
    )
    w.wait_state(with_model, TERMINAL_PIPELINE)
    w.get(f"/v1/{with_model}")
    plain = w.created(w.post(base, {**valid, "labels": {"team": "a"}}))
    w.wait_state(plain, TERMINAL_PIPELINE)
    w.get(f"/v1/{plain}")
    w.get(f"/v1beta1/{plain}")
    w.get(parent("wire-pipe", "v1beta1") + "/trainingPipelines", query={"readMask": "displayName,state"})
    w.get(parent("wire-pipe") + "/customJobs")

    slow_inputs = {**inputs, "workerPoolSpecs": [pool("sleep", "60")]}
    held = w.created(
        w.post(
            parent("wire-pipe", "v1beta1") + "/trainingPipelines",
            {**valid, "displayName": "slow", "trainingTaskInputs": slow_inputs},
        )
    )
    w.wait_state(held, {"PIPELINE_STATE_RUNNING"})

    def backing_running() -> bool:
        jobs = w.poll(parent("wire-pipe") + "/customJobs").get("customJobs", [])
        return any(j["state"] == "JOB_STATE_RUNNING" for j in jobs)

    wait_for(backing_running, timeout=60, what="the backing job to run")
    w.delete(f"/v1/{held}")
    w.post(f"/v1/{held}:cancel", {})
    w.wait_state(held, TERMINAL_PIPELINE)
    w.get(f"/v1/{held}")

    w.get(base)
    page = w.get(base, query={"pageSize": 1}).json()
    w.get(base, query={"pageSize": 1, "pageToken": page["nextPageToken"]})
    w.get(base, query={"filter": 'state="PIPELINE_STATE_SUCCEEDED"'})
    w.get(base, query={"filter": "bogus(("})
    w.get(base, query={"pageToken": "garbage"})
    w.get(base, query={"readMask": "displayName"})
    w.get(f"{base}/123")
    w.get(f"{base}/abc")
    w.post(f"{base}/123:cancel", {})
    w.post(f"/v1/{plain}:cancel", {})
    w.delete(f"{base}/123")
    for name in (plain, held, with_model):
        op = w.delete(f"/v1/{name}").json()
        w.wait_operation(op["name"])
        w.get(f"/v1/{op['name']}")
        w.get(f"/v1/{name}")
    w.get(base)


def script_clusters(w: Wire) -> None:
    """Training clusters: their routes' errors only (a created cluster runs real Slurm daemons)."""
    base = parent("wire-clusters", "v1beta1") + "/modelDevelopmentClusters"
    node_pool = {
        "id": "cpu",
        "machine_spec": {"machine_type": "n2-standard-8"},
        "scaling_spec": {"min_node_count": 2, "max_node_count": 2},
        "zone": "us-central1-a",
    }
    login = {**node_pool, "id": "login", "scaling_spec": {"min_node_count": 1, "max_node_count": 1}}
    slurm = {
        "home_directory_storage": "projects/wire-clusters/locations/us-central1-a/instances/home",
        "partitions": [{"id": "cpu", "node_pool_ids": ["cpu"]}],
        "login_node_pool_id": "login",
    }
    valid = {
        "display_name": "trainers",
        "network": {
            "network": "projects/wire-clusters/global/networks/default",
            "subnetwork": "projects/wire-clusters/regions/us-central1/subnetworks/default",
        },
        "node_pools": [node_pool, login],
        "orchestrator_spec": {"slurm_spec": slurm},
    }
    invalid: list[tuple[str, Any]] = [
        ("c1", {}),
        ("bad-id-", valid),
        ("Bad_ID", valid),
        ("c1", {**valid, "node_pools": []}),
        (
            "c1",
            {
                **valid,
                "orchestrator_spec": {"slurm_spec": {**slurm, "config": {"HealthCheckProgram": "/bin/true"}}},
            },
        ),
        (
            "c1",
            {
                **valid,
                "orchestrator_spec": {
                    "slurm_spec": {**slurm, "partitions": [{"id": "cpu", "node_pool_ids": ["nope"]}]}
                },
            },
        ),
        (
            "c1",
            {
                **valid,
                "node_pools": [
                    node_pool,
                    {**login, "scaling_spec": {"min_node_count": 1, "max_node_count": 2}},
                ],
            },
        ),
        (
            "c1",
            {
                **valid,
                "node_pools": [
                    {
                        **node_pool,
                        "machine_spec": {
                            "machine_type": "a3-highgpu-8g",
                            "accelerator_type": "NVIDIA_H100_80GB",
                            "accelerator_count": 8,
                        },
                    },
                    login,
                ],
            },
        ),
    ]
    for cluster_id, body in invalid:
        w.post(base, body, query={"modelDevelopmentClusterId": cluster_id})
    w.post(base, valid)
    w.get(base)
    w.get(base, query={"pageSize": 1})
    w.get(base, query={"pageToken": "garbage"})
    w.get(f"{base}/c1")
    w.get(f"{base}/Bad_ID")
    w.patch(f"{base}/c1", {"display_name": "x"}, query={"updateMask": "display_name"})
    w.patch(f"{base}/c1", {"display_name": "x"})
    w.delete(f"{base}/c1")
    w.get(parent("wire-clusters") + "/modelDevelopmentClusters")
    w.post(parent("wire-clusters") + "/modelDevelopmentClusters", valid)
    w.get(parent("wire-clusters", "v1beta1") + "/operations")


def script_extensions(w: Wire) -> None:
    """Costs and capacity (after the jobs and resources above have run), and the shell's refusals."""
    tw = f"/trainworks/v1/projects/wire-jobs/locations/{LOCATION}"
    w.get(tw + "/costs")
    w.get(tw + "/costs", query={"by": "job", "filter": 'state="JOB_STATE_FAILED"'})
    w.get(f"/trainworks/v1/projects/wire-pr/locations/{LOCATION}/costs", query={"by": "resource"})
    w.get(tw + "/costs", query={"by": "colour"})
    w.get(tw + "/costs", query={"filter": "bogus(("})
    w.get(f"/trainworks/v1/projects/wire-empty/locations/{LOCATION}/costs")
    w.get(tw + "/capacity")
    w.get(tw + "/capacity", query={"machineType": "a2-highgpu-1g"})
    w.get(
        tw + "/capacity",
        query={"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": "2"},
    )
    w.get(tw + "/capacity", query={"machineType": "bogus-1"})
    w.get(tw + "/capacity", query={"acceleratorCount": "many"})
    w.get(f"/trainworks/v1/projects/bad_project!/locations/{LOCATION}/capacity")
    w.get(tw + "/customJobs/123:shell")


SCRIPT: list[Callable[[Wire], None]] = [
    script_basics,
    script_custom_jobs,
    script_operations,
    script_persistent_resources,
    script_tuning_jobs,
    script_storage,
    script_datasets,
    script_models,
    script_training_pipelines,
    script_clusters,
    script_extensions,
]


# ====================================================================================== the test
def _kill_zygotes(home: Path) -> None:
    """Warm interpreters of persistent resources outlive the server by design: stop this run's, by PID."""
    for record in home.glob("persistent/*/*/*/zygotes/*.json"):
        with contextlib.suppress(OSError, ValueError, KeyError):
            os.killpg(int(json.loads(record.read_text())["pid"]), signal.SIGKILL)


@pytest.fixture
def wire_server(tmp_path: Path) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path / "home").start()
    try:
        yield proc
    finally:
        proc.stop()
        _kill_zygotes(proc.home)


def run_script(server: ServerProcess) -> list[dict[str, Any]]:
    environment = {
        server.url: "<server>",
        f"localhost:{server.port}": "<server-host>",
        str(server.home.resolve()): "<home>",
        str(server.home): "<home>",
        sys.executable: "<python>",
    }
    normalizer = WireNormalizer(environment)
    with server.client() as client:
        wire = Wire(client, normalizer)
        for step in SCRIPT:
            step(wire)
    return wire.exchanges


def _describe(index: int, exchange: dict[str, Any]) -> str:
    request = exchange.get("request", {})
    query = request.get("query")
    suffix = f"?{'&'.join(f'{k}={v}' for k, v in query.items())}" if query else ""
    return f"#{index} {request.get('method')} {request.get('path')}{suffix}"


def _pretty(value: Any) -> list[str]:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False).splitlines()


def corpus_differences(recorded: list[dict[str, Any]], live: list[dict[str, Any]], limit: int = 5) -> str:
    """A readable account of where the live exchanges differ from the recorded ones ('' when they agree)."""
    problems: list[str] = []
    for index, (old, new) in enumerate(zip(recorded, live, strict=False)):
        if old == new:
            continue
        diff = difflib.unified_diff(_pretty(old), _pretty(new), "recorded", "live", lineterm="", n=4)
        problems.append(f"{_describe(index, old)}\n" + "\n".join(diff))
        if len(problems) >= limit:
            problems.append("... (further differences not shown)")
            break
    if len(recorded) != len(live):
        problems.append(f"recorded {len(recorded)} exchanges, the live run made {len(live)}")
        if len(live) > len(recorded):
            problems.append("first extra live exchange: " + _describe(len(recorded), live[len(recorded)]))
    return "\n\n".join(problems)


def test_wire_corpus_replays_unchanged(wire_server: ServerProcess) -> None:
    live = run_script(wire_server)
    if RECORD:
        document = {"format": FORMAT, "exchanges": live}
        CORPUS.write_text(json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n")
        return
    assert CORPUS.exists(), f"no corpus at {CORPUS}: record it with TRAINWORKS_RECORD_CORPUS=1"
    document = json.loads(CORPUS.read_text())
    assert document.get("format") == FORMAT, "the corpus was recorded in another format: record it again"
    differences = corpus_differences(document["exchanges"], live)
    if differences:
        pytest.fail(
            "the server's answers differ from the recorded wire corpus:\n\n" + differences, pytrace=False
        )
