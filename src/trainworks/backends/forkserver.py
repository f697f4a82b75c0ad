"""The server's fork server: one warm interpreter (zygote.py) that forks the supervisor of every host replica.

Started cold, a replica's supervisor is a new Python interpreter (shim.py): ~15 ms of start-up before it can
set the replica up, and the server's own fork/exec of it. The fork server is a zygote the server starts once,
with the shim and its siblings loaded; for each replica it forks a process that plays the shim exactly
(`exec` requests: the replica's environment, shim.log, its plan, its record files), and the command itself
is exec'd as before. What is saved is the supervisor's start-up, not the command's.

It ends with the server that started it (it watches the server's pid); the supervisors it forked do not,
like cold ones. When it is not there (not ready yet, ended, refused a request), replicas start cold:
LocalBackend falls back to the shim, so a fork server failure never fails a launch.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from trainworks.backends import procfs
from trainworks.backends.base import LaunchRequest, ProcessHandle
from trainworks.backends.warm import ZYGOTE, fork_from, python_invocation

_READY_TIMEOUT = 5.0  # the first launch waits this long for the fork server to be ready, then starts cold
_RETRY_SECONDS = 30.0  # after a fork server failed to start, launches start cold this long before a new try


class ForkServer:
    """The fork server (a zygote) of this server process: `launch` forks a replica's supervisor from it."""

    def __init__(self, folder: Path, python: str, slots: int = 0, runs_root: Path | None = None) -> None:
        self.folder = folder
        self.python = python
        # Replica slots (slots.py): sandboxes with an interpreter waiting, for replicas in runs_root.
        self.slots = slots if runs_root is not None else 0
        self.runs_root = runs_root
        self.state = folder / "fork-server.json"
        self._lock = threading.RLock()  # close() may come while a start is under way
        self._process: subprocess.Popen[bytes] | None = None
        self._address: str | None = None
        self._failed_at = -_RETRY_SECONDS

    def launch(self, request: LaunchRequest, argv: list[str], plan: str | None) -> ProcessHandle | None:
        """Fork the replica's supervisor, to exec `argv` under `plan`; None when the fork server cannot (the
        caller starts the replica cold)."""
        address = self._ready()
        if address is None:
            return None
        payload: dict[str, Any] = {
            "run_dir": str(request.run_dir),
            "cwd": str(request.cwd or ""),
            "gcs_root": str(request.gcs_root or ""),
            "env": request.env,
            "exec": argv,
            "plan": plan,
        }
        invocation = python_invocation(argv, request.env) if self.slots and plan is not None else None
        if invocation is not None:
            payload["slot"] = {
                "python": invocation.python,
                "invocation": invocation.wire(),
                "runs_root": str(self.runs_root),
            }
        handle = fork_from(address, payload)
        if handle is None and not self._alive():
            self._address = None  # it ended: the next launch starts a new one
        return handle

    def start_soon(self) -> None:
        """Start it in the background (the server's start): the first launch need not wait for it."""
        threading.Thread(target=self._ready, name="fork-server-start", daemon=True).start()

    def _alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def _ready(self) -> str | None:
        """The fork server's socket address, starting it (and waiting for it) when it is not running."""
        with self._lock:
            if self._address is not None and self._alive():
                return self._address
            if time.monotonic() - self._failed_at < _RETRY_SECONDS:
                return None
            self._close()
            try:
                self._address = self._start()
            except OSError:
                self._address = None
            if self._address is None:
                self._failed_at = time.monotonic()
                self._close()
            return self._address

    def _start(self) -> str | None:
        self.folder.mkdir(parents=True, exist_ok=True)
        address = f"trainworks-fork-server-{uuid.uuid4().hex}"
        server = f"{os.getpid()}:{procfs.start_time(os.getpid()) or 0}"
        with open(self.folder / "fork-server.log", "ab") as log:
            self._process = subprocess.Popen(
                [self.python, "-I", "-S", str(ZYGOTE), str(self.state), address, "", server, str(self.slots)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                close_fds=True,
            )
        # The zygote goes on once this record names it (zygote._wait_for_claim), then marks it ready.
        self._write({"pid": self._process.pid, "address": address, "ready": False})
        deadline = time.monotonic() + _READY_TIMEOUT
        while time.monotonic() < deadline and self._process.poll() is None:
            record = self._read()
            if record.get("ready") and record.get("pid") == self._process.pid:
                return address
            time.sleep(0.002)
        return None

    def _write(self, record: dict[str, Any]) -> None:
        tmp = self.state.with_suffix(".tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(self.state)

    def _read(self) -> dict[str, Any]:
        try:
            record = json.loads(self.state.read_text())
        except (OSError, ValueError):
            return {}
        return record if isinstance(record, dict) else {}

    def close(self) -> None:
        """Stop the fork server (the supervisors it forked go on)."""
        with self._lock:
            self._close()

    def _close(self) -> None:
        process, self._process, self._address = self._process, None, None
        if process is None:
            return
        self.state.unlink(missing_ok=True)
        if process.poll() is None:  # it holds the stop signals (zygote.main): nothing to flush, so SIGKILL
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        process.wait()
