"""Request size limits (api/limits.py) against a real server started with small limits.

JSON bodies over --max-request-bytes get 413 with a google.rpc body, whether Content-Length says so up
front or a chunked body passes the limit while it streams; Cloud Storage uploads are held to
--max-object-bytes instead, with Cloud Storage's error body, and leave no object behind.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.server import ServerProcess

MAX_REQUEST = 4096
MAX_OBJECT = 65536
BUCKET = "limits-bucket"


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        home=tmp_path_factory.mktemp("home"),
        args=["--max-request-bytes", str(MAX_REQUEST), "--max-object-bytes", str(MAX_OBJECT)],
    ).start()
    try:
        with proc.client() as http:
            assert http.post("/storage/v1/b", json={"name": BUCKET}).status_code == 200
        yield proc
    finally:
        proc.stop()


def chunks(total: int, size: int = 1024) -> Iterator[bytes]:
    """A body without Content-Length: httpx sends it chunked."""
    sent = 0
    while sent < total:
        block = min(size, total - sent)
        sent += block
        yield b" " * block


def vertex_413(response: httpx.Response, limit: int) -> dict[str, Any]:
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == 413
    assert error["status"] == "INVALID_ARGUMENT"
    assert str(limit) in error["message"]
    assert error["details"][0]["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    return error


def gcs_413(response: httpx.Response) -> str:
    assert response.status_code == 413, response.text
    error = response.json()["error"]
    assert error["code"] == 413
    assert error["errors"][0]["reason"] == "uploadTooLarge"
    assert (
        f"limit of {MAX_OBJECT} bytes" in error["message"] or f"limit of {MAX_REQUEST} " in error["message"]
    )
    return str(error["message"])


def headers_only(server: ServerProcess, request: bytes) -> bytes:
    """Sends a request's head and no body: an answer proves the limit was checked before reading it."""
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while b"\r\n\r\n" not in data or len(data) < data.index(b"\r\n\r\n") + 4 + _length(data):
            block = sock.recv(65536)
            if not block:
                break
            data += block
    return data


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n")[0].split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def test_json_body_over_content_length_limit_is_413(small: ServerProcess) -> None:
    body = json.dumps({"displayName": "x" * MAX_REQUEST}).encode()
    with small.client() as http:
        response = http.post(
            f"/v1/{small.parent}/customJobs", content=body, headers={"content-type": "application/json"}
        )
    error = vertex_413(response, MAX_REQUEST)
    assert "--max-request-bytes" in error["message"]


def test_limit_is_checked_before_the_body_is_read(small: ServerProcess) -> None:
    head = (
        f"POST /v1/{small.parent}/customJobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        "Content-Type: application/json\r\nContent-Length: 1099511627776\r\n\r\n"
    ).encode()
    answer = headers_only(small, head)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b'"INVALID_ARGUMENT"' in answer


def test_default_limit_is_16_mib(server: ServerProcess) -> None:
    head = (
        f"POST /v1/{server.parent}/customJobs HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {(16 << 20) + 1}\r\n\r\n"
    ).encode()
    answer = headers_only(server, head)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"16777216" in answer and b"16 MiB" in answer


def test_chunked_json_body_over_limit_is_413(small: ServerProcess) -> None:
    with small.client() as http:
        response = http.post(
            f"/v1/{small.parent}/customJobs",
            content=chunks(MAX_REQUEST * 3),
            headers={"content-type": "application/json"},
        )
    assert "content-length" not in response.request.headers
    vertex_413(response, MAX_REQUEST)


def test_body_under_limit_reaches_the_api(small: ServerProcess) -> None:
    with small.client() as http:
        response = http.post(
            f"/v1/{small.parent}/customJobs",
            content=chunks(MAX_REQUEST - 10),
            headers={"content-type": "application/json"},
        )
    assert response.status_code == 400, response.text  # blank JSON: the API's own answer, not the limit
    assert "empty" in response.json()["error"]["message"]


def test_storage_json_routes_answer_in_gcs_form(small: ServerProcess) -> None:
    with small.client() as http:
        response = http.post("/storage/v1/b", json={"name": "big", "labels": {"k": "v" * MAX_REQUEST}})
        gcs_413(response)
        assert http.get("/storage/v1/b/big").status_code == 404


def test_media_upload_over_object_limit(small: ServerProcess) -> None:
    url = f"/upload/storage/v1/b/{BUCKET}/o"
    with small.client() as http:
        ok = http.post(url, params={"uploadType": "media", "name": "fits"}, content=b"a" * MAX_OBJECT)
        assert ok.status_code == 200, ok.text
        assert ok.json()["size"] == str(MAX_OBJECT)  # uploads are exempt from the JSON limit
        gcs_413(
            http.post(url, params={"uploadType": "media", "name": "big"}, content=b"a" * (MAX_OBJECT + 1))
        )
        streamed = http.post(
            url, params={"uploadType": "media", "name": "big"}, content=chunks(MAX_OBJECT * 2, 8192)
        )
        gcs_413(streamed)
        assert http.get(f"/storage/v1/b/{BUCKET}/o/big").status_code == 404


def test_multipart_upload_counts_the_object_not_the_metadata(small: ServerProcess) -> None:
    boundary = "limitboundary"
    metadata = json.dumps({"name": "multi", "metadata": {"k": "v" * 2000}})

    def body(size: int) -> bytes:
        return (
            (
                f"--{boundary}\r\nContent-Type: application/json\r\n\r\n{metadata}\r\n"
                f"--{boundary}\r\nContent-Type: application/octet-stream\r\n\r\n"
            ).encode()
            + b"m" * size
            + f"\r\n--{boundary}--\r\n".encode()
        )

    url = f"/upload/storage/v1/b/{BUCKET}/o"
    headers = {"content-type": f"multipart/related; boundary={boundary}"}
    with small.client() as http:
        ok = http.post(url, params={"uploadType": "multipart"}, content=body(MAX_OBJECT), headers=headers)
        assert ok.status_code == 200, ok.text
        big = http.post(
            url, params={"uploadType": "multipart"}, content=body(MAX_OBJECT + (2 << 20)), headers=headers
        )
        gcs_413(big)


def test_resumable_upload_is_capped_across_chunks(small: ServerProcess) -> None:
    url = f"/upload/storage/v1/b/{BUCKET}/o"
    with small.client() as http:
        declared = http.post(
            url,
            params={"uploadType": "resumable", "name": "declared"},
            headers={"x-upload-content-length": str(MAX_OBJECT + 1)},
        )
        gcs_413(declared)
        start = http.post(url, params={"uploadType": "resumable", "name": "chunks"})
        assert start.status_code == 200, start.text
        session = start.headers["location"]
        half = MAX_OBJECT // 2
        first = http.put(session, content=b"c" * half, headers={"content-range": f"bytes 0-{half - 1}/*"})
        assert first.status_code == 308, first.text
        # Past the cap by its Content-Range, and by its streamed bytes when the range leaves the end open.
        last = MAX_OBJECT + half - 1
        gcs_413(
            http.put(session, content=b"c" * MAX_OBJECT, headers={"content-range": f"bytes {half}-{last}/*"})
        )
        gcs_413(http.put(session, content=b"", headers={"content-range": f"bytes */{MAX_OBJECT + 1}"}))
        # No Content-Range or Content-Length: the whole object in one chunked request, counted as it streams.
        gcs_413(http.put(session, content=chunks(MAX_OBJECT * 2, 8192)))
        assert http.get(f"/storage/v1/b/{BUCKET}/o/chunks").status_code == 404


def test_serve_help_names_the_flags() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "trainworks.cli.main", "serve", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "200"},
    ).stdout
    assert "--max-request-bytes" in out and "--max-object-bytes" in out
