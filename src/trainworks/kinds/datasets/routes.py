"""REST routes of datasets (v1 and v1beta1): create, import and delete are long-running operations."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from trainworks.api.errors import json_body
from trainworks.kernel.params import int_param, query_param

PARENT = "/projects/{project}/locations/{location}/datasets"


def router(prefix: str) -> APIRouter:
    api = APIRouter(prefix=prefix, tags=["datasets"])
    api_version = prefix.strip("/")

    def svc(request: Request) -> Any:
        return request.app.state.services.datasets

    @api.post(PARENT)
    async def create(project: str, location: str, request: Request) -> Any:
        body = await json_body(request)
        return await run_in_threadpool(svc(request).create, project, location, body, api_version)

    @api.get(PARENT)
    def list_(project: str, location: str, request: Request) -> Any:
        return svc(request).list(
            project,
            location,
            int_param(request, "pageSize", "page_size"),
            query_param(request, "pageToken", "page_token"),
            query_param(request, "filter", "filter"),
            query_param(request, "readMask", "read_mask"),
            query_param(request, "orderBy", "order_by"),
        )

    @api.get(PARENT + "/{dataset_id}")
    def get(project: str, location: str, dataset_id: str, request: Request) -> Any:
        return svc(request).get(project, location, dataset_id, query_param(request, "readMask", "read_mask"))

    @api.patch(PARENT + "/{dataset_id}")
    async def update(project: str, location: str, dataset_id: str, request: Request) -> Any:
        body = await json_body(request)
        mask = query_param(request, "updateMask", "update_mask")
        return await run_in_threadpool(svc(request).update, project, location, dataset_id, body, mask)

    @api.post(PARENT + "/{dataset_id}:import")
    async def import_data(project: str, location: str, dataset_id: str, request: Request) -> Any:
        body = await json_body(request)
        return await run_in_threadpool(
            svc(request).import_data, project, location, dataset_id, body, api_version
        )

    @api.delete(PARENT + "/{dataset_id}")
    async def delete(project: str, location: str, dataset_id: str, request: Request) -> Any:
        return await run_in_threadpool(svc(request).delete, project, location, dataset_id, api_version)

    return api
