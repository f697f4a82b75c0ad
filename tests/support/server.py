"""A real Trainworks server process for tests: started on a free loopback port, stopped by PID."""

from __future__ import annotations

import functools
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.support.command_forks import ForkedProcess, fork_server

PROJECT = "test-project"
LOCATION = "us-central1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ServerProcess:
    home: Path
    args: list[str] = field(default_factory=list)
    env: Mapping[str, str] = field(default_factory=dict)
    port: int = 0
    process: subprocess.Popen[bytes] | ForkedProcess | None = None
    python: str = sys.executable  # the interpreter the server runs with (another installation's, say)
    cwd: Path | None = None  # where it starts (`python -m` puts it on the server's import path)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def parent(self) -> str:
        return f"projects/{PROJECT}/locations/{LOCATION}"

    @property
    def log_path(self) -> Path:
        return self.home / "server.log"

    def start(self, timeout: float = 60.0) -> ServerProcess:
        self.port = self.port or free_port()
        self.home.mkdir(parents=True, exist_ok=True)
        argv = [
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--home",
            str(self.home),
            "--container-runtime",
            "host",
            "--cancel-grace",
            "3",
            *self.args,
        ]
        env = {**os.environ, **self.env}
        self.process = fork_server(argv, env, self.log_path, self.cwd, self.python)
        if self.process is None:
            command = [self.python, "-m", "trainworks.cli.main", *argv]
            log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child for its lifetime
            self.process = subprocess.Popen(command, stdout=log, stderr=log, env=env, cwd=self.cwd)
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=1.0, verify=default_tls()) as http:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise RuntimeError(
                        f"server exited with {self.process.returncode}:\n{self.log_path.read_text()}"
                    )
                try:
                    if http.get(self.url + "/healthz").status_code == 200:
                        return self
                except httpx.HTTPError:
                    pass
                time.sleep(0.01)
        self.stop()
        raise RuntimeError(f"server did not become healthy:\n{self.log_path.read_text()}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.process = None

    def client(self, **kwargs: Any) -> httpx.Client:
        kwargs.setdefault("verify", default_tls())
        return httpx.Client(base_url=self.url, timeout=30.0, **kwargs)


def default_tls() -> ssl.SSLContext:
    """httpx's default certificate checks (certifi's roots, or SSL_CERT_FILE/SSL_CERT_DIR as set now), made
    once for each setting: each client that makes its own spends ~20 ms of CPU loading the roots, and the
    tests make thousands."""
    return _tls(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


@functools.cache
def _tls(_cert_file: str | None, _cert_dir: str | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()  # reads the two variables itself


@contextmanager
def inventory_server(folder: Path, inventory: str) -> Iterator[ServerProcess]:
    """A server with its home in `folder` whose capacity inventory is `inventory` (YAML); stopped after."""
    path = folder / "inventory.yaml"
    path.write_text(inventory)
    proc = ServerProcess(home=folder / "home", args=["--inventory", str(path)]).start()
    try:
        yield proc
    finally:
        proc.stop()


def wait_for(predicate: Any, timeout: float = 60.0, interval: float = 0.05, what: str = "condition") -> Any:
    """Poll until predicate() returns something truthy; fail with `what` after the timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


TERMINAL = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"}


def wait_job(
    client: httpx.Client, name: str, states: set[str] | None = None, timeout: float = 120.0
) -> dict[str, Any]:
    wanted = states or TERMINAL

    def check() -> dict[str, Any] | None:
        job = client.get(f"/v1/{name}").json()
        return job if job.get("state") in wanted else None

    return wait_for(check, timeout=timeout, what=f"{name} to reach {sorted(wanted)}")  # type: ignore[no-any-return]


def cancel_when_running(server: ServerProcess, body: dict[str, Any]) -> tuple[dict[str, Any], Path]:
    """Create the job, cancel it the moment it turns RUNNING, wait for its end: the job and its primary's run
    folder."""
    with server.client() as client:
        name = client.post(f"/v1/{server.parent}/customJobs", json=body).json()["name"]
        wait_for(
            lambda: client.get(f"/v1/{name}").json()["state"] == "JOB_STATE_RUNNING",
            interval=0.002,
            what="RUNNING",
        )
        assert client.post(f"/v1/{name}:cancel").status_code == 200
        done = wait_job(client, name, timeout=120)
    return done, server.home / "jobs" / name.rsplit("/", 1)[-1] / "workerpool0-0"
