"""The error middleware (api/errors.py UnexpectedErrors) over a real socket, on the server's HTTP stack
(uvicorn with uvloop and httptools, as `trainworks serve` runs it).

A route that raises before it answers gets the google.rpc 500 body and the keep-alive connection stays up;
a streamed answer that fails midway still ends properly with what was sent (the server then closes the
connection and logs the error), as under the BaseHTTPMiddleware it replaced."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
import uvicorn
import uvloop
from fastapi import FastAPI
from fastapi.responses import StreamingResponse

from trainworks.api.errors import install_error_handlers
from trainworks.kernel.errors import ApiError
from trainworks.kernel.status import Code


def app() -> FastAPI:
    api = FastAPI()
    install_error_handlers(api)

    @api.get("/boom")
    def boom() -> None:
        raise RuntimeError("boom")

    @api.get("/refused")
    def refused() -> None:
        raise ApiError(Code.FAILED_PRECONDITION, "not now")

    @api.get("/stream")
    def stream() -> StreamingResponse:
        def lines() -> Iterator[bytes]:
            yield b"one\n"
            yield b"two\n"
            raise RuntimeError("midway")

        return StreamingResponse(lines(), media_type="text/plain")

    @api.get("/ok")
    def ok() -> dict[str, bool]:
        return {"ok": True}

    return api


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        app(), host="127.0.0.1", port=port, loop="uvloop", http="httptools", log_level="critical"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=uvloop.run, args=(server.serve(),), daemon=True)
    thread.start()
    while not server.started:  # set once the socket listens
        assert thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def test_an_unexpected_error_is_a_google_rpc_500_and_the_connection_stays_up(url: str) -> None:
    with httpx.Client(base_url=url) as client:
        failed = client.get("/boom")
        assert failed.status_code == 500
        assert failed.json() == {
            "error": {
                "code": 500,
                "message": "Internal error encountered. The error was logged by the server.",
                "status": "INTERNAL",
                "details": [],
            }
        }
        assert failed.headers["content-type"] == "application/json"
        assert client.get("/ok").json() == {"ok": True}  # the same keep-alive connection
        refused = client.get("/refused")
        assert refused.status_code == 400
        assert refused.json()["error"]["status"] == "FAILED_PRECONDITION"


def test_a_stream_failing_midway_ends_with_what_was_sent(url: str) -> None:
    with httpx.Client(base_url=url) as client:
        streamed = client.get("/stream")  # a truncated chunked body would raise here
        assert streamed.status_code == 200
        assert streamed.content == b"one\ntwo\n"
