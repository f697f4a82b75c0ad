"""The server's Cloud Storage JSON API subset, through google-cloud-storage and gcsfs against a real server.

google-cloud-storage finds the server through STORAGE_EMULATOR_HOST; gcsfs through endpoint_url. gcsfs is
used as `gcsfs.core.GCSFileSystem`: the `gcsfs.GCSFileSystem` of gcsfs >= 2025 first asks the Storage Control
gRPC API for each bucket's layout, which no emulator has (replicas get GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false
so that name means the JSON API class there).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import textwrap
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import google_crc32c
import httpx
import pytest
from gcsfs.core import GCSFileSystem
from google.api_core import exceptions
from google.cloud import storage

from tests.support.jobs import job, python_pool
from tests.support.logs import replica_output
from tests.support.server import ServerProcess, wait_job


def crc32c(data: bytes) -> str:
    return base64.b64encode(google_crc32c.Checksum(data).digest()).decode()


def md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


@pytest.fixture
def gcs(server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> storage.Client:
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
    return storage.Client()


@pytest.fixture
def fs(server: ServerProcess) -> GCSFileSystem:
    return GCSFileSystem(
        endpoint_url=server.url, token="anon", skip_instance_cache=True, use_listings_cache=False
    )


def bucket_dir(server: ServerProcess, bucket: str) -> Path:
    return server.home / "buckets" / bucket


def gcs_error(response: httpx.Response, status: int, reason: str) -> str:
    """The message of a Cloud Storage error body, after checking its form."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == status
    assert error["errors"][0]["reason"] == reason and error["errors"][0]["domain"] == "global"
    return str(error["message"])


def multipart(metadata: dict[str, Any], data: bytes, boundary: str = "b0und4ry") -> tuple[bytes, str]:
    body = (
        (
            f"--{boundary}\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n{json.dumps(metadata)}\r\n"
            f"--{boundary}\r\ncontent-type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--".encode()
    )
    return body, f'multipart/related; boundary="{boundary}"'


# ---------------------------------------------------------------- google-cloud-storage
def test_bucket_exists_create_get_list_and_conflict(gcs: storage.Client, server: ServerProcess) -> None:
    assert not gcs.bucket("made-by-sdk").exists()
    created = gcs.create_bucket("made-by-sdk", location="europe-west4")
    assert created.exists()
    fetched = gcs.get_bucket("made-by-sdk")
    assert fetched.location == "EUROPE-WEST4" and fetched.storage_class == "STANDARD"
    assert fetched.time_created is not None and fetched.metageneration == 1
    assert bucket_dir(server, "made-by-sdk").is_dir()
    with pytest.raises(exceptions.Conflict):
        gcs.create_bucket("made-by-sdk")
    assert "made-by-sdk" in [b.name for b in gcs.list_buckets()]
    # A folder made under the bucket root (a job, the server itself) is a bucket too.
    bucket_dir(server, "made-on-disk").mkdir(parents=True)
    assert gcs.bucket("made-on-disk").exists()
    with server.client() as http:
        named = http.get("/storage/v1/b/made-by-sdk", params={"fields": "name"}).json()
        assert named == {"name": "made-by-sdk"}
        message = gcs_error(http.post("/storage/v1/b", json={"name": "Bad_Bucket"}), 400, "invalid")
        assert "Bad_Bucket" in message
        gcs_error(http.get("/storage/v1/b/no-such-bucket"), 404, "notFound")


def test_small_upload_is_multipart_and_its_checksums_are_kept(
    gcs: storage.Client, server: ServerProcess
) -> None:
    bucket = gcs.create_bucket("small-uploads")
    data = b"hello, local buckets\n"
    blob = bucket.blob("notes/hello.txt")
    blob.metadata = {"owner": "tests"}
    blob.upload_from_string(data, content_type="text/plain")
    assert blob.crc32c == crc32c(data) and blob.md5_hash == md5(data)
    fetched = bucket.get_blob("notes/hello.txt")
    assert fetched is not None
    assert (fetched.size, fetched.content_type, fetched.metadata) == (
        len(data),
        "text/plain",
        {"owner": "tests"},
    )
    assert (fetched.crc32c, fetched.md5_hash, fetched.generation) == (
        crc32c(data),
        md5(data),
        blob.generation,
    )
    assert fetched.download_as_bytes() == data  # google-cloud-storage checks x-goog-hash
    assert (bucket_dir(server, "small-uploads") / "notes" / "hello.txt").read_bytes() == data
    # Metadata lives outside the bucket folder: nothing but the object there.
    assert sorted(p.name for p in bucket_dir(server, "small-uploads").rglob("*")) == ["hello.txt", "notes"]
    with server.client() as http:
        body, content_type = multipart({"name": "bad-crc.txt", "crc32c": crc32c(b"other")}, data)
        response = http.post(
            "/upload/storage/v1/b/small-uploads/o",
            params={"uploadType": "multipart"},
            content=body,
            headers={"content-type": content_type},
        )
        assert "CRC32C" in gcs_error(response, 400, "invalid")
        body, content_type = multipart({"name": "bad-md5.txt", "md5Hash": md5(b"other")}, data)
        response = http.post(
            "/upload/storage/v1/b/small-uploads/o",
            params={"uploadType": "multipart"},
            content=body,
            headers={"content-type": content_type},
        )
        assert "MD5" in gcs_error(response, 400, "invalid")
    assert bucket.get_blob("bad-crc.txt") is None and bucket.get_blob("bad-md5.txt") is None


def test_large_upload_is_resumable_and_downloads_verified_and_ranged(gcs: storage.Client) -> None:
    bucket = gcs.create_bucket("large-uploads")
    data = os.urandom(9 * 1024 * 1024 + 123)  # above the client's 8 MiB multipart limit
    blob = bucket.blob("model/weights.bin")
    blob.upload_from_string(data)  # the client fails unless the last response has crc32c
    assert blob.crc32c == crc32c(data) and blob.size == len(data)
    assert bucket.blob("model/weights.bin").download_as_bytes(checksum="crc32c") == data
    assert bucket.blob("model/weights.bin").download_as_bytes(checksum="md5") == data
    assert bucket.blob("model/weights.bin").download_as_bytes(start=1000, end=2999) == data[1000:3000]


def test_list_with_prefix_delimiter_and_pages(gcs: storage.Client, server: ServerProcess) -> None:
    bucket = gcs.create_bucket("listing")
    names = ["l-x", "l.txt", "l/a.txt", "l/b/c.txt", "l/b/d.txt", "l/e/f/g.txt", "l/h.txt", "m.txt"]
    for name in reversed(names):
        bucket.blob(name).upload_from_string(name.encode())
    assert [b.name for b in gcs.list_blobs("listing")] == names  # lexicographic, like GCS
    assert [b.name for b in gcs.list_blobs("listing", prefix="l/b")] == ["l/b/c.txt", "l/b/d.txt"]
    folded = gcs.list_blobs("listing", prefix="l/", delimiter="/")
    assert [b.name for b in folded] == ["l/a.txt", "l/h.txt"]
    assert folded.prefixes == {"l/b/", "l/e/"}
    top = gcs.list_blobs("listing", delimiter="/")
    assert [b.name for b in top] == ["l-x", "l.txt", "m.txt"] and top.prefixes == {"l/"}
    pages = list(gcs.list_blobs("listing", page_size=3).pages)
    assert [[b.name for b in page] for page in pages] == [names[0:3], names[3:6], names[6:8]]
    # Pages of a folded listing: a prefix is not repeated on the next page, nothing is skipped.
    seen: list[str] = []
    token = None
    with server.client() as http:
        while True:
            params = {
                "prefix": "l/",
                "delimiter": "/",
                "maxResults": "1",
                **({"pageToken": token} if token else {}),
            }
            page = http.get("/storage/v1/b/listing/o", params=params).json()
            assert page["kind"] == "storage#objects"
            seen += [i["name"] for i in page.get("items", [])] + page.get("prefixes", [])
            token = page.get("nextPageToken")
            if not token:
                break
        assert seen == ["l/a.txt", "l/b/", "l/e/", "l/h.txt"]
        assert [
            i["name"]
            for i in http.get(
                "/storage/v1/b/listing/o", params={"startOffset": "l/b", "endOffset": "l/h"}
            ).json()["items"]
        ] == ["l/b/c.txt", "l/b/d.txt", "l/e/f/g.txt"]
        gcs_error(http.get("/storage/v1/b/listing/o", params={"pageToken": "garbage"}), 400, "invalid")


def test_metadata_delete_and_not_found(gcs: storage.Client, server: ServerProcess) -> None:
    bucket = gcs.create_bucket("lifecycle")
    blob = bucket.blob("a/b c/d+e?.json")  # spaces, '+' and '?' survive URL encoding both ways
    blob.upload_from_string(b"{}", content_type="application/json")
    fetched = bucket.get_blob("a/b c/d+e?.json")
    assert fetched is not None and fetched.content_type == "application/json" and fetched.size == 2
    with server.client() as http:
        quoted = urllib.parse.quote("a/b c/d+e?.json", safe="")
        resource = http.get(f"/storage/v1/b/lifecycle/o/{quoted}").json()
    assert resource["kind"] == "storage#object" and resource["name"] == "a/b c/d+e?.json"
    assert resource["generation"] == str(fetched.generation) and resource["size"] == "2"
    assert resource["timeCreated"].endswith("Z") and resource["crc32c"] == crc32c(b"{}")
    assert resource["id"] == f"lifecycle/a/b c/d+e?.json/{fetched.generation}"
    fetched.delete()
    assert bucket.get_blob("a/b c/d+e?.json") is None
    with pytest.raises(exceptions.NotFound):
        bucket.blob("a/b c/d+e?.json").download_as_bytes()
    with pytest.raises(exceptions.NotFound):
        bucket.blob("never-there").reload()
    with pytest.raises(exceptions.NotFound):
        bucket.blob("never-there").delete()
    with server.client() as http:
        message = gcs_error(http.get("/storage/v1/b/lifecycle/o/never-there"), 404, "notFound")
        assert message == "No such object: lifecycle/never-there"
        gcs_error(http.get("/storage/v1/b/no-such-bucket/o/x"), 404, "notFound")
    # A bucket with objects cannot go; an empty one can.
    bucket.blob("keep").upload_from_string(b"1")
    with pytest.raises(exceptions.Conflict):
        bucket.delete()
    bucket.blob("keep").delete()
    bucket.delete()
    assert not bucket.exists() and not bucket_dir(server, "lifecycle").exists()


def test_generation_preconditions(gcs: storage.Client, fs: GCSFileSystem) -> None:
    bucket = gcs.create_bucket("preconditions")
    blob = bucket.blob("once")
    blob.upload_from_string(b"first", if_generation_match=0)
    first = blob.generation
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("once").upload_from_string(b"second", if_generation_match=0)
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("once").upload_from_string(b"second", if_generation_match=first + 1)
    bucket.blob("once").upload_from_string(b"second", if_generation_match=first)
    second = bucket.get_blob("once")
    assert second is not None and second.generation > first
    with pytest.raises(exceptions.PreconditionFailed):
        bucket.blob("once").delete(if_generation_match=first)
    with pytest.raises(FileExistsError):
        fs.pipe("preconditions/once", b"third", mode="create")
    assert bucket.blob("once").download_as_bytes() == b"second"


# ---------------------------------------------------------------- gcsfs
def test_gcsfs_ls_pipe_cat_info_put_get_cp_mv_rm_find(fs: GCSFileSystem, tmp_path: Path) -> None:
    fs.mkdir("fsspec-bucket")
    fs.pipe("fsspec-bucket/data/one.txt", b"one")
    fs.pipe("fsspec-bucket/data/deep/two.txt", b"two!")
    assert fs.cat("fsspec-bucket/data/one.txt") == b"one"
    big = os.urandom(12 * 1024 * 1024)  # gcsfs pipes up to 50 MiB as one multipart body, with LF line ends
    fs.pipe("fsspec-bucket/big.bin", big)
    assert fs.cat("fsspec-bucket/big.bin") == big
    fs.rm("fsspec-bucket/big.bin")
    assert fs.cat_file("fsspec-bucket/data/deep/two.txt", start=1, end=3) == b"wo"
    info = fs.info("fsspec-bucket/data/deep/two.txt")
    assert (info["type"], info["size"], info["crc32c"]) == ("file", 4, crc32c(b"two!"))
    assert fs.info("fsspec-bucket/data")["type"] == "directory"
    assert fs.ls("fsspec-bucket/data") == ["fsspec-bucket/data/deep", "fsspec-bucket/data/one.txt"]
    local = tmp_path / "local.bin"
    local.write_bytes(os.urandom(6 * 1024 * 1024))  # gcsfs puts files over 5 MiB with a resumable upload
    fs.put_file(str(local), "fsspec-bucket/data/put.bin")
    fs.get_file("fsspec-bucket/data/put.bin", str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == local.read_bytes()
    with fs.open("fsspec-bucket/data/streamed.bin", "wb", block_size=2**18) as handle:
        for _ in range(3):
            handle.write(b"x" * 300_000)  # chunks of a resumable session, POSTed as gcsfs does
    assert fs.info("fsspec-bucket/data/streamed.bin")["size"] == 900_000
    fs.cp("fsspec-bucket/data/one.txt", "fsspec-bucket/copy/one.txt")
    fs.mv("fsspec-bucket/copy/one.txt", "fsspec-bucket/moved/one.txt")
    assert fs.cat("fsspec-bucket/moved/one.txt") == b"one"
    assert not fs.exists("fsspec-bucket/copy/one.txt")
    fs.rm("fsspec-bucket/data/deep/two.txt")
    assert fs.find("fsspec-bucket") == [
        "fsspec-bucket/data/one.txt",
        "fsspec-bucket/data/put.bin",
        "fsspec-bucket/data/streamed.bin",
        "fsspec-bucket/moved/one.txt",
    ]
    fs.rm("fsspec-bucket/data", recursive=True)
    assert fs.find("fsspec-bucket") == ["fsspec-bucket/moved/one.txt"]
    # An object may take the name of a folder whose objects are all gone.
    fs.pipe("fsspec-bucket/data", b"now a file")
    assert fs.cat("fsspec-bucket/data") == b"now a file"


def test_folder_markers(fs: GCSFileSystem, gcs: storage.Client, server: ServerProcess) -> None:
    fs.mkdir("markers")
    # A zero-byte "x/" object, as the console and other tools make them: a folder of its own.
    gcs.bucket("markers").blob("empty-folder/").upload_from_string(b"")
    assert (bucket_dir(server, "markers") / "empty-folder").is_dir()
    listing = gcs.list_blobs("markers", delimiter="/")
    assert list(listing) == [] and listing.prefixes == {"empty-folder/"}
    assert [b.name for b in gcs.list_blobs("markers")] == ["empty-folder/"]
    gcs.bucket("markers").blob("empty-folder/").delete()
    assert [b.name for b in gcs.list_blobs("markers")] == []
    with server.client() as http:
        response = http.post(
            "/upload/storage/v1/b/markers/o", params={"uploadType": "media", "name": "x/"}, content=b"data"
        )
        assert "folder" in gcs_error(response, 400, "invalid")


def test_files_written_under_the_bucket_root_are_objects(
    gcs: storage.Client, fs: GCSFileSystem, server: ServerProcess
) -> None:
    gcs.create_bucket("written-by-jobs")
    path = bucket_dir(server, "written-by-jobs") / "run1" / "checkpoint.bin"
    path.parent.mkdir()
    data = os.urandom(70_000)
    path.write_bytes(data)
    (listed,) = gcs.list_blobs("written-by-jobs")
    assert (listed.name, listed.size, listed.crc32c, listed.md5_hash) == (
        "run1/checkpoint.bin",
        len(data),
        crc32c(data),
        md5(data),
    )
    assert listed.generation == path.stat().st_mtime_ns
    assert gcs.bucket("written-by-jobs").blob("run1/checkpoint.bin").download_as_bytes() == data
    # Rewritten in place: a new generation and checksums, not the cached ones.
    path.write_bytes(b"rewritten")
    fetched = gcs.bucket("written-by-jobs").get_blob("run1/checkpoint.bin")
    assert fetched is not None
    assert (fetched.size, fetched.crc32c) == (
        9,
        crc32c(b"rewritten"),
    ) and fetched.generation > listed.generation
    assert fs.cat("written-by-jobs/run1/checkpoint.bin") == b"rewritten"


# ---------------------------------------------------------------- resumable sessions
def test_resumable_session_survives_a_server_restart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    proc = ServerProcess(home=tmp_path / "home").start()
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proc.url)
        client = storage.Client()
        bucket = client.create_bucket("resumed")
        data = os.urandom(3 * 256 * 1024 + 17)
        first = 2 * 256 * 1024
        session_url = bucket.blob("big/part.bin").create_resumable_upload_session(
            content_type="application/x-test", size=len(data)
        )
        assert session_url.startswith(proc.url + "/upload/storage/v1/b/resumed/o?")
        with httpx.Client(timeout=30) as http:
            response = http.put(
                session_url,
                content=data[:first],
                headers={"content-range": f"bytes 0-{first - 1}/{len(data)}"},
            )
            assert response.status_code == 308 and response.headers["range"] == f"bytes=0-{first - 1}"
        # Not visible while incomplete: no object, no file in the bucket.
        assert bucket.get_blob("big/part.bin") is None
        assert not (tmp_path / "home" / "buckets" / "resumed" / "big").exists()
        proc.stop()
        proc.start()  # same home, same port: the session URL still works
        with httpx.Client(timeout=30) as http:
            status = http.put(session_url, headers={"content-range": f"bytes */{len(data)}"})
            assert status.status_code == 308 and status.headers["range"] == f"bytes=0-{first - 1}"
            done = http.put(
                session_url,
                content=data[first:],
                headers={
                    "content-range": f"bytes {first}-{len(data) - 1}/{len(data)}",
                    "x-goog-hash": f"crc32c={crc32c(data)}",
                },
            )
            assert done.status_code == 200, done.text
            resource = done.json()
            assert resource["crc32c"] == crc32c(data) and resource["size"] == str(len(data))
            assert resource["contentType"] == "application/x-test"
            again = http.put(session_url, headers={"content-range": f"bytes */{len(data)}"})
            assert again.status_code == 200 and again.json()["generation"] == resource["generation"]
        assert bucket.blob("big/part.bin").download_as_bytes() == data
    finally:
        proc.stop()


def test_resumable_checks_ranges_and_checksums(gcs: storage.Client, server: ServerProcess) -> None:
    bucket = gcs.create_bucket("resumable-checks")
    data = b"0123456789" * 10
    with server.client() as http:

        def session() -> str:
            url = bucket.blob("checked.bin").create_resumable_upload_session(size=len(data))
            return str(url)

        url = session()
        bad = http.put(
            url, content=data, headers={"content-range": "bytes 0-99/100", "x-goog-hash": "crc32c=AAAAAA=="}
        )
        assert "CRC32C" in gcs_error(bad, 400, "invalid")
        assert bucket.get_blob("checked.bin") is None
        url = session()
        gap = http.put(url, content=data[50:], headers={"content-range": "bytes 50-99/100"})
        assert "starts at byte 50" in gcs_error(gap, 400, "invalid")
        short = http.put(url, content=data[:10], headers={"content-range": "bytes 0-19/100"})
        assert "names 20 bytes" in gcs_error(short, 400, "invalid")
        gcs_error(http.put(url, content=b"x", headers={"content-range": "bytes=0-0/1"}), 400, "invalid")
        # A chunk sent twice (a retry) is taken once.
        for _ in range(2):
            again = http.put(url, content=data[:30], headers={"content-range": "bytes 0-29/*"})
            assert again.status_code == 308 and again.headers["range"] == "bytes=0-29"
        done = http.put(url, content=data[30:], headers={"content-range": "bytes 30-99/100"})
        assert done.status_code == 200 and done.json()["md5Hash"] == md5(data)
        cancelled = session()
        assert http.delete(cancelled).status_code == 499
        gcs_error(http.put(cancelled, headers={"content-range": "bytes */*"}), 404, "notFound")
    assert bucket.blob("checked.bin").download_as_bytes() == data


# ---------------------------------------------------------------- bad input
def test_bad_names_and_escapes_get_400(gcs: storage.Client, server: ServerProcess) -> None:
    gcs.create_bucket("names")
    (server.home / "secret.txt").write_text("not an object")
    with server.client() as http:
        for name in ("../escape", "a/../../escape", "a//b", "/lead", "a/./b", "bad\nname", "x" * 300):
            response = http.post(
                "/upload/storage/v1/b/names/o", params={"uploadType": "media", "name": name}, content=b"x"
            )
            assert gcs_error(response, 400, "invalid").startswith("Invalid object name"), name
        response = http.post("/upload/storage/v1/b/names/o", params={"uploadType": "media"}, content=b"x")
        gcs_error(response, 400, "required")
        for path in ("/storage/v1/b/names/o/..%2F..%2Fsecret.txt", "/download/storage/v1/b/names/o/..%2Fx"):
            gcs_error(http.get(path, params={"alt": "media"}), 400, "invalid")
        gcs_error(http.get("/storage/v1/b/Names/o"), 400, "invalid")
        response = http.post(
            "/upload/storage/v1/b/no-bucket/o", params={"uploadType": "media", "name": "x"}, content=b"x"
        )
        gcs_error(response, 404, "notFound")
        gcs_error(
            http.post("/upload/storage/v1/b/names/o", params={"uploadType": "chunked"}),
            400,
            "invalidParameter",
        )
        gcs_error(http.get("/storage/v1/b/names/o", params={"maxResults": "many"}), 400, "invalid")
        gcs_error(http.get("/storage/v1/b/names/o", params={"maxResults": "0"}), 400, "invalid")
        # A file cannot also be a folder in a local bucket.
        http.post(
            "/upload/storage/v1/b/names/o", params={"uploadType": "media", "name": "file"}, content=b"x"
        )
        response = http.post(
            "/upload/storage/v1/b/names/o", params={"uploadType": "media", "name": "file/inner"}, content=b"x"
        )
        assert "'file'" in gcs_error(response, 409, "conflict")
        response = http.get(
            "/storage/v1/b/names/o/file", params={"alt": "media"}, headers={"range": "bytes=5-"}
        )
        assert (
            gcs_error(response, 416, "requestedRangeNotSatisfiable")
            and response.headers["content-range"] == "bytes */1"
        )
        body, _ = multipart({"name": "m"}, b"x")
        response = http.post(
            "/upload/storage/v1/b/names/o",
            params={"uploadType": "multipart"},
            content=body[:-4],
            headers={"content-type": 'multipart/related; boundary="b0und4ry"'},
        )
        assert "closing boundary" in gcs_error(response, 400, "invalid")
    assert [b.name for b in gcs.list_blobs("names")] == ["file"]


def test_storage_api_with_tokens_needs_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import google.auth.api_key

    proc = ServerProcess(home=tmp_path / "home", args=["--api-token", "s3cret"]).start()
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", proc.url)
        with pytest.raises(exceptions.Forbidden):
            storage.Client().create_bucket("guarded")
        keyed = storage.Client(credentials=google.auth.api_key.Credentials("s3cret"))
        keyed.create_bucket("guarded").blob("x").upload_from_string(b"ok")
        assert keyed.bucket("guarded").blob("x").download_as_bytes() == b"ok"
        with httpx.Client(base_url=proc.url) as http:
            assert (
                http.get("/storage/v1/b/guarded/o", params={"key": "s3cret"}).json()["items"][0]["name"]
                == "x"
            )
    finally:
        proc.stop()


# ---------------------------------------------------------------- replicas
def stdout_of(server: ServerProcess, created: dict[str, Any]) -> str:
    job_id = created["name"].rsplit("/", 1)[-1]
    return replica_output(server.home / "jobs" / job_id / "workerpool0-0")


def test_replica_reaches_the_storage_api_through_its_environment(
    gcs: storage.Client, server: ServerProcess
) -> None:
    bucket = gcs.create_bucket("replica-io")
    bucket.blob("seed.txt").upload_from_string(b"seed")
    code = textwrap.dedent(
        """
        import os, pathlib, sys
        import gcsfs
        from google.cloud import storage
        print("HOST", os.environ["STORAGE_EMULATOR_HOST"], flush=True)
        client = storage.Client()  # no endpoint given: STORAGE_EMULATOR_HOST says where
        client.bucket("replica-io").blob("out/sdk.txt").upload_from_string(b"written by the sdk")
        fs = gcsfs.GCSFileSystem(token="anon")
        if type(fs).__name__ != "GCSFileSystem":
            sys.exit("gcsfs would first ask a Storage Control gRPC API for the bucket's layout")
        fs.pipe("replica-io/out/gcsfs.txt", b"gcsfs saw " + fs.cat("replica-io/seed.txt"))
        folder = pathlib.Path("/gcs/replica-io/out/fuse")
        folder.mkdir(parents=True)
        (folder / "file.bin").write_bytes(bytes(range(256)) * 40)
        """
    )
    with server.client() as http:
        response = http.post(f"/v1/{server.parent}/customJobs", json=job(python_pool(code)))
        assert response.status_code == 200, response.text
        created = response.json()
        done = wait_job(http, created["name"])
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert f"HOST {server.url}" in stdout_of(server, created)
    assert bucket.blob("out/sdk.txt").download_as_bytes() == b"written by the sdk"
    assert bucket.blob("out/gcsfs.txt").download_as_bytes() == b"gcsfs saw seed"
    fuse = bucket.get_blob("out/fuse/file.bin")
    assert fuse is not None
    assert (fuse.size, fuse.crc32c) == (10240, crc32c(bytes(range(256)) * 40))


def test_a_jobs_own_storage_emulator_host_wins(server: ServerProcess) -> None:
    code = "import os; print('HOST', os.environ['STORAGE_EMULATOR_HOST'], os.environ['CLOUD_ML_JOB_ID'])"
    body = job(python_pool(code, env={"STORAGE_EMULATOR_HOST": "http://127.0.0.1:9"}))
    with server.client() as http:
        created = http.post(f"/v1/{server.parent}/customJobs", json=body).json()
        done = wait_job(http, created["name"])
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert "HOST http://127.0.0.1:9 " in stdout_of(server, created)


def test_gang_replicas_get_the_storage_url_unless_their_pool_sets_one(tmp_path: Path) -> None:
    """The Slurm path: the launcher's gang request, then each node's environment as slurm/task.py makes it."""
    from datetime import UTC, datetime

    from trainworks.backends.local import LocalBackend
    from trainworks.backends.python_packages import PackageEnvironments
    from trainworks.config import Settings
    from trainworks.kinds.custom_jobs.launcher import ReplicaLauncher
    from trainworks.slurm import task
    from trainworks.slurm.backend import SlurmBackend, SlurmTarget
    from trainworks.storage.gcs import ObjectStore
    from trainworks.store.tables import CustomJobRow, ReplicaRow

    def run_gang(settings: Settings) -> list[dict[str, str]]:
        launcher = ReplicaLauncher(
            settings,
            LocalBackend("host"),
            PackageEnvironments(settings.cache_dir, ObjectStore(settings.buckets)),
        )
        pools = [
            python_pool("pass"),
            python_pool("pass", env={"STORAGE_EMULATOR_HOST": "http://elsewhere:1"}),
        ]
        now = datetime.now(UTC)
        row = CustomJobRow(
            id=7,
            project_number="123",
            location="us-central1",
            display_name="gang",
            state=0,
            spec={"jobSpec": {"workerPoolSpecs": pools}},
            labels={},
            create_time=now,
            update_time=now,
            attempt=0,
        )
        replicas = [
            ReplicaRow(
                job_id=7, pool=p, replica_index=0, host="127.0.0.1", port=0, run_dir=str(tmp_path / f"r{p}")
            )
            for p in (0, 1)
        ]
        slurm = SlurmBackend()
        request = launcher.gang_request(slurm, row, replicas, {}, set(), None)
        manifest = slurm.manifest(request, SlurmTarget(tmp_path / "slurm.conf"))
        placed = task.slots(manifest, [["node-a"], ["node-b"]], {})
        return [task.environment(manifest, placed, rank, {}) for rank in (0, 1)]

    settings = Settings(home=tmp_path / "home", storage_url="http://127.0.0.1:8123")
    first, second = run_gang(settings)
    assert first["STORAGE_EMULATOR_HOST"] == "http://127.0.0.1:8123"
    assert first["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] == "false"
    assert second["STORAGE_EMULATOR_HOST"] == "http://elsewhere:1"
    # Objects in real Cloud Storage: replicas are not pointed at this server.
    real = Settings(home=tmp_path / "home", storage_url="http://127.0.0.1:8123", gcs_protocol="gcs")
    assert "STORAGE_EMULATOR_HOST" not in run_gang(real)[0]


@pytest.fixture(autouse=True)
def _no_stray_emulator_host(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    # A test's client must not reach another test's server through an inherited variable.
    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    yield


def test_storage_url_of_serve_options() -> None:
    from trainworks.cli.serve import storage_url

    assert storage_url("0.0.0.0", 8080) == "http://127.0.0.1:8080"
    assert storage_url("::", 9000) == "http://127.0.0.1:9000"
    assert storage_url("::1", 9000) == "http://[::1]:9000"
    assert storage_url("10.1.2.3", 80) == "http://10.1.2.3:80"
