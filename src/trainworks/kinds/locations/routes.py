"""REST routes of the Locations API, under /v1/, /v1beta1/ and /ui/ (the official clients' mixin paths):
`GET projects/{project}/locations` and `GET projects/{project}/locations/{location}`."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from trainworks.api.state import required, services
from trainworks.kernel.params import int_param, query_param
from trainworks.kernel.routes import JsonObject, add_route
from trainworks.kinds.locations.service import LocationService

PROJECT = "/projects/{project}"


def router(prefix: str) -> APIRouter:
    api = APIRouter(prefix=prefix, tags=["locations"])
    add_route(api, "GET", PROJECT + "/locations", "list_locations", _list)
    add_route(api, "GET", PROJECT + "/locations/{location}", "get_location", _get)
    return api


def _service(request: Request) -> LocationService:
    return required(services(request).locations)


def _list(request: Request, path: dict[str, str], _body: Any) -> JsonObject:
    return _service(request).list(
        path["project"],
        int_param(request, "pageSize", "page_size"),
        query_param(request, "pageToken", "page_token"),
        query_param(request, "filter", "filter"),
    )


def _get(request: Request, path: dict[str, str], _body: Any) -> JsonObject:
    return _service(request).get(path["project"], path["location"])
