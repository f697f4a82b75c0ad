"""CustomJob validation through a real server: every rejected body is a 400 INVALID_ARGUMENT whose
google.rpc.BadRequest names the exact proto field path; nothing a client sends ever yields a 5xx."""

from __future__ import annotations

import copy
import json
import random
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, wait_for, wait_job

BAD_REQUEST = "type.googleapis.com/google.rpc.BadRequest"
POOL0 = "job_spec.worker_pool_specs[0]"

Body = dict[str, Any]


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        yield client


def valid() -> Body:
    # A deep copy: python_pool shares tests.support.jobs.MACHINE, which mutations must not touch.
    return copy.deepcopy(job(python_pool("pass"), name="validation"))


def pool(body: Body, index: int = 0) -> Body:
    return body["jobSpec"]["workerPoolSpecs"][index]  # type: ignore[no-any-return]


def package_pool() -> Body:
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "pythonPackageSpec": {
            "executorImageUri": "python:3.11",
            "packageUris": ["gs://test-bucket/trainer-0.1.tar.gz"],
            "pythonModule": "trainer.task",
        },
    }


def post(http: httpx.Client, server: ServerProcess, body: Any) -> httpx.Response:
    return http.post(f"/v1/{server.parent}/customJobs", json=body)


def post_raw(http: httpx.Client, server: ServerProcess, content: bytes) -> httpx.Response:
    return http.post(
        f"/v1/{server.parent}/customJobs", content=content, headers={"content-type": "application/json"}
    )


def google_error(response: httpx.Response) -> dict[str, Any]:
    """The google.rpc error envelope: `code` is the HTTP status, `status` the canonical name."""
    assert response.headers["content-type"].startswith("application/json"), response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert error["code"] == response.status_code, error
    assert isinstance(error["status"], str) and error["status"], error
    assert isinstance(error["message"], str) and error["message"], error
    assert isinstance(error.get("details", []), list), error
    for detail in error.get("details", []):
        assert detail["@type"].startswith("type.googleapis.com/google.rpc."), detail
    return error  # type: ignore[no-any-return]


def violations(error: dict[str, Any]) -> list[dict[str, str]]:
    return [v for d in error.get("details", []) if d["@type"] == BAD_REQUEST for v in d["fieldViolations"]]


def assert_invalid(response: httpx.Response, *fields: str) -> list[dict[str, str]]:
    """A 400 INVALID_ARGUMENT whose field violations name exactly `fields`, in that order."""
    assert response.status_code == 400, response.text
    error = google_error(response)
    assert error["status"] == "INVALID_ARGUMENT", error
    found = violations(error)
    assert [v["field"] for v in found] == list(fields), found
    assert all(v["description"] for v in found), found
    return found


def assert_created(response: httpx.Response) -> Body:
    assert response.status_code == 200, response.text
    created = response.json()
    assert created["state"] == "JOB_STATE_QUEUED"
    return created  # type: ignore[no-any-return]


def _set(path: str, value: Any) -> Callable[[Body], None]:
    """A mutation that sets `a.b[0].c` (creating dicts on the way) to `value`."""

    def mutate(body: Body) -> None:
        parts: list[str | int] = []
        for token in path.replace("]", "").replace("[", ".").split("."):
            parts.append(int(token) if token.isdigit() else token)
        target: Any = body
        for part in parts[:-1]:
            target = target[part] if isinstance(part, int) else target.setdefault(part, {})
        target[parts[-1]] = copy.deepcopy(value)

    return mutate


def _del(path: str) -> Callable[[Body], None]:
    def mutate(body: Body) -> None:
        parts = [int(t) if t.isdigit() else t for t in path.replace("]", "").replace("[", ".").split(".")]
        target: Any = body
        for part in parts[:-1]:
            target = target[part]
        del target[parts[-1]]

    return mutate


def _pools(*pools: Body) -> Callable[[Body], None]:
    def mutate(body: Body) -> None:
        first = pool(body)
        body["jobSpec"]["workerPoolSpecs"] = [copy.deepcopy(first if p is FIRST else p) for p in pools]

    return mutate


FIRST: Body = {}  # marker: "the valid primary pool"


def _package(**changes: Any) -> Callable[[Body], None]:
    def mutate(body: Body) -> None:
        spec = package_pool()
        for key, value in changes.items():
            if value is None:
                del spec["pythonPackageSpec"][key]
            else:
                spec["pythonPackageSpec"][key] = value
        body["jobSpec"]["workerPoolSpecs"] = [spec]

    return mutate


def _both(mutations: list[Callable[[Body], None]]) -> Callable[[Body], None]:
    def mutate(body: Body) -> None:
        for m in mutations:
            m(body)

    return mutate


C0 = "jobSpec.workerPoolSpecs[0].containerSpec"
M0 = "jobSpec.workerPoolSpecs[0].machineSpec"
PKG0 = f"{POOL0}.python_package_spec"
ENV0 = f"{POOL0}.container_spec.env"

# (id, mutation of a valid body, the exact violation fields)
REJECTED: list[tuple[str, Callable[[Body], None], list[str]]] = [
    ("missing displayName", _del("displayName"), ["display_name"]),
    ("empty displayName", _set("displayName", ""), ["display_name"]),
    ("displayName over 128 chars", _set("displayName", "x" * 129), ["display_name"]),
    ("missing jobSpec", _del("jobSpec"), ["job_spec"]),
    ("empty workerPoolSpecs", _set("jobSpec.workerPoolSpecs", []), ["job_spec.worker_pool_specs"]),
    ("five pools", _pools(FIRST, FIRST, FIRST, FIRST, FIRST), ["job_spec.worker_pool_specs"]),
    ("pool 0 empty", _pools({}, FIRST), [POOL0]),
    (
        "pool 0 replicaCount 2",
        _set("jobSpec.workerPoolSpecs[0].replicaCount", "2"),
        [f"{POOL0}.replica_count"],
    ),
    ("pool 0 replicaCount 0", _set("jobSpec.workerPoolSpecs[0].replicaCount", 0), [f"{POOL0}.replica_count"]),
    (
        "pool 0 replicaCount missing",
        _del("jobSpec.workerPoolSpecs[0].replicaCount"),
        [f"{POOL0}.replica_count"],
    ),
    (
        "pool 1 replicaCount 0 with a spec",
        _both([_pools(FIRST, FIRST), _set("jobSpec.workerPoolSpecs[1].replicaCount", "0")]),
        ["job_spec.worker_pool_specs[1].replica_count"],
    ),
    (
        "pool 1 replicaCount missing with a spec",
        _both([_pools(FIRST, FIRST), _del("jobSpec.workerPoolSpecs[1].replicaCount")]),
        ["job_spec.worker_pool_specs[1].replica_count"],
    ),
    ("neither container nor package", _del(C0), [POOL0]),
    (
        "both container and package",
        _set("jobSpec.workerPoolSpecs[0].pythonPackageSpec", package_pool()["pythonPackageSpec"]),
        [POOL0],
    ),
    ("missing imageUri", _del(f"{C0}.imageUri"), [f"{POOL0}.container_spec.image_uri"]),
    ("empty containerSpec", _set(C0, {}), [f"{POOL0}.container_spec.image_uri"]),
    ("package without executorImageUri", _package(executorImageUri=None), [f"{PKG0}.executor_image_uri"]),
    ("package without packageUris", _package(packageUris=None), [f"{PKG0}.package_uris"]),
    ("package without pythonModule", _package(pythonModule=None), [f"{PKG0}.python_module"]),
    ("package module not a module", _package(pythonModule="trainer/task.py"), [f"{PKG0}.python_module"]),
    ("package URI not gs://", _package(packageUris=["/tmp/trainer.tar.gz"]), [f"{PKG0}.package_uris[0]"]),
    ("package URI https", _package(packageUris=["https://x.test/t.tar.gz"]), [f"{PKG0}.package_uris[0]"]),
    ("package URI escapes bucket b", _package(packageUris=["gs://b/../x"]), [f"{PKG0}.package_uris[0]"]),
    (
        "second package URI escapes its bucket",
        _package(packageUris=["gs://test-bucket/ok.tar.gz", "gs://test-bucket/a/../../x"]),
        [f"{PKG0}.package_uris[1]"],
    ),
    (
        "unknown machine type",
        _set(f"{M0}.machineType", "n1-standrd-4"),
        [f"{POOL0}.machine_spec.machine_type"],
    ),
    ("missing machine type", _set(M0, {}), [f"{POOL0}.machine_spec.machine_type"]),
    ("missing machineSpec", _del(M0), [f"{POOL0}.machine_spec.machine_type"]),
    (
        "T4 on n2",
        _set(
            M0, {"machineType": "n2-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1}
        ),
        [f"{POOL0}.machine_spec.accelerator_type"],
    ),
    (
        "three T4 on n1",
        _set(
            M0, {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 3}
        ),
        [f"{POOL0}.machine_spec.accelerator_count"],
    ),
    (
        "T4 with count 0",
        _set(M0, {"machineType": "n1-standard-4", "acceleratorType": "NVIDIA_TESLA_T4"}),
        [f"{POOL0}.machine_spec.accelerator_count"],
    ),
    (
        "count without a type on n1",
        _set(M0, {"machineType": "n1-standard-4", "acceleratorCount": 1}),
        [f"{POOL0}.machine_spec.accelerator_type"],
    ),
    (
        "count on a machine type without accelerators",
        _set(M0, {"machineType": "n2-standard-4", "acceleratorCount": 1}),
        [f"{POOL0}.machine_spec.accelerator_count"],
    ),
    (
        "g2 without its L4",
        _set(M0, {"machineType": "g2-standard-4"}),
        [f"{POOL0}.machine_spec.accelerator_type"],
    ),
    (
        "g2 with a T4",
        _set(
            M0, {"machineType": "g2-standard-4", "acceleratorType": "NVIDIA_TESLA_T4", "acceleratorCount": 1}
        ),
        [f"{POOL0}.machine_spec.accelerator_type"],
    ),
    (
        "g2 with two L4",
        _set(M0, {"machineType": "g2-standard-4", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 2}),
        [f"{POOL0}.machine_spec.accelerator_count"],
    ),
    (
        "unknown accelerator enum name",
        _set(f"{M0}.acceleratorType", "NVIDIA_TESLA_T5"),
        [f"{POOL0}.machine_spec.accelerator_type"],
    ),
    (
        "unknown accelerator enum number",
        _set(f"{M0}.acceleratorType", 99),
        [f"{POOL0}.machine_spec.accelerator_type"],
    ),
    ("unknown strategy", _set("jobSpec.scheduling.strategy", "CHEAP"), ["job_spec.scheduling.strategy"]),
    (
        "env name starts with a digit",
        _set(f"{C0}.env", [{"name": "1BAD", "value": "x"}]),
        [f"{ENV0}[0].name"],
    ),
    ("env name with a dash", _set(f"{C0}.env", [{"name": "A-B", "value": "x"}]), [f"{ENV0}[0].name"]),
    (
        "101 env vars",
        _set(f"{C0}.env", [{"name": f"V{i}", "value": "x"} for i in range(101)]),
        [ENV0],
    ),
    (
        "env var missing value",
        _set(f"{C0}.env", [{"name": "A", "value": "1"}, {"name": "B"}]),
        [f"{ENV0}[1].value"],
    ),
    ("env var missing name", _set(f"{C0}.env", [{"value": "x"}]), [f"{ENV0}[0].name"]),
    (
        "package env name",
        _both(
            [
                _package(),
                _set("jobSpec.workerPoolSpecs[0].pythonPackageSpec.env", [{"name": "1X", "value": "v"}]),
            ]
        ),
        [f"{PKG0}.env[0].name"],
    ),
    ("label key uppercase", _set("labels", {"Team": "ml"}), ['labels["Team"]']),
    ("label key starts with a digit", _set("labels", {"1team": "ml"}), ['labels["1team"]']),
    ("label key empty", _set("labels", {"": "ml"}), ['labels[""]']),
    ("label key too long", _set("labels", {"k" * 65: "ml"}), [f'labels["{"k" * 65}"]']),
    ("label value too long", _set("labels", {"team": "v" * 65}), ['labels["team"]']),
    ("label value uppercase", _set("labels", {"team": "ML"}), ['labels["team"]']),
    ("label value with a space", _set("labels", {"team": "m l"}), ['labels["team"]']),
    ("65 labels", _set("labels", {f"k{i}": "v" for i in range(65)}), ["labels"]),
    ("label value not a string", _set("labels", {"team": 5}), ['labels["team"]']),
    (
        "args over 100,000 chars in total",
        _both(
            [
                _pools(FIRST, FIRST),
                _set(f"{C0}.args", ["a" * 60_000]),
                _set("jobSpec.workerPoolSpecs[1].containerSpec.args", ["b" * 40_001]),
            ]
        ),
        ["job_spec.worker_pool_specs"],
    ),
    ("timeout 1h", _set("jobSpec.scheduling.timeout", "1h"), ["job_spec.scheduling.timeout"]),
    ("timeout as a number", _set("jobSpec.scheduling.timeout", 3600), ["job_spec.scheduling.timeout"]),
    ("timeout negative", _set("jobSpec.scheduling.timeout", "-5s"), ["job_spec.scheduling.timeout"]),
    ("timeout zero", _set("jobSpec.scheduling.timeout", "0s"), ["job_spec.scheduling.timeout"]),
    (
        "timeout out of range",
        _set("jobSpec.scheduling.timeout", "315576000001s"),
        ["job_spec.scheduling.timeout"],
    ),
    (
        "maxWaitDuration without FLEX_START",
        _set("jobSpec.scheduling", {"maxWaitDuration": "600s"}),
        ["job_spec.scheduling.max_wait_duration"],
    ),
    (
        "maxWaitDuration with SPOT",
        _set("jobSpec.scheduling", {"maxWaitDuration": "600s", "strategy": "SPOT"}),
        ["job_spec.scheduling.max_wait_duration"],
    ),
    (
        "baseOutputDirectory not gs://",
        _set("jobSpec.baseOutputDirectory", {"outputUriPrefix": "/tmp/out"}),
        ["job_spec.base_output_directory.output_uri_prefix"],
    ),
    (
        "baseOutputDirectory without a prefix",
        _set("jobSpec.baseOutputDirectory", {}),
        ["job_spec.base_output_directory.output_uri_prefix"],
    ),
    ("encryptionSpec without a key", _set("encryptionSpec", {}), ["encryption_spec.kms_key_name"]),
    (
        "nfs mount path not absolute",
        _set("jobSpec.workerPoolSpecs[0].nfsMounts", [{"server": "s", "path": "data", "mountPoint": "m"}]),
        [f"{POOL0}.nfs_mounts[0].path"],
    ),
    (
        "boot disk too small",
        _set("jobSpec.workerPoolSpecs[0].diskSpec", {"bootDiskSizeGb": 5}),
        [f"{POOL0}.disk_spec.boot_disk_size_gb"],
    ),
    ("unknown top-level field", _set("colour", "red"), ["colour"]),
    ("unknown nested field", _set(f"{C0}.imageURL", "python:3.11"), [f"{POOL0}.container_spec.imageURL"]),
    ("string for a bool", _set("jobSpec.enableWebAccess", "true"), ["job_spec.enable_web_access"]),
    (
        "number for a bool",
        _set("jobSpec.scheduling.disableRetries", 1),
        ["job_spec.scheduling.disable_retries"],
    ),
    ("object for a string", _set("displayName", {"text": "x"}), ["display_name"]),
    ("number for a string", _set(f"{C0}.imageUri", 3), [f"{POOL0}.container_spec.image_uri"]),
    ("string for a list", _set(f"{C0}.args", "--lr 0.1"), [f"{POOL0}.container_spec.args"]),
    ("list for a map", _set("labels", ["team"]), ["labels"]),
    ("string for a message", _set("jobSpec.scheduling", "fast"), ["job_spec.scheduling"]),
    ("fractional int64", _set("jobSpec.workerPoolSpecs[0].replicaCount", 1.5), [f"{POOL0}.replica_count"]),
    (
        "fractional int64 string",
        _set("jobSpec.workerPoolSpecs[0].replicaCount", "1.5"),
        [f"{POOL0}.replica_count"],
    ),
    ("bool for int64", _set("jobSpec.workerPoolSpecs[0].replicaCount", True), [f"{POOL0}.replica_count"]),
    (
        "int64 overflow",
        _set("jobSpec.workerPoolSpecs[0].replicaCount", "9223372036854775808"),
        [f"{POOL0}.replica_count"],
    ),
    ("int32 overflow", _set(f"{M0}.acceleratorCount", 2**31), [f"{POOL0}.machine_spec.accelerator_count"]),
    # These once gave a 500 (Infinity, sNaN) or hung the server computing 10**999999999.
    (
        "int64 Infinity",
        _set("jobSpec.workerPoolSpecs[0].replicaCount", "Infinity"),
        [f"{POOL0}.replica_count"],
    ),
    ("int64 NaN", _set("jobSpec.workerPoolSpecs[0].replicaCount", "NaN"), [f"{POOL0}.replica_count"]),
    ("int64 sNaN", _set("jobSpec.workerPoolSpecs[0].replicaCount", "sNaN"), [f"{POOL0}.replica_count"]),
    (
        "int64 1e999999999",
        _set("jobSpec.workerPoolSpecs[0].replicaCount", "1e999999999"),
        [f"{POOL0}.replica_count"],
    ),
    ("int64 hex", _set("jobSpec.workerPoolSpecs[0].replicaCount", "0x1"), [f"{POOL0}.replica_count"]),
    ("timestamp not RFC 3339", _set("createTime", "yesterday"), ["create_time"]),
    ("lone surrogate in a string", _set("displayName", "bad \ud800 name"), ["display_name"]),
    ("lone surrogate in a label key", _set("labels", {"\udcff": "x"}), ['labels["\\udcff"]']),
]


@pytest.mark.parametrize(("mutate", "fields"), [pytest.param(m, f, id=i) for i, m, f in REJECTED])
def test_rejected(
    http: httpx.Client, server: ServerProcess, mutate: Callable[[Body], None], fields: list[str]
) -> None:
    body = valid()
    mutate(body)
    response = post_raw(http, server, json.dumps(body).encode())
    found = assert_invalid(response, *fields)
    assert found[0]["field"] in response.json()["error"]["message"]


def test_unknown_machine_type_suggests_a_close_one(http: httpx.Client, server: ServerProcess) -> None:
    body = valid()
    pool(body)["machineSpec"]["machineType"] = "n1-standrd-4"
    (violation,) = assert_invalid(post(http, server, body), f"{POOL0}.machine_spec.machine_type")
    assert "n1-standrd-4" in violation["description"]
    assert "did you mean" in violation["description"] and "n1-standard-4" in violation["description"]


def test_accelerator_messages_name_the_allowed_values(http: httpx.Client, server: ServerProcess) -> None:
    body = valid()
    pool(body)["machineSpec"] = {
        "machineType": "n1-standard-4",
        "acceleratorType": "NVIDIA_TESLA_T4",
        "acceleratorCount": 3,
    }
    (violation,) = assert_invalid(post(http, server, body), f"{POOL0}.machine_spec.accelerator_count")
    assert "1, 2, 4" in violation["description"]
    pool(body)["machineSpec"] = {"machineType": "g2-standard-4"}
    (violation,) = assert_invalid(post(http, server, body), f"{POOL0}.machine_spec.accelerator_type")
    assert "NVIDIA_L4" in violation["description"]


def test_unknown_fields_are_named(http: httpx.Client, server: ServerProcess) -> None:
    body = valid()
    body["colour"] = "red"
    pool(body)["containerSpec"]["imageURL"] = "x"
    response = post(http, server, body)
    found = {
        v["field"]: v["description"]
        for v in assert_invalid(response, f"{POOL0}.container_spec.imageURL", "colour")
    }
    assert '"colour"' in found["colour"] and '"imageURL"' in found[f"{POOL0}.container_spec.imageURL"]
    assert "imageURL" in response.json()["error"]["message"]


def test_unknown_enum_lists_the_names(http: httpx.Client, server: ServerProcess) -> None:
    body = valid()
    pool(body)["machineSpec"]["acceleratorType"] = "NVIDIA_TESLA_T5"
    (violation,) = assert_invalid(post(http, server, body), f"{POOL0}.machine_spec.accelerator_type")
    assert "NVIDIA_TESLA_T5" in violation["description"] and "NVIDIA_TESLA_T4" in violation["description"]


def test_package_uri_escaping_its_bucket_says_so(http: httpx.Client, server: ServerProcess) -> None:
    body = valid()
    body["jobSpec"]["workerPoolSpecs"] = [package_pool()]
    pool(body)["pythonPackageSpec"]["packageUris"] = ["gs://test-bucket/../other-bucket/x.tar.gz"]
    (violation,) = assert_invalid(post(http, server, body), f"{POOL0}.python_package_spec.package_uris[0]")
    assert "escapes its bucket" in violation["description"]


def test_every_violation_is_reported(http: httpx.Client, server: ServerProcess) -> None:
    body = valid()
    body["displayName"] = ""
    body["labels"] = {"Team": "ml"}
    body["jobSpec"]["workerPoolSpecs"].append(
        {"replicaCount": "2", "containerSpec": {"env": [{"name": "1X", "value": "v"}]}}
    )
    pool(body)["replicaCount"] = "3"
    body["jobSpec"]["scheduling"] = {"timeout": "0s", "maxWaitDuration": "5s"}
    response = post(http, server, body)
    assert_invalid(
        response,
        "display_name",
        f"{POOL0}.replica_count",
        "job_spec.worker_pool_specs[1].machine_spec.machine_type",
        "job_spec.worker_pool_specs[1].container_spec.image_uri",
        "job_spec.worker_pool_specs[1].container_spec.env[0].name",
        "job_spec.scheduling.timeout",
        "job_spec.scheduling.max_wait_duration",
        'labels["Team"]',
    )
    assert "(and 7 more problems)" in response.json()["error"]["message"]


def test_every_parse_error_is_reported(http: httpx.Client, server: ServerProcess) -> None:
    body = valid()
    body["displayName"] = 7
    body["colour"] = "red"
    pool(body)["replicaCount"] = "one"
    body["jobSpec"]["scheduling"] = {"timeout": "1h", "strategy": "FAST"}
    response = post(http, server, body)
    assert response.status_code == 400, response.text
    fields = [v["field"] for v in violations(google_error(response))]
    assert sorted(fields) == sorted(
        [
            "display_name",
            "colour",
            f"{POOL0}.replica_count",
            "job_spec.scheduling.timeout",
            "job_spec.scheduling.strategy",
        ]
    )


def test_invalid_json_bodies(http: httpx.Client, server: ServerProcess) -> None:
    for content in (b"{not json", b'{"displayName": "x",}', b"\xc3\x28", b"[" * 100_000 + b"]" * 100_000):
        response = post_raw(http, server, content)
        assert response.status_code == 400, (content[:20], response.text)
        error = google_error(response)
        assert error["status"] == "INVALID_ARGUMENT"
        assert error["message"].startswith("Invalid JSON payload received.")
    response = post_raw(http, server, b"")
    assert response.status_code == 400, response.text
    assert google_error(response)["status"] == "INVALID_ARGUMENT"
    assert "empty" in response.json()["error"]["message"]


@pytest.mark.parametrize("content", [b"[]", b'[{"displayName": "x"}]', b"null", b'"job"', b"42", b"true"])
def test_non_object_bodies(http: httpx.Client, server: ServerProcess, content: bytes) -> None:
    (violation,) = assert_invalid(post_raw(http, server, content), "body")
    assert "object" in violation["description"]


@pytest.mark.parametrize("stamp", ["0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00"])
def test_timestamps_outside_the_utc_range_are_rejected(
    http: httpx.Client, server: ServerProcess, stamp: str
) -> None:
    """Once a 500 (OverflowError converting to UTC). The field is named once the timestamp parser raises
    ValueError; until then the parse guard reports it on the body."""
    body = valid()
    body["createTime"] = stamp
    response = post(http, server, body)
    assert response.status_code == 400, response.text
    assert google_error(response)["status"] == "INVALID_ARGUMENT"
    assert [v["field"] for v in violations(google_error(response))] in (["create_time"], ["body"])


def test_deeply_nested_values_are_rejected_not_crashed(http: httpx.Client, server: ServerProcess) -> None:
    deep_list = b"[" * 900 + b"]" * 900
    assert_invalid(post_raw(http, server, b'{"displayName": ' + deep_list + b"}"), "display_name")
    deep_map = b'{"a": ' * 900 + b"1" + b"}" * 900
    assert_invalid(post_raw(http, server, b'{"labels": ' + deep_map + b"}"), 'labels["a"]')


# --------------------------------------------------------------------------------------- accepted


ACCEPTED: list[tuple[str, Callable[[Body], None]]] = [
    ("displayName of 128 unicode chars", _set("displayName", "é" * 128)),
    (
        "accelerator as an int enum",
        _set(M0, {"machineType": "n1-standard-4", "acceleratorType": 5, "acceleratorCount": 1}),
    ),
    (
        "g2 with its L4",
        _set(M0, {"machineType": "g2-standard-4", "acceleratorType": "NVIDIA_L4", "acceleratorCount": 1}),
    ),
    (
        "international lowercase labels",
        _set("labels", {"é": "日本", "日本": "é", "ключ": "значение", "a_b-1": ""}),
    ),
    ("64 labels", _set("labels", {f"k{i}": "v" for i in range(64)})),
    ("64-char label key and value", _set("labels", {"k" * 64: "v" * 64})),
    ("args of exactly 100,000 chars", _set(f"{C0}.args", ["a" * 50_000, "b" * 50_000])),
    ("100 env vars", _set(f"{C0}.env", [{"name": f"V_{i}", "value": "x"} for i in range(100)])),
    (
        "maxWaitDuration with FLEX_START",
        _set("jobSpec.scheduling", {"strategy": "FLEX_START", "maxWaitDuration": "0s"}),
    ),
    ("fractional timeout", _set("jobSpec.scheduling.timeout", "0.5s")),
    ("int64 as a number", _set("jobSpec.workerPoolSpecs[0].replicaCount", 1)),
    ("int64 as a whole float", _set("jobSpec.workerPoolSpecs[0].replicaCount", 1.0)),
    ("nulls are unset", _set("jobSpec.network", None)),
    ("package task", _package()),
    (
        "gs:// base output directory",
        _set("jobSpec.baseOutputDirectory", {"outputUriPrefix": "gs://test-bucket/out"}),
    ),
]


@pytest.mark.parametrize("mutate", [pytest.param(m, id=i) for i, m in ACCEPTED])
def test_accepted(http: httpx.Client, server: ServerProcess, mutate: Callable[[Body], None]) -> None:
    body = valid()
    mutate(body)
    created = assert_created(post(http, server, body))
    if "labels" in body:
        assert created["labels"] == body["labels"]
    if "acceleratorType" in pool(body).get("machineSpec", {}):
        assert isinstance(pool(created)["machineSpec"]["acceleratorType"], str)
    assert created["displayName"] == body["displayName"]


RECORD_CLUSTER_SPEC = """
import json, os, pathlib, sys, time
out = pathlib.Path(sys.argv[1])
spec = json.loads(os.environ["CLUSTER_SPEC"])
task = spec["task"]
(out / f"{task['type']}-{task['index']}.json").write_text(json.dumps(spec))
if task["type"] == "workerpool0":
    # The primary ends the job: wait until both parameter servers have recorded their view.
    deadline = time.monotonic() + 60
    while len(list(out.glob("workerpool2-*.json"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
else:
    time.sleep(120)
"""


def test_skipped_pool_runs_only_the_other_pools(
    http: httpx.Client, server: ServerProcess, tmp_path: Path
) -> None:
    """`{}` at index 1 skips the workers: the job runs workerpool0 and workerpool2 only."""
    primary = python_pool(RECORD_CLUSTER_SPEC, args=[str(tmp_path)])
    servers = python_pool(RECORD_CLUSTER_SPEC, replicas=2, args=[str(tmp_path)])
    created = assert_created(post(http, server, job(primary, {}, servers, name="skip-pool-1")))
    assert created["jobSpec"]["workerPoolSpecs"][1] == {}
    done = wait_job(http, created["name"])
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    seen = {p.stem: json.loads(p.read_text()) for p in tmp_path.glob("*.json")}
    assert sorted(seen) == ["workerpool0-0", "workerpool2-0", "workerpool2-1"]
    for spec in seen.values():
        assert sorted(spec["cluster"]) == ["workerpool0", "workerpool2"]
        assert len(spec["cluster"]["workerpool2"]) == 2


def test_replica_count_zero_without_anything_else_is_an_empty_pool(
    http: httpx.Client, server: ServerProcess
) -> None:
    """Proto3 scalars have no presence: `{"replicaCount": "0"}` is the same message as `{}`."""
    body = valid()
    body["jobSpec"]["workerPoolSpecs"].append({"replicaCount": "0"})
    body["jobSpec"]["workerPoolSpecs"].append(copy.deepcopy(pool(body)))
    created = assert_created(post(http, server, body))
    assert created["jobSpec"]["workerPoolSpecs"][1] == {}


# ------------------------------------------------------------------------------------------- fuzz

FUZZ_SEED = 20240611
FUZZ_BODIES = 300
FUZZ_KEYS = ["extra", "replica_count", "display_name", "workerPoolSpecs", "state", "env", "@type", "", "日本"]


def _fuzz_base() -> Body:
    """A valid body touching most fields; its tasks exit at once, so accepted mutations stay cheap."""
    quick = [sys.executable, "-c", "pass"]
    return {
        "displayName": "fuzz",
        "labels": {"team": "ml", "env": "dev"},
        "encryptionSpec": {"kmsKeyName": "projects/p/locations/l/keyRings/r/cryptoKeys/k"},
        "state": "JOB_STATE_RUNNING",
        "createTime": "2020-01-01T00:00:00Z",
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {
                        "machineType": "n1-standard-4",
                        "acceleratorType": "NVIDIA_TESLA_T4",
                        "acceleratorCount": 1,
                    },
                    "replicaCount": "1",
                    "containerSpec": {
                        "imageUri": "python:3.11",
                        "command": quick,
                        "args": ["--a"],
                        "env": [{"name": "A", "value": "b"}],
                    },
                    "diskSpec": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 100},
                    "nfsMounts": [{"server": "10.0.0.1", "path": "/data", "mountPoint": "data"}],
                },
                {},
                {
                    # FLEX_START: the same machine configuration as the primary pool.
                    "machineSpec": {
                        "machineType": "n1-standard-4",
                        "acceleratorType": "NVIDIA_TESLA_T4",
                        "acceleratorCount": 1,
                    },
                    "replicaCount": "1",
                    "pythonPackageSpec": {
                        "executorImageUri": "python:3.11",
                        "packageUris": ["gs://fuzz-bucket/missing.tar.gz"],
                        "pythonModule": "trainer.task",
                        "args": ["--b"],
                    },
                },
            ],
            "scheduling": {"timeout": "60s", "strategy": "FLEX_START", "maxWaitDuration": "10s"},
            "baseOutputDirectory": {"outputUriPrefix": "gs://fuzz-bucket/out"},
            "serviceAccount": "sa@p.iam.gserviceaccount.com",
            "enableWebAccess": False,
            "reservedIpRanges": ["r"],
        },
    }


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(15)
    if kind == 0:
        return None
    if kind == 1:
        return rng.choice([True, False])
    if kind == 2:
        return rng.choice([0, 1, 2, -1, 5, 17, 2**31, 2**63, -(2**63) - 1, 10**30])
    if kind == 3:
        return rng.choice([0.5, -0.0, 1e308, -1e308, 1e-300, 3.0])
    if kind == 4:
        return rng.choice(["", "x" * 1000, "y" * 150_000])
    if kind == 5:
        return rng.choice(
            [
                "日本",
                "é",
                "💥" * 50,
                "\u0000",
                "\ud800",
                "gs://b/../x",
                "NVIDIA_TESLA_T4",
                "JOB_STATE_FAILED",
                "3600s",
                "-1s",
                "Infinity",
                "NaN",
                "1e999999999",
                "0x10",
                "1.5",
                " 7 ",
                "9" * 5000,
                "2020-13-01T00:00:00Z",
                "0001-01-01T00:00:00+01:00",
                "$(A)",
                "a" * 64,
            ]
        )
    if kind == 6:
        return [] if depth > 2 else [_random_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if kind == 7:
        return (
            {}
            if depth > 2
            else {rng.choice(FUZZ_KEYS): _random_value(rng, depth + 1) for _ in range(rng.randrange(3))}
        )
    if kind == 8:
        nested: Any = rng.choice([1, "x", None])
        for _ in range(rng.choice([50, 300, 900])):
            nested = [nested]
        return nested
    if kind == 9:
        nested = {}
        for _ in range(rng.choice([50, 300, 900])):
            nested = {"a": nested}
        return nested
    if kind == 10:
        return [{"name": f"V{i}", "value": "x"} for i in range(rng.choice([1, 101]))]
    if kind == 11:
        return {"machineType": rng.choice(["n1-standard-4", "g2-standard-4", "a2-highgpu-1g", "zz"])}
    if kind == 12:
        return rng.choice([{}, {"replicaCount": "0"}, {"containerSpec": {}}])
    if kind == 13:
        return rng.choice(["1", "0", "-5", "3", "1001"])
    return rng.choice([5, 6, 99, -3])


def _paths(value: Any, max_depth: int = 10) -> list[tuple[Any, ...]]:
    """Every path into `value` down to `max_depth` (without recursion: values may be nested deeply)."""
    out: list[tuple[Any, ...]] = []
    stack: list[tuple[Any, tuple[Any, ...]]] = [(value, ())]
    while stack:
        item, prefix = stack.pop()
        if prefix:
            out.append(prefix)
        if len(prefix) >= max_depth:
            continue
        if isinstance(item, dict):
            stack.extend((v, (*prefix, k)) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((v, (*prefix, i)) for i, v in enumerate(item))
    return out


def _mutate(rng: random.Random, base: Body) -> Body:
    body = copy.deepcopy(base)
    for _ in range(rng.randint(1, 3)):
        paths = _paths(body)
        path = rng.choice(paths)
        parent: Any = body
        for part in path[:-1]:
            parent = parent[part]
        action = rng.randrange(4)
        if action == 0 and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == 1 and isinstance(parent, dict):
            parent[rng.choice(FUZZ_KEYS)] = _random_value(rng)
        else:
            parent[path[-1]] = _random_value(rng)
    return body


def test_fuzzed_bodies_never_get_a_server_error(http: httpx.Client, server: ServerProcess) -> None:
    rng = random.Random(FUZZ_SEED)
    base = _fuzz_base()
    assert_created(post(http, server, base))  # the base itself is valid
    statuses: dict[int, int] = {}
    accepted: list[str] = []
    for i in range(FUZZ_BODIES):
        body = _mutate(rng, base)
        content = json.dumps(body, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
        response = post_raw(http, server, content)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code == 200 or 400 <= response.status_code < 500, (
            i,
            response.text[:500],
            content[:500],
        )
        if response.status_code == 200:
            created = response.json()
            assert created["state"] == "JOB_STATE_QUEUED"
            accepted.append(created["name"])
        else:
            error = google_error(response)
            assert error["status"] == "INVALID_ARGUMENT", error
    # Both outcomes are exercised, and the server is still healthy afterwards.
    assert statuses.get(200, 0) > 10 and statuses.get(400, 0) > FUZZ_BODIES // 2, statuses
    assert http.get("/healthz").status_code == 200
    for name in accepted:
        http.post(f"/v1/{name}:cancel", json={})
    for name in accepted:
        wait_job(http, name)
    # Neither the API nor the controllers running the accepted jobs hit an unexpected exception.
    assert "Traceback" not in server.log_path.read_text(errors="replace")


def test_fuzzed_raw_bytes_never_get_a_server_error(http: httpx.Client, server: ServerProcess) -> None:
    rng = random.Random(FUZZ_SEED + 1)
    text = json.dumps(valid()).encode()
    for _ in range(100):
        data = bytearray(text)
        for _ in range(rng.randint(1, 8)):
            at = rng.randrange(len(data))
            action = rng.randrange(3)
            if action == 0:
                data[at] = rng.randrange(256)
            elif action == 1:
                del data[at]
            else:
                data[at:at] = rng.choice([b"{", b"}", b"[", b'"', b",", b"\\u", b"\xc3", b"null", b"1e999"])
        response = post_raw(http, server, bytes(data))
        assert response.status_code == 200 or 400 <= response.status_code < 500, (
            response.text[:300],
            bytes(data),
        )
        if response.status_code != 200:
            google_error(response)
    wait_for(lambda: http.get("/healthz").status_code == 200, what="the server to stay healthy")
