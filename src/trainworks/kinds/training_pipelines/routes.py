"""REST routes of trainingPipelines (v1 and v1beta1), as PipelineServiceClient's REST transport calls them."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from trainworks.api.errors import json_body
from trainworks.kernel.params import int_param, query_param

PARENT = "/projects/{project}/locations/{location}/trainingPipelines"


def router(prefix: str) -> APIRouter:
    api = APIRouter(prefix=prefix, tags=["trainingPipelines"])
    api_version = prefix.strip("/")

    @api.post(PARENT)
    async def create(project: str, location: str, request: Request) -> Any:
        body = await json_body(request)
        service = request.app.state.services.training_pipelines
        return await run_in_threadpool(service.create, project, location, body)

    @api.get(PARENT)
    def list_(project: str, location: str, request: Request) -> Any:
        return request.app.state.services.training_pipelines.list(
            project,
            location,
            int_param(request, "pageSize", "page_size"),
            query_param(request, "pageToken", "page_token"),
            query_param(request, "filter", "filter"),
            query_param(request, "readMask", "read_mask"),
        )

    @api.get(PARENT + "/{pipeline_id}")
    def get(project: str, location: str, pipeline_id: str, request: Request) -> Any:
        return request.app.state.services.training_pipelines.get(project, location, pipeline_id)

    @api.post(PARENT + "/{pipeline_id}:cancel")
    def cancel(project: str, location: str, pipeline_id: str, request: Request) -> Any:
        request.app.state.services.training_pipelines.cancel(project, location, pipeline_id)
        return {}

    @api.delete(PARENT + "/{pipeline_id}")
    def delete(project: str, location: str, pipeline_id: str, request: Request) -> Any:
        return request.app.state.services.training_pipelines.delete(
            project, location, pipeline_id, api_version
        )

    return api
