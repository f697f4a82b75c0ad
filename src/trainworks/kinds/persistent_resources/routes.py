"""REST routes of persistentResources (v1 and v1beta1): every change is a long-running operation."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from trainworks.api.errors import json_body
from trainworks.kernel.params import int_param, query_param

PARENT = "/projects/{project}/locations/{location}/persistentResources"


def router(prefix: str) -> APIRouter:
    api = APIRouter(prefix=prefix, tags=["persistentResources"])
    api_version = prefix.strip("/")

    def svc(request: Request) -> Any:
        return request.app.state.services.persistent_resources

    @api.post(PARENT)
    async def create(project: str, location: str, request: Request) -> Any:
        body = await json_body(request)
        resource_id = query_param(request, "persistentResourceId", "persistent_resource_id")
        return await run_in_threadpool(svc(request).create, project, location, resource_id, body, api_version)

    @api.get(PARENT)
    def list_(project: str, location: str, request: Request) -> Any:
        return svc(request).list(
            project,
            location,
            int_param(request, "pageSize", "page_size"),
            query_param(request, "pageToken", "page_token"),
        )

    @api.get(PARENT + "/{resource_id}")
    def get(project: str, location: str, resource_id: str, request: Request) -> Any:
        return svc(request).get(project, location, resource_id)

    @api.patch(PARENT + "/{resource_id}")
    async def update(project: str, location: str, resource_id: str, request: Request) -> Any:
        body = await json_body(request)
        mask = query_param(request, "updateMask", "update_mask")
        return await run_in_threadpool(
            svc(request).update, project, location, resource_id, body, mask, api_version
        )

    @api.post(PARENT + "/{resource_id}:reboot")
    async def reboot(project: str, location: str, resource_id: str, request: Request) -> Any:
        await json_body(request, required=False)
        return await run_in_threadpool(svc(request).reboot, project, location, resource_id, api_version)

    @api.delete(PARENT + "/{resource_id}")
    def delete(project: str, location: str, resource_id: str, request: Request) -> Any:
        return svc(request).delete(project, location, resource_id, api_version)

    return api
