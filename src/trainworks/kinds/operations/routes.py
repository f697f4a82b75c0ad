"""Operations, served under /v1/, /v1beta1/ and /ui/ (the official client polls LROs under /ui/)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool

from trainworks.api.state import services
from trainworks.kernel.bodies import json_body
from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.operations import OperationService
from trainworks.kernel.params import int_param, query_param
from trainworks.kernel.routes import JsonObject
from trainworks.kernel.wire import parse_duration

LOCATION = "/projects/{project}/locations/{location}"
UNDER = LOCATION + "/{collection}/{resource_id}"


def router(prefix: str) -> APIRouter:
    api = APIRouter(prefix=prefix, tags=["operations"])

    def svc(request: Request) -> OperationService:
        return services(request).operations

    # Location-level operations.
    @api.get(LOCATION + "/operations")
    def list_ops(project: str, location: str, request: Request) -> JsonObject:
        return svc(request).list(
            project,
            location,
            None,
            int_param(request, "pageSize", "page_size"),
            query_param(request, "pageToken", "page_token"),
        )

    @api.get(LOCATION + "/operations/{op}")
    def get_op(project: str, location: str, op: str, request: Request) -> JsonObject:
        return svc(request).get(project, location, "", op)

    @api.post(LOCATION + "/operations/{op}:wait")
    async def wait_op(project: str, location: str, op: str, request: Request) -> JsonObject:
        timeout = _timeout(request, await json_body(request, required=False))
        return await run_in_threadpool(svc(request).wait, project, location, "", op, timeout)

    @api.post(LOCATION + "/operations/{op}:cancel")
    def cancel_op(project: str, location: str, op: str, request: Request) -> JsonObject:
        svc(request).cancel(project, location, "", op)
        return {}

    @api.delete(LOCATION + "/operations/{op}")
    def delete_op(project: str, location: str, op: str, request: Request) -> JsonObject:
        svc(request).delete(project, location, "", op)
        return {}

    # Operations under a resource, e.g. customJobs/123/operations/456.
    @api.get(UNDER + "/operations")
    def list_res_ops(
        project: str, location: str, collection: str, resource_id: str, request: Request
    ) -> JsonObject:
        return svc(request).list(
            project,
            location,
            f"{collection}/{resource_id}",
            int_param(request, "pageSize", "page_size"),
            query_param(request, "pageToken", "page_token"),
        )

    @api.get(UNDER + "/operations/{op}")
    def get_res_op(
        project: str, location: str, collection: str, resource_id: str, op: str, request: Request
    ) -> JsonObject:
        return svc(request).get(project, location, f"{collection}/{resource_id}", op)

    @api.post(UNDER + "/operations/{op}:wait")
    async def wait_res_op(
        project: str, location: str, collection: str, resource_id: str, op: str, request: Request
    ) -> JsonObject:
        timeout = _timeout(request, await json_body(request, required=False))
        return await run_in_threadpool(
            svc(request).wait, project, location, f"{collection}/{resource_id}", op, timeout
        )

    @api.post(UNDER + "/operations/{op}:cancel")
    def cancel_res_op(
        project: str, location: str, collection: str, resource_id: str, op: str, request: Request
    ) -> JsonObject:
        svc(request).cancel(project, location, f"{collection}/{resource_id}", op)
        return {}

    @api.delete(UNDER + "/operations/{op}")
    def delete_res_op(
        project: str, location: str, collection: str, resource_id: str, op: str, request: Request
    ) -> JsonObject:
        svc(request).delete(project, location, f"{collection}/{resource_id}", op)
        return {}

    return api


def _timeout(request: Request, body: Any) -> float | None:
    """WaitOperationRequest.timeout: the official REST client sends it in the query (`?timeout=3.500s`),
    other callers may send it in the body."""
    raw = body.get("timeout") if isinstance(body, dict) else None
    raw = raw or query_param(request, "timeout", "timeout")
    if not raw:
        return None
    try:
        return parse_duration(raw).total_seconds()
    except ValueError as exc:
        raise invalid_argument([FieldViolation("timeout", str(exc))]) from None
