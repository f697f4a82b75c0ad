"""The CLI as gcloud users expect it, against a real server: --format value/table/csv, --sort-by, --limit,
delete prompts on a terminal and --quiet, `wait`'s progress and exit codes, run time, one resource name,
a wrong --endpoint, and a missing --staging-bucket. Terminals are real pseudo-terminals."""

from __future__ import annotations

import csv
import http.server
import io
import json
import os
import re
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support import command_forks
from tests.support.command_forks import cli_env
from tests.support.jobs import job, python_pool
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_job

PY = sys.executable
REGION = ("--region", LOCATION)
PARENT = f"/v1/projects/{PROJECT}/locations/{LOCATION}/customJobs"


def server_env(server: ServerProcess | None) -> dict[str, str]:
    return cli_env(server.url, PROJECT) if server is not None else cli_env()


def run_cli(server: ServerProcess | None, *args: str) -> subprocess.CompletedProcess[str]:
    return command_forks.run_cli(list(args), env=server_env(server), timeout=180)


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, f"exit {result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def create(server: ServerProcess, code: str, display_name: str, **labels: str) -> str:
    """A one-replica job running `code`; its name as the server gives it."""
    body = {**job(python_pool(code), name=display_name), "labels": labels}
    with server.client() as http:
        answer = http.post(PARENT, json=body)
        assert answer.status_code == 200, answer.text
        return str(answer.json()["name"])


class Tty:
    """A CLI run with stdin and stderr on a pseudo-terminal (stdout a pipe): what a person at a terminal
    sees on stderr, and what they type."""

    def __init__(self, server: ServerProcess, *args: str) -> None:
        self.master, slave = os.openpty()
        self.proc = subprocess.Popen(
            [PY, "-m", "trainworks.cli.main", *args],
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=slave,
            env=server_env(server),
            text=True,
        )
        os.close(slave)
        self.seen = ""

    def read_until(self, predicate: Callable[[str], bool]) -> str:
        """Terminal output until `predicate` holds for all of it, or the program closed the terminal."""
        while not predicate(self.seen):
            try:
                chunk = os.read(self.master, 4096)
            except OSError:  # EIO: every end of the terminal is closed
                break
            if not chunk:
                break
            self.seen += chunk.decode(errors="replace")
        return self.seen

    def type(self, text: str) -> None:
        os.write(self.master, text.encode())

    def finish(self) -> tuple[int, str, str]:
        """(exit code, stdout, all terminal output)."""
        self.read_until(lambda _: False)
        stdout = self.proc.stdout.read() if self.proc.stdout else ""
        code = self.proc.wait(timeout=180)
        os.close(self.master)
        return code, stdout, self.seen


@pytest.fixture(scope="module")
def two_jobs(server: ServerProcess) -> list[str]:
    """Two finished jobs with one label, created in this order."""
    tag = uuid.uuid4().hex[:8]
    names = [create(server, "pass", f"fmt-{tag}-{i}", suite=tag) for i in ("a", "b")]
    with server.client() as http:
        for name in names:
            assert wait_job(http, name)["state"] == "JOB_STATE_SUCCEEDED"
    return names


def label_filter(names: list[str], server: ServerProcess) -> tuple[str, str]:
    with server.client() as http:
        tag = http.get(f"/v1/{names[0]}").json()["labels"]["suite"]
    return ("--filter", f"labels.suite={tag}")


# ====================================================================== --format, --sort-by, --limit
def test_list_formats_sort_and_limit(server: ServerProcess, two_jobs: list[str]) -> None:
    flt = label_filter(two_jobs, server)
    ids = [name.rsplit("/", 1)[-1] for name in two_jobs]

    def listed(*options: str) -> str:
        return ok(run_cli(server, "custom-jobs", "list", *REGION, *flt, *options)).stdout

    assert sorted(listed("--format", "value(name)").splitlines()) == sorted(two_jobs)
    out = listed("--sort-by", "createTime", "--format", "value(name.basename(),state)")
    assert out.splitlines() == [f"{i}\tJOB_STATE_SUCCEEDED" for i in ids]
    out = listed(
        "--sort-by", "~createTime", "--limit", "1", "--page-size", "1", "--format", "value(name.basename())"
    )
    assert out.splitlines() == [ids[1]]
    table = listed(
        "--sort-by", "~display_name", "--format", "table(name.basename(),displayName,state,labels.suite)"
    ).splitlines()
    assert table[0].split() == ["NAME", "DISPLAY_NAME", "STATE", "SUITE"]
    assert [row.split()[0] for row in table[1:]] == ids[::-1]
    rows = list(
        csv.reader(io.StringIO(listed("--sort-by", "createTime", "--format", "csv(name,display_name)")))
    )
    assert rows[0] == ["name", "display_name"]
    assert [row[0] for row in rows[1:]] == two_jobs
    projected = json.loads(listed("--format", "json(name,state)"))
    assert sorted(projected, key=lambda j: j["name"]) == sorted(
        ({"name": n, "state": "JOB_STATE_SUCCEEDED"} for n in two_jobs), key=lambda j: j["name"]
    )


def test_describe_and_create_take_formats_and_bad_ones_are_usage_errors(
    server: ServerProcess, two_jobs: list[str]
) -> None:
    out = ok(run_cli(server, "custom-jobs", "describe", two_jobs[0], "--format", "value(state)")).stdout
    assert out == "JOB_STATE_SUCCEEDED\n"
    made = ok(
        run_cli(
            server,
            "custom-jobs",
            "create",
            *REGION,
            "--display-name=fmt-create",
            "--worker-pool-spec=machine-type=n1-standard-4,container-image-uri=python:3.11",
            f"--command={PY},-c,pass",
            "--format",
            "value(name)",
        )
    ).stdout.strip()
    assert re.fullmatch(rf"projects/\d+/locations/{LOCATION}/customJobs/\d+", made), made
    bad = run_cli(server, "custom-jobs", "list", *REGION, "--format", "value()")
    assert bad.returncode == 2 and "value() needs the keys" in bad.stderr
    bad = run_cli(server, "custom-jobs", "list", *REGION, "--sort-by", "a b c")
    assert bad.returncode == 2 and "bad sort key" in bad.stderr
    with server.client() as http:
        wait_job(http, made)


# ====================================================================== delete prompts
def answer_delete_prompt(server: ServerProcess, name: str, reply: str) -> tuple[int, str]:
    """`custom-jobs delete` on a terminal, answered `reply` once it asks: its exit code and what it showed."""
    tty = Tty(server, "custom-jobs", "delete", name)
    tty.read_until(lambda seen: "(Y/n)?" in seen)
    tty.type(reply + "\n")
    code, _, seen = tty.finish()
    return code, seen


def test_delete_asks_on_a_terminal_and_quiet_does_not(server: ServerProcess) -> None:
    name = create(server, "pass", "prompt-me")
    with server.client() as http:
        wait_job(http, name)
        code, seen = answer_delete_prompt(server, name, "n")
        assert code == 1, seen
        assert f"You are about to delete CustomJob [{name}]." in seen
        assert "Aborted by user." in seen
        assert http.get(f"/v1/{name}").status_code == 200  # still there

        code, seen = answer_delete_prompt(server, name, "y")
        assert code == 0, seen
        assert f"Deleted CustomJob [{name}]." in seen

        other = create(server, "pass", "quiet-delete")
        wait_job(http, other)
        code, _, seen = Tty(server, "custom-jobs", "delete", other, "--quiet").finish()
        assert code == 0, seen
        assert "(Y/n)?" not in seen and f"Deleted CustomJob [{other}]." in seen

        # No terminal (a script): gcloud goes on without asking, and so do we.
        third = create(server, "pass", "script-delete")
        wait_job(http, third)
        result = ok(run_cli(server, "custom-jobs", "delete", third))
        assert "(Y/n)?" not in result.stderr and "Deleted CustomJob" in result.stderr


# ====================================================================== wait: progress, exit codes
def test_wait_shows_state_changes_on_a_terminal(server: ServerProcess, tmp_path: Path) -> None:
    gate = tmp_path / f"gate-{uuid.uuid4().hex[:8]}"
    code = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
    name = create(server, code, "wait-tty")
    job_id = name.rsplit("/", 1)[-1]  # by ID: the lines still show the server's name
    tty = Tty(server, "custom-jobs", "wait", job_id, *REGION, "--poll-interval", "0.2", "--timeout", "150")
    try:
        tty.read_until(lambda seen: "is JOB_STATE_RUNNING" in seen)
    finally:
        gate.touch()
    exit_code, stdout, seen = tty.finish()
    assert exit_code == 0, seen
    lines = re.findall(r"\[(\d+(?:\.\d)?s|\d+m\d\ds)\] CustomJob \[([^\]]+)\] is (JOB_STATE_\w+)", seen)
    assert [state for _, _, state in lines][-2:] == ["JOB_STATE_RUNNING", "JOB_STATE_SUCCEEDED"], seen
    assert {shown for _, shown, _ in lines} == {name}
    assert "JOB_STATE_SUCCEEDED" in stdout
    # Not a terminal: stderr stays quiet for scripts.
    quiet = ok(run_cli(server, "custom-jobs", "wait", name))
    assert "is JOB_STATE_" not in quiet.stderr


def test_wait_exit_codes_tell_outcomes_apart(server: ServerProcess) -> None:
    succeeded = create(server, "pass", "exit-ok")
    failed = create(server, "raise SystemExit(3)", "exit-failed")
    assert run_cli(server, "custom-jobs", "wait", succeeded, "--timeout", "120").returncode == 0
    assert run_cli(server, "custom-jobs", "wait", failed, "--timeout", "120").returncode == 1
    sleeper = create(server, "import time; time.sleep(600)", "exit-cancelled")
    with server.client() as http:
        wait_job(http, sleeper, {"JOB_STATE_RUNNING"})
    timed_out = run_cli(server, "custom-jobs", "wait", sleeper, "--timeout", "0.2")
    assert timed_out.returncode == 4, timed_out.stderr
    assert "timed out" in timed_out.stderr
    ok(run_cli(server, "custom-jobs", "cancel", sleeper))
    cancelled = run_cli(server, "custom-jobs", "wait", sleeper, "--timeout", "120")
    assert cancelled.returncode == 3, cancelled.stderr
    helped = ok(run_cli(None, "custom-jobs", "wait", "--help")).stdout
    assert "Exit codes: 0 the job succeeded, 1 it failed" in " ".join(helped.split())


# ====================================================================== run time, one name
def test_running_jobs_show_their_run_time_and_every_command_prints_the_servers_name(
    server: ServerProcess,
) -> None:
    display_name = f"run-time-{uuid.uuid4().hex[:8]}"
    name = create(server, "import time; time.sleep(600)", display_name)
    job_id = name.rsplit("/", 1)[-1]
    with server.client() as http:
        wait_job(http, name, {"JOB_STATE_RUNNING"})
    described = ok(run_cli(server, "custom-jobs", "describe", job_id, *REGION)).stdout
    assert re.search(r"Run time:\s+\S+s \(running\)", described), described
    listed = ok(
        run_cli(server, "custom-jobs", "list", *REGION, "--filter", f'display_name="{display_name}"')
    ).stdout
    row = next(line for line in listed.splitlines() if line.startswith(job_id))
    assert re.search(r"\d(\.\d)?s$", row.strip()), row  # RUN_TIME so far
    # The user names the job by ID (project "test-project"): the server's name has the project number.
    assert "/test-project/" not in name
    cancelled = ok(run_cli(server, "custom-jobs", "cancel", job_id, *REGION))
    assert f"Request to cancel CustomJob [{name}]" in cancelled.stderr
    ok_or_cancelled = run_cli(server, "custom-jobs", "wait", job_id, *REGION)
    assert ok_or_cancelled.returncode == 3
    deleted = ok(run_cli(server, "custom-jobs", "delete", job_id, *REGION))
    assert f"Deleted CustomJob [{name}]." in deleted.stderr


# ====================================================================== the endpoint, the bucket
class _HtmlHandler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
        body = b"<!DOCTYPE html><html><body><h1>Not Found</h1></body></html>"
        self.send_response(404)
        self.send_header("content-type", "text/html; charset=utf-8")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def web_server() -> Iterator[str]:
    """A web server that is not Trainworks: HTML for every path."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HtmlHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        thread.join()


def test_an_endpoint_that_is_not_trainworks_is_named_not_dumped(web_server: str) -> None:
    result = run_cli(None, "custom-jobs", "list", *REGION, "--endpoint", web_server)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"ERROR: {web_server} answered 404 with an HTML page: is it a Trainworks server? "
        "(--endpoint / TRAINWORKS_ENDPOINT)"
    )
    assert "<html" not in result.stderr and "Traceback" not in result.stderr


def test_a_missing_staging_bucket_is_an_error_unless_asked_to_create_it(
    server: ServerProcess, tmp_path: Path
) -> None:
    root = tmp_path / "proj"
    (root / "trainer").mkdir(parents=True)
    (root / "trainer" / "__init__.py").write_text("")
    (root / "trainer" / "task.py").write_text("print('staged')\n")
    bucket = f"typo-{uuid.uuid4().hex[:8]}"
    args = (
        "custom-jobs",
        "create",
        *REGION,
        "--display-name=bucket",
        "--worker-pool-spec=machine-type=n1-standard-4",
        f"--local-package-path={root}",
        "--script=trainer/task.py",
        "--executor-image-uri=python:3.11",
        f"--staging-bucket=gs://{bucket}",
    )
    missing = run_cli(server, *args)
    assert missing.returncode == 2, missing.stderr
    assert f"the bucket gs://{bucket} does not exist" in missing.stderr
    assert "--create-staging-bucket" in missing.stderr
    with server.client() as http:
        assert http.get(f"/storage/v1/b/{bucket}").status_code == 404  # not made
    made = ok(run_cli(server, *args, "--create-staging-bucket", "--format", "value(name)")).stdout.strip()
    assert re.fullmatch(r"projects/\d+/locations/.+/customJobs/\d+", made), made
    with server.client() as http:
        assert http.get(f"/storage/v1/b/{bucket}").status_code == 200
    run_cli(server, "custom-jobs", "cancel", made)  # whether it runs is test_cli_local_package's part
