"""REST routes of the model registry (v1 and v1beta1), as the official ModelServiceClient calls them.

A model path segment may carry `@VERSION` or `@ALIAS`. The `:verb` routes are registered before the plain
ones, since `{model}` would otherwise swallow `ID:listVersions`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from trainworks.api.errors import json_body
from trainworks.kernel.params import int_param, query_param

PARENT = "/projects/{project}/locations/{location}"
MODEL = PARENT + "/models/{model}"


def _service(request: Request) -> Any:
    return request.app.state.services.models


def _list_args(request: Request) -> tuple[int, str, str, str, str]:
    return (
        int_param(request, "pageSize", "page_size"),
        query_param(request, "pageToken", "page_token"),
        query_param(request, "filter", "filter"),
        query_param(request, "orderBy", "order_by"),
        query_param(request, "readMask", "read_mask"),
    )


def router(prefix: str) -> APIRouter:
    api = APIRouter(prefix=prefix, tags=["models"])
    api_version = prefix.strip("/")

    @api.post(PARENT + "/models:upload")
    async def upload(project: str, location: str, request: Request) -> Any:
        body = await json_body(request)
        # Copying the artifacts is file work: off the event loop.
        return await run_in_threadpool(_service(request).upload, project, location, body, api_version)

    @api.get(PARENT + "/models")
    def list_(project: str, location: str, request: Request) -> Any:
        return _service(request).list(project, location, *_list_args(request))

    @api.get(MODEL + ":listVersions")
    def list_versions(project: str, location: str, model: str, request: Request) -> Any:
        return _service(request).list_versions(project, location, model, *_list_args(request))

    @api.post(MODEL + ":mergeVersionAliases")
    async def merge_aliases(project: str, location: str, model: str, request: Request) -> Any:
        body = await json_body(request)
        return await run_in_threadpool(_service(request).merge_aliases, project, location, model, body)

    @api.delete(MODEL + ":deleteVersion")
    def delete_version(project: str, location: str, model: str, request: Request) -> Any:
        return _service(request).delete_version(project, location, model, api_version)

    @api.get(MODEL)
    def get(project: str, location: str, model: str, request: Request) -> Any:
        return _service(request).get(project, location, model)

    @api.patch(MODEL)
    async def update(project: str, location: str, model: str, request: Request) -> Any:
        body = await json_body(request)
        mask = query_param(request, "updateMask", "update_mask")
        return await run_in_threadpool(_service(request).update, project, location, model, body, mask)

    @api.delete(MODEL)
    def delete(project: str, location: str, model: str, request: Request) -> Any:
        return _service(request).delete(project, location, model, api_version)

    return api
