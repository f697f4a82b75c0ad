"""Shared helpers for the benchmarks: a real server in a temporary home, stopped by PID, and statistics.

Every benchmark talks only to 127.0.0.1 and compares against a baseline measured in the same run. Sandboxed
replicas get a /tmp of their own, so host folders they read or write (markers, release files) are made under
the server's scratch folder (`Server.scratch_dir`), which the server binds into every replica.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import httpx

PROJECT = "bench-project"
LOCATION = "us-central1"
PARENT = f"projects/{PROJECT}/locations/{LOCATION}"
TERMINAL = {"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED", "JOB_STATE_CANCELLED"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    """`trainworks serve` in a temporary home on a free loopback port; stopped by its PID.

    Its temporary root holds `home/` (the server's home, hidden from replicas), `server.log`, and `scratch/`:
    bound into every sandboxed replica at the same path (`--replica-bind`), for the host folders a
    benchmark shares with its replicas."""

    def __init__(self, extra_args: Sequence[str] = (), keep_home: bool = False) -> None:
        self.extra_args = list(extra_args)
        self.keep_home = keep_home
        self.root = Path(tempfile.mkdtemp(prefix="trainworks-bench-"))
        self.home = self.root / "home"
        self.scratch = self.root / "scratch"
        self.scratch.mkdir()
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.root / "server.log"

    def scratch_dir(self, prefix: str) -> Path:
        """A new folder that both this process and every replica of the server see at the same path."""
        return Path(tempfile.mkdtemp(prefix=prefix, dir=self.scratch))

    def start(self, timeout: float = 60.0) -> Server:
        self.port = free_port()
        command = [
            sys.executable,
            "-m",
            "trainworks.cli.main",
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
            "--replica-bind",
            str(self.scratch),
            *self.extra_args,
        ]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode}:\n{self.log_text()}")
            try:
                if httpx.get(self.url + "/healthz", timeout=1.0).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"server did not become healthy:\n{self.log_text()}")

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        if not self.keep_home:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def wait_job(
    client: httpx.Client, name: str, timeout: float = 120.0, interval: float = 0.02
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        job = client.get(f"/v1/{name}").json()
        if job.get("state") in TERMINAL:
            return job  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} did not finish within {timeout}s (state {job.get('state')})")
        time.sleep(interval)


def container_pool(command: list[str], replicas: int = 1, args: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"imageUri": "python:3.11", "command": command}
    if args:
        container["args"] = args
    return {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": str(replicas),
        "containerSpec": container,
    }


def custom_job(*pools: dict[str, Any], name: str = "bench") -> dict[str, Any]:
    return {"displayName": name, "jobSpec": {"workerPoolSpecs": list(pools)}}


# ------------------------------------------------------------------ statistics
def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100): a value that was really observed."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def summary(values: Sequence[float]) -> dict[str, float]:
    return {
        "n": len(values),
        "median": statistics.median(values) if values else math.nan,
        "p90": percentile(values, 90),
        "p99": percentile(values, 99),
        "min": min(values) if values else math.nan,
        "max": max(values) if values else math.nan,
    }


def markdown_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "loadavg_1m": os.getloadavg()[0],
    }


def dump_json(data: Any) -> str:
    return json.dumps(data, indent=2, sort_keys=True)


# ------------------------------------------------------------------ ratio tables
def fmt(seconds: float) -> str:
    if math.isnan(seconds):
        return "n/a"
    if seconds >= 0.1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds * 1000:.1f} ms" if seconds >= 0.01 else f"{seconds * 1000:.2f} ms"


def table(rows: list[tuple[str, dict[str, float], str, dict[str, float]]], size: int | None = None) -> str:
    def cell(stat: dict[str, float], key: str) -> str:
        text = fmt(stat[key])
        return f"{text} ({size / stat[key] / 1e6:.0f} MB/s)" if size else text

    lines = [
        [
            what,
            measured["n"],
            cell(measured, "median"),
            cell(measured, "p90"),
            against,
            cell(base, "median"),
            cell(base, "p90"),
            f"{measured['median'] / base['median']:.2f}x",
        ]
        for what, measured, against, base in rows
    ]
    headers = ["measured", "trials", "median", "p90", "against", "median", "p90", "ratio (median)"]
    return markdown_table(headers, lines)


# ------------------------------------------------------------------ a local Slurm (scripts/slurm-local.sh)
SLURM_LOCAL = Path(__file__).resolve().parents[1] / "scripts" / "slurm-local.sh"
SLURM_PROGRAMS = ("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scancel", "scontrol")


def slurm_missing() -> list[str]:
    """The Slurm programs a local cluster needs that are not on PATH (empty: Slurm is installed)."""
    return [program for program in SLURM_PROGRAMS if not shutil.which(program)]


class SlurmLocal:
    """A cluster of scripts/slurm-local.sh in `base` on a free port block; `down` stops its daemons by PID.

    `base` should be short and searchable by all (munged wants that of its socket's parents)."""

    def __init__(self, base: Path, nodes: int = 4, cpus: int = 2, first_port: int = 27000) -> None:
        self.base = base
        self.nodes = nodes
        self.cpus = cpus
        self.first_port = first_port
        self.port = 0

    @property
    def conf(self) -> Path:
        return self.base / "etc" / "slurm.conf"

    @property
    def env(self) -> dict[str, str]:
        """The environment for Slurm's clients (sbatch, squeue...) to talk to this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def slurmctld_pid(self) -> int:
        return int((self.base / "run" / "slurmctld.pid").read_text().strip())

    def _script(self, action: str, timeout: float) -> None:
        env = {
            **os.environ,
            "SLURM_LOCAL_DIR": str(self.base),
            "SLURM_LOCAL_PORT": str(self.port),
            "SLURM_LOCAL_NODES": str(self.nodes),
            "SLURM_LOCAL_CPUS": str(self.cpus),
        }
        done = subprocess.run(
            ["bash", str(SLURM_LOCAL), action], env=env, capture_output=True, text=True, timeout=timeout
        )
        if done.returncode != 0:
            raise RuntimeError(f"slurm-local.sh {action} failed:\n{done.stdout}\n{done.stderr[-2000:]}")

    def up(self) -> SlurmLocal:
        from trainworks.ports import free_block  # only the Slurm benchmarks need it

        self.port = free_block("127.0.0.1", self.first_port, 100, self.nodes + 1, set())
        self._script("up", timeout=120)
        return self

    def down(self) -> None:
        """Cancels every job, then stops each daemon `up` started, by the PID in its pid file."""
        if self.port and self.base.exists():
            self._script("down", timeout=600)


T = TypeVar("T")


def poll(probe: Callable[[], T | None], timeout: float, what: str, interval: float) -> T:
    """What `probe()` returns once it is not None, asked every `interval` seconds; TimeoutError after
    `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(interval)
