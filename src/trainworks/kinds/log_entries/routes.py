"""The Cloud Logging API v2 subset: `POST /v2/entries:list`, where gcloud (`api_endpoint_overrides/logging`)
and the client libraries (`client_options={"api_endpoint": ...}`) read jobs' logs.

The projects are in the body (`resourceNames`), not the path, so each is checked here as api/auth.py checks
a request for `/v1/projects/{project}`: the same tokens, and the same refusal for another project's."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection

from trainworks.api.auth import refusal
from trainworks.api.state import required, services
from trainworks.kernel.bodies import json_body
from trainworks.kinds.log_entries.service import ListRequest, parse_request


def _check_projects(request: Request, projects: tuple[str, ...]) -> None:
    """PERMISSION_DENIED for the first project the caller may not read."""
    for project in projects:
        scope = {**request.scope, "path": f"/v1/projects/{project}"}
        refused = refusal(HTTPConnection(scope))
        if refused is not None:
            raise refused


def _list(request: Request, parsed: ListRequest) -> bytes:
    _check_projects(request, parsed.projects)
    page = required(services(request).log_entries).list_entries(parsed)
    # Written here rather than by FastAPI's encoder, which walks every value of a thousand entries again.
    return json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode()


def router() -> APIRouter:
    api = APIRouter(tags=["logging"])

    @api.post("/v2/entries:list")
    async def list_entries(request: Request) -> Response:
        """ListLogEntries: `{resourceNames, filter, orderBy, pageSize, pageToken}` → one page of entries."""
        parsed = parse_request(await json_body(request))
        body = await run_in_threadpool(_list, request, parsed)
        return Response(body, media_type="application/json")

    return api
