"""Warm interpreter ("zygote") of a persistent resource: a Python process that has already started up and
imported the resource's heavy modules, and forks a replica supervisor for each replica launched on it.

Run as `PYTHON zygote.py STATE_FILE ADDRESS PRELOAD` (PRELOAD: module names separated by commas, may be
empty) with the environment a replica inherits from the server. It imports the modules, listens on the
abstract unix socket ADDRESS (only processes of its own user may talk to it), and records itself in
STATE_FILE as ready. It keeps running while STATE_FILE names it, so the server drops it by removing or
rewriting the file (and signalling it), and it outlives a server restart like replicas do. Run with a fifth
argument, `PID:START` of its server, it is that server's fork server (forkserver.py): it ends with the
server, and its requests carry `exec` (the command line) instead of a python command line: the child is
the shim itself, and execs the command. A sixth argument N > 0 has it keep N replica slots (slots.py): a
request a ready slot can take is handed to it instead of forking.

It answers a request with the child's pid as soon as it has forked it. It holds the stop signals, and so
does each child from the fork on: a stop the server sends before the child leads its group (to its pid)
waits as pending and reaches the command (shim.StopWatch).

For each launch request (one JSON object: run_dir, cwd, gcs_root, env, the parsed python command line and
the server's plan for the replica) it forks a child that plays the replica supervisor exactly as shim.py
does: it leads a new session (so the server signals the group), writes shim.json (with its kernel start
time, so a restarted server can adopt it), starts the training process under the plan (its memory cgroup
and sandbox: shim.supervise, sandbox.spawn) or, without one, in a private /gcs mount namespace, waits for
it and writes exit.json. The training process is the supervisor's child (in a sandbox, the child of the
namespace's init): stdio on the replica's log files, the replica's environment, cwd, argv, sys.path and
signal dispositions as `python -c/-m/script` would have them, then it runs the code in a fresh `__main__`,
and exits the way the interpreter does (SystemExit codes, tracebacks and status 1, atexit handlers,
non-daemon threads joined, SIGINT re-raised for KeyboardInterrupt).

Differences from a cold start that training code could notice: the preloaded modules were imported with
the zygote's environment (the same one the server gives every replica, without the job's own variables),
all replicas forked from one zygote share its str hash seed, and modules the zygote imported itself
(socket, json, ...) are already in sys.modules. numpy's global RandomState, when numpy is preloaded, is
reseeded from the OS in each replica, as a fresh import would seed it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io
import json
import os
import select
import signal
import socket
import struct
import sys
import time
import traceback

_SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
# What `python -c` would have on sys.path after its first entry: the zygote's own path minus its folder.
_BASE_PATH = [p for p in sys.path[1:]]
_MAX_REQUEST = 64 * 1024 * 1024
_WATCH_SECONDS = 2.0

TYPE_CHECKING = False  # typing is not imported: training code would find it in sys.modules
if TYPE_CHECKING:
    import types
    from collections.abc import Callable
    from typing import Any


def _load_shim() -> types.ModuleType:
    """The replica supervisor's helpers, under a private name so no training code can import them."""
    if "_trainworks_shim" in sys.modules:  # a replica slot's spare loaded it first (slots.py)
        return sys.modules["_trainworks_shim"]
    spec = importlib.util.spec_from_file_location("_trainworks_shim", os.path.join(_SCRIPT_DIR, "shim.py"))
    assert spec is not None and spec.loader is not None  # a .py path always has a spec and a loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # shared with what loads it by the same private name (slots.py)
    spec.loader.exec_module(module)
    return module


_shim = _load_shim()
# procfs.py is standard library only: loaded by path, as the shim loads its siblings.
_start_time = _shim._load("procfs").start_time


def _write_json(path: str, data: dict[str, Any]) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)


def _read_json(path: str) -> Any:
    try:
        with open(path) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def _still_mine(state_file: str) -> bool:
    record = _read_json(state_file)
    return isinstance(record, dict) and record.get("pid") == os.getpid()


# ------------------------------------------------------------------ the training process (grandchild)
def _stdio(unbuffered: bool) -> None:
    """Fresh sys.stdin/stdout/stderr on fds 0-2, buffered as a new interpreter would buffer them."""
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    errors = getattr(sys.stdout, "errors", None) or "strict"

    def writer(fd: int, err: bool) -> io.TextIOWrapper:
        raw = io.FileIO(fd, "wb", closefd=False)
        buffer = raw if unbuffered else io.BufferedWriter(raw)
        return io.TextIOWrapper(
            buffer,
            encoding=encoding,
            errors="backslashreplace" if err else errors,
            line_buffering=err and not unbuffered,
            write_through=unbuffered,
        )

    # typeshed declares the sys.__std*__ originals Final; a fresh interpreter's stdio replaces them too.
    sys.stdin = sys.__stdin__ = io.TextIOWrapper(  # type: ignore[misc]
        io.BufferedReader(io.FileIO(0, "rb", closefd=False)), encoding=encoding, errors=errors
    )
    sys.stdout = sys.__stdout__ = writer(1, False)  # type: ignore[misc]
    sys.stderr = sys.__stderr__ = writer(2, True)  # type: ignore[misc]


def _exit_code(exc: SystemExit) -> int:
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code & 0xFF
    with contextlib.suppress(Exception):
        print(code, file=sys.stderr)
    return 1


def _finalize() -> None:
    """What Py_Finalize does before the process ends: join threads, run atexit, flush stdio."""
    threading = sys.modules.get("threading")
    if threading is not None:
        try:
            threading._shutdown()
        except Exception:  # noqa: BLE001
            traceback.print_exc()
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()


def _run_training(
    request: dict[str, Any],
    out: int,
    err: int,
    close_capture: Callable[[], None],
    release_stops: Callable[[], None],
    base_path: list[str] | None = None,
) -> None:
    """The training process (forked with the stop signals held: shim.StopWatch.fork); never returns.
    `base_path`: sys.path after its first entry, as this interpreter's own start made it (a replica slot's
    spare: PYTHONPATH is in it already); else the zygote's, with the replica's PYTHONPATH in front."""
    os.dup2(out, 1)
    os.dup2(err, 2)
    close_capture()  # the log's read ends are the supervisor's
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    for fd in (out, err, devnull):
        os.close(fd)
    cwd = request.get("cwd") or ""
    if cwd:
        os.chdir(cwd)
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(signum, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.environ.clear()
    os.environ.update(request["env"])
    python = request["python"]
    env = request["env"]
    unbuffered = python.get("unbuffered") or bool(env.get("PYTHONUNBUFFERED"))
    _stdio(unbuffered)
    sys.dont_write_bytecode = bool(python.get("dont_write_bytecode") or env.get("PYTHONDONTWRITEBYTECODE"))
    extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p] if base_path is None else []
    mode, target, args = python["mode"], python["target"], list(python.get("args", []))
    if mode == "code":
        first = ""
        sys.argv = ["-c", *args]
    elif mode == "module":
        first = os.getcwd()
        sys.argv = ["-m", *args]
    else:
        first = os.path.dirname(os.path.realpath(target))
        sys.argv = [target, *args]
    sys.path[:] = [first, *extra, *(_BASE_PATH if base_path is None else base_path)]
    importlib.invalidate_caches()
    numpy_random = sys.modules.get("numpy.random")
    if numpy_random is not None:
        with contextlib.suppress(Exception):
            numpy_random.seed()
    main = type(sys)("__main__")
    main.__dict__["__builtins__"] = __builtins__
    sys.modules["__main__"] = main
    code = 0
    try:
        # Last thing before the code runs: a stop that came while it was being started acts now (SIGINT as
        # the KeyboardInterrupt the code would have got, the others by their default action).
        release_stops()
        if mode == "code":
            exec(compile(target, "<string>", "exec"), main.__dict__)
        elif mode == "module":
            import runpy

            # Private, what `python -m` itself runs; typeshed leaves it out.
            runpy._run_module_as_main(target, True)  # type: ignore[attr-defined]
        else:
            import runpy

            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        _finalize()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    except BaseException:  # noqa: BLE001 - what the interpreter does with an uncaught exception
        sys.excepthook(*sys.exc_info())
        code = 1
    _finalize()
    os._exit(code)


# ------------------------------------------------------------------ the replica supervisor (child)
def _supervise(request: dict[str, Any]) -> None:
    """shim.main, with the training process forked from this warm interpreter instead of exec'd; or, for
    a request with `exec` (the server's fork server), shim.main itself: the command is exec'd as the shim
    would, and only the supervisor's own interpreter start-up is saved."""
    os.setsid()
    run_dir = request["run_dir"]
    command = request.get("exec")
    if command is not None:
        # As the shim started by the server would be: the replica's environment its own, stderr on shim.log.
        os.environ.clear()
        os.environ.update(request["env"])
        log = os.open(os.path.join(run_dir, "shim.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(log, 2)
        os.close(log)
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.close(devnull)
    capture = _shim._load("capture").Capture(run_dir)
    out, err = capture.stdout, capture.stderr
    shim_record = _shim.write_forked_record(run_dir)
    # The stop signals are held from the fork on (the zygote holds them; a child keeps the mask): one the
    # server sent since it learnt the pid waits, pending, and reaches the command (StopWatch.fork).
    stops = _shim.StopWatch()
    stops.install()
    # The server's plan (memory cgroup, sandbox: sandbox.py), or the /gcs folder of a server without one.
    plan = _shim.read_plan(request.get("gcs_root") or "")
    if request.get("plan") is not None:
        plan = _shim._load("sandbox").parse_plan(request["plan"])
    if plan["gcs_root"]:
        try:
            _shim._mount_gcs(plan["gcs_root"], err)
        except OSError as exc:
            os.write(err, f"[trainworks] /gcs is not available in this replica: {exc}\n".encode())
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if command is not None:
        start = _shim.exec_start(command, request.get("cwd") or "", capture, stops)
    else:
        start = lambda: _run_training(request, out, err, capture.close_in_child, stops.release)  # noqa: E731
    _shim.supervise(
        plan,
        start,
        run_dir,
        err,
        started=lambda: _shim._fsync(shim_record),
        stops=stops,
        capture=capture,
        execs=command is not None,
    )
    os._exit(0)


# ------------------------------------------------------------------ the zygote
def _read_request(conn: socket.socket) -> Any:
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        size += len(chunk)
        if size > _MAX_REQUEST:
            raise ValueError("request too large")
        chunks.append(chunk)
    return json.loads(b"".join(chunks))


def _serve_one(listener: socket.socket, conn: socket.socket, pool: Any = None) -> None:
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    if uid != os.getuid():
        return
    conn.settimeout(10.0)
    try:
        request = _read_request(conn)
        os.makedirs(request["run_dir"], exist_ok=True)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        conn.sendall(json.dumps({"error": f"bad request: {exc}"}).encode())
        return
    if pool is not None and (taken := pool.take(request)) is not None:
        conn.sendall(json.dumps(taken).encode())  # a replica slot took it (slots.py)
        conn.shutdown(socket.SHUT_RDWR)
        pool.save()
        return
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    pid = os.fork()
    if pid == 0:
        try:
            listener.close()
            conn.close()
            if pool is not None:
                pool.close_in_child()
            _supervise(request)
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        os._exit(127)
    # Answered at once: the supervisor sets itself up while the server goes on. A stop signal the server
    # sends meanwhile is held in it (see main), and a supervisor that fails before it wrote its exit record
    # is a lost replica to the server's poll, as a cold one would be.
    conn.sendall(json.dumps({"pid": pid, "pid_start": _start_time(pid) or 0}).encode())
    # The end of the answer now: the child's copy of the connection stays open until it gets to run.
    conn.shutdown(socket.SHUT_RDWR)


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _wait_for_claim(state_file: str, timeout: float = 10.0) -> dict[str, Any] | None:
    """The server records this zygote's pid right after starting it: wait for that record. Another pid
    there means the server has replaced this zygote already."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        record = _read_json(state_file)
        if isinstance(record, dict) and "pid" in record:
            return record if record["pid"] == os.getpid() else None
        time.sleep(0.005)
    return None


def _watch(server: str) -> int | None:
    """A pidfd of the process `server` ("PID:START") names, that becomes readable once it has ended; None
    when it has ended already (its pid gone, or reused: another start time)."""
    pid, start = (int(part) for part in server.split(":"))
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return None
    if _start_time(pid) != start:
        os.close(fd)
        return None
    return fd


def main() -> None:
    state_file, address, preload = sys.argv[1], sys.argv[2], sys.argv[3]
    slots = int(sys.argv[5]) if len(sys.argv) > 5 else 0  # a fork server's replica slots (slots.py)
    modules = [m for m in preload.split(",") if m]
    # The server's fork server (backends/forkserver.py) names the server: it ends with it (the supervisors it
    # forked do not). A persistent resource's zygote outlives a server restart instead.
    server = _watch(sys.argv[4]) if len(sys.argv) > 4 else None
    # Held here, so every supervisor starts holding them: the server may signal one as soon as it has its
    # pid. The zygote itself is ended by SIGKILL, by its record no longer naming it or by its server's end.
    signal.pthread_sigmask(signal.SIG_BLOCK, _shim.STOPS)
    if len(sys.argv) > 4 and server is None:
        return
    record = _wait_for_claim(state_file)
    if record is None:
        return
    for sibling in ("capture", "sandbox", "memory_limits"):  # each supervisor would load them again
        _shim._load(sibling)
    importlib.import_module("fcntl")  # capture's, imported where it is used: once here, not in each
    started = time.monotonic()
    for name in modules:
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - reported to the server through the record
            if _still_mine(state_file):
                record.update(error=f"could not import {name!r}: {type(exc).__name__}: {exc}", ready=False)
                _write_json(state_file, record)
            traceback.print_exc()
            sys.exit(1)
    import_seconds = time.monotonic() - started
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind("\0" + address)
    listener.listen(64)
    if not _still_mine(state_file):
        return  # dropped (or replaced) while it was importing
    record.update(
        pid=os.getpid(),
        pid_start=_start_time(os.getpid()) or 0,
        address=address,
        executable=sys.executable,
        preload=modules,
        ready=True,
        import_seconds=round(import_seconds, 3),
        env={k: v for k, v in os.environ.items() if k.startswith(("PYTHON", "LANG", "LC_"))},
    )
    _write_json(state_file, record)
    print(f"[trainworks] warm interpreter ready: imported {modules} in {import_seconds:.3f}s", flush=True)
    last_check = time.monotonic()
    watched = [listener.fileno(), *([] if server is None else [server])]
    pool = None
    if slots > 0:
        folder = os.path.join(os.path.dirname(os.path.abspath(state_file)), "slots")
        pool = _shim._load("slots").Pool(slots, folder, _start_time)

    def close_in_slot() -> None:  # a slot's supervisor keeps nothing of the fork server's
        listener.close()
        if server is not None:
            os.close(server)

    while True:
        timeout = 1.0 if pool is None else pool.timeout()
        readable, _, _ = select.select(watched + ([] if pool is None else pool.watched()), [], [], timeout)
        _reap()
        if server is not None and server in readable:
            return
        if time.monotonic() - last_check > _WATCH_SECONDS:
            last_check = time.monotonic()
            if not _still_mine(state_file):
                return
        if pool is not None:
            for fd in readable:
                if fd not in watched:
                    pool.readable(fd)
        if listener.fileno() in readable:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            try:
                _serve_one(listener, conn, pool)
            except Exception:  # noqa: BLE001 - one bad request must not end the warm interpreter
                traceback.print_exc()
            finally:
                conn.close()
            _reap()
        if pool is not None:
            pool.build(close_in_slot)


if __name__ == "__main__":
    main()
