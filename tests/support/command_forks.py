"""Trainworks commands (servers, CLI runs) forked from warm interpreters instead of started cold.

A cold `python -m trainworks.cli.main serve` spends ~1.3 s of CPU importing the server (FastAPI, SQLAlchemy,
Alembic, the kinds, the gRPC types) before it does anything, a CLI command ~0.28 s importing the CLI, and the
suite starts servers a few hundred times and runs the CLI a few hundred more. Each pytest worker keeps warm
interpreters (this module run as a script) that have imported what those starts import: `server` the
server, `cli` only what the CLI itself imports before it picks a command (so each command still imports its
own modules, as it does cold). A command is a fork of one that runs the same command line
(`trainworks.cli.main`'s app) in a fresh process with the test's environment, working folder and output,
exactly what the cold start would run after those imports. It is a real process like any other: the tests
signal it by a pidfd, and the warm interpreter (its parent) sends them its wait status when it ends, so
`ForkedProcess` answers like the `subprocess.Popen` it stands beside.

Cold starts stay where a test needs one: another interpreter or working folder for a server
(`ServerProcess.python`, `.cwd`), a CLI run whose environment differs from its warm interpreter's in anything
read at import (only TRAINWORKS_* and the terminal size may), and everything when
TRAINWORKS_TEST_COLD_STARTS=1. The README's tests and the CLI's start-up tests run `trainworks` cold.

    python -P tests/support/command_forks.py ADDRESS PARENT_PID (server|cli)
"""

from __future__ import annotations

import contextlib
import json
import os
import runpy
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

COLD_ENV = "TRAINWORKS_TEST_COLD_STARTS"
_READY = b"ready\n"
_START_TIMEOUT = 60.0
# What a start imports before it runs its command, loaded once here before any fork.
PRELOAD = {
    "server": (
        "trainworks.cli.main",
        "trainworks.cli.serve",
        "trainworks.api.app",
        "uvicorn",
        "uvicorn.loops.uvloop",
        "uvicorn.protocols.http.httptools_impl",
        "uvicorn.protocols.websockets.auto",
        "uvicorn.lifespan.on",
    ),
    "cli": ("trainworks.cli.main",),
}
# Variables a forked CLI run may have otherwise than its warm interpreter: nothing reads them at import
# (PYTEST_CURRENT_TEST names the test that runs).
_CLI_OWN_ENV = ("TRAINWORKS_", "COLUMNS", "LINES", "PYTEST_")
_LENGTH = struct.Struct("!I")


class ForkedProcess:
    """A forked command's process, answering as `subprocess.Popen` does (pid, poll, wait, signals)."""

    def __init__(self, pid: int, pidfd: int, status: socket.socket) -> None:
        self.pid = pid
        self.returncode: int | None = None
        self._pidfd = pidfd
        self._status = status  # the warm interpreter writes the wait status here when the process ends

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._status], [], [], 0)[0]:
            self._collect()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._status], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"trainworks {self.pid}", timeout or 0.0)
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
                raise RuntimeError(f"the warm interpreter ended before process {self.pid} did")
            data += chunk
        self.returncode = os.waitstatus_to_exitcode(int(data))
        self._status.close()
        os.close(self._pidfd)


class WarmInterpreter:
    """One of this worker's warm interpreters: started at its first fork, stopped by PID at the end."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.env: dict[str, str] = {}  # the environment it started with
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._address = ""
        self._failed = False
        self.forks = 0

    def fork(
        self, argv: list[str], env: Mapping[str, str], cwd: Path, log: Path | None, stdio: list[int]
    ) -> ForkedProcess | None:
        """`trainworks ARGV`, its output appended to `log` or on the three `stdio` descriptors; None when
        there is no warm interpreter (start it cold)."""
        address = self._ready()
        if address is None:
            return None
        request = json.dumps(
            {"argv": argv, "env": dict(env), "cwd": str(cwd), "log": str(log) if log else None}
        ).encode()
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            conn.connect("\0" + address)
            socket.send_fds(conn, [_LENGTH.pack(len(request)) + request], stdio)
            message, fds, _flags, _addr = socket.recv_fds(conn, 64, 1)
        except OSError:
            conn.close()
            return None
        if not message.endswith(b"\n") or len(fds) != 1:
            conn.close()
            for fd in fds:
                os.close(fd)
            return None
        self.forks += 1
        return ForkedProcess(int(message), fds[0], conn)

    def _ready(self) -> str | None:
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                return self._address
            if self._failed:
                return None
            self._address = f"trainworks-test-{self.kind}-{os.getpid()}-{os.urandom(4).hex()}"
            self.env = dict(os.environ)
            self._process = subprocess.Popen(
                [sys.executable, "-P", __file__, self._address, str(os.getpid()), self.kind],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                close_fds=True,
                env=self.env,
            )
            assert self._process.stdout is not None
            ready = select.select([self._process.stdout], [], [], _START_TIMEOUT)[0]
            if not ready or self._process.stdout.readline() != _READY:
                self._failed = True  # every later command of this worker starts cold
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


WARM = {kind: WarmInterpreter(kind) for kind in PRELOAD}


def fork_server(
    argv: list[str], env: Mapping[str, str], log: Path, cwd: Path | None, python: str
) -> ForkedProcess | None:
    """A forked server, or None when this start must be (or can only be) cold."""
    if os.environ.get(COLD_ENV) == "1" or python != sys.executable or cwd is not None:
        return None
    return WARM["server"].fork(argv, env, Path.cwd(), log, [])


def run_cli(
    args: list[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """`python -m trainworks.cli.main ARGS` with nothing on its input, as `subprocess.run(...,
    capture_output=True, text=True)` runs it; forked from this worker's warm CLI interpreter if it can be."""
    command = [sys.executable, "-m", "trainworks.cli.main", *args]
    env = dict(os.environ if env is None else env)
    process = None
    if _forkable(env):
        stdin = os.open(os.devnull, os.O_RDONLY)
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        try:
            process = WARM["cli"].fork(args, env, cwd or Path.cwd(), None, [stdin, stdout_w, stderr_w])
        finally:
            for fd in (stdin, stdout_w, stderr_w):
                os.close(fd)
        if process is None:
            os.close(stdout_r)
            os.close(stderr_r)
    if process is None:
        return subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=env,
            timeout=timeout,
            cwd=cwd,
        )
    deadline = None if timeout is None else time.monotonic() + timeout
    out, err = _read_to_end(process, stdout_r, stderr_r, deadline, command)
    try:
        code = process.wait(None if deadline is None else max(deadline - time.monotonic(), 0.0))
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise subprocess.TimeoutExpired(command, timeout or 0.0, out, err) from None
    return subprocess.CompletedProcess(command, code, _text(out), _text(err))


def _text(data: bytes) -> str:
    """As `text=True` reads it: decoded, with universal newlines."""
    return data.decode().replace("\r\n", "\n").replace("\r", "\n")


def cli_env(endpoint: str | None = None, project: str | None = None, columns: int = 250) -> dict[str, str]:
    """This process's environment without its TRAINWORKS_ settings, output `columns` wide, and the endpoint
    and project given."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINWORKS_")}
    env["COLUMNS"] = str(columns)
    if endpoint is not None:
        env["TRAINWORKS_ENDPOINT"] = endpoint
    if project is not None:
        env["TRAINWORKS_PROJECT"] = project
    return env


def _forkable(env: Mapping[str, str]) -> bool:
    if os.environ.get(COLD_ENV) == "1":
        return False
    warm = WARM["cli"].env or os.environ  # before its start: it will start with this process's environment
    names = {*env, *warm}
    return all(env.get(n) == warm.get(n) for n in names if not n.startswith(_CLI_OWN_ENV))


def _read_to_end(
    process: ForkedProcess, stdout: int, stderr: int, deadline: float | None, command: list[str]
) -> tuple[bytes, bytes]:
    """Both outputs to their ends (the command's exit closes them), as Popen.communicate reads them."""
    chunks: dict[int, list[bytes]] = {stdout: [], stderr: []}
    readers = [stdout, stderr]
    try:
        while readers:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                process.kill()
                process.wait()
                output, errors = b"".join(chunks[stdout]), b"".join(chunks[stderr])
                raise subprocess.TimeoutExpired(command, 0.0, output, errors)
            for fd in select.select(readers, [], [], left)[0]:
                chunk = os.read(fd, 65536)
                if chunk:
                    chunks[fd].append(chunk)
                else:
                    readers.remove(fd)
    finally:
        os.close(stdout)
        os.close(stderr)
    return b"".join(chunks[stdout]), b"".join(chunks[stderr])


# ------------------------------------------------------------------------------------ the warm interpreter
def _run(request: dict[str, object], stdio: list[int]) -> None:
    """In the forked child: become the command the request names, then exit as the cold command does."""
    if request["log"] is not None:
        log = os.open(str(request["log"]), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        stdio = [os.open(os.devnull, os.O_RDONLY), log, log]
    for target, fd in enumerate(stdio):
        os.dup2(fd, target)
    for fd in set(stdio):
        if fd > 2:
            os.close(fd)
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    time.tzset()  # TZ as the command's own environment says
    os.chdir(str(request["cwd"]))
    argv = request["argv"]
    assert isinstance(argv, list)
    sys.argv = ["", *argv]
    sys.path.insert(0, str(request["cwd"]))  # as `python -m` puts its working folder first on the import path
    # What `python -m` does: the module runs anew as __main__ (its imports are loaded already), with its path
    # as argv[0]; it exits (SystemExit) as the cold command does, and the interpreter's exit runs as there.
    sys.modules.pop("trainworks.cli.main", None)  # run as __main__ only, as cold (runpy warns otherwise)
    runpy.run_module("trainworks.cli.main", run_name="__main__", alter_sys=True)


def _receive(conn: socket.socket) -> tuple[dict[str, object], list[int]] | None:
    """A request (length-prefixed JSON) and the descriptors sent with its first bytes."""
    message, fds, _flags, _addr = socket.recv_fds(conn, 65536, 3)
    while len(message) < _LENGTH.size or len(message) < _LENGTH.size + _LENGTH.unpack_from(message)[0]:
        chunk = conn.recv(65536)
        if not chunk:
            for fd in fds:
                os.close(fd)
            return None
        message += chunk
    return json.loads(message[_LENGTH.size :]), fds


def _main() -> None:
    address, parent, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    for name in PRELOAD[kind]:
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
            return  # the pytest worker ended: its commands are its to stop, by PID
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
        received = _receive(conn)
        if received is None:
            conn.close()
            continue
        request, stdio = received
        pid = os.fork()
        if pid == 0:
            listener.close()
            conn.close()
            os.close(parent_fd)
            for fd, (_, other) in children.items():
                os.close(fd)
                other.close()
            signal.pthread_sigmask(signal.SIG_SETMASK, [])
            _run(request, stdio)
            return
        for fd in stdio:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        socket.send_fds(conn, [f"{pid}\n".encode()], [pidfd])
        children[pidfd] = (pid, conn)


if __name__ == "__main__":
    _main()
