"""The model registry through the official ModelServiceClient (REST) against a real server process: upload
as an LRO, versions and aliases, get by @version / @alias, list with filter, order and paging, PATCH with
an update mask, the delete operations, errors, and the registry's own copy of the artifacts. Responses are
also checked with the official proto descriptors. Format detection runs on real files saved by
scikit-learn/joblib and torch."""

from __future__ import annotations

import json
import pickle
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import joblib
import pytest
import torch
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1
from google.longrunning import operations_pb2
from google.protobuf import empty_pb2, json_format
from sklearn.linear_model import LogisticRegression

from tests.support.server import LOCATION, ServerProcess
from trainworks.kernel.errors import ApiError
from trainworks.kinds.models.artifacts import ArtifactRegistry, detect_format
from trainworks.storage.gcs import ObjectStore

BUCKET = "models-bucket"
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-3:latest"


def strict(text: str | dict[str, Any], msg_cls: Any) -> Any:
    """Parse with the official descriptors, rejecting unknown fields and bad types (official-client.md §9)."""
    pb = msg_cls.pb()() if hasattr(msg_cls, "pb") else msg_cls()
    json_format.Parse(text if isinstance(text, str) else json.dumps(text), pb, ignore_unknown_fields=False)
    return pb


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> aiplatform_v1.ModelServiceClient:
    return aiplatform_v1.ModelServiceClient(
        transport="rest",
        credentials=AnonymousCredentials(),
        client_options={"api_endpoint": server.url},
    )


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def put_files(server: ServerProcess, prefix: str, files: dict[str, bytes]) -> str:
    """Objects under gs://BUCKET/prefix/ in the server's local bucket root; the directory's URI."""
    root = server.home / "buckets" / BUCKET / prefix
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return f"gs://{BUCKET}/{prefix}/"


def sklearn_model_bytes(tmp_path: Path) -> bytes:
    estimator = LogisticRegression().fit([[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1])
    target = tmp_path / "model.joblib"
    joblib.dump(estimator, target)
    return target.read_bytes()


def upload(
    client: aiplatform_v1.ModelServiceClient, parent: str, uri: str, display_name: str, **request: Any
) -> aiplatform_v1.UploadModelResponse:
    model = {"display_name": display_name, "artifact_uri": uri, "container_spec": {"image_uri": IMAGE}}
    model.update(request.pop("model", {}))
    op = client.upload_model(request={"parent": parent, "model": model, **request})
    return op.result(timeout=30)


def names(models: Any) -> list[str]:
    return [m.name for m in models]


# ====================================================================== the registry flow
def test_upload_versions_aliases_update_and_delete(
    server: ServerProcess, client: aiplatform_v1.ModelServiceClient, http: httpx.Client, tmp_path: Path
) -> None:
    parent = server.parent
    uri = put_files(server, "flow/v1", {"model.joblib": sklearn_model_bytes(tmp_path)})
    first = upload(client, parent, uri, "churn", model={"labels": {"team": "ml"}, "description": "d1"})
    assert first.model_version_id == "1"
    assert first.model.startswith("projects/") and "/models/" in first.model and "@" not in first.model
    model = first.model

    uri2 = put_files(server, "flow/v2", {"model.pkl": pickle.dumps({"weights": [1, 2]})})
    second = upload(
        client,
        parent,
        uri2,
        "churn-v2",
        parent_model=model,
        model={"version_aliases": ["candidate"], "version_description": "retrained"},
    )
    assert (second.model, second.model_version_id) == (model, "2")

    v1, v2 = client.get_model(name=f"{model}@1"), client.get_model(name=f"{model}@2")
    assert (v1.version_id, list(v1.version_aliases), v1.artifact_uri) == ("1", ["default"], uri)
    assert (v2.version_id, list(v2.version_aliases)) == ("2", ["candidate"])
    assert v2.version_description == "retrained" and v2.display_name == "churn-v2"
    assert client.get_model(name=model).version_id == "1"  # no suffix: the default version
    assert client.get_model(name=f"{model}@default").version_id == "1"
    assert client.get_model(name=f"{model}@candidate").version_id == "2"
    assert v1.container_spec.image_uri == IMAGE and v1.labels["team"] == "ml"

    versions = list(client.list_model_versions(name=model))
    assert names(versions) == [f"{model}@1", f"{model}@2"]

    # Move "default" to version 2 with an alias of its own; "candidate" moves along the mask's list.
    patched = client.update_model(
        model={"name": f"{model}@2", "version_aliases": ["default", "prod"], "labels": {"stage": "live"}},
        update_mask={"paths": ["version_aliases", "labels"]},
    )
    assert list(patched.version_aliases) == ["default", "prod"] and dict(patched.labels) == {"stage": "live"}
    assert client.get_model(name=model).version_id == "2"
    assert list(client.get_model(name=f"{model}@1").version_aliases) == []
    with pytest.raises(exceptions.NotFound):
        client.get_model(name=f"{model}@candidate")

    # An alias names one version at a time: merging "prod" into version 1 takes it from version 2.
    merged = client.merge_version_aliases(name=f"{model}@1", version_aliases=["prod", "-missing"])
    assert list(merged.version_aliases) == ["prod"]
    assert list(client.get_model(name=f"{model}@2").version_aliases) == ["default"]

    # The default version cannot go while another version exists.
    with pytest.raises(exceptions.BadRequest) as refused:
        client.delete_model_version(name=f"{model}@2").result(timeout=30)
    assert "default" in str(refused.value)

    registry = server.home / "registry"
    copies_before = sorted(p for p in registry.rglob("model.*") if p.is_file())
    assert len(copies_before) == 2
    assert isinstance(client.delete_model_version(name=f"{model}@1").result(timeout=30), empty_pb2.Empty)
    assert names(client.list_model_versions(name=model)) == [f"{model}@2"]
    assert len([p for p in registry.rglob("model.*") if p.is_file()]) == 1
    uri3 = put_files(server, "flow/v3", {"model.bst": b"xgb"})
    third = upload(client, parent, uri3, "churn-v3", parent_model=model)
    assert third.model_version_id == "3"  # version 1's number is never reused

    op = client.delete_model(name=model)
    assert isinstance(op.result(timeout=30), empty_pb2.Empty)
    raw = http.get(f"/ui/{op.operation.name}")
    assert raw.status_code == 200
    strict(raw.text, operations_pb2.Operation)
    assert raw.json()["metadata"]["@type"].endswith("v1.DeleteOperationMetadata")
    with pytest.raises(exceptions.NotFound):
        client.get_model(name=model)
    assert not [p for p in registry.rglob("model.*") if p.is_file()]


def test_list_models_filter_order_and_paging(
    server: ServerProcess, client: aiplatform_v1.ModelServiceClient, http: httpx.Client
) -> None:
    parent = server.parent
    made = []
    for i, name in enumerate(["zeta-list", "alpha-list", "mid-list"]):
        uri = put_files(server, f"list/{name}", {"saved_model.pb": b"\x08\x01"})
        labels = {"suite": "listing", "rank": str(i)}
        made.append(upload(client, parent, uri, name, model={"labels": labels}).model)
    # A second version must not add a second entry to the list.
    uri = put_files(server, "list/alpha-2", {"saved_model.pb": b"\x08\x02"})
    upload(client, parent, uri, "alpha-list-v2", parent_model=made[1])

    request = {"parent": parent, "filter": "labels.suite=listing", "order_by": "display_name", "page_size": 1}
    listed = list(client.list_models(request=request))
    assert [m.display_name for m in listed] == ["alpha-list", "mid-list", "zeta-list"]
    desc = {**request, "order_by": "create_time desc", "page_size": 2}
    assert names(client.list_models(request=desc)) == list(reversed(made))
    only = {"parent": parent, "filter": 'display_name="mid-list" AND labels.rank:*'}
    assert names(client.list_models(request=only)) == [made[2]]
    model_id = made[0].rsplit("/", 1)[1]
    assert names(client.list_models(request={"parent": parent, "filter": f"model={model_id}"})) == [made[0]]
    by_version = {"name": made[1], "order_by": "create_time desc"}
    assert names(client.list_model_versions(request=by_version)) == [f"{made[1]}@2", f"{made[1]}@1"]

    # Every response parses strictly with the official descriptors.
    page = http.get(f"/v1/{parent}/models", params={"filter": "labels.suite=listing", "pageSize": 2})
    body = page.json()
    strict(page.text, aiplatform_v1.ListModelsResponse)
    assert len(body["models"]) == 2 and body["nextPageToken"]
    strict(http.get(f"/v1/{made[1]}:listVersions").text, aiplatform_v1.ListModelVersionsResponse)
    strict(http.get(f"/v1/{made[1]}@1").text, aiplatform_v1.Model)

    bad = http.get(f"/v1/{parent}/models", params={"orderBy": "size"})
    assert (
        bad.status_code == 400
        and bad.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "order_by"
    )
    state = http.get(f"/v1/{parent}/models", params={"filter": 'state="ACTIVE"'})
    assert state.status_code == 400 and "state" in state.json()["error"]["message"]


def test_upload_operation_wire_and_model_id(
    server: ServerProcess, client: aiplatform_v1.ModelServiceClient, http: httpx.Client
) -> None:
    uri = put_files(server, "wire/v1", {"model.pt": b"torch"})
    body = {
        "model": {"displayName": "wire", "artifactUri": uri, "versionAliases": ["first"]},
        "modelId": "wire-model_1",
    }
    for version in ("v1", "v1beta1"):
        response = http.post(f"/{version}/{server.parent}/models:upload", json=body)
        if version == "v1":
            assert response.status_code == 200, response.text
            op = response.json()
            strict(response.text, operations_pb2.Operation)
            assert op["done"] is True
            assert op["metadata"]["@type"].endswith("v1.UploadModelOperationMetadata")
            assert op["response"]["@type"].endswith("v1.UploadModelResponse")
            assert op["response"]["model"].endswith("/models/wire-model_1")
            assert op["response"]["modelVersionId"] == "1"
            assert op["name"].startswith(op["response"]["model"] + "/operations/")
            polled = http.get(f"/ui/{op['name']}")
            assert polled.json() == op
        else:  # the same model ID again: ALREADY_EXISTS
            assert response.status_code == 409, response.text
    got = client.get_model(name=f"{server.parent}/models/wire-model_1@first")
    assert got.version_id == "1" and got.artifact_uri == uri


def test_upload_and_update_errors(
    server: ServerProcess, client: aiplatform_v1.ModelServiceClient, http: httpx.Client
) -> None:
    parent = server.parent

    def violations(response: httpx.Response) -> list[str]:
        assert response.status_code == 400, response.text
        details = response.json()["error"]["details"]
        return [v["field"] for d in details for v in d.get("fieldViolations", [])]

    def post(model: dict[str, Any], **extra: Any) -> httpx.Response:
        return http.post(f"/v1/{parent}/models:upload", json={"model": model, **extra})

    missing = f"gs://{BUCKET}/nothing/here/"
    assert violations(post({"displayName": "m", "artifactUri": missing})) == ["model.artifact_uri"]
    (server.home / "buckets" / BUCKET / "empty-dir").mkdir(parents=True, exist_ok=True)
    empty = post({"displayName": "m", "artifactUri": f"gs://{BUCKET}/empty-dir/"})
    assert violations(empty) == ["model.artifact_uri"] and "empty" in empty.json()["error"]["message"]
    assert violations(post({"displayName": "m"})) == ["model.artifact_uri"]  # neither URI nor container
    assert violations(post({"displayName": "m", "artifactUri": "/tmp/model"})) == ["model.artifact_uri"]
    assert violations(post({"artifactUri": missing})) == ["model.display_name"]  # checked before any copy
    uri = put_files(server, "errors/v1", {"model.joblib": b"x"})
    assert violations(post({"displayName": "m", "artifactUri": uri}, modelId="9starts-with-digit")) == [
        "model_id"
    ]
    bad_alias = post({"displayName": "m", "artifactUri": uri, "versionAliases": ["Bad_Alias"]})
    assert violations(bad_alias) == ["model.version_aliases[0]"]
    assert violations(post({"displayName": "m", "artifactUri": uri, "colour": "red"})) == ["model.colour"]
    with pytest.raises(exceptions.NotFound):
        client.upload_model(
            request={
                "parent": parent,
                "parent_model": f"{parent}/models/does-not-exist",
                "model": {"display_name": "m", "artifact_uri": uri},
            }
        )

    model = upload(client, parent, uri, "errors").model
    with pytest.raises(exceptions.NotFound):
        client.get_model(name=f"{model}@no-such-alias")
    with pytest.raises(exceptions.NotFound):
        client.get_model(name=f"{model}@7")
    with pytest.raises(exceptions.BadRequest) as immutable:
        client.update_model(
            model={"name": model, "artifact_uri": f"gs://{BUCKET}/other/"},
            update_mask={"paths": ["artifact_uri"]},
        )
    assert "model.artifact_uri" in str(immutable.value.details)
    assert "immutable" in str(immutable.value)
    no_mask = http.patch(f"/v1/{model}", json={"displayName": "x"})
    assert violations(no_mask) == ["update_mask"]
    drop_default = http.patch(f"/v1/{model}", params={"updateMask": "versionAliases"}, json={})
    assert violations(drop_default) == ["model.version_aliases"]
    renamed = http.patch(
        f"/v1/{model}", params={"updateMask": "displayName"}, json={"displayName": "renamed"}
    )
    assert renamed.status_code == 200 and renamed.json()["displayName"] == "renamed"
    strict(renamed.text, aiplatform_v1.Model)


# ====================================================================== the registry copy
def test_registry_copy_survives_bucket_changes(
    server: ServerProcess, client: aiplatform_v1.ModelServiceClient, tmp_path: Path
) -> None:
    original = sklearn_model_bytes(tmp_path)
    uri = put_files(server, "mutable/model", {"model.joblib": original, "assets/vocab.txt": b"a\nb\n"})
    registered = upload(client, server.parent, uri, "survivor")
    model_id = registered.model.rsplit("/", 1)[1]
    source = server.home / "buckets" / BUCKET / "mutable" / "model"
    (source / "model.joblib").write_bytes(b"overwritten")
    (source / "assets" / "vocab.txt").unlink()
    copies = list((server.home / "registry").rglob(f"*/{model_id}/*/model.joblib"))
    assert len(copies) == 1
    assert copies[0].read_bytes() == original
    assert (copies[0].parent / "assets" / "vocab.txt").read_bytes() == b"a\nb\n"
    assert not list((server.home / "registry" / ".staging").iterdir())  # nothing half-copied left behind
    loaded = joblib.load(copies[0])
    assert list(loaded.predict([[0.0], [3.0]])) == [0, 1]
    assert client.get_model(name=registered.model).artifact_uri == uri  # the user's URI is kept


# ====================================================================== format detection
def test_format_detection_on_real_files(tmp_path: Path) -> None:
    buckets = tmp_path / "buckets"
    registry = ArtifactRegistry(ObjectStore(buckets), tmp_path / "registry")

    def register(prefix: str, files: dict[str, bytes]) -> str:
        for name, data in files.items():
            path = buckets / "bucket-one" / prefix / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        result = registry.register(f"gs://bucket-one/{prefix}", "123", LOCATION, "m")
        assert result.files == len(files) and result.path.is_dir()
        return result.format

    tensor_file = tmp_path / "weights.pt"
    torch.save(torch.arange(4), tensor_file)
    assert torch.load(tensor_file).tolist() == [0, 1, 2, 3]
    saved_model = {"saved_model.pb": b"\x08\x01", "variables/variables.index": b"idx"}
    assert register("tf", saved_model) == "tensorflow"
    assert register("skl", {"model.joblib": sklearn_model_bytes(tmp_path)}) == "sklearn-joblib"
    assert register("pkl", {"model.pkl": pickle.dumps(LogisticRegression())}) == "sklearn-pickle"
    assert register("xgb", {"model.bst": b"binary booster"}) == "xgboost"
    assert register("torch", {"model.pt": tensor_file.read_bytes()}) == "pytorch"
    assert register("mar", {"model.mar": b"archive"}) == "pytorch"
    assert register("other", {"weights.onnx": b"onnx"}) == "custom"
    assert detect_format(["nested/dir/model.ubj"]) == "xgboost"

    with pytest.raises(ApiError) as missing:
        registry.register("gs://bucket-one/absent/", "123", LOCATION, "m")
    assert missing.value.violations[0].field == "model.artifact_uri"
    with pytest.raises(ApiError):
        registry.register("gs://bucket-one/skl/model.joblib", "123", LOCATION, "m")  # a file, not a directory
