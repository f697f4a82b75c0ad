"""google.rpc error bodies for every failure path, so no request ever gets a bare 500 page (and Cloud
Storage's own error form for the storage API)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from trainworks.kernel.errors import ApiError
from trainworks.kernel.status import Code
from trainworks.storage.object_model import StorageError
from trainworks.store.database import database_unavailable

log = logging.getLogger(__name__)

# The Cloud Storage JSON API (gcloud starts resumable uploads under /resumable/).
_GCS_PREFIXES = ("/storage/", "/upload/storage/", "/download/storage/", "/resumable/upload/storage/")

_HTTP_TO_CODE = {
    400: Code.INVALID_ARGUMENT,
    401: Code.UNAUTHENTICATED,
    403: Code.PERMISSION_DENIED,
    404: Code.NOT_FOUND,
    405: Code.UNIMPLEMENTED,
    409: Code.ABORTED,
    413: Code.INVALID_ARGUMENT,
    415: Code.INVALID_ARGUMENT,
    429: Code.RESOURCE_EXHAUSTED,
    501: Code.UNIMPLEMENTED,
    503: Code.UNAVAILABLE,
}


def error_body(
    http_status: int, code: Code, message: str, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    return {"error": {"code": http_status, "message": message, "status": code.name, "details": details or []}}


def gcs_error(exc: StorageError) -> Response:
    """Cloud Storage's own error form, for the storage API's paths."""
    if exc.status == 304:
        return Response(status_code=304)
    body = {
        "error": {
            "code": exc.status,
            "message": exc.message,
            "errors": [{"message": exc.message, "domain": "global", "reason": exc.reason}],
        }
    }
    return JSONResponse(body, status_code=exc.status, headers=exc.headers)


def unexpected_error(exc: Exception) -> ApiError:
    """The answer to a failure that is no ApiError, over REST and gRPC alike."""
    passing = database_unavailable(exc)
    if passing is not None:
        # SQLite's write lock held past busy_timeout, or the database server unreachable: retryable, not a
        # fault of the server.
        log.warning("database %s, answered UNAVAILABLE: %s", passing, exc)
        return ApiError(Code.UNAVAILABLE, f"The database is {passing}. Retry the request.")
    log.exception("internal error", exc_info=exc)
    return ApiError(Code.INTERNAL, "Internal error encountered. The error was logged by the server.")


def error_response(error: ApiError) -> JSONResponse:
    status = error.code.http_status
    return JSONResponse(error_body(status, error.code, error.message, error.details()), status_code=status)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, exc: ApiError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = _HTTP_TO_CODE.get(exc.status_code, Code.UNKNOWN)
        message = str(exc.detail)
        if exc.status_code == 404 and message == "Not Found":
            message = "The requested URL was not found on this server."
        if exc.status_code == 405:
            message = "This HTTP method is not supported for this resource."
        if request.url.path.startswith(_GCS_PREFIXES):
            # No route matched (an object name with a line break, a bucket name with a slash): Cloud Storage
            # clients still get Cloud Storage's error form.
            reason = {404: "notFound", 405: "methodNotAllowed"}.get(exc.status_code, "invalid")
            return gcs_error(StorageError(exc.status_code, reason, message))
        return JSONResponse(error_body(exc.status_code, code, message), status_code=exc.status_code)

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        violations = [
            {
                "field": ".".join(str(p) for p in e.get("loc", ())[1:]) or "request",
                "description": e.get("msg", ""),
            }
            for e in exc.errors()
        ]
        details = [{"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": violations}]
        return JSONResponse(
            error_body(400, Code.INVALID_ARGUMENT, "Invalid request.", details), status_code=400
        )

    # A middleware rather than an exception handler: Starlette re-raises after handlers for Exception,
    # which makes the server drop the client's keep-alive connection.
    app.add_middleware(UnexpectedErrors)


class UnexpectedErrors:
    """Answers any exception raised before the response started with `unexpected_error`'s google.rpc body.

    Pure ASGI: Starlette's BaseHTTPMiddleware runs every request through a task group and memory streams.
    A response that fails midway is still ended (an empty last body) before the exception goes on to the
    server, which logs it and closes the connection: as it was under BaseHTTPMiddleware."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = ended = False

        async def watched_send(message: Message) -> None:
            nonlocal started, ended
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                ended = True
            await send(message)

        try:
            await self.app(scope, receive, watched_send)
        except Exception as exc:
            if not started:
                await error_response(unexpected_error(exc))(scope, receive, send)
                return
            if not ended:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            raise
