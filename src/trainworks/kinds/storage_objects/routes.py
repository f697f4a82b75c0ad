"""The Cloud Storage JSON API subset that google-cloud-storage and gcsfs use, over the local buckets.

Clients find it through `STORAGE_EMULATOR_HOST=http://HOST:PORT` (google-cloud-storage, gcsfs), gcsfs's
`endpoint_url=` or gcloud's `api_endpoint_overrides/storage http://HOST:PORT/storage/v1/`; replicas get
that variable from the server. Buckets and their storage layout, objects, listing, media, multipart and
resumable uploads, downloads with Range, rewrite/copy/move; storage/objects.py does the work (its values in
storage/object_model.py, resumable sessions in storage/uploads.py). Errors have Cloud Storage's own body
(`{"error": {"code", "message", "errors": [{"reason", ...}]}}`), not the Vertex one of the rest of the
server, so these routes answer their errors themselves.

gcsfs >= 2025 names `gcsfs.GCSFileSystem` a class that first asks the Storage Control gRPC API (TLS, same
host:port) for each bucket's layout, which stalls a minute per call against any emulator: use
`gcsfs.core.GCSFileSystem`, or set GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false before gcsfs is imported (replicas
get that with STORAGE_EMULATOR_HOST).

Auth: when the server requires API tokens, these paths need one too, like every path: a token may use the
buckets its projects own (storage/bucket_projects.py; bucket insert with `project=P` records P as the owner),
and only an admin token those no project owns (api/auth.py).
google-cloud-storage sends no credentials to an emulator, so give it the token as an API key:
`storage.Client(credentials=google.auth.api_key.Credentials(TOKEN))` (an `x-goog-api-key` header), or
append `?key=TOKEN`; gcsfs and other clients may send it as a bearer token.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from dataclasses import replace
from email.utils import formatdate
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from starlette.concurrency import run_in_threadpool

from trainworks.api.auth import authority
from trainworks.api.errors import gcs_error
from trainworks.api.state import services
from trainworks.kernel.errors import ApiError
from trainworks.storage.bucket_projects import bucket_owner, bucket_owners, claim_owner, release_bucket
from trainworks.storage.object_listing import decode_page_token, encode_page_token
from trainworks.storage.object_model import (
    MAX_PAGE,
    BucketInfo,
    Expected,
    NewObject,
    Preconditions,
    StorageError,
    bad_request,
    bucket_resource,
    conflict,
    object_resource,
    parse_object_body,
)
from trainworks.storage.objects import ObjectService, ObjectWriter, OpenObject
from trainworks.storage.uploads import UploadSession

_FLUSH = 1 << 20  # bytes gathered from the request before a write in the thread pool
_MAX_MULTIPART_HEAD = 1 << 20  # the metadata part and the media part's headers
_READ_BLOCK = 1 << 20


class _GcsRoute(APIRoute):
    """Turns StorageError into Cloud Storage's error body before the app's Vertex-style handlers see it."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            try:
                return await handler(request)
            except StorageError as exc:
                return gcs_error(exc)

        return guarded


# ---------------------------------------------------------------- request helpers
def _service(request: Request) -> ObjectService:
    service = services(request).storage
    if service is None:  # not wired on purpose (--gcs): not a fault of the server
        raise StorageError(
            501,
            "notImplemented",
            "This server sends gs:// to real Cloud Storage (--gcs), so it serves no storage API itself.",
        )
    return service


def _base(request: Request) -> str:
    return str(request.base_url).rstrip("/")


def _int_param(request: Request, name: str) -> int | None:
    raw = request.query_params.get(name)
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise bad_request(f"Invalid value for {name}: {raw[:100]!r} is not an integer.") from None


def _max_results(request: Request) -> int:
    wanted = _int_param(request, "maxResults")
    if wanted is None:
        return MAX_PAGE
    if wanted < 1:
        raise bad_request("Invalid value for maxResults: it must be at least 1.")
    return min(wanted, MAX_PAGE)


def _top_level_fields(fields: str) -> set[str]:
    """`items(name,size),nextPageToken` -> {"items", "nextPageToken"}: sub-selections are not applied."""
    names, depth, current = set(), 0, ""
    for char in fields:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        elif char == "," and depth == 0:
            names.add(current.split("/")[0].strip())
            current = ""
            continue
        if depth == 0 and char not in "()":
            current += char
    names.add(current.split("/")[0].strip())
    return {n for n in names if n}


def _json(request: Request, body: dict[str, Any], status: int = 200) -> JSONResponse:
    fields = request.query_params.get("fields")
    if fields:
        wanted = _top_level_fields(fields)
        body = {k: v for k, v in body.items() if k in wanted}
    return JSONResponse(body, status_code=status)


async def _json_body(request: Request, required: bool) -> Any:
    raw = await request.body()
    if not raw.strip():
        if required:
            raise bad_request("The request body is empty: expected a JSON resource.", reason="required")
        return {}
    try:
        return json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise bad_request("Parse Error: the request body is not valid JSON.", reason="parseError") from None


def _sent_hashes(request: Request) -> Expected:
    """Checksums in `x-goog-hash: crc32c=...,md5=...` (google-cloud-storage sends it with a last chunk)."""
    values: dict[str, str] = {}
    for header in request.headers.getlist("x-goog-hash"):
        for part in header.split(","):
            key, sep, value = part.strip().partition("=")
            if sep:
                values[key.lower()] = value.strip()
    return Expected(values.get("crc32c"), values.get("md5"))


async def _drain(chunks: AsyncIterator[bytes], write: Callable[[bytes], None]) -> None:
    """Feed a request body to a blocking writer, a batch at a time, off the event loop."""
    pending = bytearray()
    async for chunk in chunks:
        pending += chunk
        if len(pending) >= _FLUSH:
            data = bytes(pending)
            pending.clear()
            await run_in_threadpool(write, data)
    if pending:
        await run_in_threadpool(write, bytes(pending))


# ---------------------------------------------------------------- multipart/related
def _part_headers(buf: bytes | bytearray, boundary: int) -> tuple[dict[str, str], int] | None:
    """The headers of the part whose boundary line starts at `boundary`, up to a blank line (CRLF or LF line
    ends), and where its body starts; None: read more."""
    pos = buf.find(b"\n", boundary)
    if pos < 0:
        return None
    pos += 1
    headers: dict[str, str] = {}
    while True:
        end = buf.find(b"\n", pos)
        if end < 0:
            return None
        line = bytes(buf[pos:end]).rstrip(b"\r")
        pos = end + 1
        if not line:
            return headers, pos
        name, sep, value = line.decode("latin-1").partition(":")
        if sep:
            headers[name.strip().lower()] = value.strip()


def _multipart_head(buf: bytearray, dash: bytes) -> tuple[bytes, dict[str, str], int] | None:
    """The metadata part's body, the media part's headers and where the media starts; None: read more."""
    first = buf.find(dash)
    if first < 0:
        return None
    part = _part_headers(buf, first)
    if part is None:
        return None
    _, body_start = part
    delimiter = buf.find(b"\n" + dash, body_start)
    if delimiter < 0:
        return None
    metadata = bytes(buf[body_start:delimiter]).rstrip(b"\r")
    after = delimiter + 1 + len(dash)
    if buf[after : after + 2] == b"--":
        raise bad_request("Invalid multipart body: expected a metadata part and a media part.")
    media = _part_headers(buf, after)
    if media is None:
        return None
    return metadata, media[0], media[1]


async def _read_multipart(request: Request, writer: ObjectWriter) -> tuple[Any, str | None]:
    """Streams a multipart/related upload: the JSON metadata part, then the media part into `writer`.
    Accepts LF as well as CRLF line ends (gcsfs writes LF)."""
    content_type = request.headers.get("content-type", "")
    # The boundary may be quoted with double or (as gcloud writes it) single quotes.
    match = re.search(r"""boundary=(?:"([^"]+)"|'([^']+)'|([^;\s]+))""", content_type, flags=re.IGNORECASE)
    if not content_type.lower().startswith("multipart/related") or match is None:
        raise bad_request("uploadType=multipart needs Content-Type: multipart/related; boundary=...")
    dash = b"--" + next(group for group in match.groups() if group).encode("latin-1")
    stream = request.stream()
    buf = bytearray()
    head = None
    async for chunk in stream:
        buf += chunk
        head = _multipart_head(buf, dash)
        if head is not None:
            break
        if len(buf) > _MAX_MULTIPART_HEAD:
            raise bad_request("Invalid multipart body: no media part in its first MiB.")
    if head is None:
        raise bad_request("Invalid multipart body: expected a metadata part and a media part.")
    raw_metadata, media_headers, media_start = head
    try:
        metadata = json.loads(raw_metadata) if raw_metadata.strip() else {}
    except (ValueError, UnicodeDecodeError):
        raise bad_request(
            "Invalid multipart body: the metadata part is not JSON.", reason="parseError"
        ) from None
    # The media runs to the close delimiter: hold back enough to find it at the end.
    keep = len(dash) + 72
    pending = buf[media_start:]
    async for chunk in stream:
        pending += chunk
        if len(pending) > _FLUSH + keep:
            cut = len(pending) - keep
            data = bytes(pending[:cut])
            del pending[:cut]
            await run_in_threadpool(writer.write, data)
    end = pending.rfind(b"\n" + dash)
    close = end + 1 + len(dash)
    if end < 0 or pending[close : close + 2] != b"--" or pending[close + 2 :].strip():
        raise bad_request("Invalid multipart body: the media part has no closing boundary.")
    stop = end - 1 if end > 0 and pending[end - 1 : end] == b"\r" else end
    await run_in_threadpool(writer.write, bytes(pending[:stop]))
    return metadata, media_headers.get("content-type")


# ---------------------------------------------------------------- downloads
def _byte_range(header: str, size: int) -> tuple[int, int] | None:
    """(first, last) of a single `bytes=` range; None to send the whole object (no or unusable range)."""
    unsatisfiable = StorageError(
        416,
        "requestedRangeNotSatisfiable",
        f"The requested range is not satisfiable: the object has {size} bytes.",
        {"content-range": f"bytes */{size}"},
    )
    match = re.fullmatch(r"\s*bytes=(\d*)-(\d*)\s*", header)
    if match is None or (not match.group(1) and not match.group(2)) or size == 0:
        return None
    if not match.group(1):
        suffix = int(match.group(2))
        if suffix == 0:
            raise unsatisfiable
        return max(0, size - suffix), size - 1
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) else size - 1
    if match.group(2) and last < first:
        return None  # not a valid range: ignored, as HTTP says
    if first >= size:
        raise unsatisfiable
    return first, min(last, size - 1)


def _stream(opened: OpenObject, start: int, stop: int) -> Iterator[bytes]:
    try:
        fd = opened.handle.fileno()
        offset = start
        while offset < stop:
            block = os.pread(fd, min(_READ_BLOCK, stop - offset), offset)
            if not block:
                break
            offset += len(block)
            yield block
    finally:
        opened.close()


def _media(request: Request, service: ObjectService, bucket: str, name: str) -> Response:
    opened = service.open_object(
        bucket, name, _int_param(request, "generation"), Preconditions.from_params(request.query_params)
    )
    info = opened.info
    headers = {
        "content-type": info.content_type,
        "x-goog-hash": f"crc32c={info.crc32c},md5={info.md5}",
        "x-goog-generation": str(info.generation),
        "x-goog-metageneration": str(info.metageneration),
        "x-goog-stored-content-length": str(info.size),
        "x-goog-stored-content-encoding": info.fixed.get("contentEncoding", "identity"),
        "x-goog-storage-class": "STANDARD",
        "etag": f'"{info.md5}"',
        "last-modified": formatdate(info.updated_ns / 1e9, usegmt=True),
        "accept-ranges": "bytes",
    }
    for key, header in (
        ("cacheControl", "cache-control"),
        ("contentDisposition", "content-disposition"),
        ("contentLanguage", "content-language"),
    ):
        if key in info.fixed:
            headers[header] = info.fixed[key]
    start, stop, status = 0, info.size, 200
    wanted = request.headers.get("range")
    if wanted:
        try:
            picked = _byte_range(wanted, info.size)
        except StorageError:
            opened.close()
            raise
        if picked is not None:
            start, stop, status = picked[0], picked[1] + 1, 206
            headers["content-range"] = f"bytes {picked[0]}-{picked[1]}/{info.size}"
    headers["content-length"] = str(stop - start)
    return StreamingResponse(_stream(opened, start, stop), status_code=status, headers=headers)


# ---------------------------------------------------------------- resumable chunks
_CONTENT_RANGE = re.compile(r"^bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)$")


async def _chunk(request: Request, service: ObjectService, upload_id: str) -> Response:
    """PUT (google-cloud-storage) or POST (gcsfs) to a session: a chunk, a status query or the last chunk."""
    session = await run_in_threadpool(service.session, upload_id)
    header = request.headers.get("content-range")
    first: int | None = 0
    last: int | None = None
    total: int | None = None
    if header is not None:
        match = _CONTENT_RANGE.match(header.strip())
        if match is None:
            raise bad_request(
                f"Invalid Content-Range {header[:100]!r}: expected bytes A-B/TOTAL, A-B/* or */TOTAL."
            )
        first = int(match.group(1)) if match.group(1) is not None else None
        last = int(match.group(2)) if match.group(2) is not None else None
        total = int(match.group(3)) if match.group(3) != "*" else None
        if first is not None and last is not None and last < first:
            raise bad_request(f"Invalid Content-Range {header!r}: the last byte comes before the first.")
        if total is not None and last is not None and last >= total:
            raise bad_request(f"Invalid Content-Range {header!r}: the chunk ends past the total.")
    sent = _sent_hashes(request)
    with session:
        if session.done:
            info = await run_in_threadpool(session.result)
            return JSONResponse(object_resource(info, _base(request)))
        if first is not None:
            length = None if last is None else last - first + 1
            writer = session.chunk_writer(first, length)
            try:
                await _drain(request.stream(), writer.write)
            finally:
                await run_in_threadpool(writer.close)
            if length is not None and writer.received != length:
                raise bad_request(
                    f"Invalid Content-Range {header!r}: it names {length} bytes but the body has "
                    f"{writer.received}."
                )
            if header is None:
                total = session.size()  # the whole object in one request
        size = session.size()
        if total is not None and size == total:
            info = await run_in_threadpool(session.finish, total, sent)
            return JSONResponse(object_resource(info, _base(request)))
        if total is not None and size > total:
            raise bad_request(f"Invalid Content-Range {header!r}: the session already has {size} bytes.")
        return _incomplete(session, size)


def _incomplete(session: UploadSession, size: int) -> Response:
    """308 with the bytes persisted so far (no Range header before the first byte), as GCS answers."""
    headers = {"range": f"bytes=0-{size - 1}"} if size else {}
    headers["x-guploader-uploadid"] = session.id
    return Response(status_code=308, headers=headers)


# ---------------------------------------------------------------- bucket ownership
def _project_names(request: Request, project: str | None) -> set[str] | None:
    """The ID and number of the project a bucket request names; None for none (absent, `<none>`, or not a
    project name at all, which this server has always let through)."""
    if not project or project == "<none>":
        return None
    service = _service(request)
    if service.project_number is None:
        return None
    try:
        number = service.project_number(project)  # registers a new project ID, as any API path does
    except (ApiError, ValueError):
        return None
    return authority(request).project_names(project) | {number}


def _owner_of(names: set[str]) -> tuple[str, str | None]:
    """A project's ID (its number when no ID is known) and number, as an owner is recorded."""
    ids = sorted(n for n in names if not n.isdigit())
    numbers = sorted(n for n in names if n.isdigit())
    return (ids[0] if ids else numbers[0]), (numbers[0] if numbers else None)


def _owned_buckets(
    service: ObjectService, names: set[str], request: Request
) -> tuple[list[BucketInfo], str | None]:
    """One page of the buckets a project owns, in name order, as list_buckets pages all of them."""
    prefix = request.query_params.get("prefix", "")
    page_token = request.query_params.get("pageToken")
    after = decode_page_token(page_token)["a"] if page_token else ""
    limit = _max_results(request)
    owned = sorted(
        name
        for name, owner in bucket_owners(service.root).items()
        if names & {owner.project, owner.project_number}
        and name.startswith(prefix)
        and name > after
        and (service.root / name).is_dir()
    )
    page = owned[:limit]
    token = encode_page_token(page[-1], False) if len(owned) > limit else None
    return [service.get_bucket(name) for name in page], token


def _session_in(service: ObjectService, upload_id: str, bucket: str) -> UploadSession:
    """The upload session, only under the bucket it writes to: the path's bucket is what auth checked."""
    session = service.session(upload_id)
    if session.state.get("bucket") != bucket:
        raise StorageError(404, "notFound", f"No such upload session in bucket {bucket[:100]}.")
    return session


# ---------------------------------------------------------------- the routes
def router() -> APIRouter:
    api = APIRouter(tags=["storage"], route_class=_GcsRoute)

    # ------------------------------------------------------------ buckets
    @api.get("/storage/v1/b")
    def list_buckets(request: Request) -> Response:
        """The buckets of the `project` parameter; without one (or `<none>`, as google-cloud-storage sends to
        an emulator), every bucket under the bucket root, owned or not (auth lets only admins ask that)."""
        service = _service(request)
        names = _project_names(request, request.query_params.get("project"))
        if names is None:
            buckets, token = service.list_buckets(
                request.query_params.get("prefix", ""),
                request.query_params.get("pageToken"),
                _max_results(request),
            )
        else:
            buckets, token = _owned_buckets(service, names, request)
        body: dict[str, Any] = {"kind": "storage#buckets"}
        if buckets:
            body["items"] = [bucket_resource(b, _base(request)) for b in buckets]
        if token:
            body["nextPageToken"] = token
        return _json(request, body)

    @api.post("/storage/v1/b")
    async def insert_bucket(request: Request) -> Response:
        service = _service(request)
        body = await _json_body(request, required=True)
        project = request.query_params.get("project")
        names = await run_in_threadpool(_project_names, request, project)
        name = body.get("name") if isinstance(body, dict) else None
        if isinstance(name, str) and names is not None:
            owner = bucket_owner(service.root, name)
            if owner is not None and not names & {owner.project, owner.project_number}:
                # Claimed by a job of another project that has not made its folder yet.
                raise conflict("The requested bucket name is not available: another project owns it.")
        info = await run_in_threadpool(service.insert_bucket, body, project)
        if names is not None:
            await run_in_threadpool(claim_owner, service.root, info.name, *_owner_of(names))
        return _json(request, bucket_resource(info, _base(request)))

    @api.get("/storage/v1/b/{bucket}")
    def get_bucket(bucket: str, request: Request) -> Response:
        return _json(request, bucket_resource(_service(request).get_bucket(bucket), _base(request)))

    @api.get("/storage/v1/b/{bucket}/storageLayout")
    def get_storage_layout(bucket: str, request: Request) -> Response:
        """A flat namespace in the bucket's location (gcloud storage mv reads it before moving)."""
        info = _service(request).get_bucket(bucket)
        layout = {
            "kind": "storage#storageLayout",
            "bucket": info.name,
            "location": info.location,
            "locationType": "region",
            "hierarchicalNamespace": {"enabled": False},
        }
        return _json(request, layout)

    @api.delete("/storage/v1/b/{bucket}")
    def delete_bucket(bucket: str, request: Request) -> Response:
        service = _service(request)
        service.delete_bucket(bucket)
        release_bucket(service.root, bucket)  # the name is free again, for any project
        return Response(status_code=204)

    # ------------------------------------------------------------ objects
    @api.get("/storage/v1/b/{bucket}/o")
    def list_objects(bucket: str, request: Request) -> Response:
        params = request.query_params
        page = _service(request).list_objects(
            bucket,
            prefix=params.get("prefix", ""),
            delimiter=params.get("delimiter", ""),
            start_offset=params.get("startOffset", ""),
            end_offset=params.get("endOffset", ""),
            page_token=params.get("pageToken") or None,
            max_results=_max_results(request),
        )
        body: dict[str, Any] = {"kind": "storage#objects"}
        if page.items:
            body["items"] = [object_resource(i, _base(request)) for i in page.items]
        if page.prefixes:
            body["prefixes"] = page.prefixes
        if page.next_page_token:
            body["nextPageToken"] = page.next_page_token
        return _json(request, body)

    @api.get("/storage/v1/b/{bucket}/o/{name:path}")
    def get_object(bucket: str, name: str, request: Request) -> Response:
        service = _service(request)
        alt = request.query_params.get("alt", "json")
        if alt == "media":
            return _media(request, service, bucket, name)
        if alt != "json":
            raise bad_request(f"Invalid value for alt: {alt[:50]!r}; use json or media.")
        info = service.get_object(
            bucket, name, _int_param(request, "generation"), Preconditions.from_params(request.query_params)
        )
        return _json(request, object_resource(info, _base(request)))

    @api.get("/download/storage/v1/b/{bucket}/o/{name:path}")
    def download(bucket: str, name: str, request: Request) -> Response:
        return _media(request, _service(request), bucket, name)

    @api.patch("/storage/v1/b/{bucket}/o/{name:path}")
    async def patch_object(bucket: str, name: str, request: Request) -> Response:
        service = _service(request)
        body = await _json_body(request, required=True)
        info = await run_in_threadpool(
            service.patch_object,
            bucket,
            name,
            body,
            _int_param(request, "generation"),
            Preconditions.from_params(request.query_params),
        )
        return _json(request, object_resource(info, _base(request)))

    @api.delete("/storage/v1/b/{bucket}/o/{name:path}")
    def delete_object(bucket: str, name: str, request: Request) -> Response:
        _service(request).delete_object(
            bucket, name, _int_param(request, "generation"), Preconditions.from_params(request.query_params)
        )
        return Response(status_code=204)

    async def _copy(request: Request, bucket: str, source: str, dest_bucket: str, dest: str) -> Any:
        service = _service(request)
        body = await _json_body(request, required=False)
        return await run_in_threadpool(
            service.copy_object,
            bucket,
            source,
            dest_bucket,
            dest,
            body,
            _int_param(request, "sourceGeneration"),
            Preconditions.from_params(request.query_params),
            Preconditions.from_params(request.query_params, "ifSource"),
        )

    @api.post("/storage/v1/b/{bucket}/o/{source:path}/rewriteTo/b/{dest_bucket}/o/{dest:path}")
    async def rewrite(bucket: str, source: str, dest_bucket: str, dest: str, request: Request) -> Response:
        """Done in one call: no rewriteToken is ever needed."""
        info = await _copy(request, bucket, source, dest_bucket, dest)
        size = str(info.size)
        body = {
            "kind": "storage#rewriteResponse",
            "totalBytesRewritten": size,
            "objectSize": size,
            "done": True,
            "resource": object_resource(info, _base(request)),
        }
        return _json(request, body)

    @api.post("/storage/v1/b/{bucket}/o/{source:path}/copyTo/b/{dest_bucket}/o/{dest:path}")
    async def copy(bucket: str, source: str, dest_bucket: str, dest: str, request: Request) -> Response:
        info = await _copy(request, bucket, source, dest_bucket, dest)
        return _json(request, object_resource(info, _base(request)))

    @api.post("/storage/v1/b/{bucket}/o/{source:path}/moveTo/o/{dest:path}")
    def move(bucket: str, source: str, dest: str, request: Request) -> Response:
        info = _service(request).move_object(
            bucket,
            source,
            dest,
            Preconditions.from_params(request.query_params),
            Preconditions.from_params(request.query_params, "ifSource"),
        )
        return _json(request, object_resource(info, _base(request)))

    # ------------------------------------------------------------ uploads
    # gcloud starts its resumable uploads (files over 8 MiB) under /resumable/: the same route.
    @api.post("/resumable/upload/storage/v1/b/{bucket}/o", name="resumable_upload")
    @api.post("/upload/storage/v1/b/{bucket}/o")
    async def upload(bucket: str, request: Request) -> Response:
        service = _service(request)
        params = request.query_params
        if params.get("upload_id"):
            await run_in_threadpool(_session_in, service, params["upload_id"], bucket)
            return await _chunk(request, service, params["upload_id"])
        upload_type = params.get("uploadType") or ("media" if params.get("name") else "")
        cond = Preconditions.from_params(params)
        base = _base(request)
        if upload_type == "resumable":
            body_name, meta, expected = parse_object_body(await _json_body(request, required=False))
            name = body_name or params.get("name") or ""
            content_type = request.headers.get("x-upload-content-type") or meta.content_type
            length = request.headers.get("x-upload-content-length")
            if length is not None and not length.strip().isdigit():
                raise bad_request(f"Invalid X-Upload-Content-Length {length[:50]!r}: expected a byte count.")
            upload_id = await run_in_threadpool(
                service.uploads.start,
                bucket,
                name,
                replace(meta, content_type=content_type),
                cond,
                expected,
                int(length) if length is not None else None,
            )
            location = (
                f"{base}/upload/storage/v1/b/{quote(bucket)}/o?uploadType=resumable&upload_id={upload_id}"
            )
            return Response(
                status_code=200, headers={"location": location, "x-guploader-uploadid": upload_id}
            )
        if upload_type not in ("media", "multipart"):
            raise bad_request(
                f"Invalid value for uploadType: {upload_type[:50]!r}; use media, multipart or resumable.",
                reason="invalidParameter" if upload_type else "required",
            )
        if upload_type == "media":
            name = params.get("name") or ""
            await run_in_threadpool(service.check_writable, bucket, name, cond)
        writer = service.new_writer()
        try:
            if upload_type == "media":
                await _drain(request.stream(), writer.write)
                meta = NewObject(request.headers.get("content-type") or None)
                expected = Expected()
            else:
                metadata, media_type = await _read_multipart(request, writer)
                body_name, meta, expected = parse_object_body(metadata)
                name = body_name or params.get("name") or ""
                meta = replace(meta, content_type=meta.content_type or media_type)
            info = await run_in_threadpool(
                service.commit, bucket, name, writer, meta, cond, expected.merged(_sent_hashes(request))
            )
        finally:
            writer.discard()
        return _json(request, object_resource(info, base))

    @api.put("/upload/storage/v1/b/{bucket}/o")
    async def upload_chunk(bucket: str, request: Request) -> Response:
        upload_id = request.query_params.get("upload_id")
        if not upload_id:
            raise bad_request("Required parameter: upload_id (from the Location of the session).", "required")
        await run_in_threadpool(_session_in, _service(request), upload_id, bucket)
        return await _chunk(request, _service(request), upload_id)

    @api.delete("/upload/storage/v1/b/{bucket}/o")
    async def cancel_upload(bucket: str, request: Request) -> Response:
        """Ends a session and drops its bytes; 499 is what Cloud Storage answers (and gcsfs expects)."""
        upload_id = request.query_params.get("upload_id")
        if not upload_id:
            raise bad_request("Required parameter: upload_id (from the Location of the session).", "required")
        session = await run_in_threadpool(_session_in, _service(request), upload_id, bucket)
        with session:
            await run_in_threadpool(session.cancel)
        return Response(status_code=499)

    return api
