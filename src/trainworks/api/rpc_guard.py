"""The HTTP app's rules applied to gRPC calls (kernel/rpc.py): who may call what (unexpected failures get
api/errors.py's `unexpected_error`, as over REST).

A call is judged exactly as the REST request for the same resource would be: api/auth.py's `refusal` reads a
connection, so the call is presented as one, with the REST path of the resource its request names, its
metadata as the headers (`authorization: Bearer ...`, `x-goog-api-key`; gRPC has no query string, so no
`?key=`) and its addresses, for peer identity (replicas calling without credentials).
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from starlette.requests import HTTPConnection

from trainworks.api.auth import refusal
from trainworks.api.peer_identity import is_loopback
from trainworks.kernel.errors import ApiError
from trainworks.kernel.rpc import Authorize, RpcCall

_WILDCARD_HOSTS = ("", "0.0.0.0", "::")


def server_address(call: RpcCall) -> tuple[str, int] | None:
    """The local address the call came to, as peer identity needs it. gRPC tells only the listening one: on
    every address (a wildcard), a caller on loopback came to its own address; any other is judged remote."""
    host, port = call.listening
    if host not in _WILDCARD_HOSTS:
        return host, port
    if call.client is not None and is_loopback(call.client[0]):
        return call.client[0], port
    return None


def authorizer(app: FastAPI) -> Authorize:
    """api/auth.py's check, for the calls of the gRPC server beside `app` (its services, its tokens)."""

    def refusal_of(call: RpcCall) -> ApiError | None:
        scope: dict[str, Any] = {
            "type": "http",
            "app": app,
            "path": call.path,
            "headers": [(key.encode("latin-1"), value.encode()) for key, value in call.metadata],
            "query_string": b"",
            "client": call.client,
            "server": server_address(call),
        }
        return refusal(HTTPConnection(scope))

    return refusal_of
