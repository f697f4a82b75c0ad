"""The API's side of observability: `/metrics`, and per request a latency observation and an access log line.

`install(app, settings)` must come after the auth middleware is added, so this middleware is the outer one:
it then times every request, refused ones included. `/metrics` is an ordinary route behind the API tokens;
with `settings.metrics_open` this middleware answers it itself, before the token check, for scrapers that
carry no token. Latency runs to the start of the response: a followed log stream would otherwise count
its whole life. Routes are labelled by their template (`/v1/projects/{project}/...`), never by the raw path,
so the label values stay few; the access log carries the path without its query (which may hold `key=`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from trainworks.config import Settings
from trainworks.observability.metrics import UNMATCHED_ROUTE, ServerMetrics

METRICS_PATH = "/metrics"
access_log = logging.getLogger("trainworks.access")


def _metrics_of(scope: Scope) -> ServerMetrics | None:
    app = scope.get("app")
    services = getattr(getattr(app, "state", None), "services", None)  # None until the lifespan starts
    return getattr(services, "metrics", None)


def _route_of(scope: Scope) -> tuple[str, dict[str, Any]]:
    """The route template that answered (or would have) and its path parameters."""
    route = scope.get("route")
    params = scope.get("path_params") or {}
    if route is None:  # refused before routing (auth): find the route it asked for
        app = scope.get("app")
        route, params = _match(getattr(getattr(app, "router", None), "routes", ()), scope)
    path = getattr(route, "path", None)
    return (path if isinstance(path, str) and path else UNMATCHED_ROUTE), params


Found = tuple[BaseRoute | None, dict[str, Any]]


def _match(routes: Iterable[BaseRoute], scope: Scope, depth: int = 0) -> Found:
    """Best effort: the route that would have answered. FastAPI wraps included routers (whose routes keep
    their full paths here: every router is included without a prefix); a miss is just `unmatched`."""
    partial: Found = (None, {})
    for route in routes:
        match, child = route.matches(scope)
        if match == Match.NONE:
            continue
        found: Found = (child.get("route"), child.get("path_params") or {})
        wrapped = getattr(route, "original_router", None)  # FastAPI's included router
        inner = getattr(route, "routes", None) or getattr(wrapped, "routes", None)
        if found[0] is None and inner and depth < 4:
            found = _match(inner, scope, depth + 1)
        if found[0] is None:
            found = (route, found[1])
        if match == Match.FULL:
            return found
        if partial[0] is None:
            partial = found  # the path matches, the method does not (405)
    return partial


def metrics_response(metrics: ServerMetrics | None, accept: str) -> Response:
    if metrics is None:
        return Response("the server is starting\n", status_code=503, media_type="text/plain")
    body, content_type = metrics.exposition(accept)
    return Response(body, media_type=content_type)


class ObservabilityMiddleware:
    """Pure ASGI (no BaseHTTPMiddleware): streaming responses pass through untouched."""

    def __init__(self, app: ASGIApp, metrics_open: bool = False) -> None:
        self.app = app
        self.metrics_open = metrics_open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        reported = False

        async def timed_send(message: Message) -> None:
            nonlocal reported
            if message["type"] == "http.response.start" and not reported:
                reported = True
                self._report(scope, int(message["status"]), time.perf_counter() - started)
            await send(message)

        try:
            if self.metrics_open and scope["path"] == METRICS_PATH and scope["method"] in ("GET", "HEAD"):
                accept = Request(scope).headers.get("accept", "")
                response = metrics_response(_metrics_of(scope), accept)
                await response(scope, receive, timed_send)
            else:
                await self.app(scope, receive, timed_send)
        finally:
            if not reported:  # the app raised before it answered: the server error handler answers 500
                self._report(scope, 500, time.perf_counter() - started)

    def _report(self, scope: Scope, status: int, seconds: float) -> None:
        method = str(scope.get("method", ""))
        route, params = (METRICS_PATH, {}) if scope["path"] == METRICS_PATH else _route_of(scope)
        metrics = _metrics_of(scope)
        if metrics is not None:
            metrics.request_done(method, route, status, seconds)
        if access_log.isEnabledFor(logging.INFO):
            extra: dict[str, Any] = {
                "method": method,
                "route": route,
                "path": scope.get("path", ""),
                "status": status,
                "duration_ms": round(seconds * 1000, 3),
            }
            job = params.get("job_id")
            if job:
                extra["job"] = job
            duration_ms = extra["duration_ms"]
            access_log.info("%s %s %d %.1f ms", method, extra["path"], status, duration_ms, extra=extra)


def install(app: FastAPI, settings: Settings) -> None:
    """The /metrics route and the timing middleware (call after the auth middleware is added)."""

    @app.get(METRICS_PATH, include_in_schema=False)
    def metrics(request: Request) -> Response:
        return metrics_response(_metrics_of(request.scope), request.headers.get("accept", ""))

    app.add_middleware(ObservabilityMiddleware, metrics_open=settings.metrics_open)
