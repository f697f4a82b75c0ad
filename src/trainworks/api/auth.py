"""Optional bearer-token or API-key auth. Failures get 403: the official client mishandles 401."""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from starlette.requests import HTTPConnection

from trainworks.api.errors import error_body
from trainworks.resources.status import Code

OPEN_PATHS = frozenset({"/healthz", "/console"})
# The console's static pages carry no data: the API calls they make present the token themselves.
OPEN_PREFIXES = ("/console/",)


def _presented(request: HTTPConnection) -> list[str]:
    found: list[str] = []
    header = request.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        found.append(header[7:].strip())
    key = request.headers.get("x-goog-api-key") or request.query_params.get("key")
    if key:
        found.append(key)
    return found


def refusal(conn: HTTPConnection, tokens: frozenset[str]) -> str | None:
    """Why a request or WebSocket is refused (403), or None when its credentials pass or auth is off."""
    if not tokens:
        return None
    presented = _presented(conn)
    if any(hmac.compare_digest(p, t) for p in presented for t in tokens):
        return None
    if not presented:
        return "The request is missing a valid API key or bearer token."
    return "The API key or bearer token is not valid."


def auth_middleware(
    tokens: frozenset[str],
) -> Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]:
    async def middleware(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        if tokens and request.url.path not in OPEN_PATHS and not request.url.path.startswith(OPEN_PREFIXES):
            message = refusal(request, tokens)
            if message is not None:
                return JSONResponse(error_body(403, Code.PERMISSION_DENIED, message), status_code=403)
        return await call_next(request)

    return middleware
