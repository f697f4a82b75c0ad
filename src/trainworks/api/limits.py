"""Request size limits, in one place: an ASGI middleware just outside the routes (the innermost one).

JSON APIs: a body over `Settings.max_request_bytes` (`trainworks serve --max-request-bytes`, 16 MiB by
default) is answered 413 with a google.rpc body whose status is INVALID_ARGUMENT. AIP-193 maps no code to
413; Google's own front ends answer an oversized request with 413, and INVALID_ARGUMENT is the status the
official client's callers handle for a request they must change (the same pairing errors.py uses for any
413). The check reads Content-Length before the app runs; without one (chunked), the bytes are counted as
the app reads them and the read fails once they pass the limit, so no body is buffered whole first.

Cloud Storage uploads (/upload/storage/...) stream to disk and are exempt from the JSON limit. They are
held to `Settings.max_object_bytes` (`--max-object-bytes`, 5 TiB like Cloud Storage) per object instead:
Content-Length, X-Upload-Content-Length and Content-Range's total or last byte are checked up front, and
the bytes are counted from the chunk's offset while they stream. A body that passes its limit while it
streams fails the route's read with an exception no route catches; this middleware, just outside the
routes' exception handlers, answers it. Those answers, and the JSON limit on the other /storage/ routes,
have Cloud Storage's error body (413, reason uploadTooLarge).
"""

from __future__ import annotations

import re
from typing import Any

from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from trainworks.api.errors import error_body
from trainworks.kernel.status import Code

# A multipart upload carries its JSON metadata part and headers besides the object's bytes.
_MULTIPART_SLACK = 1 << 20
_GCS_PREFIXES = ("/storage/", "/upload/storage/", "/download/storage/", "/resumable/upload/storage/")
_UPLOAD_PREFIXES = ("/upload/storage/", "/resumable/upload/storage/")  # gcloud starts resumable ones there
_CONTENT_RANGE = re.compile(r"^\s*bytes (?:(\d+)-(\d+)|\*)/(\d+|\*)\s*$")


def _size(limit: int) -> str:
    for unit, shift in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if limit >= 1 << shift and limit % (1 << shift) == 0:
            return f"{limit >> shift} {unit}"
    return f"{limit} bytes"


class _TooLarge(Exception):
    """Raised from the body reader; no route catches it, so this middleware answers it."""


class _Limit:
    """What one request may send: a byte budget from an offset, and how to say it was passed."""

    def __init__(self, limit: int, offset: int, gcs: bool, upload: bool, named: int | None = None) -> None:
        self.limit = limit
        self.named = limit if named is None else named  # the configured limit, which the message names
        self.offset = offset
        self.gcs = gcs
        self.upload = upload

    def message(self) -> str:
        what, flag = (
            ("object", "--max-object-bytes") if self.upload else ("request body", "--max-request-bytes")
        )
        return (
            f"The {what} is larger than this server's limit of {self.named} bytes "
            f"({_size(self.named)}; trainworks serve {flag})."
        )

    def response(self) -> JSONResponse:
        message = self.message()
        if self.gcs:
            errors = [{"message": message, "domain": "global", "reason": "uploadTooLarge"}]
            return JSONResponse({"error": {"code": 413, "message": message, "errors": errors}}, 413)
        field = "object size" if self.upload else "body"
        details = [
            {
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": [{"field": field, "description": message}],
            }
        ]
        return JSONResponse(error_body(413, Code.INVALID_ARGUMENT, message, details), 413)


def _int_header(headers: dict[str, str], name: str) -> int | None:
    raw = headers.get(name, "").strip()
    return int(raw) if raw.isdigit() else None


class RequestLimits:
    """The ASGI middleware. Add it innermost (first): the routes read the body through it, and only their
    own exception handlers lie between its `_TooLarge` and the `except` that answers it."""

    def __init__(self, app: ASGIApp, max_request_bytes: int, max_object_bytes: int) -> None:
        self.app = app
        self.max_request_bytes = max_request_bytes
        self.max_object_bytes = max_object_bytes

    def _plan(self, scope: Scope) -> tuple[_Limit, bool]:
        """The request's budget, and whether its headers alone already pass it."""
        path: str = scope["path"]
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        gcs = path.startswith(_GCS_PREFIXES)
        length = _int_header(headers, "content-length")
        if not path.startswith(_UPLOAD_PREFIXES):
            limit = _Limit(self.max_request_bytes, 0, gcs, upload=False)
            return limit, length is not None and length > limit.limit
        cap = self.max_object_bytes
        query = scope.get("query_string", b"").decode("latin-1")
        if re.search(r"(?:^|&)uploadType=multipart(?:&|$)", query):
            cap += _MULTIPART_SLACK
        limit = _Limit(cap, 0, gcs=True, upload=True, named=self.max_object_bytes)
        declared = _int_header(headers, "x-upload-content-length")
        too_big = declared is not None and declared > self.max_object_bytes
        match = _CONTENT_RANGE.match(headers.get("content-range", ""))
        if match is not None:
            if match.group(1) is not None:
                limit.offset = int(match.group(1))
                too_big = too_big or int(match.group(2)) >= self.max_object_bytes
            if match.group(3) != "*":
                too_big = too_big or int(match.group(3)) > self.max_object_bytes
        if length is not None and limit.offset + length > limit.limit:
            too_big = True
        return limit, too_big

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit, too_big = self._plan(scope)
        if too_big:
            await limit.response()(scope, receive, send)
            return
        received = 0
        started = False

        async def counted_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if limit.offset + received > limit.limit:
                    raise _TooLarge()
            return message

        async def tracked_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, tracked_send)
        except _TooLarge:
            if started:  # a route streaming its answer while it reads: nothing left to say
                raise
            await limit.response()(scope, receive, send)


def install(app: Any, max_request_bytes: int, max_object_bytes: int) -> None:
    app.add_middleware(RequestLimits, max_request_bytes=max_request_bytes, max_object_bytes=max_object_bytes)
