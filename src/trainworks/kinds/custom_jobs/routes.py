"""REST routes of customJobs (v1 and v1beta1), and the Trainworks extensions of a custom job."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from starlette.concurrency import run_in_threadpool

from trainworks.api.state import services
from trainworks.kernel.bodies import json_body
from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.routes import Collection, JsonObject, job_methods
from trainworks.kinds.custom_jobs.logs import POLL_SECONDS, parse_format, parse_log_query, text_line
from trainworks.kinds.custom_jobs.service import CustomJobService

PARENT = "/projects/{project}/locations/{location}/customJobs"


CUSTOM_JOBS = Collection(
    "customJobs", "job_id", lambda request: services(request).custom_jobs, job_methods(CustomJobService)
)


def _ndjson_line(line: dict[str, Any]) -> str:
    return json.dumps(line) + "\n"


def extensions_router() -> APIRouter:
    """Trainworks extensions outside /v1/: logs (NDJSON, optionally followed), status, and preemption."""
    api = APIRouter(prefix="/trainworks/v1", tags=["extensions"])

    @api.get(PARENT + "/{job_id}/logs")
    async def logs(project: str, location: str, job_id: str, request: Request) -> StreamingResponse:
        """The job's log lines (NDJSON, or `format=text`): kinds/custom_jobs/logs.py says which and how."""
        query = parse_log_query(request.query_params)
        form, download = parse_format(request.query_params)
        service = services(request).logs
        stream = await run_in_threadpool(service.open, project, location, job_id, query)
        render = text_line if form == "text" else _ndjson_line

        async def body() -> AsyncIterator[bytes]:
            while True:
                batch = await run_in_threadpool(stream.next_batch)
                if batch is None:
                    return
                if batch:
                    # "replace": a lone surrogate from a JSON payload must not end the stream
                    yield "".join(render(line) for line in batch).encode("utf-8", "replace")
                if stream.waiting:
                    await asyncio.sleep(POLL_SECONDS)  # a quiet job: look again soon, holding no thread

        headers: dict[str, str] = {}
        if download:
            suffix = "log" if form == "text" else "ndjson"
            headers["Content-Disposition"] = f'attachment; filename="customJob-{stream.job_id}.{suffix}"'
        media = "text/plain; charset=utf-8" if form == "text" else "application/x-ndjson"
        return StreamingResponse(body(), media_type=media, headers=headers)

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
        attempt = body.get("attempt") if isinstance(body, dict) else None
        if attempt is not None and (isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0):
            raise invalid_argument([FieldViolation("attempt", "expected the job's attempt number (0 first)")])
        job_status = services(request).job_status
        return await run_in_threadpool(job_status.preempt, project, location, job_id, replica, attempt)

    return api
