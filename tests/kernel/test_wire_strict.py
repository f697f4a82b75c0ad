"""Every response body the server produces, parsed strictly with the official descriptors.

The client itself parses leniently (unknown fields and enum names are silently dropped), so these tests use
`json_format.Parse(..., ignore_unknown_fields=False)` (official-client.md section 9) and a canonical round
trip: `MessageToDict(Parse(body)) == body` means the server wrote canonical proto3 JSON (camelCase, enum
names, int64 as strings, defaults omitted). Requests are sent in every spelling the proto JSON parser takes.
"""

from __future__ import annotations

import copy
import json
import sys
import uuid
from datetime import datetime
from typing import Any

import httpx
import pytest
from google.cloud import aiplatform_v1  # registers every aiplatform.v1 type (needed for Any @type)
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2, json_format
from google.rpc import code_pb2, error_details_pb2, status_pb2  # noqa: F401  (registers BadRequest, ErrorInfo)

from tests.support.rpc_codes import HTTP_FOR_CODE
from tests.support.server import ServerProcess, wait_for, wait_job

PY = sys.executable
TIMESTAMP_KEYS = {"createTime", "startTime", "endTime", "updateTime"}


# ------------------------------------------------------------------------------------------ oracle


def strict_parse(text_or_dict: str | dict[str, Any], msg_cls: Any) -> Any:
    pb = msg_cls.pb()() if hasattr(msg_cls, "pb") else msg_cls()
    text = text_or_dict if isinstance(text_or_dict, str) else json.dumps(text_or_dict)
    json_format.Parse(text, pb, ignore_unknown_fields=False)
    return pb


def canonical(
    body: dict[str, Any], msg_cls: Any = aiplatform_v1.CustomJob, numbers: bool = False
) -> dict[str, Any]:
    """What the official descriptors make of `body`, written canonically (enums as numbers with `numbers`)."""
    return json_format.MessageToDict(strict_parse(body, msg_cls), use_integers_for_enums=numbers)


def _times_as_instants(value: Any) -> Any:
    """Timestamps compared as instants: `.000Z` and `Z` are the same time written differently."""
    if isinstance(value, dict):
        return {
            k: datetime.fromisoformat(v.replace("Z", "+00:00"))
            if k in TIMESTAMP_KEYS
            else _times_as_instants(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_times_as_instants(v) for v in value]
    return value


def assert_canonical(response: httpx.Response, msg_cls: Any) -> dict[str, Any]:
    """The body parses strictly and round-trips canonically; returns it, with enum names. A request with
    `$alt=json;enum-encoding=int` gets them as numbers (the round trip checks that), read back as names."""
    assert response.headers["content-type"].startswith("application/json")
    strict_parse(response.text, msg_cls)
    body = response.json()
    numbers = "enum-encoding=int" in response.request.url.params.get("$alt", "")
    assert _times_as_instants(canonical(body, msg_cls, numbers)) == _times_as_instants(body)
    return canonical(body, msg_cls) if numbers else body  # type: ignore[no-any-return]


def assert_error_body(response: httpx.Response, status: str) -> dict[str, Any]:
    """`{"error": {code, message, status, details}}`: code is the HTTP status, the rest is a rpc Status."""
    assert response.status_code == HTTP_FOR_CODE[status]
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) <= {"code", "message", "status", "details"}
    assert error["code"] == response.status_code
    assert error["status"] == status
    assert code_pb2.Code.Value(status) > 0  # a canonical code name (raises ValueError otherwise)
    assert isinstance(error["message"], str) and error["message"]
    rpc_status = {k: v for k, v in error.items() if k != "status"}
    strict_parse(rpc_status, status_pb2.Status)  # every detail is an Any of a registered google.rpc type
    return error  # type: ignore[no-any-return]


# ------------------------------------------------------------------------------------------ helpers


def container_pool(code: str = "pass", **extra: Any) -> dict[str, Any]:
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": "python:3.11", "command": [PY, "-c", code]},
        **extra,
    }


def job_body(display_name: str, code: str = "pass", **extra: Any) -> dict[str, Any]:
    return {"displayName": display_name, "jobSpec": {"workerPoolSpecs": [container_pool(code)]}, **extra}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> httpx.Client:
    return server.client()


def create(
    http: httpx.Client, server: ServerProcess, body: dict[str, Any], query: str = ""
) -> dict[str, Any]:
    response = http.post(f"/v1/{server.parent}/customJobs{query}", json=body)
    assert response.status_code == 200, response.text
    return assert_canonical(response, aiplatform_v1.CustomJob)


def assert_echoes(sent: dict[str, Any], got: dict[str, Any]) -> None:
    """The user-settable part of the job comes back exactly as the descriptors read what was sent."""
    expected = canonical(sent)
    for key in (
        "name",
        "state",
        "createTime",
        "startTime",
        "endTime",
        "updateTime",
        "error",
        "webAccessUris",
    ):
        expected.pop(key, None)
    echoed = {k: v for k, v in got.items() if k in expected}
    assert echoed == expected
    assert set(got) - set(expected) <= {
        "name",
        "state",
        "createTime",
        "startTime",
        "endTime",
        "updateTime",
        "error",
    }


# --------------------------------------------------------------------------- jobs in every state


@pytest.fixture(scope="module")
def finished_jobs(http: httpx.Client, server: ServerProcess) -> dict[str, dict[str, Any]]:
    """One job per terminal state, as the server reports it."""
    sent = {
        "SUCCEEDED": job_body(unique("ok"), "print('ok')", labels={"kind": "ok"}),
        "FAILED": job_body(unique("fail"), "raise SystemExit(7)"),
        "CANCELLED": job_body(unique("cancel"), "import time; time.sleep(600)"),
    }
    names = {state: create(http, server, body)["name"] for state, body in sent.items()}
    wait_job(http, names["CANCELLED"], {"JOB_STATE_RUNNING"})
    cancelled = http.post(f"/v1/{names['CANCELLED']}:cancel", json={})
    assert cancelled.status_code == 200
    assert assert_canonical(cancelled, empty_pb2.Empty) == {}
    jobs = {state: wait_job(http, name) for state, name in names.items()}
    for state, job in jobs.items():
        assert job["state"] == f"JOB_STATE_{state}", job
        assert_echoes(sent[state], job)
    return jobs


def test_created_job_is_queued_and_canonical(http: httpx.Client, server: ServerProcess) -> None:
    sent = job_body(unique("queued"), labels={"a": "b"})
    job = create(http, server, sent)
    assert job["state"] == "JOB_STATE_QUEUED"
    assert "startTime" not in job and "endTime" not in job and "error" not in job
    assert_echoes(sent, job)
    got = http.get(f"/v1/{job['name']}")
    assert got.status_code == 200
    assert_canonical(got, aiplatform_v1.CustomJob)


@pytest.mark.parametrize("state", ["SUCCEEDED", "FAILED", "CANCELLED"])
def test_finished_jobs_are_canonical(
    http: httpx.Client, finished_jobs: dict[str, dict[str, Any]], state: str
) -> None:
    job = finished_jobs[state]
    got = assert_canonical(http.get(f"/v1/{job['name']}"), aiplatform_v1.CustomJob)
    assert got["state"] == f"JOB_STATE_{state}"
    assert "startTime" in got and "endTime" in got
    if state == "SUCCEEDED":
        assert "error" not in got
    else:
        assert set(got["error"]) <= {"code", "message", "details"}  # a raw google.rpc.Status
        assert got["error"]["message"]
    if state == "CANCELLED":
        assert got["error"]["code"] == 1
    if state == "FAILED":
        assert got["error"]["code"] not in (0, 1)
        assert "7" in got["error"]["message"]


def test_list_response_is_canonical(
    http: httpx.Client, server: ServerProcess, finished_jobs: dict[str, dict[str, Any]]
) -> None:
    first = http.get(f"/v1/{server.parent}/customJobs", params={"pageSize": "2"})
    page = assert_canonical(first, aiplatform_v1.ListCustomJobsResponse)
    assert len(page["customJobs"]) == 2 and page["nextPageToken"]
    second = http.get(
        f"/v1/{server.parent}/customJobs", params={"page_size": "2", "page_token": page["nextPageToken"]}
    )
    assert_canonical(second, aiplatform_v1.ListCustomJobsResponse)

    only = http.get(f"/v1/{server.parent}/customJobs", params={"filter": "labels.kind=ok"})
    body = assert_canonical(only, aiplatform_v1.ListCustomJobsResponse)
    assert [j["name"] for j in body["customJobs"]] == [finished_jobs["SUCCEEDED"]["name"]]
    assert "nextPageToken" not in body

    empty = http.get(f"/v1/{server.parent}/customJobs", params={"filter": 'display_name="no such job"'})
    assert assert_canonical(empty, aiplatform_v1.ListCustomJobsResponse) == {}

    masked = http.get(
        f"/v1/{server.parent}/customJobs", params={"readMask": "displayName,state", "pageSize": 1}
    )
    masked_body = assert_canonical(masked, aiplatform_v1.ListCustomJobsResponse)
    assert set(masked_body["customJobs"][0]) == {"displayName", "state"}


def test_operations_are_canonical(http: httpx.Client, server: ServerProcess) -> None:
    job = create(http, server, job_body(unique("delete")))
    wait_job(http, job["name"])

    deleted = http.delete(f"/v1/{job['name']}")
    op = assert_canonical(deleted, operations_pb2.Operation)
    name = op["name"]
    assert name.startswith(job["name"] + "/operations/")
    assert op["metadata"]["@type"] == "type.googleapis.com/google.cloud.aiplatform.v1.DeleteOperationMetadata"
    assert set(op) <= {"name", "metadata", "done", "response"}

    for prefix in ("/v1", "/ui", "/v1beta1"):
        waited = http.post(f"{prefix}/{name}:wait", json={"timeout": "30s"})
        done = assert_canonical(waited, operations_pb2.Operation)
        assert done["done"] is True
        assert done["response"] == {"@type": "type.googleapis.com/google.protobuf.Empty"}
        assert_canonical(http.get(f"{prefix}/{name}"), operations_pb2.Operation)
        listed = assert_canonical(
            http.get(f"{prefix}/{server.parent}/operations"), operations_pb2.ListOperationsResponse
        )
        assert name in [o["name"] for o in listed["operations"]]
        under = assert_canonical(
            http.get(f"{prefix}/{job['name']}/operations"), operations_pb2.ListOperationsResponse
        )
        assert [o["name"] for o in under["operations"]] == [name]
    # Query-parameter timeout, as the official client sends it.
    assert_canonical(http.post(f"/ui/{name}:wait?timeout=1.500s"), operations_pb2.Operation)
    # Cancel and delete of an operation answer google.protobuf.Empty.
    assert assert_canonical(http.post(f"/ui/{name}:cancel"), empty_pb2.Empty) == {}
    assert assert_canonical(http.delete(f"/ui/{name}"), empty_pb2.Empty) == {}
    assert_error_body(http.get(f"/ui/{name}"), "NOT_FOUND")


def test_error_bodies(
    http: httpx.Client, server: ServerProcess, finished_jobs: dict[str, dict[str, Any]]
) -> None:
    assert_error_body(http.get(f"/v1/{server.parent}/customJobs/987654321"), "NOT_FOUND")
    assert_error_body(http.get("/v1/no/such/route"), "NOT_FOUND")
    assert_error_body(http.get(f"/ui/{server.parent}/operations/987654321"), "NOT_FOUND")

    bad = job_body(unique("bad"))
    bad["jobSpec"]["workerPoolSpecs"][0]["machineSpec"]["machineType"] = "nope-1"
    error = assert_error_body(http.post(f"/v1/{server.parent}/customJobs", json=bad), "INVALID_ARGUMENT")
    violations = [v for d in error["details"] for v in d.get("fieldViolations", [])]
    assert [v["field"] for v in violations] == ["job_spec.worker_pool_specs[0].machine_spec.machine_type"]

    unknown = job_body(unique("unknown"), colour="red")
    error = assert_error_body(http.post(f"/v1/{server.parent}/customJobs", json=unknown), "INVALID_ARGUMENT")
    assert [v["field"] for d in error["details"] for v in d.get("fieldViolations", [])] == ["colour"]

    not_json = http.post(
        f"/v1/{server.parent}/customJobs", content=b"{nope", headers={"content-type": "application/json"}
    )
    assert_error_body(not_json, "INVALID_ARGUMENT")
    assert_error_body(
        http.get(f"/v1/{server.parent}/customJobs", params={"filter": "state="}), "INVALID_ARGUMENT"
    )
    assert_error_body(
        http.get(f"/v1/{server.parent}/customJobs", params={"pageToken": "garbage"}), "INVALID_ARGUMENT"
    )
    assert_error_body(
        http.post(f"/ui/{server.parent}/operations/1:wait", json={"timeout": "soon"}), "INVALID_ARGUMENT"
    )

    finished = finished_jobs["SUCCEEDED"]["name"]
    assert_error_body(http.post(f"/v1/{finished}:cancel", json={}), "FAILED_PRECONDITION")


# ---------------------------------------------------------------------------- request spellings


def _spellings() -> dict[str, tuple[dict[str, Any], str]]:
    """Bodies the proto JSON parser accepts, each with a query string."""
    camel = {
        "displayName": "camel",
        "labels": {"team": "ml"},
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "n1-standard-4",
                        "acceleratorType": "ACCELERATOR_TYPE_UNSPECIFIED",
                    },
                    "replicaCount": "1",
                    "containerSpec": {
                        "imageUri": "python:3.11",
                        "command": [PY, "-c", "pass"],
                        "args": ["--x"],
                    },
                    "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                }
            ],
            "scheduling": {"timeout": "3600s", "strategy": "STANDARD", "restartJobOnWorkerRestart": True},
        },
    }
    snake = {
        "display_name": "snake",
        "labels": {"team_name": "ml"},
        "job_spec": {
            "worker_pool_specs": [
                {
                    "machine_spec": {"machine_type": "n1-standard-4"},
                    "replica_count": 1,
                    "container_spec": {"image_uri": "python:3.11", "command": [PY, "-c", "pass"]},
                    "disk_spec": {"boot_disk_type": "pd-standard", "boot_disk_size_gb": "150"},
                }
            ],
            "scheduling": {"timeout": "60s", "strategy": "SPOT", "restart_job_on_worker_restart": True},
            "base_output_directory": {"output_uri_prefix": "gs://test-bucket/snake"},
        },
    }
    int_enums = {
        "displayName": "ints",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "n1-standard-4",
                        "acceleratorType": 0,
                        "reservationAffinity": {"reservationAffinityType": 2},
                    },
                    "replicaCount": 1,
                    "containerSpec": {"imageUri": "python:3.11", "command": [PY, "-c", "pass"]},
                }
            ],
            "scheduling": {"strategy": 6, "maxWaitDuration": "0s"},
        },
    }
    int64_forms = {
        "displayName": "int64",
        "jobSpec": {
            "workerPoolSpecs": [
                container_pool(),
                {},
                {**container_pool(), "replicaCount": 2},
                {**container_pool(), "replicaCount": "1"},
            ]
        },
    }
    nulls = {
        "displayName": "nulls",
        "labels": None,
        "encryptionSpec": None,
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "n1-standard-4",
                        "acceleratorType": None,
                        "acceleratorCount": None,
                    },
                    "replicaCount": "1",
                    "containerSpec": {
                        "imageUri": "i",
                        "command": [PY, "-c", "pass"],
                        "args": None,
                        "env": None,
                    },
                    "pythonPackageSpec": None,
                }
            ],
            "scheduling": None,
            "network": None,
        },
    }
    mixed = {
        "displayName": "mixed",
        "job_spec": {
            "workerPoolSpecs": [
                {
                    "machine_spec": {"machineType": "n1-standard-4"},
                    "replicaCount": 1.0,
                    "container_spec": {"imageUri": "i", "command": [PY, "-c", "pass"]},
                }
            ],
            "enableWebAccess": False,
            "reserved_ip_ranges": [],
        },
    }
    output_only = {
        **job_body("output-only"),
        "name": "projects/other/locations/elsewhere/customJobs/1",
        "state": "JOB_STATE_SUCCEEDED",
        "createTime": "2020-01-01T00:00:00Z",
        "error": {"code": 5, "message": "ignored"},
        "webAccessUris": {"workerpool0-0": "https://example"},
    }
    alt = "?%24alt=json%3Benum-encoding%3Dint"
    return {
        "camelCase": (camel, ""),
        "camelCase+alt": (camel, alt),
        "snake_case": (snake, ""),
        "int enums+alt": (int_enums, alt),
        "int64 as numbers and strings": (int64_forms, ""),
        "nulls": (nulls, ""),
        "mixed spellings": (mixed, "?$alt=json"),
        "output-only fields are ignored": (output_only, ""),
    }


SPELLINGS = _spellings()


@pytest.mark.parametrize("spelling", list(SPELLINGS))
def test_every_accepted_request_spelling(http: httpx.Client, server: ServerProcess, spelling: str) -> None:
    body, query = SPELLINGS[spelling]
    job = create(http, server, body, query)
    assert job["state"] == "JOB_STATE_QUEUED"
    assert_echoes(body, job)
    assert job["name"] != body.get("name")
    assert "error" not in job and "webAccessUris" not in job
    # What is stored is what was echoed.
    stored = assert_canonical(http.get(f"/v1/{job['name']}{query}"), aiplatform_v1.CustomJob)
    assert_echoes(body, stored)


def test_list_query_spellings(http: httpx.Client, server: ServerProcess) -> None:
    name = unique("query")
    for _ in range(3):
        create(http, server, job_body(name))
    flt = f'display_name="{name}"'
    alt = {"$alt": "json;enum-encoding=int"}
    camel = assert_canonical(
        http.get(f"/v1/{server.parent}/customJobs", params={"filter": flt, "pageSize": 2, **alt}),
        aiplatform_v1.ListCustomJobsResponse,
    )
    snake = assert_canonical(
        http.get(f"/v1/{server.parent}/customJobs", params={"filter": flt, "page_size": 2}),
        aiplatform_v1.ListCustomJobsResponse,
    )
    assert [j["name"] for j in camel["customJobs"]] == [j["name"] for j in snake["customJobs"]]
    rest = assert_canonical(
        http.get(
            f"/v1/{server.parent}/customJobs",
            params={"filter": flt, "page_size": 2, "page_token": snake["nextPageToken"], **alt},
        ),
        aiplatform_v1.ListCustomJobsResponse,
    )
    assert len(rest["customJobs"]) == 1 and "nextPageToken" not in rest


# ------------------------------------------------------------------------------- exotic fields


EXOTIC = {
    "displayName": "exotic",
    "labels": {"team": "ml", "env": "dev", "empty-value": ""},
    "encryptionSpec": {"kmsKeyName": "projects/p/locations/us-central1/keyRings/r/cryptoKeys/k"},
    "jobSpec": {
        "workerPoolSpecs": [
            {
                "containerSpec": {
                    "imageUri": "python:3.11",
                    "command": [PY, "-c", "pass"],
                    "args": ["--lr", "0.1"],
                    "env": [
                        {"name": "A", "value": "x"},
                        {"name": "B", "value": "$(A)-y"},
                        {"name": "C", "value": "$$(A)"},
                    ],
                },
                "machineSpec": {
                    "machineType": "n1-standard-4",
                    "reservationAffinity": {
                        "reservationAffinityType": "SPECIFIC_RESERVATION",
                        "key": "compute.googleapis.com/reservation-name",
                        "values": ["projects/p/zones/us-central1-a/reservations/r"],
                    },
                },
                "replicaCount": "1",
                "nfsMounts": [{"server": "10.0.0.1", "path": "/export/data", "mountPoint": "data"}],
                "lustreMounts": [
                    {
                        "instanceIp": "10.0.0.2",
                        "volumeHandle": "vh",
                        "filesystem": "fs",
                        "mountPoint": "lustre",
                    }
                ],
                "diskSpec": {"bootDiskType": "pd-standard", "bootDiskSizeGb": 250},
            },
            {},
            {
                "pythonPackageSpec": {
                    "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/pytorch:latest",
                    "packageUris": ["gs://test-bucket/trainer-0.1.tar.gz"],
                    "pythonModule": "trainer.task",
                    "args": ["--epochs", "1"],
                    "env": [{"name": "D", "value": "z"}],
                },
                # FLEX_START: every pool has the primary's machine configuration.
                "machineSpec": {
                    "machineType": "n1-standard-4",
                    "reservationAffinity": {
                        "reservationAffinityType": "SPECIFIC_RESERVATION",
                        "key": "compute.googleapis.com/reservation-name",
                        "values": ["projects/p/zones/us-central1-a/reservations/r"],
                    },
                },
                "replicaCount": "2",
            },
        ],
        "scheduling": {
            "timeout": "3600.5s",
            "restartJobOnWorkerRestart": True,
            "strategy": "FLEX_START",
            "disableRetries": True,
            "maxWaitDuration": "7200.000000001s",
        },
        "serviceAccount": "trainer@p.iam.gserviceaccount.com",
        "network": "projects/123456789/global/networks/default",
        "reservedIpRanges": ["range-a", "range-b"],
        "pscInterfaceConfig": {
            "networkAttachment": "projects/p/regions/us-central1/networkAttachments/na",
            "dnsPeeringConfigs": [{"domain": "corp.example.", "targetProject": "tp", "targetNetwork": "tn"}],
        },
        "baseOutputDirectory": {"outputUriPrefix": "gs://test-bucket/exotic/"},
        "protectedArtifactLocationId": "us-central1",
        "tensorboard": "projects/p/locations/us-central1/tensorboards/1",
        "enableWebAccess": True,
        "enableDashboardAccess": True,
        "experiment": "projects/p/locations/us-central1/metadataStores/default/contexts/exp",
        "experimentRun": "projects/p/locations/us-central1/metadataStores/default/contexts/exp-run",
        "models": ["projects/p/locations/us-central1/models/1@2"],
    },
}


def test_exotic_fields_round_trip_exactly(http: httpx.Client, server: ServerProcess) -> None:
    job = create(http, server, copy.deepcopy(EXOTIC))
    assert_echoes(EXOTIC, job)
    scheduling = job["jobSpec"]["scheduling"]
    assert scheduling["timeout"] == "3600.500s"
    assert scheduling["maxWaitDuration"] == "7200.000000001s"
    assert job["labels"] == EXOTIC["labels"]
    pool = job["jobSpec"]["workerPoolSpecs"][0]
    assert pool["nfsMounts"] == EXOTIC["jobSpec"]["workerPoolSpecs"][0]["nfsMounts"]
    assert pool["diskSpec"] == {"bootDiskType": "pd-standard", "bootDiskSizeGb": 250}
    assert pool["machineSpec"]["reservationAffinity"]["reservationAffinityType"] == "SPECIFIC_RESERVATION"
    assert [e["name"] for e in pool["containerSpec"]["env"]] == ["A", "B", "C"]
    assert job["jobSpec"]["workerPoolSpecs"][1] == {}

    # Stored, it reads back the same, also once the job has moved on.
    stored = assert_canonical(http.get(f"/v1/{job['name']}"), aiplatform_v1.CustomJob)
    assert stored["jobSpec"] == job["jobSpec"]
    later = wait_for(
        lambda: (lambda j: j if j["state"] != "JOB_STATE_QUEUED" else None)(
            http.get(f"/v1/{job['name']}").json()
        ),
        what="the exotic job to leave QUEUED",
    )
    assert later["jobSpec"] == job["jobSpec"]
