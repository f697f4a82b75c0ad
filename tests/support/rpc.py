"""A real server answering gRPC too (`serve --grpc-port`) and a test module's fixtures of it, the official
GAPIC clients on an insecure loopback channel to it, what a test reads off a gRPC error (its google.rpc.Status
and field violations, compared with REST's), and the REST paths auth judges a kind's calls by."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import grpc
import pytest
from google.api_core import exceptions
from google.protobuf import json_format
from google.rpc import error_details_pb2, status_pb2

from tests.support.server import ServerProcess, free_port
from trainworks.kernel.errors import ApiError
from trainworks.kernel.rpc import Binding, RpcCall, RpcServer
from trainworks.kernel.status import Code

C = TypeVar("C")
DETAILS_KEY = "grpc-status-details-bin"
NO_SERVICE: Any = None  # the service judged_paths gives a kind's bindings: no call reaches it


@contextmanager
def grpc_server(home: Path, *args: str) -> Iterator[tuple[ServerProcess, grpc.Channel]]:
    """A started server with gRPC on a free port, and a channel to it; both closed on exit."""
    port = free_port()
    proc = ServerProcess(home=home, args=["--grpc-port", str(port), *args]).start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield proc, channel
    finally:
        proc.stop()


def grpc_fixtures(
    folder: str, client_class: type[C], *args: str, cleanup: Callable[[Path], None] | None = None
) -> tuple[Any, Any, Any]:
    """A test module's three module-scoped fixtures, by the names it assigns them to: `served` (the server
    of `grpc_server` in a new folder named `folder`, and its channel), `server` (that server) and a client
    of `client_class` on the channel. `cleanup` is given the server's home once it has stopped."""

    @pytest.fixture(scope="module")
    def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ServerProcess, grpc.Channel]]:
        home = tmp_path_factory.mktemp(folder)
        try:
            with grpc_server(home, *args) as opened:
                yield opened
        finally:
            if cleanup is not None:
                cleanup(home)

    @pytest.fixture(scope="module")
    def server(served: tuple[ServerProcess, grpc.Channel]) -> ServerProcess:
        return served[0]

    @pytest.fixture(scope="module")
    def client(served: tuple[ServerProcess, grpc.Channel]) -> C:
        return gapic(client_class, served[1])

    return served, server, client


def gapic(client_class: type[C], channel: grpc.Channel) -> C:
    """An official GAPIC client (`aiplatform_v1.ModelServiceClient`) on its gRPC transport over `channel`."""
    maker: Any = client_class
    return maker(transport=maker.get_transport_class("grpc")(channel=channel))  # type: ignore[no-any-return]


def status_of(error: exceptions.GoogleAPICallError) -> Any:
    """The google.rpc.Status in `grpc-status-details-bin`, checked against the call's code and message."""
    call: Any = error.response
    found = [value for key, value in call.trailing_metadata() if key == DETAILS_KEY]
    assert len(found) == 1, call.trailing_metadata()
    status = status_pb2.Status.FromString(found[0])
    assert status.code == call.code().value[0] and status.message == call.details()
    return status


def violations(error: exceptions.GoogleAPICallError) -> list[tuple[str, str]]:
    """The field violations of an error's BadRequest detail, as (field, description)."""
    return [
        (v.field, v.description)
        for d in error.details
        if isinstance(d, error_details_pb2.BadRequest)
        for v in d.field_violations
    ]


def fields(error: exceptions.GoogleAPICallError) -> list[str]:
    return [field for field, _ in violations(error)]


def assert_as_rest(error: exceptions.GoogleAPICallError, rest: dict[str, Any]) -> None:
    """The gRPC error says what REST's `error` object says: the same message, the same details."""
    assert error.message == rest["message"]
    assert json_format.MessageToDict(status_of(error))["details"] == rest["details"]


def not_found(calls: Sequence[Callable[..., object]], name: str) -> list[exceptions.NotFound]:
    """The error of each of `calls` on `name`: each NOT_FOUND, with that code in its status details too."""
    errors = []
    for call in calls:
        with pytest.raises(exceptions.NotFound) as caught:
            call(name=name)
        assert status_of(caught.value).code == grpc.StatusCode.NOT_FOUND.value[0]
        errors.append(caught.value)
    return errors


def judged_paths(
    bindings: Callable[[Any], Sequence[Binding]], call: Callable[[grpc.Channel], object]
) -> list[str]:
    """The REST paths auth judged the calls `call` makes by, on an in-process server of a kind's `bindings`
    (its `rpc.bindings`, given no service) that refuses every call, so no service is reached."""
    seen: list[str] = []

    def refuse(rpc_call: RpcCall) -> ApiError:
        seen.append(rpc_call.path)
        return ApiError(Code.PERMISSION_DENIED, "refused by the test")

    def unexpected(exc: Exception) -> ApiError:
        raise AssertionError("a refused call reached its service") from exc

    server = RpcServer("127.0.0.1", 0, bindings(NO_SERVICE), refuse, unexpected, max_message_bytes=1 << 20)
    server.start()
    try:
        with grpc.insecure_channel(server.address) as channel, pytest.raises(exceptions.PermissionDenied):
            call(channel)
    finally:
        server.stop(0)
    return seen
