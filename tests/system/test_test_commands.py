"""The suite's servers and CLI runs are forked from warm interpreters (tests/support/command_forks.py): each
must be what a cold `python -m trainworks.cli.main ...` is, with the environment, working folder and output
its test gave it, and end as a cold one does."""

from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
from pathlib import Path

import pytest

from tests.support.command_forks import COLD_ENV, WARM, ForkedProcess, _forkable, cli_env, run_cli
from tests.support.jobs import job, python_pool
from tests.support.server import ServerProcess, wait_for, wait_job
from trainworks.backends import procfs


def started(home: Path, cold: bool, monkeypatch: pytest.MonkeyPatch, **kwargs: object) -> ServerProcess:
    monkeypatch.setenv(COLD_ENV, "1" if cold else "0")
    return ServerProcess(home=home, **kwargs).start()  # type: ignore[arg-type]


def children_environ(pid: int) -> dict[str, str] | None:
    """The environment the server gave its fork server (the process it starts with; a forked server's own
    /proc/PID/environ is the warm interpreter's start-up block, whatever its os.environ is now)."""
    for child in procfs.children(pid):
        if not any(part.endswith("zygote.py") for part in procfs.cmdline(child)):
            continue
        try:
            raw = Path(f"/proc/{child}/environ").read_bytes()
        except OSError:  # it ended meanwhile
            continue
        return dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item)
    return None


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_a_forked_server_answers_and_ends_as_a_cold_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stop: signal.Signals
) -> None:
    codes = {}
    for cold in (True, False):
        server = started(tmp_path / f"home-{cold}", cold, monkeypatch, env={"TRAINWORKS_TEST_MARK": "m"})
        process = server.process
        assert process is not None
        assert isinstance(process, ForkedProcess) != cold
        try:
            assert process.poll() is None
            with pytest.raises(subprocess.TimeoutExpired):
                process.wait(timeout=0.05)
            env = wait_for(functools.partial(children_environ, process.pid), what="the server's fork server")
            assert env["TRAINWORKS_TEST_MARK"] == "m"
            assert os.readlink(f"/proc/{process.pid}/cwd") == os.getcwd()
            with server.client() as client:
                listed = client.get(f"/v1/{server.parent}/customJobs")
            assert listed.status_code == 200, listed.text
            assert "Uvicorn running" in server.log_path.read_text()  # its output goes to its log
        finally:
            process.send_signal(stop)
            codes[cold] = process.wait(timeout=30)
            server.process = None
    assert codes[True] == codes[False], codes  # a stop ends both alike (uvicorn re-raises SIGTERM)
    assert codes[False] == -stop


def test_a_forked_server_reads_its_own_crash_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TRAINWORKS_CRASH_AT is in the forked server's environment only, not the interpreter it was forked
    from: the server dies there all the same."""
    server = started(tmp_path / "home", False, monkeypatch, env={"TRAINWORKS_CRASH_AT": "job-running"})
    assert isinstance(server.process, ForkedProcess)
    body = job(python_pool("pass"), name="crash")
    with server.client() as client:
        created = client.post(f"/v1/{server.parent}/customJobs", json=body)
        assert created.status_code == 200, created.text
    assert server.process.wait(timeout=60) == -signal.SIGKILL
    server.process = None
    restarted = started(tmp_path / "home", False, monkeypatch)
    try:
        with restarted.client() as client:
            assert wait_job(client, created.json()["name"])["state"] == "JOB_STATE_SUCCEEDED"
    finally:
        restarted.stop()


@pytest.mark.parametrize(
    "args",
    [
        ["--version"],
        ["no-such-command"],
        ["custom-jobs", "list", "--region", "us-central1", "--format", "json"],
        ["custom-jobs", "describe", "42", "--region", "us-central1"],
        ["admin", "tokens", "list"],
    ],
)
def test_a_forked_cli_run_answers_as_a_cold_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str]
) -> None:
    with socket.socket() as unanswered:  # a refused connection, the same for both runs
        unanswered.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{unanswered.getsockname()[1]}"
    env = cli_env(endpoint, "p")
    env["TRAINWORKS_HOME"] = str(tmp_path / "home")
    runs = {}
    for cold in (True, False):
        monkeypatch.setenv(COLD_ENV, "1" if cold else "0")
        forks = WARM["cli"].forks
        runs[cold] = run_cli(args, env=env, timeout=60)
        assert WARM["cli"].forks == forks + (not cold)
    assert (runs[False].returncode, runs[False].stdout, runs[False].stderr) == (
        runs[True].returncode,
        runs[True].stdout,
        runs[True].stderr,
    )
    assert runs[False].stdout or runs[False].stderr


def test_a_forked_cli_run_keeps_to_its_timeout() -> None:
    with socket.socket() as silent:  # accepts, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        env = cli_env(f"http://127.0.0.1:{silent.getsockname()[1]}", "p")
        with pytest.raises(subprocess.TimeoutExpired):
            run_cli(["custom-jobs", "list", "--region", "us-central1"], env=env, timeout=2)


def test_only_what_no_import_reads_may_differ_from_the_warm_interpreter() -> None:
    env = dict(os.environ)
    assert _forkable({**env, "TRAINWORKS_ENDPOINT": "http://x", "COLUMNS": "10"})
    assert not _forkable({**env, "FORCE_COLOR": "1"})  # typer reads it at import
    assert not _forkable({k: v for k, v in env.items() if k != "PATH"})
