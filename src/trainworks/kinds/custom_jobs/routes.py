"""REST routes of customJobs (v1 and v1beta1), and the Trainworks extensions of a custom job."""

from __future__ import annotations

import json

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from trainworks.api.state import services
from trainworks.kernel.bodies import json_body
from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.params import query_param
from trainworks.kernel.routes import Collection, JsonObject, job_methods
from trainworks.kinds.custom_jobs.service import CustomJobService

PARENT = "/projects/{project}/locations/{location}/customJobs"


CUSTOM_JOBS = Collection(
    "customJobs", "job_id", lambda request: services(request).custom_jobs, job_methods(CustomJobService)
)


def extensions_router() -> APIRouter:
    """Trainworks extensions outside /v1/: logs (NDJSON, optionally followed), status, and preemption."""
    api = APIRouter(prefix="/trainworks/v1", tags=["extensions"])

    @api.get(PARENT + "/{job_id}/logs")
    def logs(project: str, location: str, job_id: str, request: Request) -> StreamingResponse:
        follow = query_param(request, "follow", "follow").lower() in ("1", "true", "yes")
        task = query_param(request, "task", "task") or None
        entries = services(request).logs.entries(project, location, job_id, task=task, follow=follow)
        lines = (json.dumps(e) + "\n" for e in entries)
        return StreamingResponse(lines, media_type="application/x-ndjson")

    @api.get(PARENT + "/{job_id}/status")
    def status(project: str, location: str, job_id: str, request: Request) -> JsonObject:
        return services(request).job_status.status(project, location, job_id)

    @api.post(PARENT + "/{job_id}:preempt")
    async def preempt(project: str, location: str, job_id: str, request: Request) -> JsonObject:
        body = await json_body(request, required=False)
        replica = body.get("replica") if isinstance(body, dict) else None
        if replica is not None and not isinstance(replica, str):
            raise invalid_argument(
                [FieldViolation("replica", "expected a replica name such as workerpool1-0")]
            )
        job_status = services(request).job_status
        return await run_in_threadpool(job_status.preempt, project, location, job_id, replica)

    return api
