"""Test servers forked from a warm interpreter instead of started cold.

A cold `python -m trainworks.cli.main serve` spends ~1.3 s of CPU importing the server (FastAPI, SQLAlchemy,
Alembic, the kinds, the gRPC types) before it does anything, and the suite starts servers a few hundred
times. Each pytest worker keeps one warm interpreter (this module run as a script) that has imported them;
a server is a fork of it that runs the same command line (`trainworks.cli.main`'s app) in a fresh process
with the test's environment, working folder and log, exactly what the cold start would run after its
imports. The server is a real process like any other: the tests signal it by a pidfd, and the warm
interpreter sends them its wait status when it ends (it is the server's parent), so `ForkedServer` answers
like the `subprocess.Popen` it stands beside.

Cold starts stay where a test needs one: another interpreter or working folder (`ServerProcess.python`,
`.cwd`), and everywhere when TRAINWORKS_TEST_COLD_SERVERS=1. The README's and the CLI's own tests start
`trainworks serve` cold.

    python -P tests/support/server_forks.py ADDRESS PARENT_PID
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

COLD_ENV = "TRAINWORKS_TEST_COLD_SERVERS"
_READY = b"ready\n"
_START_TIMEOUT = 60.0
# What a server's start imports: loaded once here, before any fork.
_PRELOAD = (
    "trainworks.cli.main",
    "trainworks.cli.serve",
    "trainworks.api.app",
    "uvicorn",
    "uvicorn.loops.uvloop",
    "uvicorn.protocols.http.httptools_impl",
    "uvicorn.protocols.websockets.auto",
    "uvicorn.lifespan.on",
)


class ForkedServer:
    """A forked server process, answering as `subprocess.Popen` does (pid, poll, wait, signals)."""

    def __init__(self, pid: int, pidfd: int, status: socket.socket) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._status = status  # the warm interpreter writes the wait status here when the server ends

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._status], [], [], 0)[0]:
            self._collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"server {self.pid}", timeout or 0.0)
            self._collect()
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # ended, not yet collected: as Popen does
                signal.pidfd_send_signal(self._pidfd, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _collect(self) -> None:
        data = b""
        while not data.endswith(b"\n"):
            chunk = self._status.recv(64)
            if not chunk:
                raise RuntimeError(f"the warm interpreter ended before server {self.pid} did")
            data += chunk
        self.returncode = os.waitstatus_to_exitcode(int(data))
        self._status.close()
        os.close(self._pidfd)


class WarmInterpreter:
    """This worker's warm interpreter: started at the first fork, stopped by PID at the end of the session."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._address = ""
        self._failed = False

    def fork(
        self, argv: list[str], env: Mapping[str, str], log: Path, cwd: Path | None
    ) -> ForkedServer | None:
        """A server running `trainworks ARGV`; None when there is no warm interpreter (start it cold)."""
        address = self._ready()
        if address is None:
            return None
        request = {"argv": argv, "env": dict(env), "log": str(log), "cwd": str(cwd or os.getcwd())}
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect("\0" + address)
            conn.sendall(json.dumps(request).encode() + b"\n")
            message, fds, _flags, _addr = socket.recv_fds(conn, 64, 1)
        except OSError:
            conn.close()
            return None
        if not message.endswith(b"\n") or len(fds) != 1:
            conn.close()
            for fd in fds:
                os.close(fd)
            return None
        return ForkedServer(int(message), fds[0], conn)

    def _ready(self) -> str | None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                return self._address
            if self._failed:
                return None
            self._address = f"trainworks-test-servers-{os.getpid()}-{os.urandom(4).hex()}"
            self._process = subprocess.Popen(
                [sys.executable, "-P", __file__, self._address, str(os.getpid())],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                close_fds=True,
            )
            assert self._process.stdout is not None
            ready = select.select([self._process.stdout], [], [], _START_TIMEOUT)[0]
            if not ready or self._process.stdout.readline() != _READY:
                self._failed = True  # every later server of this worker starts cold
                self._stop()
                return None
            return self._address

    def stop(self) -> None:
        with self._lock:
            self._stop()

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.kill()
            process.wait()
            if process.stdout is not None:
                process.stdout.close()


WARM = WarmInterpreter()


def fork_server(
    argv: list[str], env: Mapping[str, str], log: Path, cwd: Path | None, python: str
) -> ForkedServer | None:
    """A forked server, or None when this start must be (or can only be) cold."""
    if os.environ.get(COLD_ENV) == "1" or python != sys.executable or cwd is not None:
        return None
    return WARM.fork(argv, env, log, cwd)


# ------------------------------------------------------------------------------------ the warm interpreter
def _serve(request: dict[str, object]) -> None:
    """In the forked child: become the server the request names, then exit as the CLI does."""
    log = os.open(str(request["log"]), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.close(devnull)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    time.tzset()  # TZ as the server's own environment says
    os.chdir(str(request["cwd"]))
    argv = request["argv"]
    assert isinstance(argv, list)
    sys.argv = ["trainworks", *argv]
    sys.path.insert(0, str(request["cwd"]))  # as `python -m` puts its working folder first on the import path
    from trainworks.cli.main import main

    main()  # exits (SystemExit) like the cold command; the interpreter's exit runs as there


def _main() -> None:
    address, parent = sys.argv[1], int(sys.argv[2])
    for name in _PRELOAD:
        __import__(name)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + address)
    listener.listen(64)
    parent_fd = os.pidfd_open(parent)
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, the test's connection)
    sys.stdout.buffer.write(_READY)
    sys.stdout.flush()
    while True:
        readable = select.select([listener, parent_fd, *children], [], [])[0]
        if parent_fd in readable:
            return  # the pytest worker ended: its servers are its to stop, by PID
        for fd in readable:
            if fd in children:
                pid, conn = children.pop(fd)
                _, status = os.waitpid(pid, 0)
                with contextlib.suppress(OSError):
                    conn.sendall(f"{status}\n".encode())
                conn.close()
                os.close(fd)
        if listener not in readable:
            continue
        conn, _ = listener.accept()
        data = b""
        while not data.endswith(b"\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
        if not data.endswith(b"\n"):
            conn.close()
            continue
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            listener.close()
            conn.close()
            os.close(parent_fd)
            for fd, (_, other) in children.items():
                os.close(fd)
                other.close()
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            _serve(request)
            return
        pidfd = os.pidfd_open(pid)
        socket.send_fds(conn, [f"{pid}\n".encode()], [pidfd])
        children[pidfd] = (pid, conn)


if __name__ == "__main__":
    _main()
