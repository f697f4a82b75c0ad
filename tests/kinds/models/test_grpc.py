"""The model registry over gRPC: the official ModelServiceClient on its gRPC transport (an insecure loopback
channel) against a real server: upload as an LRO (a model, then a version of it), get by @version and
@alias, list with filter, order and paging, list versions, update with a mask, merge aliases, copy into
another location (an LRO), delete a version and the model (LROs), v1beta1 (whose ListModels has no
order_by), NOT_FOUND, ALREADY_EXISTS and INVALID_ARGUMENT with field violations; the same model and the
same error as REST."""

from __future__ import annotations

import uuid
from typing import Any

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import aiplatform_v1, aiplatform_v1beta1
from google.protobuf import empty_pb2, json_format

from tests.kinds.models.test_api import IMAGE, put_files
from tests.support.rpc import assert_as_rest, fields, gapic, grpc_fixtures, judged_paths, not_found
from tests.support.server import LOCATION, PROJECT, ServerProcess
from trainworks.kinds.models import rpc

ELSEWHERE = "europe-west4"


served, server, client = grpc_fixtures("models-grpc", aiplatform_v1.ModelServiceClient)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def upload(
    client: Any, server: ServerProcess, display_name: str, model: dict[str, Any] | None = None, **request: Any
) -> Any:
    """The finished upload's operation: a model of one small file (a new folder each time)."""
    uri = put_files(server, unique("files"), {"model.pkl": b"weights"})
    spec = {"display_name": display_name, "artifact_uri": uri, "container_spec": {"image_uri": IMAGE}}
    operation = client.upload_model(
        request={"parent": server.parent, "model": {**spec, **(model or {})}, **request}
    )
    operation.result(timeout=30)
    return operation


def test_upload_versions_get_update_and_delete(
    client: aiplatform_v1.ModelServiceClient, server: ServerProcess
) -> None:
    model_id = unique("churn")
    first = upload(client, server, "churn", {"labels": {"team": "ml"}}, model_id=model_id)
    assert isinstance(first.metadata, aiplatform_v1.UploadModelOperationMetadata)
    model = first.result().model
    assert (
        model.endswith(f"/locations/{LOCATION}/models/{model_id}") and first.result().model_version_id == "1"
    )
    second = upload(
        client, server, "churn-v2", {"version_aliases": ["candidate"]}, parent_model=model
    ).result()
    assert (second.model, second.model_version_id) == (model, "2")

    v1 = client.get_model(name=f"{model}@1")
    assert (v1.version_id, list(v1.version_aliases), v1.labels["team"]) == ("1", ["default"], "ml")
    assert client.get_model(name=f"{model}@candidate").version_id == "2"
    assert client.get_model(name=model).version_id == "1"
    with server.client() as http:
        assert json_format.MessageToDict(aiplatform_v1.Model.pb(v1)) == http.get(f"/v1/{model}@1").json()
    versions = client.list_model_versions(request={"name": model, "order_by": "create_time desc"})
    assert [m.version_id for m in versions] == ["2", "1"]

    # UpdateModel names the version in model.name, as REST's PATCH path does.
    patched = client.update_model(
        model={"name": f"{model}@2", "version_aliases": ["default", "prod"], "labels": {"stage": "live"}},
        update_mask={"paths": ["version_aliases", "labels"]},
    )
    assert list(patched.version_aliases) == ["default", "prod"] and dict(patched.labels) == {"stage": "live"}
    assert client.get_model(name=model).version_id == "2"
    merged = client.merge_version_aliases(name=f"{model}@1", version_aliases=["prod"])
    assert list(merged.version_aliases) == ["prod"]
    assert list(client.get_model(name=f"{model}@2").version_aliases) == ["default"]

    with pytest.raises(exceptions.FailedPrecondition) as refused:
        client.delete_model_version(name=f"{model}@2")
    assert "default" in refused.value.message
    deletion = client.delete_model_version(name=f"{model}@1")
    assert isinstance(deletion.result(timeout=30), empty_pb2.Empty)
    assert [m.version_id for m in client.list_model_versions(name=model)] == ["2"]

    deletion = client.delete_model(name=model)
    assert isinstance(deletion.result(timeout=30), empty_pb2.Empty)
    assert isinstance(deletion.metadata, aiplatform_v1.DeleteOperationMetadata)
    with pytest.raises(exceptions.NotFound):
        client.get_model(name=model)


def test_list_filters_orders_and_pages(
    client: aiplatform_v1.ModelServiceClient, server: ServerProcess
) -> None:
    suite = unique("suite")
    made = [
        upload(client, server, name, {"labels": {"suite": suite}}).result().model
        for name in ("zeta", "alpha", "mid")
    ]
    request = {
        "parent": server.parent,
        "filter": f"labels.suite={suite}",
        "order_by": "display_name",
        "page_size": 2,
    }
    pages = list(client.list_models(request=request).pages)
    assert [[m.display_name for m in p.models] for p in pages] == [["alpha", "mid"], ["zeta"]]
    newest = client.list_models(request={**request, "order_by": "create_time desc", "page_size": 0})
    assert [m.name for m in newest] == made[::-1]

    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.list_models(request={"parent": server.parent, "order_by": "size"})
    assert fields(caught.value) == ["order_by"]
    with server.client() as http:
        rest = http.get(f"/v1/{server.parent}/models", params={"orderBy": "size"}).json()["error"]
    assert_as_rest(caught.value, rest)


def test_copy_into_another_location(client: aiplatform_v1.ModelServiceClient, server: ServerProcess) -> None:
    source = upload(client, server, "source", {"description": "the original"}).result().model
    target = unique("copied")
    operation = client.copy_model(
        request={
            "parent": f"projects/{PROJECT}/locations/{ELSEWHERE}",
            "source_model": source,
            "model_id": target,
        }
    )
    copied = operation.result(timeout=30)
    assert isinstance(copied, aiplatform_v1.CopyModelResponse)
    assert isinstance(operation.metadata, aiplatform_v1.CopyModelOperationMetadata)
    assert copied.model.endswith(f"/locations/{ELSEWHERE}/models/{target}") and copied.model_version_id == "1"
    got = client.get_model(name=copied.model)
    assert (got.display_name, got.description) == ("source", "the original") and got.model_source_info.copy

    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.copy_model(request={"parent": server.parent, "model_id": unique("x")})
    assert fields(caught.value) == ["source_model"]


def test_v1beta1_lists_without_order_by(served: tuple[ServerProcess, grpc.Channel]) -> None:
    server, channel = served
    beta = gapic(aiplatform_v1beta1.ModelServiceClient, channel)
    suite = unique("beta")
    operation = upload(beta, server, "beta", {"labels": {"suite": suite}})
    assert operation.operation.metadata.type_url.endswith("aiplatform.v1beta1.UploadModelOperationMetadata")
    listed = beta.list_models(request={"parent": server.parent, "filter": f"labels.suite={suite}"})
    assert [m.name for m in listed] == [operation.result().model]
    assert isinstance(beta.delete_model(name=operation.result().model).result(timeout=30), empty_pb2.Empty)


def test_errors(client: aiplatform_v1.ModelServiceClient, server: ServerProcess) -> None:
    unknown = f"{server.parent}/models/does-not-exist"
    not_found((client.get_model, client.delete_model, client.list_model_versions), unknown)
    with pytest.raises(exceptions.NotFound):
        upload(client, server, "m", parent_model=unknown)

    with pytest.raises(exceptions.InvalidArgument) as caught:
        upload(client, server, "m", model_id="9starts-with-digit")
    assert fields(caught.value) == ["model_id"]
    with pytest.raises(exceptions.InvalidArgument) as caught:
        upload(client, server, "", {"artifact_uri": "gs://models-bucket/nothing/here/"})
    assert fields(caught.value) == ["model.display_name"]
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.upload_model(parent=server.parent, model=None)
    assert fields(caught.value) == ["model"]

    model_id = unique("twice")
    upload(client, server, "m", model_id=model_id)
    with pytest.raises(exceptions.AlreadyExists):
        upload(client, server, "m", model_id=model_id)
    model = f"{server.parent}/models/{model_id}"
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.update_model(
            model={"name": model, "artifact_uri": "gs://x/y/"}, update_mask={"paths": ["artifact_uri"]}
        )
    assert "immutable" in caught.value.message
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.update_model(model={"display_name": "x"}, update_mask={"paths": ["display_name"]})
    assert fields(caught.value) == ["model.name"]


def test_auth_judges_an_update_by_the_name_in_its_body() -> None:
    """UpdateModel names the model in model.name: auth sees its project, as the REST PATCH path has it."""
    name = "projects/other/locations/l/models/m@2"

    def update(channel: grpc.Channel) -> object:
        client = gapic(aiplatform_v1.ModelServiceClient, channel)
        return client.update_model(model={"name": name}, update_mask={"paths": ["labels"]})

    assert judged_paths(rpc.bindings, update) == [f"/v1/{name}"]
