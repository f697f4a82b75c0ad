"""Plain reproductions of what the API fuzzer (tests/system/test_fuzz_api.py) found, one test per finding.

Each test replays the request that failed against a real server and checks the answer the way the fuzzer
does, with schemathesis against the server's own description: no 5xx, and status code, content type and
body as described.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import requests
import schemathesis
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.server import ServerProcess
from trainworks.api.app import create_app
from trainworks.config import Settings

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
BUCKET = "findings"


@pytest.fixture(scope="module")
def described(server: ServerProcess) -> Any:
    # The first build of the description imports the official types: seconds on a loaded machine.
    return schemathesis.openapi.from_dict(requests.get(server.url + "/openapi.json", timeout=120).json())


@pytest.fixture(scope="module")
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as client:
        assert client.post("/storage/v1/b", json={"name": BUCKET}).status_code == 200
        yield client


def replay(described: Any, server: ServerProcess, method: str, path: str, **parts: Any) -> Any:
    """Send one request as the fuzzer builds it and run the fuzzer's checks on the answer."""
    case = described[path][method].Case(**parts)
    response = case.call(base_url=server.url, timeout=60)
    case.validate_response(response, checks=CHECKS)
    return response


def test_object_media_download_is_described(
    described: Any, server: ServerProcess, http: httpx.Client
) -> None:
    """`GET /storage/v1/b/B/o/NAME?alt=media` answers the object's bytes in its own content type, which the
    description listed only as a JSON object resource (ST105 Undocumented Content-Type)."""
    params = {"uploadType": "media", "name": "note.txt"}
    uploaded = http.post(
        f"/upload/storage/v1/b/{BUCKET}/o",
        params=params,
        content=b"hello",
        headers={"content-type": "text/plain"},
    )
    assert uploaded.status_code == 200, uploaded.text
    path_parameters = {"bucket": BUCKET, "name": "note.txt"}
    media = replay(
        described,
        server,
        "GET",
        "/storage/v1/b/{bucket}/o/{name}",
        path_parameters=path_parameters,
        query={"alt": "media"},
    )
    assert media.content == b"hello" and media.headers["content-type"][0].startswith("text/plain")
    resource = replay(
        described, server, "GET", "/storage/v1/b/{bucket}/o/{name}", path_parameters=path_parameters
    )
    assert resource.json()["name"] == "note.txt"


def test_cancelled_upload_is_described(described: Any, server: ServerProcess, http: httpx.Client) -> None:
    """Cancelling a resumable upload answers 499 with no body, as Cloud Storage does (and gcsfs expects); the
    description promised a JSON 200 (ST101 Undocumented HTTP status code)."""
    started = http.post(
        f"/upload/storage/v1/b/{BUCKET}/o", params={"uploadType": "resumable", "name": "x"}, json={}
    )
    assert started.status_code == 200 and started.headers["location"]
    upload_id = started.headers["x-guploader-uploadid"]
    cancelled = replay(
        described,
        server,
        "DELETE",
        "/upload/storage/v1/b/{bucket}/o",
        path_parameters={"bucket": BUCKET},
        query={"upload_id": upload_id},
    )
    assert cancelled.status_code == 499 and not cancelled.content


def test_description_is_served_off_the_event_loop(tmp_path: Any) -> None:
    """Building the description imports the official types (seconds, the first time): FastAPI's own route for
    /openapi.json is a coroutine, run on the event loop, which would stall every other request meanwhile."""
    app = create_app(Settings(home=tmp_path))
    routes = [r for r in app.router.routes if getattr(r, "path", None) == "/openapi.json"]
    assert len(routes) == 1
    assert not inspect.iscoroutinefunction(routes[0].endpoint)  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("method", "path", "path_parameters"),
    [
        # A line break: the `{name:path}` routes do not match it (GCS names cannot hold one either).
        ("DELETE", "/storage/v1/b/{bucket}/o/{name}", {"bucket": BUCKET, "name": "a\nb"}),
        (
            "POST",
            "/storage/v1/b/{bucket}/o/{source}/copyTo/b/{dest_bucket}/o/{dest}",
            {"bucket": BUCKET, "source": "a", "dest_bucket": BUCKET, "dest": "x\ny"},
        ),
        # A slash in a bucket name takes the URL past every route.
        ("GET", "/storage/v1/b/{bucket}", {"bucket": "a/b"}),
    ],
)
def test_storage_urls_no_route_matches_answer_in_the_storage_error_form(
    described: Any, server: ServerProcess, http: httpx.Client, method: str, path: str, path_parameters: Any
) -> None:
    """Under /storage a URL no route matched was answered in the Vertex error form (`status`, `details`),
    not Cloud Storage's (`errors`: reason, domain, message) that the description promises there (ST108)."""
    answer = replay(described, server, method, path, path_parameters=path_parameters)
    error = answer.json()["error"]
    assert answer.status_code == 404 and error["errors"][0]["reason"] == "notFound", error
