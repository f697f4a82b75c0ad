"""REST routes of customJobs (v1 and v1beta1)."""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from trainworks.api.errors import json_body
from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.params import int_param, query_param

PARENT = "/projects/{project}/locations/{location}/customJobs"


def router(prefix: str) -> APIRouter:
    api = APIRouter(prefix=prefix, tags=["customJobs"])
    api_version = prefix.strip("/")  # v1 or v1beta1: the version of the types operations name

    @api.post(PARENT)
    async def create(project: str, location: str, request: Request) -> Any:
        body = await json_body(request)
        return await _run(request, lambda s: s.custom_jobs.create(project, location, body))

    @api.get(PARENT)
    def list_(project: str, location: str, request: Request) -> Any:
        services = request.app.state.services
        return services.custom_jobs.list(
            project,
            location,
            int_param(request, "pageSize", "page_size"),
            query_param(request, "pageToken", "page_token"),
            query_param(request, "filter", "filter"),
            query_param(request, "readMask", "read_mask"),
        )

    @api.get(PARENT + "/{job_id}")
    def get(project: str, location: str, job_id: str, request: Request) -> Any:
        return request.app.state.services.custom_jobs.get(project, location, job_id)

    @api.post(PARENT + "/{job_id}:cancel")
    def cancel(project: str, location: str, job_id: str, request: Request) -> Any:
        request.app.state.services.custom_jobs.cancel(project, location, job_id)
        return {}

    @api.delete(PARENT + "/{job_id}")
    def delete(project: str, location: str, job_id: str, request: Request) -> Any:
        return request.app.state.services.custom_jobs.delete(project, location, job_id, api_version)

    return api


async def _run(request: Request, call: Any) -> Any:
    from starlette.concurrency import run_in_threadpool

    return await run_in_threadpool(call, request.app.state.services)


def extensions_router() -> APIRouter:
    """Trainworks extensions outside /v1/: logs (NDJSON, optionally followed), status, and preemption."""
    api = APIRouter(prefix="/trainworks/v1", tags=["extensions"])

    @api.get(PARENT + "/{job_id}/logs")
    def logs(project: str, location: str, job_id: str, request: Request) -> StreamingResponse:
        follow = query_param(request, "follow", "follow").lower() in ("1", "true", "yes")
        task = query_param(request, "task", "task") or None
        entries = request.app.state.services.logs.entries(project, location, job_id, task=task, follow=follow)
        lines = (json.dumps(e) + "\n" for e in entries)
        return StreamingResponse(lines, media_type="application/x-ndjson")

    @api.get(PARENT + "/{job_id}/status")
    def status(project: str, location: str, job_id: str, request: Request) -> Any:
        return request.app.state.services.job_status.status(project, location, job_id)

    @api.post(PARENT + "/{job_id}:preempt")
    async def preempt(project: str, location: str, job_id: str, request: Request) -> Any:
        body = await json_body(request, required=False)
        replica = body.get("replica") if isinstance(body, dict) else None
        if replica is not None and not isinstance(replica, str):
            raise invalid_argument(
                [FieldViolation("replica", "expected a replica name such as workerpool1-0")]
            )
        return await _run(request, lambda s: s.job_status.preempt(project, location, job_id, replica))

    return api
