"""models:copy through the official ModelServiceClient (REST) against a real server process: a model's
version copied into another location as a new model (its own ID or a server-chosen one) or as a new version
of an existing model, with its registry copy of the artifacts; what the copy carries (modelSourceInfo,
originalModelInfo, encryptionSpec); the operation and its CopyModelResponse; and the errors."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from google.api_core import exceptions
from google.auth.credentials import AnonymousCredentials
from google.cloud import aiplatform_v1, aiplatform_v1beta1

from tests.support.server import LOCATION, PROJECT, ServerProcess

BUCKET = "copy-bucket"
IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-3:latest"
ELSEWHERE = "europe-west4"
KMS = f"projects/{PROJECT}/locations/{ELSEWHERE}/keyRings/r/cryptoKeys/k"


@pytest.fixture(scope="module")
def client(server: ServerProcess) -> aiplatform_v1.ModelServiceClient:
    return aiplatform_v1.ModelServiceClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": server.url}
    )


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        yield c


def source_model(server: ServerProcess, client: aiplatform_v1.ModelServiceClient, model_id: str) -> str:
    """A model of two versions in us-central1 (version 2 with its own files and alias); its name."""
    for version in ("1", "2"):
        folder = server.home / "buckets" / BUCKET / model_id / version
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "model.pkl").write_bytes(f"weights {version}".encode())
    model: dict[str, Any] = {
        "display_name": "source",
        "description": "the original",
        "artifact_uri": f"gs://{BUCKET}/{model_id}/1/",
        "container_spec": {"image_uri": IMAGE},
        "labels": {"team": "ml"},
    }
    first = client.upload_model(
        request={"parent": server.parent, "model": model, "model_id": model_id}
    ).result(timeout=30)
    second = {**model, "artifact_uri": f"gs://{BUCKET}/{model_id}/2/", "version_aliases": ["candidate"]}
    client.upload_model(
        request={"parent": server.parent, "model": second, "parent_model": first.model}
    ).result(timeout=30)
    return str(first.model)


def copy(client: aiplatform_v1.ModelServiceClient, location: str = ELSEWHERE, **request: Any) -> Any:
    return client.copy_model(
        request={"parent": f"projects/{PROJECT}/locations/{location}", **request}
    ).result(timeout=30)


def test_copy_into_another_location(server: ServerProcess, client: aiplatform_v1.ModelServiceClient) -> None:
    source = source_model(server, client, "copy-src")
    copied = copy(
        client, source_model=f"projects/{PROJECT}/locations/{LOCATION}/models/copy-src", model_id="copy-dst"
    )
    number = source.split("/")[1]
    assert copied.model == f"projects/{number}/locations/{ELSEWHERE}/models/copy-dst"
    assert copied.model_version_id == "1"
    got = client.get_model(name=copied.model)
    original = client.get_model(name=source)
    assert (got.display_name, got.description, dict(got.labels)) == ("source", "the original", {"team": "ml"})
    assert got.artifact_uri == original.artifact_uri and got.container_spec.image_uri == IMAGE
    assert list(got.version_aliases) == ["default"] and got.version_id == "1"
    assert got.model_source_info.copy and got.model_source_info.source_type.name == "CUSTOM"
    assert got.original_model_info.model == f"{source}@1"  # the default version of the source
    assert not got.encryption_spec.kms_key_name
    # The copy has a registry copy of its own: deleting the source leaves it whole.
    files = list((server.home / "registry" / number / ELSEWHERE / "copy-dst").rglob("model.pkl"))
    assert [f.read_bytes() for f in files] == [b"weights 1"]
    client.delete_model(name=source).result(timeout=30)
    assert [f.read_bytes() for f in files] == [b"weights 1"]
    assert client.get_model(name=copied.model).display_name == "source"


def test_a_version_a_new_version_and_a_copy_of_a_copy(
    server: ServerProcess, client: aiplatform_v1.ModelServiceClient
) -> None:
    source = source_model(server, client, "copy-versions")
    # A version by its alias, into a model with a server-chosen ID, encrypted with the given key.
    chosen = copy(client, source_model=f"{source}@candidate", encryption_spec={"kms_key_name": KMS})
    assert chosen.model.rsplit("/", 1)[1].isdigit() and chosen.model_version_id == "1"
    got = client.get_model(name=chosen.model)
    assert got.original_model_info.model == f"{source}@2"
    assert got.encryption_spec.kms_key_name == KMS
    assert list(got.version_aliases) == ["default"]  # the source's own aliases stay with it
    # Version 1 of the source, as a new version of that copy: the default stays where it was.
    again = copy(client, source_model=f"{source}@1", parent_model=chosen.model)
    assert (again.model, again.model_version_id) == (chosen.model, "2")
    second = client.get_model(name=f"{chosen.model}@2")
    assert list(second.version_aliases) == [] and second.original_model_info.model == f"{source}@1"
    assert client.get_model(name=chosen.model).version_id == "1"
    # A copy of a copy names the first original; in the same location too.
    twice = copy(client, LOCATION, source_model=chosen.model, model_id="copy-of-copy")
    assert client.get_model(name=twice.model).original_model_info.model == f"{source}@2"


def test_the_operation_and_its_types(
    server: ServerProcess, client: aiplatform_v1.ModelServiceClient, http: httpx.Client
) -> None:
    source = source_model(server, client, "copy-op")
    body = {"sourceModel": source, "modelId": "copy-op-dst"}
    op = http.post(f"/v1beta1/projects/{PROJECT}/locations/{ELSEWHERE}/models:copy", json=body).json()
    assert op["done"] is True
    assert op["metadata"]["@type"].endswith("aiplatform.v1beta1.CopyModelOperationMetadata")
    assert op["response"]["@type"].endswith("aiplatform.v1beta1.CopyModelResponse")
    assert op["response"]["modelVersionId"] == "1"
    assert "/models/copy-op-dst/operations/" in op["name"]
    assert http.get(f"/v1/{op['name']}").json() == op
    op_id = op["name"].rsplit("/", 1)[1]
    at_location = http.get(f"/v1/projects/{PROJECT}/locations/{ELSEWHERE}/operations/{op_id}")
    assert at_location.json() == op
    beta = aiplatform_v1beta1.ModelServiceClient(
        transport="rest", credentials=AnonymousCredentials(), client_options={"api_endpoint": server.url}
    )
    request = {
        "parent": f"projects/{PROJECT}/locations/{ELSEWHERE}",
        "source_model": source,
        "model_id": "copy-op-beta",
    }
    result = beta.copy_model(request=request).result(timeout=30)
    assert result.model.endswith("/models/copy-op-beta")


@pytest.fixture(scope="module")
def error_source(server: ServerProcess, client: aiplatform_v1.ModelServiceClient) -> str:
    """A source model, and a copy of it that takes the ID `copy-errors-taken`."""
    source = source_model(server, client, "copy-errors")
    copy(client, source_model=source, model_id="copy-errors-taken")
    return source


@pytest.mark.parametrize(
    ("body", "error", "field"),
    [
        ({}, exceptions.BadRequest, "source_model"),
        ({"sourceModel": "models/x"}, exceptions.BadRequest, "source_model"),
        ({"sourceModel": "SOURCE", "modelId": "Bad_ID"}, exceptions.BadRequest, "model_id"),
        (
            {"sourceModel": "SOURCE", "modelId": "a", "parentModel": "PARENT"},
            exceptions.BadRequest,
            "body",
        ),
        (
            {"sourceModel": "projects/other-project/locations/us-central1/models/x"},
            exceptions.BadRequest,
            "source_model",
        ),
        (
            {"sourceModel": "SOURCE", "parentModel": f"projects/{PROJECT}/locations/{LOCATION}/models/x"},
            exceptions.BadRequest,
            "parent_model",
        ),
        (
            {"sourceModel": f"projects/{PROJECT}/locations/{LOCATION}/models/missing"},
            exceptions.NotFound,
            None,
        ),
        ({"sourceModel": "SOURCE@7"}, exceptions.NotFound, None),
        (
            {"sourceModel": "SOURCE", "parentModel": f"projects/{PROJECT}/locations/{ELSEWHERE}/models/none"},
            exceptions.NotFound,
            None,
        ),
        ({"sourceModel": "SOURCE", "modelId": "copy-errors-taken"}, exceptions.Conflict, None),
        ({"sourceModel": "SOURCE", "unknownField": 1}, exceptions.BadRequest, None),
    ],
)
def test_errors(
    error_source: str, http: httpx.Client, body: dict[str, Any], error: type[Exception], field: str | None
) -> None:
    source = error_source
    filled = {
        k: v.replace("SOURCE", source).replace("PARENT", source) if isinstance(v, str) else v
        for k, v in body.items()
    }
    answer = http.post(f"/v1/projects/{PROJECT}/locations/{ELSEWHERE}/models:copy", json=filled)
    assert (
        answer.status_code
        == {exceptions.BadRequest: 400, exceptions.NotFound: 404, exceptions.Conflict: 409}[error]
    )
    if field is not None:
        violations = answer.json()["error"]["details"][0]["fieldViolations"]
        assert field in [v["field"] for v in violations], violations
