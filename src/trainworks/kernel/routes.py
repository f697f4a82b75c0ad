"""A router factory for a collection's standard methods (get, list, create, update, delete, custom verbs).

A kind declares its collection: the path segment (`customJobs`), the name of the resource ID in the path
(`job_id`), how a request reaches the kind's service, and its methods in the order the router tries them
(a `GET {id}:verb` must come before `GET {id}`, which would take `id:verb` for an ID). Each method calls the
service with the project, the location, the resource ID where the path has one, then its arguments in
order: query parameters (either spelling, kernel/params.py), the JSON body, the API version (`v1` or
`v1beta1`, which long-running operations' metadata types name). api/app.py includes each collection's
router (`Collection.router`) under its API versions.

`add_route` makes one such route of a path and a function of the request, the path's values and the body:
routes that are no collection's methods (operations, served under a location and under any resource) use it.

Routes keep the names FastAPI makes their OpenAPI operation IDs and summaries of, and answer the service's
JSON object (proto3 JSON it built) with `JsonObject` as their response model, without a schema of its own
in the description. They write the object themselves (`json_response`, in the thread pool) and hand FastAPI
a finished response: the bytes FastAPI would write for that model, without its per-request validation.
A request with `$alt=json;enum-encoding=int` gets that object's enums as numbers (kernel/enum_numbers.py).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Concatenate, Generic, TypeVar

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import Response
from pydantic import TypeAdapter
from starlette.concurrency import run_in_threadpool

from trainworks.kernel.bodies import json_body
from trainworks.kernel.enum_numbers import numbered_if_asked
from trainworks.kernel.list_query import ListQuery
from trainworks.kernel.params import int_param, query_param

S = TypeVar("S")

# What a route answers: the JSON object its service built, sent as built.
JsonObject = dict[str, Any]

LOCATION = "/projects/{project}/locations/{location}"

# FastAPI validates a `JsonObject` answer, then writes it with a TypeAdapter of that type: pydantic-core's
# JSON (compact, UTF-8 unescaped, NaN and infinities as null, shortest floats: "1e-7"). orjson writes the
# same bytes for what it takes (str keys, str, int, float, bool, None, list, tuple, dict, enums, UUIDs),
# several times faster on a list page; what it would write its own way (datetimes, dataclasses, subclasses
# of builtins) or cannot (ints past 64 bits, lone surrogates, sets, bytes, models) it refuses with a
# TypeError, and FastAPI's own path answers those.
_JSON_OBJECT = TypeAdapter(JsonObject)
_ORJSON_AS_PYDANTIC = (
    orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS
)


def json_bytes(answer: JsonObject) -> bytes:
    """`answer` as FastAPI writes it from a route whose response model is `JsonObject`, byte for byte."""
    try:
        return orjson.dumps(answer, option=_ORJSON_AS_PYDANTIC)
    except TypeError:
        return _JSON_OBJECT.dump_json(_JSON_OBJECT.validate_python(answer), by_alias=True)


def json_response(answer: JsonObject) -> Response:
    """`answer` sent as FastAPI sends it from a route whose response model is `JsonObject` (same headers)."""
    return Response(json_bytes(answer), media_type="application/json")


@dataclass(frozen=True)
class Query:
    """A query parameter the service takes, in either spelling (pageSize or page_size)."""

    camel: str
    snake: str
    integer: bool = False  # 0 when absent, a 400 when not an integer

    def read(self, request: Request) -> str | int:
        if self.integer:
            return int_param(request, self.camel, self.snake)
        return query_param(request, self.camel, self.snake)


class Input(Enum):
    BODY = "the request's JSON body (required)"
    API_VERSION = "v1 or v1beta1, from the path"
    LIST_QUERY = "a ListQuery: pageSize, pageToken, filter, orderBy and readMask"


BODY = Input.BODY
API_VERSION = Input.API_VERSION
LIST_QUERY = Input.LIST_QUERY

PAGE_SIZE = Query("pageSize", "page_size", integer=True)
PAGE_TOKEN = Query("pageToken", "page_token")
FILTER = Query("filter", "filter")
READ_MASK = Query("readMask", "read_mask")
ORDER_BY = Query("orderBy", "order_by")
UPDATE_MASK = Query("updateMask", "update_mask")
PAGE = (PAGE_SIZE, PAGE_TOKEN)
LIST = (*PAGE, FILTER, READ_MASK)
LIST_QUERY_FIELDS = (*PAGE, FILTER, ORDER_BY, READ_MASK)  # what LIST_QUERY reads, in ListQuery's order

Argument = Query | Input
# A service method, unbound (`CustomJobService.get`): it answers a JSON object, or nothing (an empty one).
Call = Callable[Concatenate[S, ...], JsonObject | None]


@dataclass(frozen=True)
class Method(Generic[S]):
    http: str
    name: str  # the route's name: FastAPI makes the OpenAPI operation ID and summary of it
    call: Call[S]
    args: tuple[Argument, ...] = ()
    on_resource: bool = True  # the path names one resource ({id}) or the collection
    verb: str = ""  # a custom method: `{id}:cancel`, `models:upload`
    ignore_body: bool = False  # takes an optional JSON body (a 400 when not JSON) and passes nothing of it

    def path(self, collection: str, id_name: str) -> str:
        path = f"{LOCATION}/{collection}"
        if self.on_resource:
            path += "/{" + id_name + "}"
        return f"{path}:{self.verb}" if self.verb else path


def create(call: Call[S], *args: Argument) -> Method[S]:
    return Method("POST", "create", call, args, on_resource=False)


def list_(call: Call[S], *args: Argument) -> Method[S]:
    return Method("GET", "list_", call, args, on_resource=False)


def get(call: Call[S], *args: Argument) -> Method[S]:
    return Method("GET", "get", call, args)


def update(call: Call[S], *args: Argument) -> Method[S]:
    return Method("PATCH", "update", call, args)


def delete(call: Call[S], *args: Argument) -> Method[S]:
    return Method("DELETE", "delete", call, args)


def cancel(call: Call[S]) -> Method[S]:
    """`:cancel`: the service answers nothing, the route google.protobuf.Empty."""
    return Method("POST", "cancel", call, verb="cancel")


def verb(
    http: str,
    verb: str,
    name: str,
    call: Call[S],
    *args: Argument,
    on_resource: bool = True,
    ignore_body: bool = False,
) -> Method[S]:
    return Method(http, name, call, args, on_resource=on_resource, verb=verb, ignore_body=ignore_body)


Args = tuple[Argument, ...]


def _standard(service: type[S], name: str) -> Call[S]:
    # The service class's method of the standard name, unbound: a missing one fails at import.
    call: Call[S] = getattr(service, name)
    return call


def job_methods(service: type[S]) -> list[Method[S]]:
    """A job collection's methods: create (synchronous), list, get, cancel, and delete (an LRO)."""
    return [
        create(_standard(service, "create"), BODY),
        list_(_standard(service, "list"), *LIST),
        get(_standard(service, "get")),
        cancel(_standard(service, "cancel")),
        delete(_standard(service, "delete"), API_VERSION),
    ]


def lro_methods(
    service: type[S],
    *,
    create_args: Args,
    list_args: Args,
    update_args: Args,
    delete_args: Args,
    get_args: Args = (),
    verbs: Sequence[Method[S]] = (),
) -> list[Method[S]]:
    """The methods of a collection whose changes are LROs: create, list, get, update, its custom verbs,
    then delete, each with the arguments the kind's service takes."""
    return [
        create(_standard(service, "create"), *create_args),
        list_(_standard(service, "list"), *list_args),
        get(_standard(service, "get"), *get_args),
        update(_standard(service, "update"), *update_args),
        *verbs,
        delete(_standard(service, "delete"), *delete_args),
    ]


class Body(Enum):
    """Whether a route reads a JSON body: a 400 when one it reads is not JSON (or, required, is missing)."""

    NONE = "not read"
    OPTIONAL = "read when sent"
    REQUIRED = "read, and required"


# A route's work: the request, its path's values by name (in path order) and its JSON body (None unread).
Answer = Callable[[Request, dict[str, str], Any], JsonObject]
Written = Callable[[Request, dict[str, str], Any], Response]  # the same, its answer written


def add_route(
    api: APIRouter, http: str, path: str, name: str, answer: Answer, body: Body = Body.NONE
) -> None:
    """A route answering `answer`'s JSON object, named `name` (FastAPI makes its OpenAPI operation ID and
    summary of it) and declaring the path's parameters as a hand-written route does. A route reading a body
    reads it on the event loop, then does its work in the thread pool; any other runs in FastAPI's."""
    names = re.findall(r"\{(\w+)\}", path)

    def ordered(request: Request, path: dict[str, str], body: Any) -> Response:
        # The one place a Vertex route's answer is written: enums as numbers when the request asks.
        return json_response(numbered_if_asked(request, answer(request, {n: path[n] for n in names}, body)))

    if body is Body.NONE:
        endpoint = _plain(ordered)
    else:
        endpoint = _reading_body(ordered, required=body is Body.REQUIRED)
    endpoint.__name__ = endpoint.__qualname__ = name
    # FastAPI reads the path parameters off the signature: the same one a hand-written route has.
    params = [inspect.Parameter(n, _POSITIONAL, annotation=str) for n in names]
    params.append(inspect.Parameter("request", _POSITIONAL, annotation=Request))
    endpoint.__signature__ = inspect.Signature(params, return_annotation=JsonObject)  # type: ignore[attr-defined]
    api.add_api_route(path, endpoint, methods=[http], name=name)


_POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD


def _reading_body(answer: Written, required: bool) -> Callable[..., Any]:
    async def endpoint(request: Request, **path: str) -> Response:
        body = await json_body(request, required=required)
        return await run_in_threadpool(answer, request, path, body)  # the service's work: off the loop

    return endpoint


def _plain(answer: Written) -> Callable[..., Any]:
    def endpoint(request: Request, **path: str) -> Response:  # FastAPI runs it in its thread pool
        return answer(request, path, None)

    return endpoint


@dataclass(frozen=True)
class Collection(Generic[S]):
    segment: str  # customJobs
    id_name: str  # the resource ID's name in the path: job_id
    service: Callable[[Request], S]
    methods: Sequence[Method[S]]

    def router(self, prefix: str) -> APIRouter:
        """The collection's routes under a prefix (/v1 or /v1beta1), in the order of its methods."""
        api = APIRouter(prefix=prefix, tags=[self.segment])
        api_version = prefix.strip("/")
        for method in self.methods:
            if BODY in method.args:
                body = Body.REQUIRED
            else:
                body = Body.OPTIONAL if method.ignore_body else Body.NONE
            path = method.path(self.segment, self.id_name)
            add_route(api, method.http, path, method.name, self._answer(method, api_version), body)
        return api

    def _answer(self, method: Method[S], api_version: str) -> Answer:
        def answer(request: Request, path: dict[str, str], body: Any) -> JsonObject:
            service = self.service(request)
            values = [_value(arg, request, body, api_version) for arg in method.args]
            result = method.call(service, *path.values(), *values)
            return {} if result is None else result

        return answer


def _value(arg: Argument, request: Request, body: Any, api_version: str) -> Any:
    if arg is BODY:
        return body
    if arg is API_VERSION:
        return api_version
    if arg is LIST_QUERY:
        fields: list[Any] = [q.read(request) for q in LIST_QUERY_FIELDS]
        return ListQuery(*fields)
    assert isinstance(arg, Query)
    return arg.read(request)
