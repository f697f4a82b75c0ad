"""`trainworks tensorboard NAME`: a real TensorBoard on a custom job's AIP_TENSORBOARD_LOG_DIR.

The server says where the job's log directory is (the tensorboard extension endpoint): with local buckets,
the folder under its bucket root, which TensorBoard reads as it grows; otherwise the gs:// URI, which
TensorBoard reads when TensorFlow is installed. TensorBoard listens on 127.0.0.1 only and runs until
Ctrl-C (or SIGTERM), which stops it by its PID.
"""

from __future__ import annotations

import ctypes
import importlib.util
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Annotated
from urllib.parse import urlsplit

import typer

from trainworks.kernel.cli import NO_FORMAT, Options, command
from trainworks.kernel.render import print_status
from trainworks.kinds.custom_jobs.cli import CUSTOM_JOBS, JobArg
from trainworks.kinds.custom_jobs.client import CustomJobsClient, TensorboardInfo
from trainworks.ports import bindable

HOST = "127.0.0.1"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")
STARTUP_TIMEOUT = 120.0  # TensorBoard imports a lot on its first start
STOP_GRACE = 10.0


PR_SET_PDEATHSIG = 1


class _Stop(Exception):
    """Ctrl-C or SIGTERM: TensorBoard is stopped before this command exits."""


def _on_stop(_signum: int, _frame: FrameType | None) -> None:
    raise _Stop()


def _die_with_parent() -> None:
    """In TensorBoard's process, before it starts: it gets SIGTERM when this command dies, even killed
    outright (SIGKILL), so no orphan keeps the port and the terminal's pipes."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def choose_log_dir(info: TensorboardInfo, endpoint: str) -> str:
    """The job's folder when this machine has it (the server is local); else the gs:// URI."""
    local = info.get("localPath")
    if local and (Path(local).exists() or urlsplit(endpoint).hostname in LOOPBACK_NAMES):
        return local  # a local server's folder may not exist yet: TensorBoard picks it up when it appears
    return info["logDir"]


def _answers(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=0.5):
            return True
    except OSError:
        return False


def _wait_until_listening(process: subprocess.Popen[bytes], port: int) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while not _answers(port):
        if process.poll() is not None:
            print_status(f"ERROR: TensorBoard exited with status {process.returncode}.")
            raise typer.Exit(1)
        if time.monotonic() > deadline:
            _stop(process)
            print_status(f"ERROR: TensorBoard did not listen on {HOST}:{port} within {STARTUP_TIMEOUT:g}s.")
            raise typer.Exit(1)
        time.sleep(0.1)


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=STOP_GRACE)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@command(options=NO_FORMAT)
def tensorboard(
    job: JobArg,
    port: Annotated[int, typer.Option("--port", help="Port for TensorBoard on 127.0.0.1.")] = 6006,
    *,
    opts: Options,
) -> None:
    """Launch TensorBoard on a custom job's AIP_TENSORBOARD_LOG_DIR (<baseOutputDirectory>/logs/)."""
    if not 1 <= port <= 65535:
        print_status(f"ERROR: --port: {port} is not a TCP port (1-65535).")
        raise typer.Exit(2)
    if importlib.util.find_spec("tensorboard") is None:
        print_status("ERROR: TensorBoard is not installed here: pip install 'trainworks[tensorboard]'.")
        raise typer.Exit(1)
    name = opts.name(CUSTOM_JOBS, job)
    info = opts.call(CustomJobsClient, lambda client: client.get_custom_job_tensorboard(name))
    log_dir = choose_log_dir(info, opts.endpoint)
    if not bindable(HOST, port):  # else an old TensorBoard there would pass for this one
        print_status(f"ERROR: --port: {HOST}:{port} is in use; pick another port.")
        raise typer.Exit(1)
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", log_dir]
    command += ["--host", HOST, "--port", str(port)]
    # Both stop signals raise _Stop from the moment TensorBoard exists: no KeyboardInterrupt to lose.
    previous = {signum: signal.signal(signum, _on_stop) for signum in (signal.SIGINT, signal.SIGTERM)}
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
    try:
        _wait_until_listening(process, port)
        print(f"http://{HOST}:{port}/", flush=True)  # stdout: the result, for scripts
        print_status(f"TensorBoard (pid {process.pid}) on {log_dir}, the job's {info['logDir']}.")
        print_status("Press Ctrl-C to stop it.")
        process.wait()
        if process.returncode != 0:
            print_status(f"ERROR: TensorBoard exited with status {process.returncode}.")
            raise typer.Exit(1)
    except (KeyboardInterrupt, _Stop):
        print_status("Stopping TensorBoard.")
    finally:
        _stop(process)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
