"""`trainworks custom-jobs shell`: a terminal in a running replica, over the server's shell WebSocket.

With a terminal on stdin the local terminal goes raw (every key goes to the remote shell, Ctrl-C included)
and window size changes follow; it is restored on the way out. `--command` runs one command and exits with
its status; without a terminal on stdin the command gets no remote terminal either (like `ssh host cmd`)
and stdin's end reaches it as end of input.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import termios
import threading
import tty
from collections.abc import Iterator
from types import FrameType
from urllib.parse import urlencode, urlsplit, urlunsplit

import httpx
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from trainworks.kernel.client import ApiError, TrainworksConnectionError


def shell_url(
    endpoint: str,
    name: str,
    replica: str,
    command: str | None,
    tty_: bool,
    size: os.terminal_size | None,
) -> str:
    """ws(s)://HOST/trainworks/v1/NAME:shell?replica=...: the shell socket of job `name` on `endpoint`."""
    parts = urlsplit(endpoint.rstrip("/"))
    scheme = "wss" if parts.scheme == "https" else "ws"
    query: dict[str, str] = {"replica": replica, "tty": "1" if tty_ else "0"}
    if command is not None:
        query["command"] = command
    term = os.environ.get("TERM")
    if tty_ and term:
        query["term"] = term
    if size is not None:
        query["cols"], query["rows"] = str(size.columns), str(size.lines)
    path = f"{parts.path}/trainworks/v1/{name}:shell"
    return urlunsplit((scheme, parts.netloc, path, urlencode(query), ""))


def _refusal(exc: InvalidStatus) -> ApiError:
    """The server's google.rpc error body of a refused upgrade, as the REST client reports errors."""
    response = httpx.Response(exc.response.status_code, content=bytes(exc.response.body or b""))
    response.read()
    return ApiError.from_response(response)


def _terminal_size(fd: int) -> os.terminal_size | None:
    """The terminal's size; None when it is not a terminal or reports none (0 x 0)."""
    try:
        size = os.get_terminal_size(fd)
    except OSError:
        return None
    return size if size.columns > 0 and size.lines > 0 else None


@contextlib.contextmanager
def _raw_mode(fd: int) -> Iterator[None]:
    saved = termios.tcgetattr(fd)
    try:
        tty.setraw(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _forward_input(ws: ClientConnection, stdin: int, wake: int, interactive: bool) -> None:
    """stdin bytes and window size changes to the socket, until the socket closes."""
    reading = True
    try:
        while True:
            ready, _, _ = select.select([stdin, wake] if reading else [wake], [], [])
            if wake in ready:
                os.read(wake, 512)
                size = _terminal_size(stdin)
                if interactive and size is not None:
                    ws.send(json.dumps({"resize": [size.columns, size.lines]}))
            if reading and stdin in ready:
                data = os.read(stdin, 65536)
                if data:
                    ws.send(data)
                else:  # end of stdin: the remote command reads end of input
                    ws.send(json.dumps({"eof": True}))
                    reading = False
    except (ConnectionClosed, OSError):
        return


def _session(ws: ClientConnection, stdin: int, stdout: int, interactive: bool) -> int:
    """Terminal bytes both ways until the server ends the session; the remote exit status."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)

    def on_winch(_signum: int, _frame: FrameType | None) -> None:
        """Nothing here: the wake-up fd below has woken the input thread, which sends the resize."""

    # The kernel may deliver SIGWINCH to any thread, and a Python handler runs only when the main thread
    # next runs Python (it waits on the socket): the wake-up fd is written from the C-level handler at once,
    # in whichever thread took the signal.
    previous = signal.signal(signal.SIGWINCH, on_winch) if interactive else None
    previous_fd = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False) if interactive else None
    sender = threading.Thread(target=_forward_input, args=(ws, stdin, wake_r, interactive), daemon=True)
    sender.start()
    status: int | None = None
    try:
        for message in ws:
            if isinstance(message, bytes):
                _write_all(stdout, message)
                continue
            try:
                control = json.loads(message)
            except ValueError:
                control = {}
            if not isinstance(control, dict):
                continue
            if "exit" in control:
                status = int(control["exit"])
            elif "error" in control:
                print(f"\r\n[trainworks] {control['error']}\r", file=sys.stderr)
    except ConnectionClosed:
        pass
    finally:
        if previous_fd is not None:
            signal.set_wakeup_fd(previous_fd)
        if previous is not None:
            signal.signal(signal.SIGWINCH, previous)
    reason = ws.close_reason
    if reason:
        print(f"\r\n[trainworks] {reason}\r", file=sys.stderr)
    if status is None:
        print("[trainworks] the connection ended before the shell did", file=sys.stderr)
        return 1
    return status


def open_shell(endpoint: str, api_key: str | None, name: str, replica: str, command: str | None) -> int:
    """Run the shell session; returns the remote shell's (or command's) exit status."""
    stdin, stdout = sys.stdin.fileno(), sys.stdout.fileno()
    interactive = os.isatty(stdin)
    url = shell_url(
        endpoint, name, replica, command, interactive, _terminal_size(stdin) if interactive else None
    )
    headers = {"x-goog-api-key": api_key} if api_key else {}
    try:
        ws = connect(url, additional_headers=headers, max_size=None, open_timeout=30)
    except InvalidStatus as exc:
        raise _refusal(exc) from None
    except (OSError, InvalidHandshake, TimeoutError) as exc:
        raise TrainworksConnectionError(endpoint, exc) from None
    with ws:
        if not interactive:
            return _session(ws, stdin, stdout, interactive)
        with _raw_mode(stdin):
            return _session(ws, stdin, stdout, interactive)
