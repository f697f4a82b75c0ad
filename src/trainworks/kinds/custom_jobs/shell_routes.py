"""The shell WebSocket: a terminal in a running replica, for `trainworks custom-jobs shell` and the console.

`/trainworks/v1/projects/P/locations/L/customJobs/ID:shell?replica=workerpool0-0` (optional `command`,
`tty=0` for a command without a terminal, `term`, `cols`, `rows`). Credentials are those of the REST API
(bearer token, `x-goog-api-key` or `?key=`), checked before the upgrade; so is the replica, and a refusal is
a google.rpc error body with its HTTP status. Once open: binary frames carry terminal bytes both ways; text
frames are JSON controls, `{"resize": [cols, rows]}` and `{"eof": true}` from the client, and from the
server `{"error": "..."}` for a control it could not use and, last, `{"exit": status}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
from dataclasses import dataclass

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from starlette.concurrency import run_in_threadpool

from trainworks.api.auth import refusal
from trainworks.api.errors import error_response
from trainworks.api.state import services
from trainworks.backends.shell import DEFAULT_TERM, ShellSession, ShellUnavailable, plan_shell
from trainworks.kernel.errors import ApiError, FieldViolation, failed_precondition, invalid_argument
from trainworks.kernel.status import Code
from trainworks.kinds.custom_jobs.web_access import shell_replica

log = logging.getLogger(__name__)

PARENT = "/projects/{project}/locations/{location}/customJobs"
_TERM = re.compile(r"^[A-Za-z0-9._+-]{1,64}$")
_MAX_SIZE = 10000


@dataclass(frozen=True)
class ShellOptions:
    replica: str
    command: str | None
    tty: bool
    term: str
    cols: int
    rows: int


def _size(websocket: WebSocket, name: str, default: int) -> int:
    raw = websocket.query_params.get(name)
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= _MAX_SIZE:
        raise invalid_argument(
            [FieldViolation(name, f"expected an integer from 1 to {_MAX_SIZE}, got {raw!r}")]
        )
    return int(raw)


def _options(websocket: WebSocket) -> ShellOptions:
    query = websocket.query_params
    tty = query.get("tty", "1").lower()
    if tty not in ("0", "1", "true", "false"):
        raise invalid_argument([FieldViolation("tty", f"expected 1 or 0 (true or false), got {tty!r}")])
    term = query.get("term") or DEFAULT_TERM
    if not _TERM.match(term):
        raise invalid_argument([FieldViolation("term", f"{term!r} is not a terminal type such as xterm")])
    command = query.get("command")
    if command is not None and not command.strip():
        raise invalid_argument([FieldViolation("command", "the command is empty")])
    return ShellOptions(
        replica=query.get("replica") or "workerpool0-0",
        command=command,
        tty=tty in ("1", "true"),
        term=term,
        cols=_size(websocket, "cols", 80),
        rows=_size(websocket, "rows", 24),
    )


async def _deny(websocket: WebSocket, error: ApiError) -> None:
    """Refuse the upgrade with an error body, where the server can send one (uvicorn can)."""
    if "websocket.http.response" in websocket.scope.get("extensions", {}):
        await websocket.send_denial_response(error_response(error))
    else:
        await websocket.close(code=1008, reason=error.message.encode()[:120].decode(errors="ignore"))


def _control(session: ShellSession, text: str) -> str | None:
    """Apply a control frame; what was wrong with it, or None."""
    try:
        data = json.loads(text)
    except ValueError:
        data = None
    if not isinstance(data, dict):
        return 'a text frame must be a JSON object such as {"resize": [80, 24]}'
    if "resize" in data:
        size = data["resize"]
        if (
            not isinstance(size, list)
            or len(size) != 2
            or not all(type(n) is int and 1 <= n <= _MAX_SIZE for n in size)
        ):
            return f"resize: expected [cols, rows], two integers from 1 to {_MAX_SIZE}"
        session.resize(size[0], size[1])
        return None
    if data.get("eof") is True:
        session.end_of_input()
        return None
    return f"unknown control frame {sorted(data)}; expected resize or eof"


async def bridge(websocket: WebSocket, session: ShellSession, replica: str) -> None:
    """Terminal bytes both ways until the shell exits, the client goes, or the replica ends."""

    async def output() -> None:
        while chunk := await session.read():
            await websocket.send_bytes(chunk)

    async def input_() -> None:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return
            if message.get("bytes") is not None:
                await session.write(message["bytes"])
            elif message.get("text") is not None:
                problem = _control(session, message["text"])
                if problem:
                    await websocket.send_text(json.dumps({"error": problem}))

    out_task = asyncio.create_task(output())
    in_task = asyncio.create_task(input_())
    replica_task = asyncio.create_task(session.replica_ended())
    tasks = (out_task, in_task, replica_task)
    done: set[asyncio.Task[None]] = set()
    try:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        # A shell killed with its replica (the PID namespace's end, the teardown's hang-up) may close its
        # output before the replica's end is noticed: the replica's command has ended by then.
        replica_gone = replica_task in done or session.replica_has_ended()
        code = await session.close()
    shell_ended = out_task in done and out_task.exception() is None
    if not shell_ended and not replica_gone:
        return  # the client went away: nobody to tell
    reason = f"the replica {replica} ended" if replica_gone else ""
    with contextlib.suppress(WebSocketDisconnect, RuntimeError):
        await websocket.send_text(json.dumps({"exit": code}))
        await websocket.close(code=1000, reason=reason)


def router() -> APIRouter:
    api = APIRouter(prefix="/trainworks/v1", tags=["extensions"])

    @api.websocket(PARENT + "/{job_id}:shell")
    async def shell(websocket: WebSocket, project: str, location: str, job_id: str) -> None:
        custom_jobs = services(websocket).custom_jobs
        refused = await run_in_threadpool(refusal, websocket)  # the API's own check: token and project
        if refused is not None:
            await _deny(websocket, refused)
            return
        try:
            options = _options(websocket)
            row = await run_in_threadpool(
                shell_replica, custom_jobs, project, location, job_id, options.replica
            )
            try:
                plan = plan_shell(
                    int(row.pid or 0), int(row.pid_start or 0), options.command, options.term, options.tty
                )
                session = await run_in_threadpool(ShellSession, plan, options.cols, options.rows, options.tty)
            except ShellUnavailable as exc:
                raise failed_precondition(
                    f"No shell opens into {options.replica} of CustomJob {job_id}: {exc}."
                ) from None
        except ApiError as exc:
            await _deny(websocket, exc)
            return
        except Exception as exc:  # the same promise as the REST API: a google.rpc body, never a bare 500
            log.exception("opening a shell failed", exc_info=exc)
            message = "Internal error encountered. The error was logged by the server."
            await _deny(websocket, ApiError(Code.INTERNAL, message))
            return
        log.info("shell %d opened into %s of CustomJob %s", session.pid, options.replica, job_id)
        try:
            await websocket.accept()
        except BaseException:
            await session.close()
            raise
        await bridge(websocket, session, options.replica)
        log.info("shell %d into %s of CustomJob %s closed", session.pid, options.replica, job_id)

    return api
