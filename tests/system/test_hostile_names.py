"""Hostile names everywhere a user names something that may become a file or a path, against a real server.

Names with `..`, `/`, NUL, line breaks, very long strings, unicode and shell metacharacters go into display
names and labels, resource ids in paths and in create parameters, model artifact URIs, dataset source URIs,
pipeline output directories, package URIs, cluster ids and the storage API's bucket and object names. Each
must be answered 2xx (a name that is only data) or 400/404, never 5xx; afterwards nothing named after them
may exist outside the server's buckets, and no job's files may be named after its display name.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import httpx
import pytest

from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, wait_job

MARK = "hostile7q"
HOSTILE = [
    f"../../escape-{MARK}",
    f"a/b/../../../../escape-{MARK}",
    f"/tmp/escape-{MARK}",
    f"nul\x00escape-{MARK}",
    f"line\nbreak-{MARK}",
    f"{MARK}-" + "x" * 5000,
    f"ünïcødé-☃-{MARK}-\u202e",
    f"$(touch /tmp/pwned-{MARK});`id`|&>escape-{MARK}",
    "..",
    ".",
]
# The same inside gs:// URIs: each would leave its bucket or name none.
HOSTILE_URIS = [
    "gs://b/../../etc",
    f"gs://hostile-bucket/../../escape-{MARK}",
    f"gs://hostile-bucket/a/%2e%2e/../../escape-{MARK}",
    f"gs://hostile-bucket/nul\x00-{MARK}",
    f"gs://../escape-{MARK}",
    "gs://hostile-bucket/..",
    "/etc/passwd",
    "file:///etc/passwd",
    f"gs://hostile-bucket/{MARK}" + "y" * 5000,
]
# Ids the routes only ever accept as plain tokens (a trailing line break included: '$' alone accepts it).
HOSTILE_IDS = [*HOSTILE, "abc\n", "123\n", "%2e%2e", f"{MARK}%2F..%2F..", " 123"]


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("hostile") / "home").start()
    try:
        with proc.client() as http:
            assert http.post("/storage/v1/b", json={"name": "hostile-bucket"}).status_code == 200
        yield proc
    finally:
        proc.stop()
    escaped = [
        str(p)
        for root in (proc.home.parent, Path("/tmp"), Path.cwd())
        for p in _shallow(root)
        if MARK in p.name and proc.home / "buckets" not in p.parents
    ]
    assert not escaped, f"files named after hostile input outside the buckets: {escaped}"


def _shallow(root: Path, depth: int = 3) -> Iterator[Path]:
    """Paths under root down to depth, not following links; unreadable folders are skipped."""
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        yield Path(entry.path)
        if depth > 1 and entry.is_dir(follow_symlinks=False):
            yield from _shallow(Path(entry.path), depth - 1)


def refused(response: httpx.Response, *allowed: int) -> None:
    """A 4xx in google.rpc (or Cloud Storage) form: 400 or 404 unless others are allowed."""
    assert response.status_code in (allowed or (400, 404)), _sent(response)
    assert "error" in response.json()


def not_5xx(response: httpx.Response) -> None:
    assert response.status_code < 500, _sent(response)


def _sent(response: httpx.Response) -> str:
    request = response.request
    body = (
        request.content
        if len(request.content) < 600
        else request.content[:300] + b"..." + request.content[-300:]
    )
    return f"{request.method} {request.url!s:.300} {body!r} -> {response.text[:300]}"


def segment(name: str) -> str:
    return quote(name, safe="")


def test_display_names_and_labels_are_data_not_paths(hostile: ServerProcess) -> None:
    with hostile.client() as http:
        created: list[str] = []
        for name in HOSTILE:
            response = http.post(f"/v1/{hostile.parent}/customJobs", json=job(python_pool("0"), name=name))
            not_5xx(response)
            if response.status_code == 200:
                created.append(response.json()["name"])
            for labels in ({name: "v"}, {"k": name}):
                response = http.post(
                    f"/v1/{hostile.parent}/customJobs", json={**job(python_pool("0")), "labels": labels}
                )
                refused(response, 400)
        assert created, "no display name was accepted at all"
        for name in created:
            wait_job(http, name)
    jobs = hostile.home / "jobs"
    named = [str(p) for p in jobs.rglob("*") if MARK in p.name or "escape" in p.name]
    assert not named, named


@pytest.mark.parametrize(
    "collection",
    [
        "customJobs",
        "hyperparameterTuningJobs",
        "trainingPipelines",
        "datasets",
        "models",
        "persistentResources",
        "operations",
    ],
)
def test_resource_ids_in_paths(hostile: ServerProcess, collection: str) -> None:
    with hostile.client() as http:
        for raw in HOSTILE_IDS:
            if raw in ("..", "."):
                continue  # HTTP clients fold these path segments before sending them
            url = f"/v1/{hostile.parent}/{collection}/{segment(raw)}"
            refused(http.get(url))
            not_5xx(http.delete(url))
        refused(http.get(f"/v1/{hostile.parent}/customJobs/{segment('1/../../2')}/logs"))


def test_resource_ids_in_create_parameters(hostile: ServerProcess) -> None:
    with hostile.client() as http:
        for raw in HOSTILE_IDS:
            response = http.post(
                f"/v1/{hostile.parent}/persistentResources",
                params={"persistentResourceId": raw},
                json={
                    "resourcePools": [{"machineSpec": {"machineType": "n1-standard-4"}, "replicaCount": 1}]
                },
            )
            refused(response, 400)
            response = http.post(
                f"/v1beta1/{hostile.parent}/modelDevelopmentClusters",
                params={"modelDevelopmentClusterId": raw},
                json={"displayName": "c"},
            )
            refused(response, 400)
            model = {"displayName": "m", "artifactUri": "gs://hostile-bucket/model/"}
            response = http.post(f"/v1/{hostile.parent}/models:upload", json={"model": model, "modelId": raw})
            refused(response, 400)


def test_model_artifact_uris(hostile: ServerProcess) -> None:
    with hostile.client() as http:
        for uri in HOSTILE_URIS:
            model = {"displayName": "m", "artifactUri": uri, "containerSpec": {"imageUri": "python:3.11"}}
            refused(http.post(f"/v1/{hostile.parent}/models:upload", json={"model": model}), 400)
    registry = [p for p in hostile.home.rglob("passwd")]
    assert not registry, registry


def test_dataset_source_uris(hostile: ServerProcess) -> None:
    schema = "gs://google-cloud-aiplatform/schema/dataset/metadata/tabular_1.0.0.yaml"
    with hostile.client() as http:
        for uri in HOSTILE_URIS:
            body = {
                "displayName": "d",
                "metadataSchemaUri": schema,
                "metadata": {"inputConfig": {"gcsSource": {"uri": [uri]}}},
            }
            response = http.post(f"/v1/{hostile.parent}/datasets", json=body)
            not_5xx(response)
            if response.status_code == 200 and "error" in response.json():
                continue  # an operation that failed: checked by the filesystem scan
            assert response.status_code == 400, (uri, response.text[:300])
    assert not list(hostile.home.rglob("passwd"))


def test_pipeline_output_dirs_and_package_uris(hostile: ServerProcess) -> None:
    task = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
    with hostile.client() as http:
        for uri in HOSTILE_URIS:
            inputs = {
                "workerPoolSpecs": [python_pool("pass")],
                "baseOutputDirectory": {"outputUriPrefix": uri},
            }
            body = {"displayName": "p", "trainingTaskDefinition": task, "trainingTaskInputs": inputs}
            refused(http.post(f"/v1/{hostile.parent}/trainingPipelines", json=body), 400)
            base = job(python_pool("pass"), baseOutputDirectory={"outputUriPrefix": uri})
            refused(http.post(f"/v1/{hostile.parent}/customJobs", json=base), 400)
            pool = {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "1",
                "pythonPackageSpec": {
                    "executorImageUri": "python:3.11",
                    "packageUris": [uri],
                    "pythonModule": "trainer.task",
                },
            }
            refused(http.post(f"/v1/{hostile.parent}/customJobs", json=job(pool)), 400)


def test_storage_bucket_and_object_names(hostile: ServerProcess) -> None:
    with hostile.client() as http:
        for name in HOSTILE:
            refused(http.post("/storage/v1/b", json={"name": name}), 400)
            if name not in ("..", "."):
                refused(http.get(f"/storage/v1/b/{segment(name)}/o"))
            upload = http.post(
                "/upload/storage/v1/b/hostile-bucket/o",
                params={"uploadType": "media", "name": name},
                content=b"data",
            )
            not_5xx(upload)
            if upload.status_code == 200:  # Cloud Storage allows '..' inside names: stored as data
                assert upload.json()["name"] == name
                got = http.get(f"/storage/v1/b/hostile-bucket/o/{segment(name)}", params={"alt": "media"})
                assert got.status_code == 200 and got.content == b"data"
            else:
                refused(upload, 400)
            source = f"/storage/v1/b/hostile-bucket/o/{segment('src')}"
            http.post(
                "/upload/storage/v1/b/hostile-bucket/o",
                params={"uploadType": "media", "name": "src"},
                content=b"s",
            )
            not_5xx(http.post(f"{source}/rewriteTo/b/hostile-bucket/o/{segment(name)}"))
            not_5xx(http.post(f"{source}/moveTo/o/{segment(name)}"))
        buckets = hostile.home / "buckets"
        for path in buckets.rglob("*"):
            assert buckets in path.resolve().parents


def test_cli_local_package_path_is_resolved_client_side(hostile: ServerProcess, tmp_path: Path) -> None:
    """The server never reads a client's local path: a packageUri that is a path is refused."""
    with hostile.client() as http:
        for uri in (str(tmp_path), "/etc", f"../../escape-{MARK}", f"{sys.executable}"):
            pool = {
                "machineSpec": {"machineType": "n1-standard-4"},
                "replicaCount": "1",
                "pythonPackageSpec": {
                    "executorImageUri": "python:3.11",
                    "packageUris": [uri],
                    "pythonModule": "trainer.task",
                },
            }
            refused(http.post(f"/v1/{hostile.parent}/customJobs", json=job(pool)), 400)
