"""gcloud itself (the Google Cloud CLI) against a real server, set up by the README's recipe in a private
configuration folder: `ai custom-jobs create/list/describe/cancel`, `ai operations describe` of a persistent
resource's operation (at the location, by its ID), `ai models copy` into another region, and `storage cp` up
(a small file, which gcloud sends as one multipart body, and one over 8 MiB, which it sends as a resumable
upload) and down, and `storage mv`."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.gcloud import Gcloud, gcloud_for, needs_gcloud
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_for, wait_job

pytestmark = needs_gcloud

PARENT = f"/v1/projects/{PROJECT}/locations/{LOCATION}"
BUCKET = "gcloud-bucket"


@pytest.fixture(scope="module")
def gcloud(server: ServerProcess, tmp_path_factory: pytest.TempPathFactory) -> Gcloud:
    return gcloud_for(server, tmp_path_factory.mktemp("gcloud-config"))


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def test_the_recipe_points_gcloud_at_the_server(gcloud: Gcloud, server: ServerProcess) -> None:
    assert gcloud.ok("config", "get", "api_endpoint_overrides/aiplatform").strip() == f"{server.url}/"
    assert gcloud.ok("config", "get", "api_endpoint_overrides/storage").strip() == f"{server.url}/storage/v1/"
    assert gcloud.ok("config", "get", "core/project").strip() == PROJECT
    assert gcloud.ok("config", "configurations", "list", "--format=value(name,is_active)").count("True") == 1
    assert (gcloud.config / "configurations" / "config_trainworks").is_file()


def test_custom_jobs_create_list_describe_cancel(
    gcloud: Gcloud, http: httpx.Client, server: ServerProcess, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"  # the job runs until cancelled (or, should the test fail, until the gate opens)
    code = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.1)"
    config = tmp_path / "job.yaml"
    config.write_text(
        json.dumps(  # YAML is a superset of JSON
            {
                "workerPoolSpecs": [
                    {
                        "machineSpec": {"machineType": "n1-standard-4"},
                        "replicaCount": 1,
                        "containerSpec": {"imageUri": "python:3.11", "command": [sys.executable, "-c", code]},
                    }
                ]
            }
        )
    )
    try:
        create = ["ai", "custom-jobs", "create", f"--region={LOCATION}", "--display-name=gcloud-job"]
        created = gcloud(*create, f"--config={config}")
        assert created.returncode == 0, created.stderr
        assert "is submitted successfully" in created.stderr
        listed = json.loads(gcloud.ok("ai", "custom-jobs", "list", f"--region={LOCATION}", "--format=json"))
        name = next(job["name"] for job in listed if job["displayName"] == "gcloud-job")
        job_id = name.rsplit("/", 1)[1]
        wait_for(
            lambda: http.get(f"/v1/{name}").json()["state"] == "JOB_STATE_RUNNING", what="the job to run"
        )
        described = json.loads(
            gcloud.ok("ai", "custom-jobs", "describe", job_id, f"--region={LOCATION}", "--format=json")
        )
        assert described["name"] == name and described["state"] == "JOB_STATE_RUNNING"
        cancelled = gcloud("ai", "custom-jobs", "cancel", job_id, f"--region={LOCATION}")
        assert cancelled.returncode == 0, cancelled.stderr
        assert "Request to cancel CustomJob" in cancelled.stderr
        assert wait_job(http, name)["state"] == "JOB_STATE_CANCELLED"
        missing = gcloud("ai", "custom-jobs", "describe", "123", f"--region={LOCATION}")
        assert missing.returncode != 0 and "NOT_FOUND" in missing.stderr
    finally:
        gate.touch()


def test_operations_describe_of_a_persistent_resource_operation(gcloud: Gcloud, http: httpx.Client) -> None:
    body = {"resourcePools": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": "1"}]}
    started = http.post(
        f"{PARENT}/persistentResources", json=body, params={"persistentResourceId": "gcloud-pr"}
    )
    assert started.status_code == 200, started.text
    name = started.json()["name"]
    assert "/persistentResources/gcloud-pr/operations/" in name
    op_id = name.rsplit("/", 1)[1]
    http.post(f"/v1/{name}:wait", json={"timeout": "30s"})
    described = json.loads(
        gcloud.ok("ai", "operations", "describe", op_id, f"--region={LOCATION}", "--format=json")
    )
    assert described["name"] == name and described["done"] is True
    assert described["response"]["state"] == "RUNNING"
    assert described["metadata"]["@type"].endswith("CreatePersistentResourceOperationMetadata")
    missing = gcloud("ai", "operations", "describe", "123", f"--region={LOCATION}")
    assert missing.returncode != 0 and "NOT_FOUND" in missing.stderr


def test_models_copy(gcloud: Gcloud, http: httpx.Client, server: ServerProcess) -> None:
    folder = server.home / "buckets" / BUCKET / "model"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.pkl").write_bytes(b"weights")
    upload = {
        "modelId": "gcloud-src",
        "model": {
            "displayName": "src",
            "artifactUri": f"gs://{BUCKET}/model/",
            "containerSpec": {"imageUri": "x"},
        },
    }
    assert http.post(f"{PARENT}/models:upload", json=upload).status_code == 200
    source = f"projects/{PROJECT}/locations/{LOCATION}/models/gcloud-src"
    gcloud.ok(
        "ai",
        "models",
        "copy",
        "--region=europe-west4",
        f"--source-model={source}",
        "--destination-model-id=gcloud-dst",
    )
    copied = json.loads(
        gcloud.ok("ai", "models", "describe", "gcloud-dst", "--region=europe-west4", "--format=json")
    )
    assert copied["displayName"] == "src" and copied["artifactUri"] == f"gs://{BUCKET}/model/"
    assert copied["modelSourceInfo"] == {"copy": True, "sourceType": "CUSTOM"}
    assert copied["originalModelInfo"]["model"].endswith("/locations/us-central1/models/gcloud-src@1")
    # As a new version of that copy.
    gcloud.ok(
        "ai",
        "models",
        "copy",
        "--region=europe-west4",
        f"--source-model={source}",
        f"--destination-parent-model={copied['name']}",
    )
    versions = json.loads(
        gcloud.ok("ai", "models", "list-version", "gcloud-dst", "--region=europe-west4", "--format=json")
    )
    assert sorted(v["versionId"] for v in versions) == ["1", "2"]


def test_storage_cp_up_and_down_and_mv(
    gcloud: Gcloud, http: httpx.Client, server: ServerProcess, tmp_path: Path
) -> None:
    assert http.post("/storage/v1/b", params={"project": PROJECT}, json={"name": BUCKET}).status_code in (
        200,
        409,
    )
    small = tmp_path / "small.txt"
    small.write_text("hello from gcloud\n")
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(9 * 1024 * 1024 + 17))  # over gcloud's 8 MiB: a resumable upload
    gcloud.ok("storage", "cp", str(small), f"gs://{BUCKET}/up/small.txt")
    gcloud.ok("storage", "cp", str(big), f"gs://{BUCKET}/up/big.bin")
    stored = server.home / "buckets" / BUCKET / "up"
    assert (stored / "small.txt").read_bytes() == small.read_bytes()
    assert (stored / "big.bin").read_bytes() == big.read_bytes()

    down = tmp_path / "down"
    down.mkdir()
    gcloud.ok("storage", "cp", f"gs://{BUCKET}/up/big.bin", f"gs://{BUCKET}/up/small.txt", str(down))
    assert (down / "big.bin").read_bytes() == big.read_bytes()
    assert (down / "small.txt").read_bytes() == small.read_bytes()

    gcloud.ok("storage", "mv", f"gs://{BUCKET}/up/small.txt", f"gs://{BUCKET}/moved/small.txt")
    listed = gcloud.ok("storage", "ls", "--recursive", f"gs://{BUCKET}/**").split()
    assert f"gs://{BUCKET}/moved/small.txt" in listed and f"gs://{BUCKET}/up/small.txt" not in listed
    assert (server.home / "buckets" / BUCKET / "moved" / "small.txt").read_bytes() == small.read_bytes()
