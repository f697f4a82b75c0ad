"""Replica supervisor: the process the server starts for each replica.

Run as `python -I -S shim.py RUN_DIR CWD SETUP ARGV...` with the replica's environment as its own (CWD may be
empty). SETUP is "-" when the server sends the replica's plan on stdin (sandbox.py's format: its memory
cgroup and its sandbox), a folder to bind at /gcs in a private mount namespace (no sandbox), or empty. It
leads the replica's process group, starts the command with its output in RUN_DIR (through sandbox.spawn
when there is a plan), and writes the exit status to RUN_DIR/exit.json, so the status survives a server
restart; a replica the OOM killer ended gets `oom_kill` there. A stop signal that comes while it sets the
replica up and starts the command is held and reaches the command (StopWatch). It imports only built-in
modules and its two sibling modules (no json: its records are written by hand) because its start-up is on
every replica's start path.
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
#: The stop signals: the server's teardown (cancel, preemption), sent to the replica's process group.
STOPS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
_PF_EXITING = 0x4  # a task's flags in /proc/PID/stat (include/linux/sched.h): it is in do_exit


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


def write_forked_record(run_dir: str, extra: Sequence[tuple[str, float]] = ()) -> str:
    """shim.json of a supervisor forked from a zygote (the fork server's, a persistent resource's, a replica
    slot's), before its command runs: its pid and kernel start time (a restarted server adopts it by them)
    and its zygote; not yet durable (`_fsync` once the command exists). Returns its path."""
    path = os.path.join(run_dir, "shim.json")
    fields = [
        ("pid", os.getpid()),
        ("started", time.time()),
        ("pid_start", _load("procfs").start_time(os.getpid()) or 0),
        ("zygote", os.getppid()),
        *extra,
    ]
    _write_record(path, fields, durable=False)
    return path


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
    # Stop signals are held from here on (StopWatch): one that comes while the replica is set up and started
    # still reaches the command. The server starts this process with them blocked already (backends/local.py),
    # so one that comes while this interpreter starts up is held as well.
    stops = StopWatch()
    stops.install()
    run_dir, cwd, setup = sys.argv[1:4]
    argv = sys.argv[4:]
    plan = read_plan(setup)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the plan's pipe is done with
    os.close(devnull)
    capture = _load("capture").Capture(run_dir)
    err = capture.stderr
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

    start = exec_start(argv, cwd, capture, stops)
    started = lambda: _fsync(shim_record)  # noqa: E731
    supervise(plan, start, run_dir, err, started=started, stops=stops, capture=capture, execs=True)


# What subprocess's restore_signals puts back: Python ignores these at start-up, and an ignored signal stays
# ignored across exec (a shell pipeline's `| head` would see EPIPE errors instead of ending quietly).
_RESTORED = tuple(getattr(signal, name) for name in ("SIGPIPE", "SIGXFZ", "SIGXFSZ") if hasattr(signal, name))


def exec_start(argv: list[str], cwd: str, capture: Any, stops: StopWatch) -> Callable[[], None]:
    """The replica's start (run in its own process, never returns): its stdio on the log's pipes, its working
    folder, default signal dispositions, then exec of the command (with this process's environment)."""

    def start() -> None:
        os.dup2(capture.stdout, 1)
        os.dup2(capture.stderr, 2)
        capture.close_in_child()
        if cwd:
            os.chdir(cwd)
        for signum in (*STOPS, *_RESTORED):
            signal.signal(signum, signal.SIG_DFL)
        stops.release()  # a stop that came while it was being started ends it here, before it runs
        try:
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(2, f"[trainworks] could not start {argv[0]!r}: {exc}\n".encode())
        os._exit(127)

    return start


def supervise(
    plan: dict[str, Any],
    start: Callable[[], None],
    run_dir: str,
    log_fd: int,
    started: Callable[[], None] | None = None,
    stops: StopWatch | None = None,
    capture: Any = None,
    execs: bool = False,
) -> None:
    """Run the replica (`start`, in its own process) under `plan`, wait for it and write its exit record;
    then remove its memory cgroup. `stops`: the stop signals' watch, installed early by the caller;
    `capture`: the replica's log (capture.Capture): its logger starts before the command, and has written
    everything the command wrote before the exit record says it ended; `execs`: `start` execs the command
    (sandbox.spawn)."""
    cgroup = plan["cgroup"]
    limits: Any = _load("memory_limits") if cgroup else None  # only used when there is a cgroup
    before = limits.oom_kills(cgroup["dir"], cgroup["version"]) if cgroup else None
    if stops is None:
        stops = StopWatch()
        stops.install()
    if capture is not None:
        capture.start()
    if cgroup is None and plan["sandbox"] is None:
        child = stops.fork()
        if child == 0:
            try:
                start()
            except BaseException as exc:  # noqa: BLE001 - anything here means the command never started
                os.write(2, f"[trainworks] could not start the replica: {exc}\n".encode())
            os._exit(127)
        if started is not None:
            started()
        status = _wait(child)
    else:
        try:
            status = _load("sandbox").spawn(plan, start, log_fd, stops, started, execs)
        except OSError as exc:
            os.write(log_fd, f"[trainworks] the replica could not be started: {exc}\n".encode())
            stops.take_pending()  # a stop that came meanwhile: the start was interrupted
            status = 127 << 8
    finish(status, run_dir, cgroup, before, stops, capture)


def finish(
    status: int,
    run_dir: str,
    cgroup: dict[str, Any] | None,
    before: int | None,
    stops: StopWatch,
    capture: Any = None,
) -> None:
    """The command has ended with `status`: its log written out, its exit record (an OOM kill is one the
    memory cgroup counted since `before`), its memory cgroup removed."""
    if capture is not None:
        capture.finish()
    oom = False
    if cgroup is not None:
        limits = _load("memory_limits")
        oom = status != 0 and limits.ran_out_of_memory(cgroup["dir"], cgroup["version"], before, status)
    record_status(status, run_dir, oom, stops.ended(status))
    if cgroup is not None:
        limits.remove_dir(cgroup["dir"])


class StopWatch:
    """The stop signals (STOPS: the server's teardown, sent to the replica's process group) around the
    command's start, and whether one came while the command still ran.

    None is lost while the command is being started: they are held (blocked) from `install` on, so one that
    comes early waits as pending instead of running a handler that could only note it. `fork` starts each
    process of the replica (the command; in a sandbox, first its init) with them still held: the parent
    takes those pending for itself (they came before the child existed, or came to both) and sends them to
    the child, and only then lets the child go on (a pipe), so a signal the child got itself and the same
    one sent on merge into one pending signal. The parent then takes later ones in its handler. The command
    sets its own dispositions and calls `release` last thing before it runs: a held stop acts there, and
    the command never runs (ended by that signal, as if it had come a moment later).

    An exit 0 with no stop before it is a run that finished on its own: a preemption decided in that same
    instant must not restart it. So is one whose stop came while the command was already exiting (past
    its exit call, not yet reapable, the stop not caught: `_dying_without`)."""

    def __init__(self) -> None:
        self.command: int | None = None  # the pid to look at; None: not started yet (a stop now interrupts)
        self.interrupted = False  # a stop came while the command had not ended
        self.came = False  # a stop came at all

    def install(self) -> None:
        """Hold the stop signals, then catch them (the supervisor outlives them). Held first: a signal caught
        by the handler before the command exists could only be noted, not passed on."""
        signal.pthread_sigmask(signal.SIG_BLOCK, STOPS)
        for signum in STOPS:
            signal.signal(signum, self._on_stop)

    def _on_stop(self, signum: int, _frame: object) -> None:
        self.came = True
        if self.command is None or (_running(self.command) and not _dying_without(self.command, signum)):
            self.interrupted = True

    def take_pending(self) -> list[int]:
        """Take the held stop signals that are pending, without running the handler (one that came before
        the command exists interrupts its run)."""
        taken = []
        while (info := signal.sigtimedwait(STOPS, 0)) is not None:
            taken.append(info.si_signo)
        if taken:
            self.came = self.interrupted = True
        return taken

    def fork(self, fork: Callable[[], int] = os.fork) -> int:
        """`fork` (os.fork, or one like it) for the replica's next process, with the stop signals held (see
        the class). In the child it returns 0 once every stop that came before is pending there, still held:
        `release` them once its own dispositions are set. In the parent it returns the child's pid, and
        takes stops as they come."""
        go_r, go_w = os.pipe()
        try:
            child = fork()
        except OSError:
            os.close(go_r)
            os.close(go_w)
            raise
        if child == 0:
            try:
                os.close(go_w)
                while os.read(go_r, 1):  # end of file: the parent has sent on what it took
                    pass
                os.close(go_r)
            except BaseException:  # noqa: BLE001 - the caller's code after fork() is the parent's: not here
                os._exit(127)
            self.command = None
            return 0
        os.close(go_r)
        self.command = child
        try:
            for signum in self.take_pending():
                os.kill(child, signum)
            self.release()  # a stop pending now runs the handler while the child is sure to be alive
        finally:
            os.close(go_w)
        return child

    @staticmethod
    def release() -> None:
        """Stop holding the stop signals: a pending one acts now (its handler, or its default action)."""
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOPS)

    def ended(self, status: int) -> bool:
        """Whether the command's run (`status`: its wait status) was interrupted: a stop came while it ran,
        or a stop came and a stop signal ended it (the handler may only have run once it was reaped)."""
        signal.pthread_sigmask(signal.SIG_BLOCK, ())  # changes nothing; runs any handler still due
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) in STOPS
        return self.interrupted or (self.came and killed)


def _running(pid: int) -> bool:
    """Whether the child `pid` has not ended yet (looked at without reaping it)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None
    except ChildProcessError:  # already reaped: it ended
        return False


def _dying_without(pid: int, signum: int) -> bool:
    """Whether the command `pid` was already on its way out when the stop `signum` came, so that the stop
    could not have begun its end: every thread of it is exiting (PF_EXITING: past its exit call, not yet a
    zombie; the kernel drops a signal sent to a dying process), and it does not catch `signum` (a handler
    could have run and exited before we looked). Its wait status then says the rest: killed by a stop
    signal, or an exit of its own. Anything unreadable counts as alive (interrupted), as before."""
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            status = handle.read()
        caught = next(line for line in status.splitlines() if line.startswith(b"SigCgt:"))
        if int(caught.split()[1], 16) & (1 << (signum - 1)):
            return False
        threads = os.listdir(f"/proc/{pid}/task")
        for tid in threads:
            with open(f"/proc/{pid}/task/{tid}/stat", "rb") as handle:
                flags = int(handle.read().rsplit(b")", 1)[1].split()[6])
            if not flags & _PF_EXITING:
                return False
    except (OSError, ValueError, IndexError, StopIteration):
        return False
    return bool(threads)


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
