"""Datasets API (v1) against a real server with the official DatasetServiceClient: tabular CSV datasets and
a text JSONL dataset filled by import_data, get, list with paging and filters, update, delete; strict wire
checks of every response; and the errors for bad sources and schemas."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1
from google.longrunning import operations_pb2
from google.protobuf import field_mask_pb2, json_format, struct_pb2

from tests.support import command_forks
from tests.support.server import LOCATION, PROJECT, ServerProcess

TABULAR = "gs://google-cloud-aiplatform/schema/dataset/metadata/tabular_1.0.0.yaml"
TEXT = "gs://google-cloud-aiplatform/schema/dataset/metadata/text_1.0.0.yaml"
TEXT_IMPORT = "gs://google-cloud-aiplatform/schema/dataset/ioformat/text_classification_single_label_io_format_1.0.0.yaml"


def strict(payload: dict[str, Any] | str, cls: Any) -> Any:
    message = cls.pb()() if hasattr(cls, "pb") else cls()
    text = payload if isinstance(payload, str) else json.dumps(payload)
    json_format.Parse(text, message, ignore_unknown_fields=False)
    return message


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> aiplatform_v1.DatasetServiceClient:
    return aiplatform_v1.DatasetServiceClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": server.url}
    )


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Any:
    with server.client() as c:
        yield c


def put(server: ServerProcess, uri: str, text: str) -> None:
    bucket, _, key = uri.removeprefix("gs://").partition("/")
    path = server.home / "buckets" / bucket / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def bucket_path(server: ServerProcess, uri: str) -> Path:
    bucket, _, key = uri.removeprefix("gs://").partition("/")
    return server.home / "buckets" / bucket / key


def tabular(display_name: str, uris: list[str], **extra: Any) -> aiplatform_v1.Dataset:
    metadata = struct_pb2.Value()
    json_format.ParseDict({"inputConfig": {"gcsSource": {"uri": uris}}}, metadata)
    return aiplatform_v1.Dataset(
        display_name=display_name, metadata_schema_uri=TABULAR, metadata=metadata, **extra
    )


def field_violations(error: exceptions.GoogleAPICallError) -> dict[str, str]:
    return {v["field"]: v["description"] for d in error.details for v in d.get("fieldViolations", [])}


def unique() -> str:
    return uuid.uuid4().hex[:8]


# ------------------------------------------------------------------ tabular
def test_tabular_dataset_from_csv_with_a_wildcard(
    server: ServerProcess, client: aiplatform_v1.DatasetServiceClient, http: httpx.Client
) -> None:
    tag = unique()
    put(server, f"gs://data-{tag}/iris/part-1.csv", "x,y,label\n1,2,a\n3,4,b\n")
    put(server, f"gs://data-{tag}/iris/part-2.csv", 'x,y,label\n5,6,"c, d"\n')
    operation = client.create_dataset(
        parent=server.parent,
        dataset=tabular(f"iris-{tag}", [f"gs://data-{tag}/iris/*.csv"], labels={"team": "ml"}),
    )
    created = operation.result(timeout=30)
    assert created.display_name == f"iris-{tag}"
    assert created.data_item_count == 3
    assert re.fullmatch(rf"projects/\d+/locations/{LOCATION}/datasets/\d+", created.name)
    assert isinstance(operation.metadata, aiplatform_v1.CreateDatasetOperationMetadata)

    # The raw operation and the dataset parse strictly with the official descriptors.
    raw = http.get(f"/ui/{operation.operation.name}").json()
    strict(raw, operations_pb2.Operation)
    assert raw["done"] is True
    assert raw["response"]["@type"] == "type.googleapis.com/google.cloud.aiplatform.v1.Dataset"
    dataset_id = created.name.rsplit("/", 1)[-1]
    body = http.get(f"/v1/{server.parent}/datasets/{dataset_id}").json()
    strict(body, aiplatform_v1.Dataset)
    assert body["dataItemCount"] == "3"
    assert body["metadata"] == {"inputConfig": {"gcsSource": {"uri": [f"gs://data-{tag}/iris/*.csv"]}}}
    assert body["labels"] == {"team": "ml"}

    # The server keeps its own copy: later changes to the bucket do not change the dataset.
    put(server, f"gs://data-{tag}/iris/part-1.csv", "x,y,label\n9,9,z\n")
    stored = [p for p in (server.home / "datasets" / dataset_id).iterdir() if not p.name.startswith(".")]
    assert len(stored) == 1
    assert stored[0].read_text() == 'x,y,label\n1,2,a\n3,4,b\n5,6,"c, d"\n'
    got = client.get_dataset(name=created.name)
    assert got.data_item_count == 3 and got.etag == body["etag"]


def test_mismatched_headers_missing_sources_and_bad_schemas_are_rejected(
    server: ServerProcess, client: aiplatform_v1.DatasetServiceClient
) -> None:
    tag = unique()
    put(server, f"gs://data-{tag}/a.csv", "x,y\n1,2\n")
    put(server, f"gs://data-{tag}/b.csv", "x,z\n1,2\n")
    with pytest.raises(exceptions.BadRequest) as caught:
        client.create_dataset(
            parent=server.parent, dataset=tabular("bad", [f"gs://data-{tag}/a.csv", f"gs://data-{tag}/b.csv"])
        )
    problems = field_violations(caught.value)
    assert "differs from the header" in problems["metadata.inputConfig.gcsSource.uri[1]"]

    with pytest.raises(exceptions.BadRequest) as caught:
        client.create_dataset(parent=server.parent, dataset=tabular("bad", [f"gs://data-{tag}/missing.csv"]))
    assert "does not exist" in field_violations(caught.value)["metadata.inputConfig.gcsSource.uri[0]"]

    with pytest.raises(exceptions.BadRequest) as caught:
        client.create_dataset(parent=server.parent, dataset=tabular("bad", [f"gs://data-{tag}/none-*.csv"]))
    assert "no objects match" in field_violations(caught.value)["metadata.inputConfig.gcsSource.uri[0]"]

    no_source = aiplatform_v1.Dataset(display_name="bad", metadata_schema_uri=TABULAR)
    with pytest.raises(exceptions.BadRequest) as caught:
        client.create_dataset(parent=server.parent, dataset=no_source)
    assert "metadata.inputConfig" in field_violations(caught.value)

    bad_schema = tabular("bad", [f"gs://data-{tag}/a.csv"])
    bad_schema.metadata_schema_uri = "gs://google-cloud-aiplatform/schema/dataset/metadata/sound_1.0.0.yaml"
    with pytest.raises(exceptions.BadRequest) as caught:
        client.create_dataset(parent=server.parent, dataset=bad_schema)
    assert "metadata_schema_uri" in field_violations(caught.value)

    nameless = tabular("", [f"gs://data-{tag}/a.csv"])
    with pytest.raises(exceptions.BadRequest) as caught:
        client.create_dataset(parent=server.parent, dataset=nameless)
    assert field_violations(caught.value) == {"display_name": "Required field is not set."}

    with pytest.raises(exceptions.NotFound):
        client.get_dataset(name=f"{server.parent}/datasets/12345")


# ------------------------------------------------------------------ text (JSONL) with import
def test_text_dataset_import_data(
    server: ServerProcess, client: aiplatform_v1.DatasetServiceClient, http: httpx.Client
) -> None:
    tag = unique()
    lines = [
        {"textContent": "good", "classificationAnnotation": {"displayName": "pos"}},
        {
            "textContent": "bad",
            "classificationAnnotation": {"displayName": "neg"},
            "dataItemResourceLabels": {"aiplatform.googleapis.com/ml_use": "test"},
        },
    ]
    put(server, f"gs://text-{tag}/items.jsonl", "".join(json.dumps(x) + "\n" for x in lines))
    put(server, f"gs://text-{tag}/more.jsonl", json.dumps({"textContent": "meh"}) + "\n\n")
    created = client.create_dataset(
        parent=server.parent,
        dataset=aiplatform_v1.Dataset(display_name=f"text-{tag}", metadata_schema_uri=TEXT),
    ).result(timeout=30)
    assert created.data_item_count == 0

    operation = client.import_data(
        name=created.name,
        import_configs=[
            aiplatform_v1.ImportDataConfig(
                gcs_source=aiplatform_v1.GcsSource(uris=[f"gs://text-{tag}/items.jsonl"]),
                import_schema_uri=TEXT_IMPORT,
                data_item_labels={"aiplatform.googleapis.com/ml_use": "training"},
            ),
            aiplatform_v1.ImportDataConfig(
                gcs_source=aiplatform_v1.GcsSource(uris=[f"gs://text-{tag}/more.jsonl"]),
                import_schema_uri=TEXT_IMPORT,
            ),
        ],
    )
    assert isinstance(operation.result(timeout=30), aiplatform_v1.ImportDataResponse)
    assert isinstance(operation.metadata, aiplatform_v1.ImportDataOperationMetadata)
    strict(http.get(f"/ui/{operation.operation.name}").json(), operations_pb2.Operation)
    assert client.get_dataset(name=created.name).data_item_count == 3

    # A second import adds to the items; an import of a broken file changes nothing.
    client.import_data(
        name=created.name,
        import_configs=[
            {"gcs_source": {"uris": [f"gs://text-{tag}/more.jsonl"]}, "import_schema_uri": TEXT_IMPORT}
        ],
    ).result(timeout=30)
    put(server, f"gs://text-{tag}/broken.jsonl", '{"textContent": "x"}\nnot json\n')
    with pytest.raises(exceptions.BadRequest) as caught:
        client.import_data(
            name=created.name,
            import_configs=[{"gcs_source": {"uris": [f"gs://text-{tag}/broken.jsonl"]}}],
        )
    assert "line 2 is not JSON" in field_violations(caught.value)["import_configs[0].gcs_source.uris[0]"]
    assert client.get_dataset(name=created.name).data_item_count == 4
    stored = [p for p in (server.home / "datasets" / created.name.rsplit("/", 1)[-1]).iterdir()]
    items = [json.loads(line) for line in stored[0].read_text().splitlines()]
    assert [i["textContent"] for i in items] == ["good", "bad", "meh", "meh"]
    # The import's labels went to every item; an item's own labels win.
    assert items[0]["dataItemResourceLabels"] == {"aiplatform.googleapis.com/ml_use": "training"}
    assert items[1]["dataItemResourceLabels"] == {"aiplatform.googleapis.com/ml_use": "test"}


# ------------------------------------------------------------------ list, update, delete
def test_list_with_paging_and_filters_update_and_delete(
    server: ServerProcess, client: aiplatform_v1.DatasetServiceClient, http: httpx.Client
) -> None:
    tag = unique()
    put(server, f"gs://list-{tag}/d.csv", "a\n1\n")
    names = []
    for i in range(5):
        dataset = tabular(f"list-{tag}-{i}", [f"gs://list-{tag}/d.csv"], labels={"batch": tag, "n": str(i)})
        names.append(client.create_dataset(parent=server.parent, dataset=dataset).result(timeout=30).name)

    pager = client.list_datasets(
        request={"parent": server.parent, "page_size": 2, "filter": f"labels.batch={tag}"}
    )
    pages = list(pager.pages)
    assert [len(p.datasets) for p in pages] == [2, 2, 1]
    assert [d.name for p in pages for d in p.datasets] == names[::-1]  # newest first
    raw = http.get(
        f"/v1/{server.parent}/datasets", params={"pageSize": 2, "filter": f"labels.batch={tag}"}
    ).json()
    strict(raw, aiplatform_v1.ListDatasetsResponse)
    assert raw["nextPageToken"]

    by_name = client.list_datasets(
        request={
            "parent": server.parent,
            "filter": f'display_name:"list-{tag}-*" AND labels.n!=0',
            "order_by": "display_name",
        }
    )
    assert [d.display_name for d in by_name] == [f"list-{tag}-{i}" for i in range(1, 5)]
    with pytest.raises(exceptions.BadRequest) as caught:
        client.list_datasets(request={"parent": server.parent, "filter": "state=RUNNING"})
    assert "filter" in field_violations(caught.value)

    # Update: displayName, description and labels; other fields are refused by name.
    current = client.get_dataset(name=names[0])
    current.display_name = f"renamed-{tag}"
    current.description = "the first one"
    updated = client.update_dataset(
        dataset=current, update_mask=field_mask_pb2.FieldMask(paths=["display_name", "description"])
    )
    assert updated.display_name == f"renamed-{tag}" and updated.description == "the first one"
    assert updated.etag != current.etag and updated.labels["batch"] == tag
    with pytest.raises(exceptions.BadRequest) as caught:
        client.update_dataset(
            dataset=updated, update_mask=field_mask_pb2.FieldMask(paths=["metadata_schema_uri"])
        )
    assert "immutable" in field_violations(caught.value)["update_mask"]
    stale = client.get_dataset(name=names[0])
    stale.etag = current.etag  # from before the update
    with pytest.raises(exceptions.Conflict):
        client.update_dataset(dataset=stale, update_mask=field_mask_pb2.FieldMask(paths=["labels"]))
    raw = http.patch(f"/v1/{names[0]}", params={"updateMask": "labels"}, json={"labels": {"k": "v"}}).json()
    strict(raw, aiplatform_v1.Dataset)
    assert raw["labels"] == {"k": "v"}

    # Delete: an LRO, the dataset and its stored rows are gone.
    dataset_id = names[1].rsplit("/", 1)[-1]
    assert (server.home / "datasets" / dataset_id).is_dir()
    operation = client.delete_dataset(name=names[1])
    operation.result(timeout=30)
    assert isinstance(operation.metadata, aiplatform_v1.DeleteOperationMetadata)
    strict(http.get(f"/ui/{operation.operation.name}").json(), operations_pb2.Operation)
    with pytest.raises(exceptions.NotFound):
        client.get_dataset(name=names[1])
    assert not (server.home / "datasets" / dataset_id).exists()


# ------------------------------------------------------------------ CLI
def cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    return command_forks.run_cli(
        ["datasets", *args, "--endpoint", server.url, "--project", PROJECT], timeout=60
    )


def test_cli_create_import_list_describe_delete(server: ServerProcess) -> None:
    tag = unique()
    put(server, f"gs://cli-{tag}/t.csv", "a,b\n1,2\n3,4\n")
    put(server, f"gs://cli-{tag}/t.jsonl", '{"textContent": "x"}\n')
    made = cli(
        server,
        "create",
        "--region",
        LOCATION,
        "--display-name",
        f"cli-{tag}",
        "--csv",
        f"gs://cli-{tag}/t.csv",
        "--labels",
        f"tag={tag}",
        "--format",
        "json",
    )
    assert made.returncode == 0, made.stderr
    tabular_name = json.loads(made.stdout)["name"]
    assert json.loads(made.stdout)["dataItemCount"] == "2"
    text = cli(
        server,
        "create",
        "--region",
        LOCATION,
        "--display-name",
        f"cli-text-{tag}",
        "--jsonl",
        f"gs://cli-{tag}/t.jsonl",
        "--labels",
        f"tag={tag}",
    )
    assert text.returncode == 0, text.stderr
    assert "Items:" in text.stdout and "1" in text.stdout

    listed = cli(
        server, "list", "--region", LOCATION, "--filter", f"labels.tag={tag}", "--sort-by", "display_name"
    )
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.strip().splitlines()
    assert lines[0].split()[:2] == ["DATASET_ID", "DISPLAY_NAME"]
    assert [line.split()[1] for line in lines[1:]] == [
        f"cli-{tag}",
        f"cli-text-{tag}",
    ]  # hex tags sort before "text"

    described = cli(server, "describe", tabular_name.rsplit("/", 1)[-1], "--region", LOCATION)
    assert described.returncode == 0 and f"gs://cli-{tag}/t.csv" in described.stdout
    imported = cli(server, "import", tabular_name, "--jsonl", f"gs://cli-{tag}/t.jsonl")
    assert imported.returncode == 1 and "import_configs" in imported.stderr

    bad = cli(
        server, "create", "--region", LOCATION, "--display-name", "x", "--csv", f"gs://cli-{tag}/none.csv"
    )
    assert bad.returncode == 1 and "metadata.inputConfig.gcsSource.uri[0]" in bad.stderr
    deleted = cli(server, "delete", tabular_name)
    assert deleted.returncode == 0 and "Deleted Dataset" in deleted.stderr
    assert cli(server, "describe", tabular_name).returncode == 1
