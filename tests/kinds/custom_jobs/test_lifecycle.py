"""Job lifecycle against a real server process: states, times, errors, cancel, timeout, teardown."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import httpx

from tests.support.jobs import job, python_pool
from tests.support.logs import replica_output
from tests.support.server import ServerProcess, wait_for, wait_job

SLEEP = "import time; time.sleep(120)"


def create(client: httpx.Client, server: ServerProcess, body: dict) -> dict:
    response = client.post(f"/v1/{server.parent}/customJobs", json=body)
    assert response.status_code == 200, response.text
    return response.json()


def job_dir(server: ServerProcess, created: dict) -> Path:
    return server.home / "jobs" / created["name"].rsplit("/", 1)[-1]


def replica_pids(server: ServerProcess, created: dict) -> list[int]:
    pids = []
    for shim in job_dir(server, created).glob("*/shim.json"):
        pids.append(json.loads(shim.read_text())["pid"])
    return pids


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


def test_single_replica_job_succeeds_with_times_in_order(server: ServerProcess) -> None:
    with server.client() as client:
        created = create(client, server, job(python_pool("print('hello from the primary')")))
        assert created["state"] == "JOB_STATE_QUEUED"
        assert "startTime" not in created and "endTime" not in created
        done = wait_job(client, created["name"])
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert "error" not in done
    assert done["createTime"] <= done["startTime"] <= done["endTime"] <= done["updateTime"]
    stdout = replica_output(job_dir(server, created) / "workerpool0-0")
    assert "hello from the primary" in stdout


def test_failing_worker_fails_job_and_stops_other_replicas(server: ServerProcess) -> None:
    fail = "import sys; print('bad input', file=sys.stderr); sys.exit(3)"
    with server.client() as client:
        created = create(client, server, job(python_pool(SLEEP), python_pool(fail)))
        done = wait_job(client, created["name"])
    assert done["state"] == "JOB_STATE_FAILED"
    assert done["error"]["code"] == 3
    message = done["error"]["message"]
    assert "workerpool1-0 exited with a non-zero status of 3" in message
    assert "bad input" in message
    wait_for(lambda: not any(alive(p) for p in replica_pids(server, created)), what="replicas to stop")


def test_primary_failure_reports_signal(server: ServerProcess) -> None:
    code = "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"
    with server.client() as client:
        done = wait_job(client, create(client, server, job(python_pool(code)))["name"])
    assert done["state"] == "JOB_STATE_FAILED"
    assert "non-zero status of 134" in done["error"]["message"]
    assert "SIGABRT" in done["error"]["message"]


def test_worker_exiting_early_with_zero_does_not_end_job(server: ServerProcess, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    primary = (
        "import os, time, pathlib\n"
        f"gate = pathlib.Path({str(gate)!r})\n"
        "deadline = time.time() + 60\n"
        "while not gate.exists() and time.time() < deadline: time.sleep(0.02)\n"
    )
    with server.client() as client:
        created = create(client, server, job(python_pool(primary), python_pool("pass")))
        wait_for(
            lambda: (job_dir(server, created) / "workerpool1-0" / "exit.json").exists(), what="worker to exit"
        )
        assert client.get(f"/v1/{created['name']}").json()["state"] == "JOB_STATE_RUNNING"
        gate.write_text("go")
        assert wait_job(client, created["name"])["state"] == "JOB_STATE_SUCCEEDED"


def test_cancel_sends_sigterm_then_job_is_cancelled(server: ServerProcess, tmp_path: Path) -> None:
    marker = tmp_path / "got-sigterm"
    code = (
        "import signal, sys, time, pathlib\n"
        f"def bye(*_): pathlib.Path({str(marker)!r}).write_text('term'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, bye)\n"
        "print('ready', flush=True)\n"
        "time.sleep(120)\n"
    )
    with server.client() as client:
        created = create(client, server, job(python_pool(code)))
        name = created["name"]
        wait_job(client, name, {"JOB_STATE_RUNNING"})
        replica = job_dir(server, created) / "workerpool0-0"
        wait_for(lambda: "ready" in replica_output(replica), what="replica to be ready")
        response = client.post(f"/v1/{name}:cancel", json={})
        assert response.status_code == 200 and response.json() == {}
        done = wait_job(client, name)
    assert done["state"] == "JOB_STATE_CANCELLED"
    assert done["error"]["code"] == 1
    assert marker.read_text() == "term"


def test_cancel_escalates_to_sigkill_after_grace(server: ServerProcess) -> None:
    code = (
        "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ready', flush=True)\ntime.sleep(120)"
    )
    with server.client() as client:
        created = create(client, server, job(python_pool(code)))
        name = created["name"]
        wait_job(client, name, {"JOB_STATE_RUNNING"})
        replica = job_dir(server, created) / "workerpool0-0"
        wait_for(lambda: "ready" in replica_output(replica), what="replica to be ready")
        client.post(f"/v1/{name}:cancel", json={})
        assert client.get(f"/v1/{name}").json()["state"] == "JOB_STATE_CANCELLING"
        done = wait_job(client, name, timeout=60)
    assert done["state"] == "JOB_STATE_CANCELLED"
    assert not any(alive(p) for p in replica_pids(server, created))


def test_cancel_of_finished_job_is_failed_precondition(server: ServerProcess) -> None:
    with server.client() as client:
        name = create(client, server, job(python_pool("pass")))["name"]
        wait_job(client, name)
        response = client.post(f"/v1/{name}:cancel", json={})
    assert response.status_code == 400
    assert response.json()["error"]["status"] == "FAILED_PRECONDITION"


def test_timeout_ends_job_as_failed(server: ServerProcess) -> None:
    with server.client() as client:
        body = job(python_pool(SLEEP), scheduling={"timeout": "1s"})
        done = wait_job(client, create(client, server, body)["name"], timeout=60)
    assert done["state"] == "JOB_STATE_FAILED"
    assert done["error"]["code"] == 4
    assert "timeout of 1s" in done["error"]["message"]


def test_container_without_command_fails_clearly_in_host_mode(server: ServerProcess) -> None:
    body = job(
        {
            "machineSpec": {"machineType": "n1-standard-4"},
            "replicaCount": "1",
            "containerSpec": {"imageUri": "example.com/trainer:latest"},
        }
    )
    with server.client() as client:
        done = wait_job(client, create(client, server, body)["name"])
    assert done["state"] == "JOB_STATE_FAILED"
    assert "host mode" in done["error"]["message"] and "command" in done["error"]["message"]


def test_missing_program_fails_with_its_name(server: ServerProcess) -> None:
    body = job(
        {
            "machineSpec": {"machineType": "n1-standard-4"},
            "replicaCount": "1",
            "containerSpec": {"imageUri": "x", "command": ["/nonexistent/train-binary"]},
        }
    )
    with server.client() as client:
        done = wait_job(client, create(client, server, body)["name"])
    assert done["state"] == "JOB_STATE_FAILED"
    assert "/nonexistent/train-binary" in done["error"]["message"]


def test_replicas_are_process_group_leaders(server: ServerProcess) -> None:
    code = "import os; print(os.getpgid(0) == os.getpgid(os.getppid()), os.getsid(0) == os.getpgid(0))"
    with server.client() as client:
        created = create(client, server, job(python_pool(code)))
        wait_job(client, created["name"])
    assert replica_output(job_dir(server, created) / "workerpool0-0").split() == ["True", "True"]


def test_replica_writes_to_gcs_mount(server: ServerProcess) -> None:
    code = (
        "import os, pathlib\n"
        "d = pathlib.Path('/gcs/out-bucket/run1')\n"
        "d.mkdir(parents=True, exist_ok=True)\n"
        "(d / 'model.txt').write_text(os.environ['AIP_MODEL_DIR'])\n"
    )
    body = job(python_pool(code), baseOutputDirectory={"outputUriPrefix": "gs://out-bucket/run1"})
    with server.client() as client:
        done = wait_job(client, create(client, server, body)["name"])
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert (
        server.home / "buckets" / "out-bucket" / "run1" / "model.txt"
    ).read_text() == "gs://out-bucket/run1/model/"
    assert not Path("/gcs/out-bucket").exists() or os.path.ismount("/gcs") is False


def test_logs_endpoint_reads_and_follows(server: ServerProcess) -> None:
    code = (
        "import sys, time\nfor i in range(3):\n    print('line', i, flush=True); time.sleep(0.05)\n"
        "print('oops', file=sys.stderr)"
    )
    with server.client() as client:
        name = create(client, server, job(python_pool(code)))["name"]
        with client.stream(
            "GET", f"/trainworks/v1/{name}/logs", params={"follow": "true"}, timeout=None
        ) as r:
            assert r.status_code == 200
            entries = [json.loads(line) for line in r.iter_lines() if line]
        assert client.get(f"/v1/{name}").json()["state"] == "JOB_STATE_SUCCEEDED"
        again = client.get(f"/trainworks/v1/{name}/logs", params={"task": "workerpool0-0"})
    texts = [(e["task"], e["text"]) for e in entries]
    assert [t for task, t in texts if task == "workerpool0-0"][:3] == ["line 0", "line 1", "line 2"]
    assert ("workerpool0-0", "oops") in texts
    assert any(e["task"] == "service" and e["text"] == "Job is running." for e in entries)
    stderr = [e for e in entries if e["text"] == "oops"][0]
    assert stderr["severity"] == "ERROR"
    replayed = [json.loads(line) for line in again.text.splitlines()]
    assert {e["task"] for e in replayed} <= {"workerpool0-0", "service"}
    assert len([e for e in replayed if e["task"] == "workerpool0-0"]) == 4


def test_logs_of_unknown_job_is_404(server: ServerProcess) -> None:
    with server.client() as client:
        response = client.get(f"/trainworks/v1/{server.parent}/customJobs/123/logs")
    assert response.status_code == 404
    assert response.json()["error"]["status"] == "NOT_FOUND"


def test_update_time_moves_with_state(server: ServerProcess) -> None:
    with server.client() as client:
        created = create(client, server, job(python_pool("pass")))
        done = wait_job(client, created["name"])
    assert done["updateTime"] > created["updateTime"]
    assert time.time() > 0


def test_env_values_stay_out_of_files_and_argv(server: ServerProcess) -> None:
    code = "import os; print(os.environ['API_SECRET'][::-1])"  # the value itself must not be in the code
    with server.client() as client:
        created = create(client, server, job(python_pool(code, env={"API_SECRET": "hunter2"})))
        wait_job(client, created["name"])
    replica = job_dir(server, created) / "workerpool0-0"
    assert replica_output(replica).strip() == "2retnuh"
    launch = json.loads((replica / "launch.json").read_text())
    assert "API_SECRET" in launch["env_names"]
    assert "hunter2" not in (replica / "launch.json").read_text()
    assert not any("hunter2" in arg for arg in launch["argv"])
