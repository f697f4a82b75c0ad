"""REST routes of v1beta1 modelDevelopmentClusters (training clusters): every change is an LRO."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from trainworks.api.errors import json_body
from trainworks.kernel.params import int_param, query_param

PARENT = "/projects/{project}/locations/{location}/modelDevelopmentClusters"


def router(prefix: str = "/v1beta1") -> APIRouter:
    api = APIRouter(prefix=prefix, tags=["modelDevelopmentClusters"])

    def svc(request: Request) -> Any:
        return request.app.state.services.clusters

    @api.post(PARENT)
    async def create(project: str, location: str, request: Request) -> Any:
        body = await json_body(request)
        cluster_id = query_param(request, "modelDevelopmentClusterId", "model_development_cluster_id")
        return await run_in_threadpool(svc(request).create, project, location, cluster_id, body)

    @api.get(PARENT)
    def list_(project: str, location: str, request: Request) -> Any:
        return svc(request).list(
            project,
            location,
            int_param(request, "pageSize", "page_size"),
            query_param(request, "pageToken", "page_token"),
        )

    @api.get(PARENT + "/{cluster_id}")
    def get(project: str, location: str, cluster_id: str, request: Request) -> Any:
        return svc(request).get(project, location, cluster_id)

    @api.patch(PARENT + "/{cluster_id}")
    async def update(project: str, location: str, cluster_id: str, request: Request) -> Any:
        body = await json_body(request)
        mask = query_param(request, "updateMask", "update_mask")
        mode = query_param(request, "updateMode", "update_mode")
        return await run_in_threadpool(svc(request).update, project, location, cluster_id, body, mask, mode)

    @api.delete(PARENT + "/{cluster_id}")
    def delete(project: str, location: str, cluster_id: str, request: Request) -> Any:
        return svc(request).delete(project, location, cluster_id)

    return api
