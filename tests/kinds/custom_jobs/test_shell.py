"""Shells into live replicas: the CLI under a pseudo-terminal, the WebSocket protocol, and webAccessUris.

A real server (with an API token) runs real jobs whose replica waits on a gate file; the shell must show
the replica's environment, working directory and /gcs, and nothing it started may outlive it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.cloud import aiplatform_v1
from websockets.exceptions import ConnectionClosedOK, InvalidStatus
from websockets.sync.client import ClientConnection, connect

from tests.support.jobs import MACHINE
from tests.support.podman import BUSYBOX_IMAGE, podman_backed_server
from tests.support.server import ServerProcess, wait_for, wait_job
from tests.support.supervisors import replica_inits

TOKEN = "shell-test-token"
VALUE = "value-from-the-replica-env"
PROMPT = b"replica-shell> "
BUCKET = "shell-bucket"


@pytest.fixture(scope="module")
def shell_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("shell"), args=["--api-token", TOKEN]).start()
    (proc.home / "buckets" / BUCKET).mkdir(parents=True)
    (proc.home / "buckets" / BUCKET / "hello.txt").write_text("hello\n")
    try:
        yield proc
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def client(shell_server: ServerProcess) -> Iterator[httpx.Client]:
    with shell_server.client(headers={"x-goog-api-key": TOKEN}) as http:
        yield http


class GatedJob:
    """A one-replica job that writes its working directory to a file and runs until its gate file exists."""

    def __init__(
        self, server: ServerProcess, client: httpx.Client, folder: Path, web_access: bool = False
    ) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.gate = folder / "gate"
        self.cwd_file = folder / "cwd"
        script = (
            f"pwd > {self.cwd_file}.tmp && mv {self.cwd_file}.tmp {self.cwd_file}; "
            "echo hi > marker-file.txt; "
            f"while [ ! -e {self.gate} ]; do sleep 0.05; done"
        )
        env = [{"name": "MY_VAR", "value": VALUE}, {"name": "PS1", "value": PROMPT.decode()}]
        pool = {
            "machineSpec": MACHINE,
            "replicaCount": "1",
            "containerSpec": {"imageUri": "busybox", "command": ["sh", "-c", script], "env": env},
        }
        spec: dict[str, Any] = {"workerPoolSpecs": [pool]}
        if web_access:
            spec["enableWebAccess"] = True
        created = client.post(
            f"/v1/{server.parent}/customJobs", json={"displayName": "shell", "jobSpec": spec}
        )
        assert created.status_code == 200, created.text
        self.name: str = created.json()["name"]
        self.id = self.name.rsplit("/", 1)[-1]
        self.client = client
        wait_for(self.cwd_file.exists, timeout=60, what="the replica to start")
        wait_job(client, self.name, {"JOB_STATE_RUNNING"})

    @property
    def cwd(self) -> str:
        return self.cwd_file.read_text().strip()

    def release(self) -> dict[str, Any]:
        self.gate.touch()
        return wait_job(self.client, self.name)


@pytest.fixture(scope="module")
def running(
    shell_server: ServerProcess, client: httpx.Client, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GatedJob]:
    folder = tmp_path_factory.mktemp("running")
    try:
        job = GatedJob(shell_server, client, folder)
        yield job
    finally:
        (folder / "gate").touch()  # even when a test failed: no replica outlives the module


@pytest.fixture
def gated(
    shell_server: ServerProcess, client: httpx.Client, tmp_path: Path
) -> Iterator[Callable[..., GatedJob]]:
    """Makes GatedJobs for one test; their gates open at its end, whatever happened."""
    folders: list[Path] = []

    def make(name: str, web_access: bool = False) -> GatedJob:
        folders.append(tmp_path / name)
        return GatedJob(shell_server, client, tmp_path / name, web_access=web_access)

    try:
        yield make
    finally:
        for folder in folders:
            (folder / "gate").touch()


def ws_url(server: ServerProcess, job: str, **query: str) -> str:
    params = "&".join(f"{k}={v}" for k, v in query.items())
    return f"ws://127.0.0.1:{server.port}/trainworks/v1/{job}:shell" + (f"?{params}" if params else "")


def open_ws(server: ServerProcess, job: str, **query: str) -> ClientConnection:
    return connect(ws_url(server, job, **query), additional_headers={"x-goog-api-key": TOKEN})


def read_until(ws: ClientConnection, pattern: bytes, timeout: float = 30.0) -> bytes:
    """Terminal bytes from the socket until `pattern` (a regex) matches them."""
    seen = b""
    deadline = time.monotonic() + timeout
    while not re.search(pattern, seen):
        message = ws.recv(timeout=max(deadline - time.monotonic(), 0.01))
        if isinstance(message, bytes):
            seen += message
    return seen


def next_text(ws: ClientConnection, timeout: float = 30.0) -> str:
    """The next control frame, past any terminal bytes."""
    deadline = time.monotonic() + timeout
    while True:
        message = ws.recv(timeout=max(deadline - time.monotonic(), 0.01))
        if isinstance(message, str):
            return message


def gone(pid: int) -> bool:
    """The process has ended: no longer there, or a zombie waiting for its (new) parent to reap it."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rfind(")") + 2 :].startswith(("Z", "X"))


def pid_namespace(run_dir: Path) -> str | None:
    """The PID namespace of a sandboxed replica (its init), None without one."""
    inits = replica_inits(run_dir)
    try:
        namespace = os.readlink(f"/proc/{inits[0]}/ns/pid")
    except (OSError, IndexError):
        return None
    return namespace if namespace != os.readlink("/proc/self/ns/pid") else None


def gone_in(namespace: str | None, pid: int) -> bool:
    """`gone` for a PID a shell printed ($$, $!): in a sandboxed replica that is a PID of its namespace."""
    if namespace is None:
        return gone(pid)
    for entry in Path("/proc").iterdir():
        try:
            if not entry.name.isdigit() or os.readlink(entry / "ns" / "pid") != namespace:
                continue
            status = (entry / "status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if int(fields["NSpid"].split()[-1]) == pid and not fields["State"].strip().startswith(("Z", "X")):
            return False
    return True


def cli(server: ServerProcess, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "trainworks.cli.main",
        "custom-jobs",
        "shell",
        *args,
        "--endpoint",
        server.url,
        "--api-key",
        TOKEN,
    ]


def read_pty(
    fd: int, until: bytes | None, deadline: float, after: bytes = b"", nudge: bytes | None = None
) -> bytes:
    """What the program on the terminal writes, until `until` is seen after `after` (None: until it closes
    the terminal). With `nudge`, that is typed whenever the terminal has been quiet for a second."""

    def found(seen: bytes) -> bool:
        start = seen.find(after)
        return start >= 0 and until is not None and until in seen[start + len(after) :]

    seen = b""
    while until is None or not found(seen):
        left = max(deadline - time.monotonic(), 0)
        ready, _, _ = select.select([fd], [], [], left if nudge is None else min(left, 1.0))
        if not ready and nudge is not None and left > 1.0:
            os.write(fd, nudge)
            continue
        if not ready:
            raise AssertionError(f"timed out waiting for {until!r}; got {seen!r}")
        try:
            data = os.read(fd, 65536)
        except OSError:  # EIO: the program has exited and closed the terminal
            data = b""
        if not data:
            if until is not None:
                raise AssertionError(f"the terminal closed before {until!r}; got {seen!r}")
            break
        seen += data
    return seen


def set_size(fd: int, cols: int, rows: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def test_cli_shell_under_a_pty_sees_the_replica_env_cwd_and_gcs(
    shell_server: ServerProcess, running: GatedJob
) -> None:
    argv = cli(shell_server, running.name)
    pid, master = pty.fork()  # the CLI's controlling terminal: resizing it sends the CLI SIGWINCH
    if pid == 0:
        try:
            set_size(0, 100, 30)
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    cooked = termios.tcgetattr(master)
    try:
        deadline = time.monotonic() + 60
        read_pty(master, PROMPT, deadline)  # the local terminal is raw and the remote shell is up
        os.write(master, b"trap 'echo WINCH $(stty size)' WINCH; echo START $(stty size)\r")
        read_pty(master, PROMPT, deadline, after=b"START 30 100")  # the remote terminal started at our size
        set_size(master, 123, 45)
        # ... and follows its changes, with a SIGWINCH to the shell. bash may hold a trap for a signal that
        # came while it was between two lines until it has read the next one: empty lines are typed while
        # nothing comes (the trap only runs at all if the signal came).
        try:
            read_pty(master, b"WINCH 45 123", time.monotonic() + 30, nudge=b"\r")
        except AssertionError as error:
            os.write(master, b"echo SIZE $(stty size)\r")
            size = read_pty(master, PROMPT, deadline, after=b"SIZE ")
            raise AssertionError(f"{error}; the remote terminal's size then: {size!r}") from None
        os.write(master, b"echo MY_VAR=$MY_VAR; echo PWD=$(pwd); ls /gcs; ls; echo SHELL_PID=$$; exit\r")
        output = read_pty(master, None, deadline)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, output
        assert termios.tcgetattr(master) == cooked  # the CLI put the terminal back as it found it
    finally:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG) == (0, 0):
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        os.close(master)
    text = output.decode(errors="replace")
    assert f"MY_VAR={VALUE}" in text
    assert f"PWD={running.cwd}\r\n" in text
    assert BUCKET in text  # /gcs is the replica's mount of the bucket root
    assert "marker-file.txt" in text  # the replica's working directory
    shell_pid = int(re.search(r"SHELL_PID=(\d+)", text).group(1))  # type: ignore[union-attr]
    namespace = pid_namespace(Path(running.cwd))
    wait_for(lambda: gone_in(namespace, shell_pid), timeout=10, what="the shell process to end")


def test_command_without_a_terminal_exits_with_its_status(
    shell_server: ServerProcess, running: GatedJob
) -> None:
    result = subprocess.run(
        cli(shell_server, running.name, "--command", "echo $MY_VAR; cat; exit 3"),
        input=b"from-stdin\n",
        capture_output=True,
        timeout=60,
    )
    assert result.returncode == 3, result.stderr
    assert result.stdout == f"{VALUE}\nfrom-stdin\n".encode()


def test_resize_frames_set_the_terminal_size(shell_server: ServerProcess, running: GatedJob) -> None:
    with open_ws(shell_server, running.name, cols="100", rows="30") as ws:
        read_until(ws, re.escape(PROMPT))
        ws.send(b"stty size\r")
        assert b"30 100" in read_until(ws, rb"\d+ \d+\r\n")
        ws.send(json.dumps({"resize": [123, 45]}))
        ws.send(b"stty size\r")
        assert b"45 123" in read_until(ws, rb"45 123|\d+ \d+\r\n.*\d+ \d+\r\n")
        ws.send(json.dumps({"resize": [0, "x"]}))
        error = json.loads(next_text(ws))
        assert "resize" in error["error"]
        ws.send(b"exit 7\r")
        assert json.loads(next_text(ws)) == {"exit": 7}
        with pytest.raises(ConnectionClosedOK):
            ws.recv(timeout=30)
        assert ws.close_reason == ""  # the shell ended by itself: nothing to explain


def test_closing_the_socket_stops_the_shell_and_what_it_started(
    shell_server: ServerProcess, client: httpx.Client, running: GatedJob
) -> None:
    with open_ws(shell_server, running.name) as ws:
        read_until(ws, re.escape(PROMPT))
        ws.send(b"sleep 600 & echo BG=$! SH=$$\r")
        found = re.search(rb"BG=(\d+) SH=(\d+)", read_until(ws, rb"BG=\d+ SH=\d+"))
        assert found is not None
    background, shell = int(found.group(1)), int(found.group(2))
    namespace = pid_namespace(Path(running.cwd))
    wait_for(
        lambda: gone_in(namespace, background) and gone_in(namespace, shell),
        timeout=15,
        what="the shell and its job to end",
    )
    assert client.get(f"/v1/{running.name}").json()["state"] == "JOB_STATE_RUNNING"  # the replica lives on


def test_shell_ends_when_the_job_ends_then_a_finished_job_is_refused(
    shell_server: ServerProcess, gated: Callable[..., GatedJob]
) -> None:
    job = gated("ending")
    with open_ws(shell_server, job.name) as ws:
        read_until(ws, re.escape(PROMPT))
        ws.send(b"sleep 600 & echo BG=$! SH=$$\r")
        found = re.search(rb"BG=(\d+) SH=(\d+)", read_until(ws, rb"BG=\d+ SH=\d+"))
        assert found is not None
        namespace = pid_namespace(Path(job.cwd))
        job.gate.touch()
        # Hung up on (SIGHUP), or killed with the sandboxed replica's PID namespace (SIGKILL) if first.
        assert json.loads(next_text(ws))["exit"] in (129, 137)
        with pytest.raises(ConnectionClosedOK):
            ws.recv(timeout=30)
        assert ws.close_reason == "the replica workerpool0-0 ended"
    wait_for(
        lambda: all(gone_in(namespace, int(pid)) for pid in found.groups()),
        timeout=15,
        what="the shell's processes to end",
    )
    assert job.release()["state"] == "JOB_STATE_SUCCEEDED"

    with pytest.raises(InvalidStatus) as refused:
        open_ws(shell_server, job.name)
    assert refused.value.response.status_code == 400
    error = json.loads(refused.value.response.body)["error"]
    assert error["status"] == "FAILED_PRECONDITION"
    assert "JOB_STATE_SUCCEEDED" in error["message"]

    result = subprocess.run(
        cli(shell_server, job.name), capture_output=True, timeout=60, stdin=subprocess.DEVNULL
    )
    assert result.returncode == 1
    assert b"FAILED_PRECONDITION" in result.stderr and b"JOB_STATE_SUCCEEDED" in result.stderr


def test_wrong_or_missing_token_is_refused_before_the_upgrade(
    shell_server: ServerProcess, running: GatedJob
) -> None:
    for headers in ({"x-goog-api-key": "wrong"}, {"authorization": "Bearer wrong"}, {}):
        with pytest.raises(InvalidStatus) as refused:
            connect(ws_url(shell_server, running.name), additional_headers=headers)
        assert refused.value.response.status_code == 403
        assert json.loads(refused.value.response.body)["error"]["status"] == "PERMISSION_DENIED"
    # The key in the query, as a browser's WebSocket must send it.
    with connect(ws_url(shell_server, running.name, key=TOKEN, command="echo%20ok")) as ws:
        assert b"ok" in read_until(ws, rb"ok")


def test_unknown_replica_or_bad_size_names_the_field(shell_server: ServerProcess, running: GatedJob) -> None:
    for query, field in (({"replica": "workerpool1-0"}, "replica"), ({"cols": "0"}, "cols")):
        with pytest.raises(InvalidStatus) as refused:
            open_ws(shell_server, running.name, **query)
        assert refused.value.response.status_code == 400
        error = json.loads(refused.value.response.body)["error"]
        violations = error["details"][0]["fieldViolations"]
        assert violations[0]["field"] == field, error


def test_web_access_uris_only_while_running(
    shell_server: ServerProcess, client: httpx.Client, running: GatedJob, gated: Callable[..., GatedJob]
) -> None:
    job = gated("web", web_access=True)
    number = job.name.split("/")[1]
    expected = {
        "workerpool0-0": f"{shell_server.url}/console/terminal/{number}/us-central1/{job.id}/workerpool0-0"
    }
    assert client.get(f"/v1/{job.name}").json()["webAccessUris"] == expected
    listed = client.get(f"/v1/{shell_server.parent}/customJobs").json()["customJobs"]
    assert {j["name"]: j.get("webAccessUris") for j in listed}[job.name] == expected
    # The official client reads the map.
    jobs = aiplatform_v1.JobServiceClient(
        transport="rest", client_options={"api_endpoint": shell_server.url, "api_key": TOKEN}
    )
    assert dict(jobs.get_custom_job(name=job.name).web_access_uris) == expected
    # A running job without enableWebAccess has none.
    assert "webAccessUris" not in client.get(f"/v1/{running.name}").json()
    assert "webAccessUris" not in job.release()
    assert "webAccessUris" not in client.get(f"/v1/{job.name}").json()


# ---------------------------------------------------------------------------------------------- podman
@pytest.fixture(scope="module")
def podman_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with podman_backed_server(tmp_path_factory, ["--api-token", TOKEN]) as proc:
        yield proc


def test_shell_into_a_podman_replica_runs_in_its_container(podman_server: ServerProcess) -> None:
    bucket = podman_server.home / "buckets" / BUCKET
    bucket.mkdir(parents=True)
    script = (
        "echo in-the-container > /tmp/marker; touch /gcs/shell-bucket/started; "
        "while [ ! -e /gcs/shell-bucket/gate ]; do sleep 0.05; done"
    )
    pool = {
        "machineSpec": MACHINE,
        "replicaCount": "1",
        "containerSpec": {
            "imageUri": BUSYBOX_IMAGE,
            "command": ["sh", "-c", script],
            "env": [{"name": "MY_VAR", "value": VALUE}],
        },
    }
    with podman_server.client(headers={"x-goog-api-key": TOKEN}) as http:
        created = http.post(
            f"/v1/{podman_server.parent}/customJobs",
            json={"displayName": "pod", "jobSpec": {"workerPoolSpecs": [pool]}},
        )
        assert created.status_code == 200, created.text
        name = created.json()["name"]
        try:
            wait_for((bucket / "started").exists, timeout=120, what="the container to start")
            result = subprocess.run(
                cli(podman_server, name, "--command", "echo $MY_VAR; cat /tmp/marker; exit 5"),
                capture_output=True,
                stdin=subprocess.DEVNULL,
                timeout=60,
            )
            assert result.returncode == 5, result.stderr
            assert result.stdout == f"{VALUE}\nin-the-container\n".encode()
            with open_ws(podman_server, name) as ws:  # interactive: the image's sh on a terminal of its own
                ws.send(b"echo X=$MY_VAR; tty; exit\r")
                output = read_until(ws, rb"/dev/pts/\d+")
                assert re.search(rb"X=" + VALUE.encode() + rb"\r\n/dev/pts/\d+", output)
                assert json.loads(next_text(ws)) == {"exit": 0}
        finally:
            (bucket / "gate").touch()
        assert wait_job(http, name)["state"] == "JOB_STATE_SUCCEEDED"
