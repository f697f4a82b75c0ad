"""The replica supervisor (backends/shim.py) notes whether a stop signal came while the command still ran.

The server decides a preemption, then signals the replica's process group. A command that exited 0 in between
finished on its own: its exit record says `"interrupted": 0` and the job succeeds instead of restarting. A
command that caught the stop and exited 0 was interrupted: `"interrupted": 1`. Both orders are forced, not
raced for: the supervisor (and the sandbox's init) are stopped while the command exits, and the command is
stopped until the supervisor has taken the signal. Run with and without the sandbox (it needs root).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import group_members
from tests.support.server import wait_for
from tests.support.supervisors import start_supervisor
from trainworks.backends import sandbox, shim
from trainworks.backends.capture import LOGGER_NAME, read_output
from trainworks.backends.local import SHIM

SIGTERM_BIT = 1 << (signal.SIGTERM - 1)
# Prints "ready", then exits 0 on SIGUSR1 (finishes on its own) or on SIGTERM (a graceful stop).
COMMAND = """
import os, signal, sys
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
signal.signal(signal.SIGUSR1, lambda *_: sys.exit(0))
print("ready", flush=True)
while True:
    signal.pause()
"""

PLANS = ["none", "sandbox"]


@pytest.fixture(params=PLANS)
def replica(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replica]:
    if request.param == "sandbox" and not sandbox.available():
        pytest.skip("building a sandbox needs CAP_SYS_ADMIN")
    started = Replica(tmp_path, request.param == "sandbox")
    try:
        yield started
    finally:
        started.stop()


class Replica:
    def __init__(self, run_dir: Path, sandboxed: bool) -> None:
        self.run_dir = run_dir
        self.process = start_supervisor(run_dir, [sys.executable, "-c", COMMAND], sandboxed)
        wait_for(lambda: "ready" in self._stdout(), what="the command to start")

    def _stdout(self) -> str:
        return read_output(str(self.run_dir))

    def members(self) -> list[int]:
        """The supervisor's process group: the supervisor, the sandbox's init if any, the command."""
        return group_members(self.process.pid)

    def watchers(self, command: int) -> list[int]:
        """The processes that note a stop (shim.StopWatch): the supervisor and the sandbox's init if any. Not
        the command, nor the logger: it ignores stop signals (and, forked while the supervisor holds them,
        keeps them pending, never taking them)."""
        logger = LOGGER_NAME.encode()
        return [
            p
            for p in self.members()
            if p != command and Path(f"/proc/{p}/comm").read_bytes().strip() != logger
        ]

    def command(self) -> int:
        """The command's host PID: the group's member that runs COMMAND (the supervisor and the init, forked
        from it, are the shim)."""
        for pid in self.members():
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if str(SHIM).encode() not in argv:
                return pid
        raise AssertionError("the command is not running")

    def exit_record(self) -> dict[str, float]:
        self.process.wait(timeout=60)
        return dict(json.loads((self.run_dir / "exit.json").read_text()))

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


def state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def took_sigterm(pid: int) -> bool:
    """The process took the pending SIGTERM (delivered: its handler ran) and sleeps again in its wait."""
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    pending = int(status["SigPnd"], 16) | int(status["ShdPnd"], 16)
    return not pending & SIGTERM_BIT and status["State"].strip().startswith("S")


def test_a_command_that_exited_before_the_stop_was_not_interrupted(replica: Replica) -> None:
    command = replica.command()
    watchers = replica.watchers(command)
    for pid in watchers:  # the supervisor (and init) see nothing until the command has ended
        os.kill(pid, signal.SIGSTOP)
    for pid in watchers:  # stopped, not only told to stop: one still running could reap the command
        wait_for(lambda pid=pid: state(pid) == "T", what=f"process {pid} to stop")
    os.kill(command, signal.SIGUSR1)
    wait_for(lambda: state(command) == "Z", what="the command to end")
    os.killpg(replica.process.pid, signal.SIGTERM)  # the stop comes after the end
    for pid in watchers:
        os.kill(pid, signal.SIGCONT)
    assert replica.exit_record() | {"ended": 0} == {"exit_code": 0, "interrupted": 0, "ended": 0}


def test_a_command_that_caught_the_stop_and_exited_0_was_interrupted(replica: Replica) -> None:
    command = replica.command()
    watchers = replica.watchers(command)
    os.kill(command, signal.SIGSTOP)  # it cannot end before the supervisor (and init) took the stop
    wait_for(lambda: state(command) == "T", what="the command to stop")
    os.killpg(replica.process.pid, signal.SIGTERM)
    for pid in watchers:
        wait_for(lambda pid=pid: took_sigterm(pid), what=f"process {pid} to take SIGTERM")
    os.kill(command, signal.SIGCONT)
    assert replica.exit_record() | {"ended": 0} == {"exit_code": 0, "interrupted": 1, "ended": 0}


# A watcher (the supervisor's StopWatch) whose command is PID 1 of a PID namespace of its own: such a process
# cannot finish exiting while a process of its namespace is not reaped, so a stopped outside parent of one
# holds it in its exit (past PF_EXITING, not yet a zombie) for as long as the test needs. It prints the
# command's PID, then, once it has reaped it, its wait status and whether the stop interrupted it.
WATCHER = """
import os, signal, sys, time
from trainworks.backends import sandbox, shim
stops = shim.StopWatch()
stops.install()
sandbox.unshare(sandbox.CLONE_NEWPID, "a PID namespace for the command")
child = stops.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # as an exec'd command has it
    signal.signal(signal.SIGHUP, lambda *_: None)  # caught: a handler could end it
    stops.release()
    while not os.path.exists(sys.argv[1]):
        time.sleep(0.01)
    os._exit(0)
print(child, flush=True)
status = shim._wait(child)
print(status, int(stops.ended(status)), flush=True)
"""


def flags(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[6])


def test_a_stop_that_came_while_the_command_was_exiting_did_not_interrupt_it(tmp_path: Path) -> None:
    """The flake the preemption storm found: the chief had called exit, the stop came before it was a
    zombie, and the run that had finished was restarted. Forced here: the command is held in its exit."""
    if not sandbox.available():
        pytest.skip("a PID namespace needs CAP_SYS_ADMIN")
    release = tmp_path / "release"
    watcher = subprocess.Popen(
        [sys.executable, "-c", WATCHER, str(release)], stdout=subprocess.PIPE, start_new_session=True
    )
    holder: subprocess.Popen[bytes] | None = None
    try:
        assert watcher.stdout is not None
        command = int(watcher.stdout.readline())
        # A process in the command's namespace whose parent (nsenter) is outside it and stopped: when the
        # command exits, the kernel kills it, and the command's exit waits until it is reaped.
        holder = subprocess.Popen(["nsenter", "-t", str(command), "-p", "--", "sleep", "600"])
        wait_for(lambda: bool(children(holder.pid)), what="nsenter's child in the namespace")
        os.kill(holder.pid, signal.SIGSTOP)
        wait_for(lambda: state(holder.pid) == "T", what="nsenter to stop")
        release.touch()
        wait_for(lambda: bool(flags(command) & shim._PF_EXITING), what="the command to be exiting")
        assert state(command) != "Z"  # not reapable yet: only its flags say it is on its way out
        assert shim._dying_without(command, signal.SIGTERM)
        assert not shim._dying_without(command, signal.SIGHUP)  # caught: its handler could have ended it
        os.kill(watcher.pid, signal.SIGTERM)  # the teardown's stop, after the exit call
        wait_for(lambda: took_sigterm(watcher.pid), what="the watcher to take SIGTERM")
        os.kill(holder.pid, signal.SIGCONT)
        assert watcher.stdout.readline().split() == [b"0", b"0"]  # exit 0, not interrupted
    finally:
        for process in (holder, watcher):
            if process is not None and process.poll() is None:
                os.kill(process.pid, signal.SIGKILL)
                os.kill(process.pid, signal.SIGCONT)
                process.wait()


def test_a_running_command_is_not_taken_for_a_dying_one() -> None:
    assert not shim._dying_without(os.getpid(), signal.SIGTERM)
    assert not shim._dying_without(2**22 + 1, signal.SIGTERM)  # no such process: alive, as before


def children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found
