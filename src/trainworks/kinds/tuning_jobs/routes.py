"""REST routes of hyperparameterTuningJobs (v1 and v1beta1)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from trainworks.api.errors import json_body
from trainworks.kernel.params import int_param, query_param

PARENT = "/projects/{project}/locations/{location}/hyperparameterTuningJobs"


def router(prefix: str) -> APIRouter:
    api = APIRouter(prefix=prefix, tags=["hyperparameterTuningJobs"])
    api_version = prefix.strip("/")

    @api.post(PARENT)
    async def create(project: str, location: str, request: Request) -> Any:
        body = await json_body(request)
        service = request.app.state.services.tuning_jobs
        return await run_in_threadpool(service.create, project, location, body)

    @api.get(PARENT)
    def list_(project: str, location: str, request: Request) -> Any:
        return request.app.state.services.tuning_jobs.list(
            project,
            location,
            int_param(request, "pageSize", "page_size"),
            query_param(request, "pageToken", "page_token"),
            query_param(request, "filter", "filter"),
            query_param(request, "readMask", "read_mask"),
        )

    @api.get(PARENT + "/{job_id}")
    def get(project: str, location: str, job_id: str, request: Request) -> Any:
        return request.app.state.services.tuning_jobs.get(project, location, job_id)

    @api.post(PARENT + "/{job_id}:cancel")
    def cancel(project: str, location: str, job_id: str, request: Request) -> Any:
        request.app.state.services.tuning_jobs.cancel(project, location, job_id)
        return {}

    @api.delete(PARENT + "/{job_id}")
    def delete(project: str, location: str, job_id: str, request: Request) -> Any:
        return request.app.state.services.tuning_jobs.delete(project, location, job_id, api_version)

    return api
