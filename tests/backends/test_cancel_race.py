"""A stop signal sent while the replica supervisor (backends/shim.py) is starting the command is acted on.

The server cancels a replica by sending SIGTERM to its process group, and SIGKILL only after its grace (10 s
by default). A stop that reaches the supervisor before the command runs must still end the command at once:
the command, once started, takes it, or it never runs. Each case here starts a replica whose command has no
handler of its own and runs until a signal ends it, sends the stop to the replica's group at one moment of
its start, and waits for the exit record: the command ended by that very signal, interrupted. A lost stop
leaves the command running (a server would SIGKILL it after its grace): the wait then gives up after
HANG_GUARD, far past any start, and the case fails on that.

The moments run from the first instant the supervisor catches stop signals (cold start: its handler shows in
/proc; warm start: the zygote's launch has returned) to a little past the command's "ready", spread evenly
over a start measured in the same run: before the fork, between the fork and the exec (or the training
code), during a sandbox's setup, while the command's interpreter starts. Whatever the moment, the outcome
must be the same. Cold starts, warm (zygote) starts and the server's fork server (a zygote that answers
with the supervisor's pid before the supervisor leads its group), with and without the sandbox (which needs
root). The stop is sent as the server sends it (LocalBackend.signal).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.server import wait_for
from tests.support.supervisors import start_supervisor, warm_interpreter
from trainworks.backends import procfs, sandbox
from trainworks.backends.base import LaunchRequest, ProcessHandle
from trainworks.backends.capture import read_output
from trainworks.backends.forkserver import ForkServer
from trainworks.backends.local import LocalBackend
from trainworks.backends.warm import WarmPool, WarmTarget, python_invocation
from trainworks.kinds.custom_jobs.launcher import host_env

# No handler of its own: the stop's default action (KeyboardInterrupt, then the same, for SIGINT) ends it.
COMMAND = "import time\nprint('ready', flush=True)\nwhile True:\n    time.sleep(1)\n"
ARGV = [sys.executable, "-c", COMMAND]
MOMENTS = 10  # per case
HANG_GUARD = 60.0  # seconds: only a lost stop comes near it
# (start, plan, stop signal). SIGINT on warm starts only: a cold interpreter that takes it during its own
# start-up exits 1 on the KeyboardInterrupt, which is CPython's doing; a warm one runs the code as
# KeyboardInterrupt's default would end it (zygote.py).
CASES = [
    pytest.param(start, plan, stop, id=f"{start}-{plan}-{stop.name}")
    for start in ("cold", "warm", "forked")
    for plan in ("none", "sandbox")
    for stop in (signal.SIGTERM, signal.SIGINT)
    if start == "warm" or stop == signal.SIGTERM
]


class Replica:
    """One replica being started, and its process group (led by its supervisor)."""

    def __init__(
        self, handle: ProcessHandle, run_dir: Path, process: subprocess.Popen[bytes] | None = None
    ) -> None:
        self.handle = handle
        self.group = handle.pid
        self.run_dir = run_dir
        self.process = process  # a cold start's supervisor is this test's child: reaped here

    def send(self, signum: int) -> None:
        """The stop, as the server's teardown sends it."""
        LocalBackend().signal(self.handle, signum)

    def record(self) -> dict[str, float] | None:
        path = self.run_dir / "exit.json"
        return dict(json.loads(path.read_text())) if path.exists() else None

    def ready(self) -> bool:
        return "ready" in read_output(str(self.run_dir))

    def stop(self) -> None:
        """Whatever still runs of it goes (a lost stop's command, most of all)."""
        if self.record() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.group, signal.SIGKILL)
        if self.process is not None:
            self.process.wait()


def _catches_sigterm(pid: int) -> bool:
    """Whether `pid` has a SIGTERM handler of its own (the supervisor's StopWatch is installed)."""
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return False
    caught = next(line.split(":", 1)[1] for line in lines if line.startswith("SigCgt:"))
    return bool(int(caught, 16) & (1 << (signal.SIGTERM - 1)))


def start_cold(run_dir: Path, sandboxed: bool) -> Replica:
    """The supervisor as backends/local.py starts it; returns once it catches stop signals."""
    process = start_supervisor(run_dir, ARGV, sandboxed)
    replica = Replica(ProcessHandle(process.pid, procfs.start_time(process.pid) or 0), run_dir, process)
    try:
        wait_for(lambda: _catches_sigterm(process.pid), interval=0.0005, what="the supervisor's handler")
    except BaseException:
        replica.stop()
        raise
    return replica


@pytest.fixture(scope="module")
def warm_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WarmPool, WarmTarget]]:
    with warm_interpreter(tmp_path_factory.mktemp("warm"), "cancel-race") as warm:
        yield warm


def warm_starter(pool: WarmPool, target: WarmTarget) -> Callable[[Path, bool], Replica]:
    def start_warm(run_dir: Path, sandboxed: bool) -> Replica:
        """Forked from the zygote; returns once its supervisor catches stop signals (its ready byte)."""
        env = host_env()
        invocation = python_invocation(ARGV, env)
        assert invocation is not None
        request = LaunchRequest("1", "workerpool0-0", ARGV, env, run_dir, run_dir)
        handle = pool.launch(target, request, invocation, lambda _r: "sandbox\n" if sandboxed else None)
        assert handle is not None, "the zygote did not start the replica"
        return Replica(handle, run_dir, None)

    return start_warm


@pytest.fixture(scope="module")
def fork_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ForkServer]:
    server = ForkServer(tmp_path_factory.mktemp("fork-server"), sys.executable)
    try:
        yield server
    finally:
        server.close()


def fork_starter(server: ForkServer) -> Callable[[Path, bool], Replica]:
    def start_forked(run_dir: Path, sandboxed: bool) -> Replica:
        """Forked by the fork server; returns as soon as it answers (the supervisor may not lead its group
        yet, nor catch stop signals: it holds them)."""
        request = LaunchRequest("1", "workerpool0-0", ARGV, host_env(), run_dir, run_dir)
        handle = server.launch(request, ARGV, "sandbox\n" if sandboxed else None)
        assert handle is not None, "the fork server did not start the replica"
        return Replica(handle, run_dir, None)

    return start_forked


def ended(replica: Replica, what: str) -> dict[str, float]:
    record: Any = wait_for(replica.record, timeout=HANG_GUARD, interval=0.005, what=what)
    if replica.process is not None:
        replica.process.wait(timeout=HANG_GUARD)
    return dict(record)


@pytest.mark.parametrize(("kind", "plan", "stop"), CASES)
def test_a_stop_at_any_moment_of_the_start_ends_the_command_by_that_stop(
    request: pytest.FixtureRequest, kind: str, plan: str, stop: int, tmp_path: Path
) -> None:
    sandboxed = plan == "sandbox"
    if sandboxed and not sandbox.available():
        pytest.skip("building a sandbox needs CAP_SYS_ADMIN")
    if kind == "cold":
        start = start_cold
    elif kind == "warm":
        start = warm_starter(*request.getfixturevalue("warm_pool"))
    else:
        start = fork_starter(request.getfixturevalue("fork_server"))
    expected = {"exit_code": 128 + stop, "signal": stop, "interrupted": 1}

    # The start's length, measured here (it varies with the machine and its load): the moments span it.
    first = start(tmp_path / "measure", sandboxed)
    try:
        began = time.monotonic()
        wait_for(first.ready, interval=0.001, what="the command to start")
        span = 1.25 * (time.monotonic() - began)
        first.send(stop)
        assert ended(first, "the started replica to end") | {"ended": 0} == expected | {"ended": 0}
    finally:
        first.stop()

    for index in range(MOMENTS):
        moment = span * index / (MOMENTS - 1)
        replica = start(tmp_path / f"run-{index}", sandboxed)
        try:
            time.sleep(moment)  # picks the moment of the start the stop comes at; nothing waits on it
            replica.send(stop)
            record = ended(replica, f"the replica to end on a stop {moment * 1000:.1f} ms into its start")
            assert record | {"ended": 0} == expected | {"ended": 0}, f"stop {moment * 1000:.1f} ms in"
        finally:
            replica.stop()
