"""`trainworks custom-jobs` and its REST client: flag parsing units, then the CLI against a real server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from tests.support import command_forks
from tests.support.command_forks import cli_env
from tests.support.server import LOCATION, PROJECT, ServerProcess, wait_job
from trainworks.client import ApiError, TrainworksClient, TrainworksConnectionError
from trainworks.kernel.flags import camelize, parse_dict, split_list
from trainworks.kernel.names import FlagError
from trainworks.kinds.custom_jobs.cli import job_name
from trainworks.kinds.custom_jobs.pool_specs import (
    build_custom_job,
    parse_duration,
    parse_worker_pool_spec,
    parse_worker_pool_specs,
)

PY = sys.executable


# ====================================================================== --worker-pool-spec and friends
def test_split_list_plain_and_escaped() -> None:
    assert split_list("a,b,c") == ["a", "b", "c"]
    assert split_list("") == []
    assert split_list("^:^python3:-c:print(1, 2)") == ["python3", "-c", "print(1, 2)"]
    assert split_list("^||^a,b||c") == ["a,b", "c"]


def test_container_pool_spec() -> None:
    pool = parse_worker_pool_spec(
        "machine-type=n1-standard-4,replica-count=1,container-image-uri=gcr.io/p/img:1"
    )
    assert pool == {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": "1",
        "containerSpec": {"imageUri": "gcr.io/p/img:1"},
    }


def test_replica_count_defaults_to_one_and_accelerator_count_to_one() -> None:
    pool = parse_worker_pool_spec(
        "machine-type=n1-standard-8,accelerator-type=NVIDIA_TESLA_T4,container-image-uri=img"
    )
    assert pool["replicaCount"] == "1"
    assert pool["machineSpec"] == {
        "machineType": "n1-standard-8",
        "acceleratorType": "NVIDIA_TESLA_T4",
        "acceleratorCount": 1,
    }
    pool = parse_worker_pool_spec(
        "machine-type=a2-highgpu-2g,accelerator-type=NVIDIA_TESLA_A100,accelerator-count=2,"
        "replica-count=3,container-image-uri=img"
    )
    assert pool["machineSpec"]["acceleratorCount"] == 2
    assert pool["replicaCount"] == "3"


def test_python_package_pool_spec_takes_package_uris() -> None:
    pool = parse_worker_pool_spec(
        "machine-type=e2-standard-4,executor-image-uri=us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-4:latest,"
        "python-module=trainer.task",
        ["gs://b/pkg-0.1.tar.gz"],
    )
    assert pool["pythonPackageSpec"] == {
        "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-4:latest",
        "packageUris": ["gs://b/pkg-0.1.tar.gz"],
        "pythonModule": "trainer.task",
    }
    assert "containerSpec" not in pool


def test_disk_keys_map_to_disk_spec() -> None:
    pool = parse_worker_pool_spec(
        "machine-type=n1-standard-4,container-image-uri=i,disk-type=pd-ssd,disk-size=200"
    )
    assert pool["diskSpec"] == {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 200}


def test_empty_spec_skips_a_pool_but_not_the_first() -> None:
    pools = parse_worker_pool_specs(
        [
            "machine-type=n1-standard-4,container-image-uri=i",
            "",
            "machine-type=n1-standard-4,container-image-uri=j",
        ]
    )
    assert pools[1] == {}
    assert pools[2]["containerSpec"]["imageUri"] == "j"
    with pytest.raises(FlagError, match="first --worker-pool-spec"):
        parse_worker_pool_specs(["", "machine-type=n1-standard-4,container-image-uri=i"])


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("machine-type=n1-standard-4,container-image=img", r"unknown key \[container-image\]"),
        ("machine-typ=n1-standard-4,container-image-uri=img", r"unknown key \[machine-typ\]"),
        ("container-image-uri=img", r"key \[machine-type\] required"),
        ("machine-type=n1-standard-4", r"exactly one of keys \[executor-image-uri, container-image-uri\]"),
        (
            "machine-type=n1-standard-4,container-image-uri=i,executor-image-uri=e,python-module=m",
            r"exactly one of keys",
        ),
        (
            "machine-type=n1-standard-4,container-image-uri=i,python-module=m",
            r"\[python-module\] is not allowed",
        ),
        ("machine-type=n1-standard-4,executor-image-uri=e", r"key \[python-module\] is required"),
        (
            "machine-type=n1-standard-4,container-image-uri=i,accelerator-count=2",
            r"\[accelerator-type\] required",
        ),
        (
            "machine-type=n1-standard-4,container-image-uri=i,accelerator-type=NVIDIA_TESLA_X",
            r"invalid value of \[accelerator-type\]: NVIDIA_TESLA_X",
        ),
        (
            "machine-type=n1-standard-4,container-image-uri=i,replica-count=two",
            r"\[replica-count\] needs an integer",
        ),
        ("machine-type=n1-standard-4,container-image-uri=i,replica-count=0", r"at least 1"),
        (
            "machine-type=n1-standard-4,container-image-uri",
            r"bad syntax for dict arg: \[container-image-uri\]",
        ),
        ("machine-type=a,machine-type=b,container-image-uri=i", r"\[machine-type\] is given more than once"),
        (
            "machine-type=n1-standard-4,executor-image-uri=e,local-package-path=.",
            r"\[local-package-path\] is not",
        ),
    ],
)
def test_bad_worker_pool_specs_name_the_problem(spec: str, expected: str) -> None:
    with pytest.raises(FlagError, match=expected) as info:
        parse_worker_pool_spec(spec)
    assert info.value.flag == "--worker-pool-spec"
    assert "--worker-pool-spec" in str(info.value)


def test_at_most_four_pools() -> None:
    spec = "machine-type=n1-standard-4,container-image-uri=i"
    with pytest.raises(FlagError, match="at most 4"):
        parse_worker_pool_specs([spec] * 5)


def test_parse_dict_without_spec_keeps_equals_in_values() -> None:
    assert parse_dict("A=1,B=x=y", "--env-vars") == {"A": "1", "B": "x=y"}
    assert parse_dict("^;^A=1,2;B=3", "--env-vars") == {"A": "1,2", "B": "3"}


@pytest.mark.parametrize(
    ("text", "wire"),
    [
        ("3600", "3600s"),
        ("3600s", "3600s"),
        ("90m", "5400s"),
        ("1h30m", "5400s"),
        ("2d", "172800s"),
        ("1.5s", "1.5s"),
    ],
)
def test_parse_duration(text: str, wire: str) -> None:
    assert parse_duration(text) == wire


@pytest.mark.parametrize("text", ["", "soon", "1x", "h1", "0s", "5m3"])
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(FlagError, match="--timeout"):
        parse_duration(text)


def test_camelize_leaves_label_keys_alone() -> None:
    data = {
        "job_spec": {"worker_pool_specs": [{"machine_spec": {"machine_type": "x"}}]},
        "labels": {"a_b": "c"},
    }
    assert camelize(data) == {
        "jobSpec": {"workerPoolSpecs": [{"machineSpec": {"machineType": "x"}}]},
        "labels": {"a_b": "c"},
    }


def test_job_name_expansion() -> None:
    full = "projects/p/locations/europe-west4/customJobs/42"
    assert job_name("42", "p", "us-central1") == "projects/p/locations/us-central1/customJobs/42"
    assert job_name(full, "other", None) == full
    with pytest.raises(FlagError, match="--region"):
        job_name("42", "p", None)
    with pytest.raises(FlagError):
        job_name("projects/p/locations/l/models/1", "p", "l")


def _write(path: Path, data: Any) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_config_snake_case_then_flags_override(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "job.yaml",
        {
            "worker_pool_specs": [
                {
                    "machine_spec": {"machine_type": "n1-standard-4"},
                    "replica_count": 1,
                    "container_spec": {
                        "image_uri": "img",
                        "command": ["run"],
                        "env": [{"name": "A", "value": "1"}],
                    },
                },
                {
                    "machine_spec": {"machine_type": "n1-standard-4"},
                    "replica_count": 2,
                    "python_package_spec": {
                        "executor_image_uri": "e",
                        "package_uris": ["gs://b/old.tar.gz"],
                        "python_module": "m",
                    },
                },
            ],
            "scheduling": {"restart_job_on_worker_restart": True},
        },
    )
    body = build_custom_job(
        display_name="j",
        config=config,
        args=["--epochs=3,--lr=0.1"],
        env_vars=["A=2,B=3"],
        python_package_uris=["gs://b/new.tar.gz"],
        labels=["team=ml", "env=dev"],
        timeout="2h",
        base_output_dir="gs://b/out",
    )
    spec = body["jobSpec"]
    first, second = spec["workerPoolSpecs"]
    assert first["containerSpec"]["command"] == ["run"]
    assert first["containerSpec"]["args"] == ["--epochs=3", "--lr=0.1"]
    assert first["containerSpec"]["env"] == [{"name": "A", "value": "2"}, {"name": "B", "value": "3"}]
    assert second["pythonPackageSpec"]["args"] == ["--epochs=3", "--lr=0.1"]
    assert second["pythonPackageSpec"]["packageUris"] == ["gs://b/new.tar.gz"]
    assert spec["scheduling"] == {"restartJobOnWorkerRestart": True, "timeout": "7200s"}
    assert spec["baseOutputDirectory"] == {"outputUriPrefix": "gs://b/out"}
    assert body["labels"] == {"team": "ml", "env": "dev"}
    assert body["displayName"] == "j"


def test_worker_pool_spec_flags_replace_config_pools_and_command_applies_to_containers(
    tmp_path: Path,
) -> None:
    config = _write(
        tmp_path / "job.json",
        {
            "workerPoolSpecs": {
                "machineSpec": {"machineType": "n1-standard-4"},
                "containerSpec": {"imageUri": "a"},
            }
        },
    )
    body = build_custom_job(
        display_name="j",
        config=config,
        worker_pool_specs=["machine-type=n1-standard-8,container-image-uri=b"],
        command=["^|^python3|-c|print(1, 2)"],
    )
    (pool,) = body["jobSpec"]["workerPoolSpecs"]
    assert pool["containerSpec"] == {"imageUri": "b", "command": ["python3", "-c", "print(1, 2)"]}
    assert pool["machineSpec"] == {"machineType": "n1-standard-8"}


def test_config_may_hold_a_whole_custom_job(tmp_path: Path) -> None:
    config = _write(
        tmp_path / "job.yaml",
        {
            "display_name": "from-file",
            "labels": {"team": "a"},
            "job_spec": {
                "worker_pool_specs": [
                    {"machine_spec": {"machine_type": "m"}, "container_spec": {"image_uri": "i"}}
                ]
            },
        },
    )
    body = build_custom_job(display_name=None, config=config, labels=["team=b,x=y"])
    assert body["displayName"] == "from-file"
    assert body["labels"] == {"team": "b", "x": "y"}
    assert body["jobSpec"]["workerPoolSpecs"][0]["containerSpec"] == {"imageUri": "i"}


def test_create_needs_pools_and_a_display_name(tmp_path: Path) -> None:
    with pytest.raises(FlagError, match="--worker-pool-spec"):
        build_custom_job(display_name="j")
    with pytest.raises(FlagError, match="--display-name"):
        build_custom_job(display_name=None, worker_pool_specs=["machine-type=m,container-image-uri=i"])
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(FlagError, match="--config"):
        build_custom_job(display_name="j", config=bad)
    with pytest.raises(FlagError, match="--config"):
        build_custom_job(display_name="j", config=tmp_path / "missing.yaml")


def test_api_error_parses_google_rpc_body() -> None:
    body = {
        "error": {
            "code": 400,
            "message": "Invalid value for display_name: required",
            "status": "INVALID_ARGUMENT",
            "details": [
                {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "INVALID_ARGUMENT"},
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [{"field": "display_name", "description": "required"}],
                },
            ],
        }
    }
    error = ApiError.from_response(httpx.Response(400, json=body))
    assert (error.status_code, error.status, error.message) == (
        400,
        "INVALID_ARGUMENT",
        body["error"]["message"],
    )
    assert error.violations == [("display_name", "required")]
    plain = ApiError.from_response(httpx.Response(502, text="<html>bad gateway</html>"))
    assert plain.status_code == 502 and "bad gateway" in plain.message


# ====================================================================== the client against a real server
def test_client_pages_through_jobs_and_waits_for_operations(server: ServerProcess) -> None:
    marker = f"page-{uuid.uuid4().hex[:8]}"
    body = {
        "displayName": marker,
        "jobSpec": {
            "workerPoolSpecs": [
                {
                    "machineSpec": {"machineType": "n1-standard-4"},
                    "replicaCount": "1",
                    "containerSpec": {"imageUri": "local", "command": [PY, "-c", "print('paged')"]},
                }
            ]
        },
    }
    with TrainworksClient(server.url) as client:
        names = {client.create_custom_job(server.parent, body).name for _ in range(3)}
        listed = list(client.list_custom_jobs(server.parent, filter=f'display_name="{marker}"', page_size=1))
        assert {j.name for j in listed} == names
        first = sorted(names)[0]
        with server.client() as http:
            wait_job(http, first)
        entries = list(client.stream_logs(first, task="workerpool0-0", follow=True))
        wanted = {"task": "workerpool0-0", "severity": "INFO", "stream": "stdout", "text": "paged"}
        assert any(wanted.items() <= dict(e).items() for e in entries)
        op = client.delete_custom_job(first)
        assert op.name.startswith(first + "/operations/")
        done = client.wait_operation(op.name, timeout_s=60)
        assert done.done is True and done.error is None
        assert client.get_operation(op.name).done is True
        with pytest.raises(ApiError) as info:
            client.get_custom_job(first)
        assert (info.value.status_code, info.value.status) == (404, "NOT_FOUND")
        with pytest.raises(ApiError) as info:
            client.create_custom_job(server.parent, {"jobSpec": body["jobSpec"]})
        assert info.value.status == "INVALID_ARGUMENT"
        assert any(field == "display_name" for field, _ in info.value.violations)


def test_client_connection_error() -> None:
    with (
        TrainworksClient("http://127.0.0.1:9", timeout=5) as client,
        pytest.raises(TrainworksConnectionError),
    ):
        client.get_custom_job(f"projects/{PROJECT}/locations/{LOCATION}/customJobs/1")


# ====================================================================== the CLI as a subprocess
def run_cli(
    server: ServerProcess | None, *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    env = cli_env(server.url, PROJECT) if server is not None else cli_env()
    return command_forks.run_cli(["custom-jobs", *args], env=env, timeout=timeout)


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, (
        f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    )
    return result


def create_json(server: ServerProcess, *args: str) -> dict[str, Any]:
    result = ok(run_cli(server, "create", "--region", LOCATION, "--format", "json", *args))
    job: dict[str, Any] = json.loads(result.stdout)
    return job


REGION = ("--region", LOCATION)
CONTAINER_POOL = (
    "--worker-pool-spec=machine-type=n1-standard-4,replica-count=1,container-image-uri=python:3.11"
)


@pytest.fixture(scope="module")
def finished_job(server: ServerProcess) -> Iterator[tuple[dict[str, Any], str]]:
    """One job created from flags that printed a unique line, waited for with `wait`."""
    line = f"hello-from-cli-{uuid.uuid4().hex[:8]}"
    job = create_json(
        server,
        "--display-name",
        "cli-hello",
        CONTAINER_POOL,
        f"--command={PY},-c,print('{line}')",
        "--labels=team=ml,suite=cli",
    )
    assert job["state"] == "JOB_STATE_QUEUED"
    assert job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]["command"] == [PY, "-c", f"print('{line}')"]
    assert job["labels"] == {"team": "ml", "suite": "cli"}
    result = ok(run_cli(server, "wait", job["name"].rsplit("/", 1)[-1], *REGION, "--timeout", "120"))
    assert "JOB_STATE_SUCCEEDED" in result.stdout
    yield job, line


def test_create_human_prints_a_summary(server: ServerProcess) -> None:
    result = ok(
        run_cli(
            server,
            "create",
            *REGION,
            "--display-name",
            "cli-human",
            CONTAINER_POOL,
            f"--command={PY},-c,pass",
            "--timeout=10m",
        )
    )
    assert "Display name: cli-human" in result.stdout
    assert "JOB_STATE_QUEUED" in result.stdout
    assert "600s" in result.stdout
    assert "is submitted successfully" in result.stderr
    name = next(w.strip("[]") for w in result.stderr.split() if "/customJobs/" in w)
    with server.client() as http:
        assert wait_job(http, name)["state"] == "JOB_STATE_SUCCEEDED"


def test_describe_json_and_human(server: ServerProcess, finished_job: tuple[dict[str, Any], str]) -> None:
    job, _ = finished_job
    job_id = job["name"].rsplit("/", 1)[-1]
    described = json.loads(ok(run_cli(server, "describe", job_id, *REGION, "--format", "json")).stdout)
    assert described["name"] == job["name"]
    assert described["state"] == "JOB_STATE_SUCCEEDED"
    assert described["startTime"] and described["endTime"]
    by_name = json.loads(ok(run_cli(server, "describe", job["name"], "--format=json")).stdout)
    assert by_name == described
    human = ok(run_cli(server, "describe", job_id, *REGION)).stdout
    assert job["name"] in human
    assert "JOB_STATE_SUCCEEDED" in human
    assert "cli-hello" in human
    assert "Started:" in human and "Ended:" in human
    assert "pool 0: 1 x n1-standard-4" in human
    as_yaml = yaml.safe_load(ok(run_cli(server, "describe", job_id, *REGION, "--format", "yaml")).stdout)
    assert as_yaml == described


def test_list_json_filter_limit_and_human(
    server: ServerProcess, finished_job: tuple[dict[str, Any], str]
) -> None:
    job, _ = finished_job
    listed = json.loads(ok(run_cli(server, "list", *REGION, "--format", "json")).stdout)
    assert job["name"] in [j["name"] for j in listed]
    filtered = json.loads(
        ok(run_cli(server, "list", *REGION, "--format", "json", "--filter", "labels.suite=cli")).stdout
    )
    assert [j["name"] for j in filtered] == [job["name"]]
    limited = json.loads(ok(run_cli(server, "list", *REGION, "--format", "json", "--limit", "1")).stdout)
    assert len(limited) == 1
    human = ok(run_cli(server, "list", *REGION, "--filter", "labels.suite=cli")).stdout
    header, row = human.strip().splitlines()
    assert header.split() == ["CUSTOM_JOB_ID", "DISPLAY_NAME", "STATE", "CREATE_TIME", "RUN_TIME"]
    assert row.split()[:3] == [job["name"].rsplit("/", 1)[-1], "cli-hello", "JOB_STATE_SUCCEEDED"]
    empty = ok(run_cli(server, "list", *REGION, "--filter", 'display_name="no-such-job"')).stdout
    assert "Listed 0 items." in empty


# `stream-logs`' human lines: `2026-12-05T05:40:00.123Z INFO    [task] text` (UTC, milliseconds).
TIMED_LINE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z ([A-Z]+) +(\[.*)$")


def untimed(lines: list[str]) -> list[tuple[str, str]]:
    """(severity, `[task] text`) of each line, every one checked to start with its time and severity."""
    out = []
    for line in lines:
        match = TIMED_LINE.match(line)
        assert match, f"not a timed log line: {line!r}"
        out.append((match.group(1), match.group(2)))
    return out


def test_stream_logs_shows_the_printed_line(
    server: ServerProcess, finished_job: tuple[dict[str, Any], str]
) -> None:
    job, line = finished_job
    job_id = job["name"].rsplit("/", 1)[-1]
    out = untimed(ok(run_cli(server, "stream-logs", job_id, *REGION)).stdout.splitlines())
    assert ("INFO", f"[workerpool0-0] {line}") in out
    assert any(o.startswith("[service] ") for _, o in out)
    bare = ok(run_cli(server, "stream-logs", job_id, *REGION, "--no-timestamps")).stdout.splitlines()
    assert f"[workerpool0-0] {line}" in bare
    only_task = ok(
        run_cli(server, "stream-logs", job_id, *REGION, "--task", "workerpool0-0", "--format", "json")
    )
    entries = [json.loads(x) for x in only_task.stdout.splitlines()]
    wanted = {"task": "workerpool0-0", "severity": "INFO", "stream": "stdout", "text": line}
    assert any(wanted.items() <= e.items() for e in entries)
    assert {e["task"] for e in entries} <= {"workerpool0-0", "service"}
    assert [e["insertId"] for e in entries] == sorted(e["insertId"] for e in entries)  # in time order


def test_stream_logs_follows_a_running_job_until_it_ends(server: ServerProcess, tmp_path: Path) -> None:
    # The job prints, then waits for a file this test creates only after the line has been streamed (outside
    # the server's home, which replicas cannot see).
    gate = tmp_path / f"gate-{uuid.uuid4().hex[:8]}"
    code = (
        "import os, sys, time\n"
        "print('before-gate', flush=True)\n"
        f"while not os.path.exists({str(gate)!r}): time.sleep(0.05)\n"
        "print('after-gate', flush=True)\n"
    )
    job = create_json(
        server,
        "--display-name",
        "cli-follow",
        "--timeout=120s",
        CONTAINER_POOL,
        f"--command=^|^{PY}|-c|{code}",
    )
    env = cli_env(server.url, PROJECT)
    with subprocess.Popen(
        [
            PY,
            "-m",
            "trainworks.cli.main",
            "custom-jobs",
            "stream-logs",
            job["name"],
            "--task",
            "workerpool0-0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdout is not None
        try:
            seen = []
            for out_line in proc.stdout:
                seen.append(untimed([out_line.rstrip("\n")])[0][1])
                if seen[-1] == "[workerpool0-0] before-gate":
                    gate.touch()
            assert proc.wait(timeout=120) == 0, proc.stderr.read() if proc.stderr else ""
        finally:
            if proc.poll() is None:
                proc.kill()
    assert seen.index("[workerpool0-0] before-gate") < seen.index("[workerpool0-0] after-gate")
    assert "Job completed successfully." in " ".join(seen)


def test_cancel_a_sleeping_job(server: ServerProcess) -> None:
    job = create_json(
        server,
        "--display-name",
        "cli-sleeper",
        CONTAINER_POOL,
        f"--command={PY},-c,import time; time.sleep(600)",
    )
    with server.client() as http:
        wait_job(http, job["name"], {"JOB_STATE_RUNNING"})
    result = ok(run_cli(server, "cancel", job["name"].rsplit("/", 1)[-1], *REGION))
    assert "Request to cancel CustomJob" in result.stderr
    waited = run_cli(server, "wait", job["name"], "--format", "json", "--timeout", "120")
    assert waited.returncode == 3, waited.stderr  # issue 19: a cancelled job exits 3
    final = json.loads(waited.stdout)
    assert final["state"] == "JOB_STATE_CANCELLED"
    assert final["error"]["code"] == 1
    again = run_cli(server, "cancel", job["name"])
    assert again.returncode == 1
    assert "FAILED_PRECONDITION" in again.stderr
    assert "Traceback" not in again.stderr


def test_wait_exits_one_when_the_job_fails(server: ServerProcess) -> None:
    job = create_json(
        server, "--display-name", "cli-fails", CONTAINER_POOL, f"--command={PY},-c,raise SystemExit(3)"
    )
    result = run_cli(server, "wait", job["name"], "--timeout", "120")
    assert result.returncode == 1, result.stderr
    assert "JOB_STATE_FAILED" in result.stdout


def test_wait_times_out_with_exit_four(server: ServerProcess) -> None:
    job = create_json(
        server,
        "--display-name",
        "cli-slow",
        CONTAINER_POOL,
        f"--command={PY},-c,import time; time.sleep(600)",
    )
    try:
        result = run_cli(server, "wait", job["name"], "--timeout", "0.5")
        assert result.returncode == 4  # issue 19: a wait timeout exits 4, apart from a failed job
        assert "timed out" in result.stderr
    finally:
        ok(run_cli(server, "cancel", job["name"]))


def test_create_with_config_yaml(server: ServerProcess, tmp_path: Path) -> None:
    config = _write(
        tmp_path / "job.yaml",
        {
            "worker_pool_specs": [
                {
                    "machine_spec": {"machine_type": "n1-standard-4"},
                    "replica_count": 1,
                    "container_spec": {
                        "image_uri": "python:3.11",
                        "command": [
                            PY,
                            "-c",
                            "import os, sys; print('cfg', os.environ['COLOR'], *sys.argv[1:])",
                        ],
                        "env": [{"name": "COLOR", "value": "red"}],
                    },
                }
            ],
            "scheduling": {"timeout": "600s"},
        },
    )
    job = create_json(
        server,
        "--display-name",
        "cli-config",
        "--config",
        str(config),
        "--args=alpha,beta",
        "--env-vars=COLOR=blue",
    )
    container = job["jobSpec"]["workerPoolSpecs"][0]["containerSpec"]
    assert container["args"] == ["alpha", "beta"]
    assert container["env"] == [{"name": "COLOR", "value": "blue"}]
    assert job["jobSpec"]["scheduling"]["timeout"] == "600s"
    ok(run_cli(server, "wait", job["name"], "--timeout", "120"))
    out = untimed(ok(run_cli(server, "stream-logs", job["name"], "--no-follow")).stdout.splitlines())
    assert ("INFO", "[workerpool0-0] cfg blue alpha beta") in out


def test_delete_a_finished_job(server: ServerProcess) -> None:
    job = create_json(server, "--display-name", "cli-delete", CONTAINER_POOL, f"--command={PY},-c,pass")
    ok(run_cli(server, "wait", job["name"], "--timeout", "120"))
    result = ok(run_cli(server, "delete", job["name"]))
    assert "Deleted CustomJob" in result.stderr
    gone = run_cli(server, "describe", job["name"])
    assert gone.returncode == 1
    assert "NOT_FOUND" in gone.stderr


def test_server_validation_error_exits_one_and_names_the_field(server: ServerProcess) -> None:
    result = run_cli(
        server,
        "create",
        *REGION,
        "--display-name",
        "cli-bad",
        "--worker-pool-spec=machine-type=n9-imaginary-4,container-image-uri=img",
        "--command=true",
        "--labels=Team=x",
    )
    assert result.returncode == 1
    assert "INVALID_ARGUMENT" in result.stderr
    assert "job_spec.worker_pool_specs[0].machine_spec.machine_type" in result.stderr
    assert "n9-imaginary-4" in result.stderr
    assert 'labels["Team"]' in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_unknown_worker_pool_spec_key_errors_clearly(server: ServerProcess) -> None:
    result = run_cli(
        server,
        "create",
        *REGION,
        "--display-name",
        "cli-typo",
        "--worker-pool-spec=machine-type=n1-standard-4,container-image=img",
    )
    assert result.returncode == 2
    assert "--worker-pool-spec" in result.stderr
    assert "unknown key [container-image]" in result.stderr
    assert "container-image-uri" in result.stderr  # the valid keys are listed
    assert "Traceback" not in result.stderr
    listed = json.loads(
        ok(run_cli(server, "list", *REGION, "--format", "json", "--filter", 'display_name="cli-typo"')).stdout
    )
    assert listed == []


def test_missing_region_and_bad_job_names(server: ServerProcess) -> None:
    result = run_cli(server, "describe", "123")
    assert result.returncode == 2 and "--region" in result.stderr
    result = run_cli(server, "describe", "123", *REGION)
    assert result.returncode == 1 and "NOT_FOUND" in result.stderr
    result = run_cli(server, "describe", "projects/p/locations/l/models/1")
    assert result.returncode == 2 and "not a CustomJob name" in result.stderr


def test_unreachable_server_is_an_error_not_a_traceback() -> None:
    result = run_cli(None, "list", *REGION, "--endpoint", "http://127.0.0.1:9")
    assert result.returncode == 1
    assert "cannot reach the Trainworks server at http://127.0.0.1:9" in result.stderr
    assert "Traceback" not in result.stderr


def test_api_key_is_sent(tmp_path: Path) -> None:
    proc = ServerProcess(home=tmp_path / "home", args=["--api-token", "s3cret"]).start()
    try:
        denied = run_cli(proc, "list", *REGION)
        assert denied.returncode == 1
        assert "PERMISSION_DENIED" in denied.stderr
        allowed = ok(run_cli(proc, "list", *REGION, "--api-key", "s3cret", "--format", "json"))
        assert json.loads(allowed.stdout) == []
    finally:
        proc.stop()
