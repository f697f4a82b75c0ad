"""Warm starts on persistent resources: pre-started interpreters ("zygotes") and the backend that uses them.

A RUNNING persistent resource keeps, per Python interpreter its jobs use, one zygote process (zygote.py)
that has already started up and imported the modules named in the resource's `trainworks-preload` label.
A replica of a job on the resource whose command is a plain `python -c CODE`, `python -m MODULE` or
`python SCRIPT` (host runtime: container tasks with a python command, and python package tasks) is forked
from the matching zygote instead of exec'd, which skips interpreter start-up and those imports. Anything
else (other commands, interpreter options the fork cannot reproduce, start-up variables that differ from
the zygote's, podman) starts cold, exactly as on no resource.

State: each zygote has a record file under `<home>/persistent/<project number>/<location>/<id>/zygotes/`,
written by the server when it starts the zygote (pid and kernel start time) and completed by the zygote
once it is ready (its socket address and environment). Records are how a restarted server finds the warm
interpreters again; a zygote exits by itself once its record no longer names it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainworks.backends import procfs
from trainworks.backends.base import LaunchRequest, ProcessHandle, ReplicaStatus, write_launch_record

ZYGOTE = Path(__file__).with_name("zygote.py")
Key = tuple[str, str, str]  # project number, location, resource ID

_PYTHON_NAME = re.compile(r"^python(\d+(\.\d+)?)?$")
_STARTUP_PREFIXES = ("PYTHON", "LANG", "LC_")
# Start-up variables a forked replica can honour itself; any other must be what the zygote started with.
_EMULATED = frozenset({"PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONPATH", "PYTHONUSERBASE"})
_START_TIMEOUT = 600.0
_CONNECT_TIMEOUT = 10.0


@dataclass(frozen=True)
class PythonInvocation:
    """A command line a zygote can reproduce: `python [-u] [-B] (-c CODE | -m MODULE | SCRIPT) ARGS`."""

    python: str
    mode: str  # "code", "module" or "path"
    target: str
    args: tuple[str, ...]
    unbuffered: bool = False
    dont_write_bytecode: bool = False

    def wire(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "target": self.target,
            "args": list(self.args),
            "unbuffered": self.unbuffered,
            "dont_write_bytecode": self.dont_write_bytecode,
        }


def python_invocation(argv: list[str], env: dict[str, str]) -> PythonInvocation | None:
    """The python command line in argv, when a warm fork can run it exactly as the interpreter would."""
    if not argv or not _PYTHON_NAME.match(os.path.basename(argv[0])):
        return None
    python = argv[0]
    if "/" not in python:
        found = shutil.which(python, path=env.get("PATH"))
        if found is None:
            return None
        python = found
    unbuffered = dont_write_bytecode = False
    i = 1
    while i < len(argv) and argv[i].startswith("-") and argv[i] not in ("-c", "-m", "-"):
        if argv[i] == "-u":
            unbuffered = True
        elif argv[i] == "-B":
            dont_write_bytecode = True
        else:
            return None  # -O, -I, -X ..., -E, -S, combined flags: only a fresh interpreter gets them right
        i += 1
    if i >= len(argv) or argv[i] == "-":
        return None  # an interactive interpreter or a program on stdin
    if argv[i] in ("-c", "-m"):
        if i + 1 >= len(argv):
            return None
        mode = "code" if argv[i] == "-c" else "module"
        return PythonInvocation(
            python, mode, argv[i + 1], tuple(argv[i + 2 :]), unbuffered, dont_write_bytecode
        )
    return PythonInvocation(python, "path", argv[i], tuple(argv[i + 1 :]), unbuffered, dont_write_bytecode)


def startup_env_matches(zygote_env: dict[str, str], env: dict[str, str]) -> bool:
    """Whether the variables the interpreter reads at start-up are those the zygote started with."""
    names = {k for k in (*zygote_env, *env) if k.startswith(_STARTUP_PREFIXES) and k not in _EMULATED}
    return all(zygote_env.get(k) == env.get(k) for k in names)


@dataclass(frozen=True)
class WarmTarget:
    """A RUNNING resource's warm state: which zygotes may serve its replicas."""

    key: Key
    generation: int
    preload: tuple[str, ...]


def _read(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(json.dumps(data))
    tmp.replace(path)


def _alive(record: dict[str, Any]) -> bool:
    pid, start = record.get("pid"), record.get("pid_start")
    return isinstance(pid, int) and bool(start) and procfs.is_alive(pid, int(start))  # type: ignore[arg-type]


def stop_recorded(record: dict[str, Any]) -> bool:
    """SIGKILL the zygote a record names (its process group), if that pid is still it; whether it was."""
    if not _alive(record):
        return False
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(int(record["pid"]), signal.SIGKILL)
        return True
    return False


class WarmPool:
    """The zygotes of every persistent resource on this server."""

    def __init__(
        self, root: Path, env: Callable[[], dict[str, str]], default_python: str | None = None
    ) -> None:
        self.root = root
        self.env = env
        self.default_python = default_python or sys.executable
        self._lock = threading.RLock()
        self._children: dict[int, subprocess.Popen[bytes]] = {}  # zygotes this process started

    # -------------------------------------------------------------- layout
    def resource_dir(self, key: Key) -> Path:
        number, location, resource_id = key
        return self.root / number / location / resource_id

    def _record_path(self, key: Key, python: str) -> Path:
        digest = hashlib.sha256(python.encode()).hexdigest()[:16]
        return self.resource_dir(key) / "zygotes" / f"{digest}.json"

    def pythons(self, key: Key) -> list[str]:
        """The interpreters the resource keeps warm: the server's own (the host runtime's executor) and every
        one a job on the resource has used (python package environments)."""
        extra = _read(self.resource_dir(key) / "pythons.json") or {}
        out = [self.default_python]
        out += [p for p in extra.get("pythons", []) if p not in out and os.path.exists(p)]
        return out

    def note_python(self, key: Key, python: str) -> None:
        with self._lock:
            path = self.resource_dir(key) / "pythons.json"
            known = (_read(path) or {}).get("pythons", [])
            if python != self.default_python and python not in known:
                _write(path, {"pythons": [*known, python]})

    # -------------------------------------------------------------- lifecycle
    def ensure(self, target: WarmTarget) -> tuple[bool, str | None]:
        """Start what is missing; (every zygote ready, why the default interpreter's zygote failed)."""
        ready = True
        error: str | None = None
        for python in self.pythons(target.key):
            status = self._ensure_one(target, python)
            if status != "ready":
                ready = False
            if status.startswith("error:") and python == self.default_python:
                error = status[len("error:") :]
        self._reap()
        return ready, error

    def _matches(self, record: dict[str, Any], target: WarmTarget) -> bool:
        return record.get("generation") == target.generation and tuple(record.get("preload", ())) == tuple(
            target.preload
        )

    def _ensure_one(self, target: WarmTarget, python: str) -> str:
        with self._lock:
            path = self._record_path(target.key, python)
            record = _read(path)
            if record is not None and self._matches(record, target):
                if record.get("error"):
                    return "error:" + str(record["error"])
                if _alive(record):
                    if record.get("ready"):
                        return "ready"
                    if time.time() - float(record.get("starting_at", 0)) < _START_TIMEOUT:
                        return "starting"
            if record is not None:
                self._kill(record)
                path.unlink(missing_ok=True)
            if not os.path.exists(python):
                return "error:" + f"the interpreter {python} does not exist"
            self._start(target, python, path)
            return "starting"

    def _start(self, target: WarmTarget, python: str, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        address = f"trainworks-zygote-{uuid.uuid4().hex}"
        log = open(path.with_suffix(".log"), "ab")  # noqa: SIM115 - the child keeps it
        try:
            process = subprocess.Popen(
                [python, str(ZYGOTE), str(path), address, ",".join(target.preload)],
                env=self.env(),
                cwd=str(path.parent),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        finally:
            log.close()
        self._children[process.pid] = process
        _write(
            path,
            {
                "pid": process.pid,
                "pid_start": procfs.start_time(process.pid) or 0,
                "python": python,
                "generation": target.generation,
                "preload": list(target.preload),
                "address": address,
                "ready": False,
                "starting_at": time.time(),
            },
        )

    def _kill(self, record: dict[str, Any]) -> None:
        stop_recorded(record)
        self._reap()

    def _reap(self) -> None:
        for pid, process in list(self._children.items()):
            if process.poll() is not None:
                del self._children[pid]

    def drop(self, key: Key, forget: bool = False) -> None:
        """Stop the resource's zygotes (a reboot re-creates them; `forget` removes all its warm state)."""
        with self._lock:
            folder = self.resource_dir(key)
            for path in sorted((folder / "zygotes").glob("*.json")):
                record = _read(path)
                path.unlink(missing_ok=True)
                if record is not None:
                    self._kill(record)
            if forget:
                shutil.rmtree(folder, ignore_errors=True)

    def drop_others(self, keep: Iterable[Key]) -> None:
        """Forget the warm state of resources that no longer exist (deleted while the server was down)."""
        wanted = {self.resource_dir(k) for k in keep}
        if not self.root.is_dir():
            return
        for folder in self.root.glob("*/*/*"):
            if folder.is_dir() and folder not in wanted:
                number, location, resource_id = folder.relative_to(self.root).parts
                self.drop((number, location, resource_id), forget=True)

    def stats(self, key: Key) -> list[dict[str, Any]]:
        out = []
        for path in sorted((self.resource_dir(key) / "zygotes").glob("*.json")):
            record = _read(path)
            if record is not None:
                out.append({**record, "alive": _alive(record)})
        return out

    # -------------------------------------------------------------- launching
    def ready_record(self, target: WarmTarget, python: str) -> dict[str, Any] | None:
        record = _read(self._record_path(target.key, python))
        if record is None or not record.get("ready") or not self._matches(record, target):
            return None
        return record if _alive(record) else None

    def launch(
        self,
        target: WarmTarget,
        request: LaunchRequest,
        invocation: PythonInvocation,
        plan: Callable[[LaunchRequest], str | None] = lambda _request: None,
    ) -> ProcessHandle | None:
        """Fork the replica from a ready zygote; None when none can serve it (the caller starts it cold)."""
        record = self.ready_record(target, invocation.python)
        if record is None:
            self.note_python(target.key, invocation.python)  # kept warm from the next job on
            return None
        if not startup_env_matches(record.get("env", {}), request.env):
            return None
        payload = {
            "run_dir": str(request.run_dir),
            "cwd": str(request.cwd or ""),
            "gcs_root": str(request.gcs_root or ""),
            "env": request.env,
            "python": invocation.wire(),
            "plan": plan(
                request
            ),  # the replica's cgroup and sandbox (sandbox.py's format), as for a cold start
        }
        return fork_from(str(record["address"]), payload)


def fork_from(address: str, payload: dict[str, Any]) -> ProcessHandle | None:
    """Ask the zygote at `address` to fork the replica `payload` describes: its supervisor's handle, or None
    when the zygote could not be asked (the caller starts the replica otherwise)."""
    sent = False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(_CONNECT_TIMEOUT)
            sock.connect("\0" + address)
            sock.sendall(json.dumps(payload).encode())
            sent = True
            sock.shutdown(socket.SHUT_WR)
            chunks = []
            while chunk := sock.recv(65536):
                chunks.append(chunk)
        reply = json.loads(b"".join(chunks) or b"{}")
    except (OSError, ValueError):
        reply = {}
    if "pid" in reply:
        return ProcessHandle(pid=int(reply["pid"]), pid_start=int(reply["pid_start"]))
    if sent:  # the zygote may have forked it before the answer was lost: never start a replica twice
        return _forked_in(Path(payload["run_dir"]))
    return None


def _forked_in(run_dir: Path) -> ProcessHandle | None:
    """The supervisor a zygote forked in run_dir, once its shim.json names it (written first thing, after the
    zygote answered); None when none does within the connect timeout (the zygote ended before the fork)."""
    deadline = time.monotonic() + _CONNECT_TIMEOUT
    while (handle := find_warm(run_dir)) is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return handle


def find_warm(run_dir: Path) -> ProcessHandle | None:
    """A replica a zygote started in run_dir (its shim.json names the zygote), if it is still there."""
    record = _read(run_dir / "shim.json")
    if record is None or "zygote" not in record:
        return None
    pid = int(record["pid"])
    if (run_dir / "exit.json").exists():
        return ProcessHandle(pid=pid, pid_start=0)  # it ran to the end: poll reads its record
    start = int(record.get("pid_start", 0))
    return ProcessHandle(pid=pid, pid_start=start) if start and procfs.is_alive(pid, start) else None


class WarmStartBackend:
    """The local backend, with replicas of jobs on a RUNNING persistent resource forked from its zygotes."""

    def __init__(
        self, inner: Any, pool: WarmPool, resolve: Callable[[LaunchRequest], WarmTarget | None]
    ) -> None:
        self.inner = inner
        self.pool = pool
        self.resolve = resolve
        self.name = inner.name
        self.capabilities = inner.capabilities

    def __getattr__(self, name: str) -> Any:  # the inner backend's own parts (its isolation, ...)
        return getattr(self.inner, name)

    def launch(self, request: LaunchRequest) -> ProcessHandle:
        try:
            target = self.resolve(request) if request.persistent_resource is not None else None
        except Exception:  # noqa: BLE001 - no warm start is never worse than a failed launch
            target = None
        invocation = python_invocation(request.argv, request.env) if target is not None else None
        if target is not None and invocation is not None:
            request.run_dir.mkdir(parents=True, exist_ok=True)
            for stale in ("exit.json", "shim.json"):
                (request.run_dir / stale).unlink(missing_ok=True)
            handle = self.pool.launch(
                target, request, invocation, getattr(self.inner, "plan", lambda _r: None)
            )
            if handle is not None:
                warm = {"persistentResource": target.key[2], "generation": target.generation}
                write_launch_record(request, request.argv, warm=warm)
                return handle
        return self.inner.launch(request)

    def find(self, run_dir: Path) -> ProcessHandle | None:
        return self.inner.find(run_dir)  # LocalBackend.find knows the supervisors zygotes forked

    def poll(self, handle: ProcessHandle, run_dir: Path) -> ReplicaStatus:
        return self.inner.poll(handle, run_dir)

    def signal(self, handle: ProcessHandle, signum: int) -> None:
        self.inner.signal(handle, signum)
