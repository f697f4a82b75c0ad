"""Dataset exports for training pipelines: datasets made through a real server's API, exported with the
DatasetService over the same home into the server's bucket root, and read back as objects through the
server's Cloud Storage API; plus the InputDataConfig checks."""

from __future__ import annotations

import csv
import io
import json
import re
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest
from google.cloud import storage

from tests.support.server import LOCATION, PROJECT, ServerProcess
from trainworks.kernel.errors import ApiError
from trainworks.kernel.projects import Projects
from trainworks.kinds.datasets import files as dataset_files
from trainworks.kinds.datasets.service import DatasetExport, DatasetService
from trainworks.kinds.datasets.store import DatasetStore
from trainworks.storage.gcs import ObjectStore
from trainworks.store.database import Database

TABULAR = "gs://google-cloud-aiplatform/schema/dataset/metadata/tabular_1.0.0.yaml"
TEXT = "gs://google-cloud-aiplatform/schema/dataset/metadata/text_1.0.0.yaml"
NOW = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
ROWS = 100


@pytest.fixture(scope="module")
def service(server: ServerProcess) -> Iterator[DatasetService]:
    """A DatasetService over the server's own database and bucket root."""
    db = Database(f"sqlite:///{server.home / 'trainworks.db'}")
    projects = Projects(db)
    yield DatasetService(
        DatasetStore(db),
        projects,
        ObjectStore(server.home / "buckets"),
        server.home / "datasets",
    )
    db.dispose()


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


@pytest.fixture
def gcs(server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> storage.Client:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
    return storage.Client()


def put(server: ServerProcess, uri: str, text: str) -> None:
    bucket, _, key = uri.removeprefix("gs://").partition("/")
    path = server.home / "buckets" / bucket / key
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def create(http: httpx.Client, server: ServerProcess, body: dict[str, Any]) -> str:
    response = http.post(f"/v1/{server.parent}/datasets", json=body)
    assert response.status_code == 200, response.text
    operation = response.json()
    assert operation["done"] is True
    return str(operation["response"]["name"].rsplit("/", 1)[-1])


@pytest.fixture(scope="module")
def table_id(server: ServerProcess, http: httpx.Client) -> str:
    lines = ["id,label,ts,use"]
    for i in range(ROWS):
        use = ("training", "validation", "test", "other")[i % 4]
        lines.append(f"{i},{'ab'[i % 2]},2024-01-01T00:{i // 60:02d}:{i % 60:02d}Z,{use}")
    put(server, "gs://src-data/table.csv", "\n".join(lines) + "\n")
    body = {
        "displayName": "table",
        "metadataSchemaUri": TABULAR,
        "metadata": {"inputConfig": {"gcsSource": {"uri": ["gs://src-data/table.csv"]}}},
    }
    return create(http, server, body)


def read_objects(gcs: storage.Client, pattern: str) -> dict[str, str]:
    """The objects a `gs://b/dir/training-*.csv` URI names, read through the server's storage API."""
    bucket, _, key = pattern.removeprefix("gs://").partition("/")
    prefix, _, suffix = key.partition("*")
    blobs = gcs.list_blobs(bucket, prefix=prefix)
    return {
        b.name: b.download_as_text()
        for b in blobs
        if b.name.endswith(suffix) and "/" not in b.name[len(prefix) :]
    }


def csv_rows(text: str) -> tuple[list[str], list[list[str]]]:
    records = list(csv.reader(io.StringIO(text)))
    return records[0], records[1:]


def config(dataset_id: str, prefix: str, **split: Any) -> dict[str, Any]:
    return {"datasetId": dataset_id, "gcsDestination": {"outputUriPrefix": prefix}, **split}


# ------------------------------------------------------------------ exports
def test_fraction_export_writes_disjoint_complete_csv_shards(
    service: DatasetService, table_id: str, gcs: storage.Client, server: ServerProcess
) -> None:
    prefix = f"gs://out-{uuid.uuid4().hex[:6]}/runs/"
    export = service.export(PROJECT, LOCATION, config(table_id, prefix), now=NOW)
    directory = f"{prefix.rstrip('/')}/dataset-{table_id}-tables-2024-05-06T07:08:09.123Z"
    assert export.directory_uri == directory
    assert export.data_format == "csv"
    assert export.env == {
        "AIP_DATA_FORMAT": "csv",
        "AIP_TRAINING_DATA_URI": f"{directory}/training-*.csv",
        "AIP_VALIDATION_DATA_URI": f"{directory}/validation-*.csv",
        "AIP_TEST_DATA_URI": f"{directory}/test-*.csv",
    }
    assert export.counts == {"training": 80, "validation": 10, "test": 10}
    assert DatasetExport.from_dict(json.loads(json.dumps(export.to_dict()))) == export

    ids: dict[str, set[str]] = {}
    for name in ("training", "validation", "test"):
        objects = read_objects(gcs, export.env[f"AIP_{name.upper()}_DATA_URI"])
        assert list(objects) == [f"{directory.split('/', 3)[3]}/{name}-00000-of-00001.csv"]
        header, rows = csv_rows(next(iter(objects.values())))
        assert header == ["id", "label", "ts", "use"]
        assert len(rows) == export.counts[name]
        ids[name] = {r[0] for r in rows}
    assert not ids["training"] & ids["validation"] and not ids["training"] & ids["test"]
    assert not ids["validation"] & ids["test"]
    assert set().union(*ids.values()) == {str(i) for i in range(ROWS)}

    # The same pipeline and time again: the same directory and the same bytes.
    before = {
        p: p.read_bytes()
        for p in (server.home / "buckets").rglob("*.csv")
        if directory.split("/")[-1] in str(p)
    }
    again = service.export(PROJECT, LOCATION, config(table_id, prefix), now=NOW)
    assert again == export
    after = {p: p.read_bytes() for p in before}
    assert after == before and len(before) == 3


def test_large_sets_are_sharded_and_empty_sets_get_one_shard(
    service: DatasetService, table_id: str, gcs: storage.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(dataset_files, "SHARD_ROWS", 30)
    split = {"fractionSplit": {"trainingFraction": 0.9, "testFraction": 0.1}}
    export = service.export(PROJECT, LOCATION, config(table_id, "gs://out-shards/x", **split), now=NOW)
    assert export.counts == {"training": 90, "validation": 0, "test": 10}
    training = read_objects(gcs, export.env["AIP_TRAINING_DATA_URI"])
    assert [n.rsplit("/", 1)[-1] for n in training] == [f"training-{i:05d}-of-00003.csv" for i in range(3)]
    assert [len(csv_rows(t)[1]) for t in training.values()] == [30, 30, 30]
    assert all(csv_rows(t)[0] == ["id", "label", "ts", "use"] for t in training.values())
    validation = read_objects(gcs, export.env["AIP_VALIDATION_DATA_URI"])
    assert [csv_rows(t) for t in validation.values()] == [(["id", "label", "ts", "use"], [])]


def test_timestamp_stratified_and_predefined_exports(
    service: DatasetService, table_id: str, gcs: storage.Client
) -> None:
    def rows_of(export: DatasetExport, name: str) -> list[list[str]]:
        texts = read_objects(gcs, export.env[f"AIP_{name.upper()}_DATA_URI"]).values()
        return [row for text in texts for row in csv_rows(text)[1]]

    fractions = {"trainingFraction": 0.6, "validationFraction": 0.2, "testFraction": 0.2}
    timed = service.export(
        PROJECT,
        LOCATION,
        config(table_id, "gs://out-time", timestampSplit={**fractions, "key": "ts"}),
        now=NOW,
    )
    assert timed.counts == {"training": 60, "validation": 20, "test": 20}
    assert max(r[2] for r in rows_of(timed, "training")) < min(r[2] for r in rows_of(timed, "validation"))
    assert max(r[2] for r in rows_of(timed, "validation")) < min(r[2] for r in rows_of(timed, "test"))

    stratified = service.export(
        PROJECT,
        LOCATION,
        config(table_id, "gs://out-strat", stratifiedSplit={**fractions, "key": "label"}),
        now=NOW,
    )
    for name, share in (("training", 0.6), ("validation", 0.2), ("test", 0.2)):
        labels = [r[1] for r in rows_of(stratified, name)]
        assert labels.count("a") == labels.count("b") == ROWS // 2 * share

    predefined = service.export(
        PROJECT, LOCATION, config(table_id, "gs://out-pre", predefinedSplit={"key": "use"}), now=NOW
    )
    assert predefined.counts == {"training": 25, "validation": 25, "test": 25}  # "other" rows are left out
    assert {r[3] for r in rows_of(predefined, "test")} == {"test"}


def test_jsonl_filter_export(
    service: DatasetService, server: ServerProcess, http: httpx.Client, gcs: storage.Client
) -> None:
    items = [
        {"textContent": f"t{i}", "dataItemResourceLabels": {"aiplatform.googleapis.com/ml_use": use}}
        for i, use in enumerate(["training", "training", "validation", "test", "training"])
    ]
    put(server, "gs://src-text/items.jsonl", "".join(json.dumps(i) + "\n" for i in items))
    dataset_id = create(http, server, {"displayName": "text", "metadataSchemaUri": TEXT})
    response = http.post(
        f"/v1/{server.parent}/datasets/{dataset_id}:import",
        json={"importConfigs": [{"gcsSource": {"uris": ["gs://src-text/items.jsonl"]}}]},
    )
    assert response.status_code == 200, response.text
    split = {
        "filterSplit": {
            "trainingFilter": "labels.aiplatform.googleapis.com/ml_use=training",
            "validationFilter": "ml_use=validation",
            "testFilter": "ml_use=test",
        },
        "annotationSchemaUri": "gs://google-cloud-aiplatform/schema/dataset/annotation/text_classification_1.0.0.yaml",
    }
    export = service.export(PROJECT, LOCATION, config(dataset_id, "gs://out-text", **split), now=NOW)
    assert re.search(
        rf"/dataset-{dataset_id}-text_classification-2024-05-06T07:08:09\.123Z$", export.directory_uri
    )
    assert export.data_format == "jsonl" and export.env["AIP_DATA_FORMAT"] == "jsonl"
    assert export.counts == {"training": 3, "validation": 1, "test": 1}
    training = read_objects(gcs, export.env["AIP_TRAINING_DATA_URI"])
    assert [n.rsplit("/", 1)[-1] for n in training] == ["training-00000-of-00001.jsonl"]
    texts = [json.loads(line)["textContent"] for line in next(iter(training.values())).splitlines()]
    assert texts == ["t0", "t1", "t4"]


# ------------------------------------------------------------------ checks
def problems(call: Any) -> dict[str, str]:
    with pytest.raises(ApiError) as caught:
        call()
    return {v.field: v.description for v in caught.value.violations}


def test_input_data_config_checks(service: DatasetService, table_id: str) -> None:
    def check(body: dict[str, Any]) -> dict[str, str]:
        return problems(lambda: service.check_input_data_config(PROJECT, LOCATION, body))

    base = "training_pipeline.input_data_config"
    service.check_input_data_config(PROJECT, LOCATION, config(table_id, "gs://okay/x"))
    assert check({"gcsDestination": {"outputUriPrefix": "gs://okay/x"}}) == {
        f"{base}.dataset_id": "Required field is not set."
    }
    over = check(
        config(table_id, "gs://okay/x", fractionSplit={"trainingFraction": 0.9, "testFraction": 0.2})
    )
    assert "must not exceed 1" in over[f"{base}.fraction_split.training_fraction"]
    bq = check({"datasetId": table_id, "bigqueryDestination": {"outputUri": "bq://p"}})
    assert "not supported here" in bq[f"{base}.bigquery_destination"]
    assert f"{base}.gcs_destination" in check({"datasetId": table_id})
    assert f"{base}.gcs_destination.output_uri_prefix" in check(config(table_id, "s3://nope"))
    assert f"{base}.stratified_split" in check(
        config(table_id, "gs://okay/x", predefinedSplit={"key": "use"}, stratifiedSplit={"key": "label"})
    )
    assert (
        "no column 'nope'"
        in check(config(table_id, "gs://okay/x", predefinedSplit={"key": "nope"}))[
            f"{base}.predefined_split.key"
        ]
    )
    assert (
        check(config(table_id, "gs://okay/x", timestampSplit={"trainingFraction": 0.5}))[
            f"{base}.timestamp_split.key"
        ]
        == "Required field is not set."
    )
    filters = check(
        config(table_id, "gs://okay/x", filterSplit={"trainingFilter": "a=1", "validationFilter": "a ="})
    )
    assert set(filters) == {f"{base}.filter_split.validation_filter", f"{base}.filter_split.test_filter"}
    assert f"{base}.fraction_split.bogus" in check(
        config(table_id, "gs://okay/x", fractionSplit={"bogus": 1})
    )
    with pytest.raises(ApiError) as caught:
        service.check_input_data_config(PROJECT, LOCATION, config("123456", "gs://okay/x"))
    assert caught.value.code.name == "NOT_FOUND"
    # Another location's dataset is not found either.
    with pytest.raises(ApiError) as caught:
        service.check_input_data_config(PROJECT, "europe-west4", config(table_id, "gs://okay/x"))
    assert caught.value.code.name == "NOT_FOUND"


def test_bad_timestamps_fail_the_export_naming_the_key(
    service: DatasetService, server: ServerProcess, http: httpx.Client
) -> None:
    put(server, "gs://src-data/bad-ts.csv", "v,ts\n1,2024-01-01T00:00:00Z\n2,not a time\n")
    body = {
        "displayName": "bad-ts",
        "metadataSchemaUri": TABULAR,
        "metadata": {"inputConfig": {"gcsSource": {"uri": ["gs://src-data/bad-ts.csv"]}}},
    }
    dataset_id = create(http, server, body)
    found = problems(
        lambda: service.export(
            PROJECT, LOCATION, config(dataset_id, "gs://out-bad", timestampSplit={"key": "ts"}), now=NOW
        )
    )
    assert "row 2" in found["training_pipeline.input_data_config.timestamp_split.key"]
