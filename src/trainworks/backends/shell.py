"""Interactive shells in live replicas: a pseudo-terminal running a shell in the replica's own environment.

A host replica's shell enters the namespaces of the replica's command with `nsenter`: in a sandbox its mount
and PID namespaces, with every capability dropped (`setpriv`), as the replica itself runs; without one, the
mount namespace of its private /gcs view. It joins the replica's memory cgroup, starts in the command's
working directory and gets the command's environment, read from /proc/<pid>/environ. A podman replica's
shell is `podman exec` into its container, run with the podman client's environment (which carries the
server's podman configuration). Either way the shell leads a session of its own with the pseudo-terminal as
its controlling terminal (`setsid --ctty`), so closing the session can stop everything started from it.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import os
import select
import shutil
import signal
import struct
import subprocess
import termios
from dataclasses import dataclass
from pathlib import Path

from trainworks.backends import procfs
from trainworks.backends.capture import LOGGER_NAME
from trainworks.backends.memory_limits import memory_cgroup_of

DEFAULT_TERM = "xterm-256color"
_READ_SIZE = 65536
# After the shell exits, what is still in the terminal buffer is sent; a background writer that keeps the
# terminal open must not keep the session alive forever.
_DRAIN_CHUNKS = 64


class ShellUnavailable(Exception):
    """No shell can be opened into this replica (it ended, or this host lacks what a shell needs)."""


@dataclass(frozen=True)
class ShellPlan:
    """What to run on the terminal, and the process whose end ends the shell."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    replica_pid: int
    replica_start: int


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError as exc:
        raise ShellUnavailable(f"the replica's environment cannot be read: {exc.strerror}") from None
    env: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name:
            env[name.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return env


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _namespace(pid: int | str, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def supervised(pid: int) -> list[int]:
    """A replica supervisor's children but its logger (backends/capture.py): in a sandbox, the init of the
    replica's PID namespace; else the command."""
    return [child for child in procfs.children(pid) if _comm(child) != LOGGER_NAME]


def command_process(pid: int, pid_start: int) -> int:
    """The replica's command: in a sandbox, the first child of the init of the replica's PID namespace
    (the supervisor's child); else the supervisor's child (started cold, forked by the fork server or by a
    warm interpreter: the supervisor forks the command in each case, shim.supervise)."""
    if not procfs.is_alive(pid, pid_start):
        raise ShellUnavailable("the replica is not running")
    children = supervised(pid)
    if children and _namespace(children[0], "pid") != _namespace(pid, "pid"):
        commands = procfs.children(children[0])
        if not commands:
            raise ShellUnavailable("the replica's command has ended")
        return commands[0]  # the init starts the command first; orphans it adopts come after
    if not children:
        raise ShellUnavailable("the replica's command has ended")
    return children[0]  # beside its logger the supervisor forks exactly one child: the command


def _podman_container(argv: list[str]) -> str | None:
    """The container name of a `podman run --name=NAME ...` command line, or None for anything else."""
    if len(argv) < 2 or not os.path.basename(argv[0]).startswith("podman") or argv[1] != "run":
        return None
    for word in argv[2:]:
        if word.startswith("--name="):
            return word.removeprefix("--name=")
    return None


def _tool(name: str) -> str:
    path = shutil.which(name, path=os.environ.get("PATH", "") + os.pathsep + "/usr/bin:/bin")
    if path is None:
        raise ShellUnavailable(f"`{name}` (util-linux) is not installed on the server host")
    return path


def plan_shell(
    pid: int, pid_start: int, command: str | None = None, term: str = DEFAULT_TERM, tty: bool = True
) -> ShellPlan:
    """How to open a shell into the replica whose (supervisor) process is `pid`; `command` runs one
    command with `sh -c` instead of an interactive shell; `tty=False` gives a container no terminal."""
    target = command_process(pid, pid_start)
    target_start = procfs.start_time(target)
    if target_start is None:
        raise ShellUnavailable("the replica's command has ended")
    argv = procfs.cmdline(target)
    setsid = _tool("setsid")
    container = _podman_container(argv)
    if container is not None:
        # Inside the image: its own shell, environment and working directory; bash when the image has it.
        inner = 'exec bash -c "$1"' if command else "exec bash -i"
        fallback = 'exec sh -c "$1"' if command else "exec sh -i"
        script = f"if command -v bash >/dev/null 2>&1; then {inner}; else {fallback}; fi"
        shell_argv = [
            argv[0],
            "exec",
            "--interactive",
            *(["--tty", f"--env=TERM={term}"] if tty else []),
            container,
            "/bin/sh",
            "-c",
            script,
            "sh",
            *([command] if command else []),
        ]
        return ShellPlan([setsid, "--ctty", *shell_argv], _environ(target), None, target, target_start)

    env = _environ(target)
    env["TERM"] = term
    # --norc/--noprofile: start-up files could change the variables; the shell shows the replica's own.
    shell = shutil.which("bash", path=env.get("PATH")) or shutil.which("bash")
    if shell:
        words = [shell, "--norc", "--noprofile"] + (["-c", command] if command else ["-i"])
    else:
        words = ["/bin/sh"] + (["-c", command] if command else ["-i"])
    # The shell joins the replica's memory cgroup: what it starts counts against the replica's limit.
    join = _join_cgroup(target)
    if _namespace(target, "pid") != _namespace("self", "pid"):
        # A sandbox: its mounts and PID namespace, and none of the capabilities the replica gave up.
        nsenter = [_tool("nsenter"), f"--target={target}", "--mount", "--pid", "--wd"]
        drop = [_tool("setpriv"), "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--"]
        argv = [setsid, "--ctty", *join, *nsenter, "--", *drop, *words]
        return ShellPlan(argv, env, None, target, target_start)
    if _namespace(target, "mnt") != _namespace("self", "mnt"):
        # --wd without a value: the command's working directory, opened before entering (it may be in /gcs).
        nsenter = [_tool("nsenter"), f"--target={target}", "--mount", "--wd"]
        return ShellPlan([setsid, "--ctty", *join, *nsenter, "--", *words], env, None, target, target_start)
    try:
        cwd = os.readlink(f"/proc/{target}/cwd")
    except OSError as exc:
        raise ShellUnavailable(f"the replica's working directory cannot be read: {exc.strerror}") from None
    return ShellPlan([setsid, "--ctty", *join, *words], env, cwd, target, target_start)


def _join_cgroup(target: int) -> list[str]:
    """argv words that move the shell into the replica's memory cgroup before it starts (none when the
    replica has no cgroup of its own)."""
    folder = memory_cgroup_of(target)
    if folder is None or folder == memory_cgroup_of("self"):
        return []
    procs = os.path.join(folder, "cgroup.procs")
    return ["/bin/sh", "-c", 'echo $$ > "$0" && exec "$@"', procs]


def _winsize(cols: int, rows: int) -> bytes:
    return struct.pack("HHHH", rows, cols, 0, 0)


def _pidfd(pid: int, start: int | None = None) -> int | None:
    """A pidfd (readable once the process ends), or None when `pid` is gone or is now another process."""
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if start is not None and procfs.start_time(pid) != start:  # checked after opening: no reuse race
        os.close(fd)
        return None
    return fd


def session_members(sid: int) -> list[int]:
    """Every process of session `sid`: the shell and what it started, whichever process group."""
    members = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as handle:
                data = handle.read().decode("utf-8", "replace")
        except OSError:
            continue
        fields = data[data.rfind(")") + 2 :].split()
        if len(fields) > 3 and int(fields[3]) == sid:
            members.append(int(entry.name))
    return members


class ShellSession:
    """One shell on a pseudo-terminal: async reads and writes of terminal bytes, resizes, and its end."""

    def __init__(self, plan: ShellPlan, cols: int = 80, rows: int = 24, tty: bool = True) -> None:
        self.plan = plan
        master, slave = os.openpty()
        try:
            fcntl.ioctl(slave, termios.TIOCSWINSZ, _winsize(cols, rows))
            if not tty:
                # Like `ssh host cmd` without -t: output bytes arrive as written, input is not echoed.
                attrs = termios.tcgetattr(slave)
                attrs[1] &= ~termios.OPOST
                attrs[3] &= ~(termios.ECHO | termios.ECHONL)
                termios.tcsetattr(slave, termios.TCSANOW, attrs)
            self.process = subprocess.Popen(
                plan.argv,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                env=plan.env,
                cwd=plan.cwd,
                close_fds=True,
            )
        except (OSError, termios.error) as exc:
            os.close(master)
            raise ShellUnavailable(f"the shell could not start: {exc}") from None
        finally:
            os.close(slave)
        self.fd = master
        os.set_blocking(master, False)
        # The shell has not been waited for, so its pid cannot have been reused yet.
        self._shell_fd = _pidfd(self.process.pid)
        self._replica_fd = _pidfd(plan.replica_pid, plan.replica_start)
        self._closed = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def _shell_exited(self) -> bool:
        """Whether the shell has ended, without reaping it (its pid names the session until close)."""
        if self._shell_fd is None:
            return self.process.poll() is not None
        return bool(select.select([self._shell_fd], [], [], 0)[0])

    async def _ready(self, *fds: int, write: bool = False) -> None:
        """Wait until one of fds is readable (or, for the first, writable when `write`)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()

        def wake() -> None:
            if not future.done():
                future.set_result(None)

        watched: list[tuple[int, bool]] = []
        for index, fd in enumerate(fds):
            as_writer = write and index == 0
            (loop.add_writer if as_writer else loop.add_reader)(fd, wake)
            watched.append((fd, as_writer))
        try:
            await future
        finally:
            for fd, as_writer in watched:
                (loop.remove_writer if as_writer else loop.remove_reader)(fd)

    async def read(self) -> bytes:
        """The next terminal output; b"" once the shell has exited and its output is all read."""
        drained = 0
        while True:
            try:
                data = os.read(self.fd, _READ_SIZE)
            except BlockingIOError:
                if self._shell_exited():
                    return b""
                extra = [self._shell_fd] if self._shell_fd is not None else []
                await self._ready(self.fd, *extra)
                continue
            except OSError as exc:
                if exc.errno == errno.EIO:  # every holder of the terminal has closed it
                    return b""
                raise
            if not data:
                return b""
            if self._shell_exited():
                drained += 1
                if drained > _DRAIN_CHUNKS:
                    return b""
            return data

    async def write(self, data: bytes) -> None:
        """Terminal input, as typed; waits while the terminal's input buffer is full."""
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(self.fd, view) :]
            except BlockingIOError:
                await self._ready(self.fd, write=True)
            except OSError as exc:
                if exc.errno == errno.EIO:
                    return  # the shell is gone: the reader reports the end
                raise

    def end_of_input(self) -> None:
        """End of input for a command reading the terminal: the terminal's EOF character."""
        with contextlib.suppress(OSError):
            os.write(self.fd, bytes([termios.tcgetattr(self.fd)[6][termios.VEOF][0]]))

    def resize(self, cols: int, rows: int) -> None:
        fcntl.ioctl(self.fd, termios.TIOCSWINSZ, _winsize(cols, rows))  # the kernel sends SIGWINCH

    async def replica_ended(self) -> None:
        """Returns once the replica's command has ended (at once if it is already gone)."""
        if self._replica_fd is None:
            return
        await self._ready(self._replica_fd)

    def replica_has_ended(self) -> bool:
        """Whether the replica's command has ended, now (its pidfd is readable once it has)."""
        if self._replica_fd is None or self._closed:
            return True
        return bool(select.select([self._replica_fd], [], [], 0)[0])

    async def close(self, grace: float = 1.0) -> int:
        """Stop the shell's whole session (SIGHUP, then SIGKILL) and return its exit status (128 + signal
        when a signal ended it). The shell is reaped last, so its session id cannot be reused meanwhile."""
        if not self._closed:
            self._closed = True
            self._signal_session(signal.SIGHUP)
            if self._shell_fd is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._ready(self._shell_fd), grace)
            self._signal_session(signal.SIGKILL)
            await asyncio.to_thread(self.process.wait)
            for fd in (self.fd, self._shell_fd, self._replica_fd):
                if fd is not None:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        code = self.process.returncode
        return 128 - code if code < 0 else code

    def _signal_session(self, signum: int) -> None:
        for pid in {self.process.pid, *session_members(self.process.pid)}:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signum)
