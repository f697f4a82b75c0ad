"""The request forms of `gcloud storage` over plain HTTP against a real server (tests/system/test_gcloud.py
runs gcloud itself): a multipart upload whose boundary is single-quoted with LF line ends, resumable uploads
started under /resumable/upload/ (with the same bucket ownership rules as /upload/), and a bucket's
storage layout."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.server import ServerProcess

BUCKET = "gcloud-forms"


@pytest.fixture
def http(server: ServerProcess) -> Iterator[httpx.Client]:
    with server.client() as c:
        c.post("/storage/v1/b", json={"name": BUCKET})
        yield c


def test_a_single_quoted_boundary_with_lf_line_ends(http: httpx.Client) -> None:
    boundary = "===============4286410286452838932=="
    body = (
        f"--{boundary}\ncontent-type: application/json\n\n"
        + json.dumps({"name": "quoted.txt", "contentType": "text/plain"})
        + f"\n--{boundary}\ncontent-type: text/plain\n\nhello gcloud\n--{boundary}--\n"
    )
    answer = http.post(
        f"/upload/storage/v1/b/{BUCKET}/o",
        params={"uploadType": "multipart"},
        content=body.encode(),
        headers={"content-type": f"multipart/related; boundary='{boundary}'"},
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["name"] == "quoted.txt" and answer.json()["size"] == "12"
    media = http.get(f"/storage/v1/b/{BUCKET}/o/quoted.txt", params={"alt": "media"})
    assert media.content == b"hello gcloud"
    # The other spellings still work: double-quoted and bare.
    for header in (f'multipart/related; boundary="{boundary}"', f"multipart/related; boundary={boundary}"):
        again = http.post(
            f"/upload/storage/v1/b/{BUCKET}/o",
            params={"uploadType": "multipart"},
            content=body.encode(),
            headers={"content-type": header},
        )
        assert again.status_code == 200, again.text


def test_a_resumable_upload_started_under_resumable(http: httpx.Client) -> None:
    data = b"0123456789" * 1000
    started = http.post(
        f"/resumable/upload/storage/v1/b/{BUCKET}/o",
        params={"alt": "json", "uploadType": "resumable"},
        json={"name": "resumed.bin"},
        headers={"x-upload-content-length": str(len(data))},
    )
    assert started.status_code == 200, started.text
    session = started.headers["location"]
    assert "/upload/storage/v1/b/" in session and "upload_id=" in session
    finished = http.put(
        session, content=data, headers={"content-range": f"bytes 0-{len(data) - 1}/{len(data)}"}
    )
    assert finished.status_code == 200, finished.text
    assert finished.json()["size"] == str(len(data))
    assert http.get(f"/storage/v1/b/{BUCKET}/o/resumed.bin", params={"alt": "media"}).content == data
    # Its errors have Cloud Storage's form, as under /upload/.
    missing = http.post("/resumable/upload/storage/v1/b/no-such-bucket/o", params={"uploadType": "resumable"})
    assert missing.status_code == 404 and missing.json()["error"]["errors"][0]["reason"] == "notFound"


def test_the_storage_layout(http: httpx.Client) -> None:
    layout = http.get(f"/storage/v1/b/{BUCKET}/storageLayout", params={"alt": "json"})
    assert layout.status_code == 200, layout.text
    bucket = http.get(f"/storage/v1/b/{BUCKET}").json()
    assert layout.json() == {
        "kind": "storage#storageLayout",
        "bucket": BUCKET,
        "location": bucket["location"],
        "locationType": "region",
        "hierarchicalNamespace": {"enabled": False},
    }
    missing = http.get("/storage/v1/b/no-such-bucket/storageLayout")
    assert missing.status_code == 404 and missing.json()["error"]["errors"][0]["reason"] == "notFound"


def _token(home: Path, project: str) -> str:
    made = subprocess.run(
        [sys.executable, "-m", "trainworks.cli.main", "admin", "tokens", "create", "--project", project]
        + ["--home", str(home)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return made.stdout.strip()


def test_resumable_uploads_keep_to_the_bucket_owner(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    alpha, beta = _token(home, "alpha"), _token(home, "beta")
    server = ServerProcess(home=home).start()
    try:
        with server.client(headers={"authorization": f"Bearer {alpha}"}) as mine:
            assert mine.post(
                "/storage/v1/b", params={"project": "alpha"}, json={"name": "alpha-owned"}
            ).is_success
            path = "/resumable/upload/storage/v1/b/alpha-owned/o"
            started = mine.post(path, params={"uploadType": "resumable"}, json={"name": "a.bin"})
            assert started.status_code == 200, started.text
        with server.client(headers={"authorization": f"Bearer {beta}"}) as theirs:
            refused = theirs.post(path, params={"uploadType": "resumable"}, json={"name": "b.bin"})
        assert refused.status_code == 403, refused.text
        error = refused.json()["error"]
        assert "alpha-owned" in error["message"] and error["errors"][0]["reason"] == "forbidden"
        with server.client() as anonymous:
            assert (
                anonymous.post(path, params={"uploadType": "resumable"}, json={"name": "c.bin"}).status_code
                == 403
            )
    finally:
        server.stop()
