"""Replica supervisor: the process the server starts for each replica.

Run as `python -I -S shim.py RUN_DIR CWD SETUP ARGV...` with the replica's environment as its own (CWD may be
empty). SETUP is "-" when the server sends the replica's plan on stdin (sandbox.py's format: its memory
cgroup and its sandbox), a folder to bind at /gcs in a private mount namespace (no sandbox), or empty. It
leads the replica's process group, starts the command with its output in RUN_DIR (through sandbox.spawn
when there is a plan), and writes the exit status to RUN_DIR/exit.json, so the status survives a server
restart; a replica the OOM killer ended gets `oom_kill` there. It imports only built-in modules and its two
sibling modules (no json: its records are written by hand) because its start-up is on every replica's
start path.
"""

from __future__ import annotations

import os
import signal
import sys
import time

TYPE_CHECKING = False  # typing itself is not imported: this module is on every replica's start path
if TYPE_CHECKING:
    import types
    from collections.abc import Callable, Sequence
    from typing import Any

CLONE_NEWNS = 0x00020000
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
_DIR = os.path.dirname(os.path.abspath(__file__))


def _load(name: str) -> types.ModuleType:
    """A sibling module (sandbox, memory_limits), under a private name: a warm interpreter shares its
    sys.modules with training code."""
    key = "_trainworks_" + name
    module = sys.modules.get(key)
    if module is None:
        import importlib.machinery
        import types

        path = os.path.join(_DIR, name + ".py")
        loader = importlib.machinery.SourceFileLoader(key, path)
        module = types.ModuleType(key)
        module.__file__ = path
        module.__loader__ = loader
        sys.modules[key] = module
        loader.exec_module(module)
    return module


def _write_record(path: str, fields: Sequence[tuple[str, float]], durable: bool = True) -> None:
    """A flat JSON object of numbers, written atomically."""
    text = "{" + ", ".join(f'"{key}": {value!r}' for key, value in fields) + "}"
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode())
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def _fsync(path: str) -> None:
    """Best effort: the file is in place already, this only makes it survive a host crash."""
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        return


def _mount_gcs(root: str, err: int) -> None:
    """A private mount namespace with the bucket root bound at /gcs, as Cloud Storage FUSE shows it."""
    import ctypes  # here, not at the top: replicas without /gcs (podman) skip its ~8 ms of CPU

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNS) != 0:
        raise OSError(ctypes.get_errno(), "unshare(CLONE_NEWNS) failed")
    if libc.mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None) != 0:
        raise OSError(ctypes.get_errno(), "making / private failed")
    os.makedirs("/gcs", exist_ok=True)
    if libc.mount(root.encode(), b"/gcs", None, MS_BIND | MS_REC, None) != 0:
        raise OSError(ctypes.get_errno(), f"bind-mounting {root} at /gcs failed")


def read_plan(setup: str) -> dict[str, Any]:
    """The replica's plan: from stdin ("-"), else the legacy /gcs folder (or nothing)."""
    if setup != "-":
        return {"cgroup": None, "gcs_root": setup or None, "sandbox": None}
    chunks = []
    while True:
        chunk = os.read(0, 65536)
        if not chunk:
            break
        chunks.append(chunk)
    return _load("sandbox").parse_plan(b"".join(chunks).decode())


def main() -> None:
    run_dir, cwd, setup = sys.argv[1:4]
    argv = sys.argv[4:]
    plan = read_plan(setup)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the plan's pipe is done with
    os.close(devnull)
    capture = _load("capture").Capture(run_dir)
    out, err = capture.stdout, capture.stderr
    if os.getpgid(0) != os.getpid():
        os.setsid()
    # Written before the command starts, made durable once it has (the command need not wait on the disk).
    shim_record = os.path.join(run_dir, "shim.json")
    _write_record(shim_record, [("pid", os.getpid()), ("started", time.time())], durable=False)
    if plan["gcs_root"]:
        try:
            _mount_gcs(plan["gcs_root"], err)
        except OSError as exc:
            os.write(err, f"[trainworks] /gcs is not available in this replica: {exc}\n".encode())

    # The supervisor outlives signals sent to the group; the command gets default handlers after exec.
    stops = StopWatch()
    stops.install()

    def start() -> None:
        os.dup2(out, 1)
        os.dup2(err, 2)
        capture.close_in_child()
        if cwd:
            os.chdir(cwd)
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, signal.SIG_DFL)
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"[trainworks] could not start {argv[0]!r}: {exc}\n".encode())
        os._exit(127)

    supervise(plan, start, run_dir, err, started=lambda: _fsync(shim_record), stops=stops, capture=capture)


def supervise(
    plan: dict[str, Any],
    start: Callable[[], None],
    run_dir: str,
    log_fd: int,
    started: Callable[[], None] | None = None,
    stops: StopWatch | None = None,
    capture: Any = None,
) -> None:
    """Run the replica (`start`, in its own process) under `plan`, wait for it and write its exit record;
    then remove its memory cgroup. `stops`: the stop signals' watch, installed early by the caller;
    `capture`: the replica's log (capture.Capture): its logger starts before the command, and has written
    everything the command wrote before the exit record says it ended."""
    cgroup = plan["cgroup"]
    limits: Any = _load("memory_limits") if cgroup else None  # only used when there is a cgroup
    before = limits.oom_kills(cgroup["dir"], cgroup["version"]) if cgroup else None
    if stops is None:
        stops = StopWatch()
        stops.install()
    if capture is not None:
        capture.start()
    if cgroup is None and plan["sandbox"] is None:
        child = os.fork()
        if child == 0:
            try:
                start()
            except BaseException as exc:  # noqa: BLE001 - anything here means the command never started
                os.write(2, f"[trainworks] could not start the replica: {exc}\n".encode())
            os._exit(127)
        stops.command = child
        if started is not None:
            started()
        status = _wait(child)
    else:
        try:
            status = _load("sandbox").spawn(plan, start, log_fd, started, stops)
        except OSError as exc:
            os.write(log_fd, f"[trainworks] the replica could not be started: {exc}\n".encode())
            status = 127 << 8
    if capture is not None:
        capture.finish()
    oom = False
    if cgroup is not None:
        oom = status != 0 and limits.ran_out_of_memory(cgroup["dir"], cgroup["version"], before, status)
    record_status(status, run_dir, oom, stops.interrupted)
    if cgroup is not None:
        limits.remove_dir(cgroup["dir"])


class StopWatch:
    """Whether a stop signal (SIGTERM, SIGINT, SIGHUP: the server's teardown, sent to the replica's process
    group) reached the supervisor while the command still ran. An exit 0 with none before it is a run that
    finished on its own: a preemption decided in that same instant must not restart it."""

    def __init__(self) -> None:
        self.command: int | None = None  # the pid to look at; None: not started yet (a stop now interrupts)
        self.interrupted = False

    def install(self) -> None:
        """Catch the stop signals (the supervisor outlives them; the command gets default handlers)."""
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._on_stop)

    def _on_stop(self, _signum: int, _frame: object) -> None:
        if self.command is None or _running(self.command):
            self.interrupted = True


def _running(pid: int) -> bool:
    """Whether the child `pid` has not ended yet (looked at without reaping it)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:  # already reaped: it ended
        return False


def _wait(child: int) -> int:
    while True:
        try:
            return os.waitpid(child, 0)[1]
        except InterruptedError:
            continue


def record_status(status: int, run_dir: str, oom: bool = False, interrupted: bool = False) -> None:
    """Write the exit record: 128+signal when a signal ended the command; oom_kill when the OOM killer did;
    interrupted: whether a stop signal came while the command still ran (StopWatch)."""
    if os.WIFSIGNALED(status):
        signum = os.WTERMSIG(status)
        record: list[tuple[str, float]] = [("exit_code", 128 + signum), ("signal", signum)]
    else:
        record = [("exit_code", os.WEXITSTATUS(status))]
    if oom:
        record.append(("oom_kill", 1))
    record.append(("interrupted", int(interrupted)))
    record.append(("ended", time.time()))
    _write_record(os.path.join(run_dir, "exit.json"), record)


if __name__ == "__main__":
    main()
