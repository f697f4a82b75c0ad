"""datasets over gRPC: the official DatasetServiceClient on its gRPC transport (an insecure loopback channel)
against a real server: create as an LRO (tabular CSV, text JSONL), import_data, get (and its read mask), list
with filter, order and paging, update with a mask, delete as an LRO, v1beta1, NOT_FOUND and INVALID_ARGUMENT
with field violations; the same dataset and the same error as REST."""

from __future__ import annotations

import json
import uuid

import grpc
import pytest
from google.api_core import exceptions
from google.cloud import aiplatform_v1, aiplatform_v1beta1
from google.protobuf import empty_pb2, field_mask_pb2, json_format

from tests.kinds.datasets.test_api import TEXT, TEXT_IMPORT, put, tabular
from tests.support.rpc import (
    assert_as_rest,
    fields,
    gapic,
    grpc_fixtures,
    judged_paths,
    status_of,
    violations,
)
from tests.support.server import ServerProcess
from trainworks.kinds.datasets import rpc

served, server, client = grpc_fixtures("datasets-grpc", aiplatform_v1.DatasetServiceClient)


def unique() -> str:
    return uuid.uuid4().hex[:8]


def test_create_get_update_and_delete(
    client: aiplatform_v1.DatasetServiceClient, server: ServerProcess
) -> None:
    tag = unique()
    put(server, f"gs://data-{tag}/iris.csv", "x,y,label\n1,2,a\n3,4,b\n")
    operation = client.create_dataset(
        parent=server.parent,
        dataset=tabular(f"iris-{tag}", [f"gs://data-{tag}/iris.csv"], labels={"team": "ml"}),
    )
    created = operation.result(timeout=30)
    assert isinstance(operation.metadata, aiplatform_v1.CreateDatasetOperationMetadata)
    assert created.display_name == f"iris-{tag}" and created.data_item_count == 2
    assert "/datasets/" in created.name and dict(created.labels) == {"team": "ml"}

    got = client.get_dataset(name=created.name)
    assert got == created
    with server.client() as http:
        assert (
            json_format.MessageToDict(aiplatform_v1.Dataset.pb(got)) == http.get(f"/v1/{created.name}").json()
        )
    masked = client.get_dataset(request={"name": created.name, "read_mask": {"paths": ["display_name"]}})
    assert masked.display_name == created.display_name and not masked.name

    # UpdateDataset names the dataset in dataset.name, as REST's PATCH path does.
    got.display_name, got.description = f"renamed-{tag}", "the first one"
    updated = client.update_dataset(
        dataset=got, update_mask=field_mask_pb2.FieldMask(paths=["display_name", "description"])
    )
    assert (updated.display_name, updated.description) == (f"renamed-{tag}", "the first one")
    assert updated.etag != got.etag and updated.labels["team"] == "ml"
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.update_dataset(
            dataset=updated, update_mask=field_mask_pb2.FieldMask(paths=["metadata_schema_uri"])
        )
    assert fields(caught.value) == ["update_mask"] and "immutable" in caught.value.message
    stale = client.get_dataset(name=created.name)
    stale.etag = got.etag  # from before the update
    with pytest.raises(exceptions.Aborted):
        client.update_dataset(dataset=stale, update_mask=field_mask_pb2.FieldMask(paths=["labels"]))

    deletion = client.delete_dataset(name=created.name)
    assert isinstance(deletion.result(timeout=30), empty_pb2.Empty)
    assert isinstance(deletion.metadata, aiplatform_v1.DeleteOperationMetadata)
    with pytest.raises(exceptions.NotFound):
        client.get_dataset(name=created.name)


def test_import_data(client: aiplatform_v1.DatasetServiceClient, server: ServerProcess) -> None:
    tag = unique()
    lines = [
        {"textContent": "good", "classificationAnnotation": {"displayName": "pos"}},
        {"textContent": "meh"},
    ]
    put(server, f"gs://text-{tag}/items.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    created = client.create_dataset(
        parent=server.parent,
        dataset=aiplatform_v1.Dataset(display_name=f"text-{tag}", metadata_schema_uri=TEXT),
    ).result(timeout=30)
    # ImportData's REST body is the whole request but its name (`body: "*"`).
    operation = client.import_data(
        name=created.name,
        import_configs=[
            aiplatform_v1.ImportDataConfig(
                gcs_source=aiplatform_v1.GcsSource(uris=[f"gs://text-{tag}/items.jsonl"]),
                import_schema_uri=TEXT_IMPORT,
            )
        ],
    )
    assert isinstance(operation.result(timeout=30), aiplatform_v1.ImportDataResponse)
    assert isinstance(operation.metadata, aiplatform_v1.ImportDataOperationMetadata)
    assert client.get_dataset(name=created.name).data_item_count == 2

    put(server, f"gs://text-{tag}/broken.jsonl", '{"textContent": "x"}\nnot json\n')
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.import_data(
            name=created.name, import_configs=[{"gcs_source": {"uris": [f"gs://text-{tag}/broken.jsonl"]}}]
        )
    assert fields(caught.value) == ["import_configs[0].gcs_source.uris[0]"]
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.import_data(name=created.name, import_configs=[])
    assert fields(caught.value) == ["import_configs"]


def test_list_filters_orders_and_pages(
    client: aiplatform_v1.DatasetServiceClient, server: ServerProcess
) -> None:
    tag = unique()
    put(server, f"gs://list-{tag}/d.csv", "a\n1\n")
    names = [
        client.create_dataset(
            parent=server.parent,
            dataset=tabular(
                f"list-{tag}-{i}", [f"gs://list-{tag}/d.csv"], labels={"batch": tag, "n": str(i)}
            ),
        )
        .result(timeout=30)
        .name
        for i in range(3)
    ]
    request = {"parent": server.parent, "page_size": 2, "filter": f"labels.batch={tag}"}
    pages = list(client.list_datasets(request=request).pages)
    assert [[d.name for d in p.datasets] for p in pages] == [names[:0:-1], names[:1]]  # newest first
    ordered = client.list_datasets(
        request={
            "parent": server.parent,
            "filter": f"labels.batch={tag} AND labels.n!=0",
            "order_by": "display_name",
        }
    )
    assert [d.display_name for d in ordered] == [f"list-{tag}-1", f"list-{tag}-2"]
    masked = client.list_datasets(request={**request, "read_mask": {"paths": ["display_name"]}})
    assert all(d.display_name and not d.name for d in masked)

    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.list_datasets(request={"parent": server.parent, "filter": "state=RUNNING"})
    assert fields(caught.value) == ["filter"]
    with server.client() as http:
        rest = http.get(f"/v1/{server.parent}/datasets", params={"filter": "state=RUNNING"}).json()["error"]
    assert_as_rest(caught.value, rest)


def test_v1beta1(served: tuple[ServerProcess, grpc.Channel]) -> None:
    server, channel = served
    beta = gapic(aiplatform_v1beta1.DatasetServiceClient, channel)
    created = beta.create_dataset(
        parent=server.parent,
        dataset=aiplatform_v1beta1.Dataset(display_name="beta", metadata_schema_uri=TEXT),
    )
    dataset = created.result(timeout=30)
    assert created.operation.metadata.type_url.endswith("aiplatform.v1beta1.CreateDatasetOperationMetadata")
    assert dataset.name in [
        d.name for d in beta.list_datasets(request={"parent": server.parent, "order_by": "create_time"})
    ]
    assert isinstance(beta.delete_dataset(name=dataset.name).result(timeout=30), empty_pb2.Empty)


def test_errors(client: aiplatform_v1.DatasetServiceClient, server: ServerProcess) -> None:
    unknown = f"{server.parent}/datasets/123456789"
    with pytest.raises(exceptions.NotFound) as caught:
        client.get_dataset(name=unknown)
    assert status_of(caught.value).code == grpc.StatusCode.NOT_FOUND.value[0]
    with pytest.raises(exceptions.NotFound):
        client.delete_dataset(name=unknown)

    tag = unique()
    put(server, f"gs://bad-{tag}/a.csv", "x,y\n1,2\n")
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.create_dataset(parent=server.parent, dataset=tabular("", [f"gs://bad-{tag}/a.csv"]))
    assert violations(caught.value) == [("display_name", "Required field is not set.")]
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.create_dataset(parent=server.parent, dataset=tabular("bad", [f"gs://bad-{tag}/missing.csv"]))
    assert fields(caught.value) == ["metadata.inputConfig.gcsSource.uri[0]"]
    with pytest.raises(exceptions.InvalidArgument) as caught:
        client.update_dataset(dataset={"display_name": "x"}, update_mask={"paths": ["display_name"]})
    assert fields(caught.value) == ["dataset.name"]


def test_auth_judges_an_update_by_the_name_in_its_body() -> None:
    """UpdateDataset names the dataset in dataset.name: auth sees its project, as REST's PATCH path has it."""
    name = "projects/other/locations/l/datasets/1"

    def update(channel: grpc.Channel) -> object:
        client = gapic(aiplatform_v1beta1.DatasetServiceClient, channel)
        return client.update_dataset(dataset={"name": name}, update_mask={"paths": ["labels"]})

    assert judged_paths(rpc.bindings, update) == [f"/v1beta1/{name}"]
