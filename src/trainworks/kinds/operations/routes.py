"""Operations, served under /v1/, /v1beta1/ and /ui/ (the official client polls LROs under /ui/).

Each operation is served under the resource it belongs to and, by its ID, at its location: get, wait,
cancel and delete there too (the location's list shows every operation of the location)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from trainworks.api.state import services
from trainworks.kernel.errors import FieldViolation, invalid_argument
from trainworks.kernel.operations import OperationService
from trainworks.kernel.params import int_param, query_param
from trainworks.kernel.routes import Body, JsonObject, add_route
from trainworks.kernel.wire import parse_duration

LOCATION = "/projects/{project}/locations/{location}"
UNDER = LOCATION + "/{collection}/{resource_id}"


def router(prefix: str) -> APIRouter:
    """The same five methods on a location's operations (`list_ops`, `get_op`...) and, after them, on a
    resource's, e.g. customJobs/123/operations/456 (`list_res_ops`, `get_res_op`...)."""
    api = APIRouter(prefix=prefix, tags=["operations"])
    for parent, ops, op in ((LOCATION, "ops", "op"), (UNDER, "res_ops", "res_op")):
        add_route(api, "GET", parent + "/operations", f"list_{ops}", _list)
        add_route(api, "GET", parent + "/operations/{op}", f"get_{op}", _get)
        add_route(api, "POST", parent + "/operations/{op}:wait", f"wait_{op}", _wait, Body.OPTIONAL)
        add_route(api, "POST", parent + "/operations/{op}:cancel", f"cancel_{op}", _cancel)
        add_route(api, "DELETE", parent + "/operations/{op}", f"delete_{op}", _delete)
    return api


def _service(request: Request) -> OperationService:
    return services(request).operations


def _resource(path: dict[str, str]) -> str | None:
    """The resource the operations are under (`customJobs/123`); None for a location's own."""
    return f"{path['collection']}/{path['resource_id']}" if "collection" in path else None


def _operation(path: dict[str, str]) -> tuple[str, str, str, str]:
    """The project, location, resource ("" for a location's own) and ID of the operation the path names."""
    return path["project"], path["location"], _resource(path) or "", path["op"]


def _list(request: Request, path: dict[str, str], _body: Any) -> JsonObject:
    page_size = int_param(request, "pageSize", "page_size")
    page_token = query_param(request, "pageToken", "page_token")
    return _service(request).list(path["project"], path["location"], _resource(path), page_size, page_token)


def _get(request: Request, path: dict[str, str], _body: Any) -> JsonObject:
    return _service(request).get(*_operation(path))


def _wait(request: Request, path: dict[str, str], body: Any) -> JsonObject:
    return _service(request).wait(*_operation(path), _timeout(request, body))


def _cancel(request: Request, path: dict[str, str], _body: Any) -> JsonObject:
    _service(request).cancel(*_operation(path))
    return {}


def _delete(request: Request, path: dict[str, str], _body: Any) -> JsonObject:
    _service(request).delete(*_operation(path))
    return {}


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
