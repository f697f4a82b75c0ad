"""Server crashes lose nothing: replicas are re-adopted, exits while down are recorded, lost ones fail."""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from tests.support.jobs import job, python_pool
from tests.support.logs import replica_output
from tests.support.server import ServerProcess, wait_for, wait_job

GATED = (
    "import pathlib, sys, time\n"
    "gate = pathlib.Path(sys.argv[1])\n"
    "print('waiting', flush=True)\n"
    "deadline = time.time() + 120\n"
    "while not gate.exists() and time.time() < deadline: time.sleep(0.02)\n"
    "print('released', flush=True)\n"
)


def _start(server: ServerProcess, gate: Path, **spec: object) -> tuple[str, Path]:
    body = job(python_pool(GATED, args=[str(gate)]), python_pool(GATED, args=[str(gate)]), **spec)
    with server.client() as client:
        created = client.post(f"/v1/{server.parent}/customJobs", json=body).json()
        wait_job(client, created["name"], {"JOB_STATE_RUNNING"})
    job_dir = server.home / "jobs" / created["name"].rsplit("/", 1)[-1]
    for task in ("workerpool0-0", "workerpool1-0"):
        replica = job_dir / task
        wait_for(lambda r=replica: "waiting" in replica_output(r), what=f"{task} to start")
    return created["name"], job_dir


def _shim_pids(job_dir: Path) -> dict[str, int]:
    return {p.parent.name: json.loads(p.read_text())["pid"] for p in job_dir.glob("*/shim.json")}


# Numbered lines in three stages (stdout, and every 7th on stderr too); before the second and the third it
# waits for a gate file (argv: lines per stage, gate 2, gate 3).
STAGED = (
    "import pathlib, sys, time\n"
    "per_stage = int(sys.argv[1])\n"
    "for stage, gate in enumerate([None, *sys.argv[2:]]):\n"
    "    deadline = time.time() + 120\n"
    "    while gate and not pathlib.Path(gate).exists() and time.time() < deadline: time.sleep(0.02)\n"
    "    for i in range(stage * per_stage, (stage + 1) * per_stage):\n"
    "        print(f'line {i:06d}', flush=i % 10 == 0)\n"
    "        if i % 7 == 0: print(f'err {i:06d}', file=sys.stderr)\n"
    "    sys.stdout.flush()\n"
)


def test_replicas_survive_server_kill_and_are_readopted(fresh_server: ServerProcess, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    name, job_dir = _start(fresh_server, gate)
    before = _shim_pids(job_dir)
    fresh_server.stop(signal.SIGKILL)
    for pid in before.values():
        os.kill(pid, 0)  # still running without the server
    gate.write_text("go")  # the replicas finish while the server is down
    wait_for(lambda: all((job_dir / t / "exit.json").exists() for t in before), what="replicas to finish")
    fresh_server.start()
    with fresh_server.client() as client:
        done = wait_job(client, name)
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert _shim_pids(job_dir) == before  # adopted, not relaunched
    assert replica_output(job_dir / "workerpool0-0").count("waiting") == 1


def test_a_server_killed_mid_job_loses_no_line(fresh_server: ServerProcess, tmp_path: Path) -> None:
    """The replica's supervisor captures its output, not the server: what it writes while no server runs is
    in its log, once, in order, with what came before and after."""
    per_stage = 3000
    down, up = tmp_path / "server-down", tmp_path / "server-up"
    body = job(python_pool(STAGED, args=[str(per_stage), str(down), str(up)]))
    with fresh_server.client() as client:
        name = client.post(f"/v1/{fresh_server.parent}/customJobs", json=body).json()["name"]
        wait_job(client, name, {"JOB_STATE_RUNNING"})
    job_dir = fresh_server.home / "jobs" / name.rsplit("/", 1)[-1]
    replica = job_dir / "workerpool0-0"

    def written(last: int) -> bool:
        return f"line {last:06d}\n" in replica_output(replica)

    wait_for(lambda: written(per_stage - 1), what="stage 1 in the log")
    supervisor = _shim_pids(job_dir)["workerpool0-0"]
    fresh_server.stop(signal.SIGKILL)
    down.write_text("go")
    wait_for(lambda: written(2 * per_stage - 1), what="stage 2, written while no server runs")
    fresh_server.start()
    up.write_text("go")
    with fresh_server.client() as client:
        done = wait_job(client, name)
        answer = client.get(f"/trainworks/v1/{name}/logs", params={"task": "workerpool0-0"})
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert _shim_pids(job_dir)["workerpool0-0"] == supervisor  # one replica throughout, adopted
    lines = 3 * per_stage
    out = [f"line {i:06d}" for i in range(lines)]
    err = [f"err {i:06d}" for i in range(0, lines, 7)]
    # In the replica's folder, and through the logs endpoint, in time order.
    assert replica_output(replica) == "".join(f"{line}\n" for line in out)
    assert replica_output(replica, "stderr") == "".join(f"{line}\n" for line in err)
    assert answer.status_code == 200, answer.text
    entries = [json.loads(line) for line in answer.text.splitlines()]
    replica_entries = [e for e in entries if e["task"] == "workerpool0-0"]
    assert [e["text"] for e in replica_entries if e["stream"] == "stdout"] == out
    assert [e["text"] for e in replica_entries if e["stream"] == "stderr"] == err
    assert len(replica_entries) == len(out) + len(err)
    ids = [e["insertId"] for e in entries]  # `<ns>.<task>.<offset>`: in the log's order, each once
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_running_job_continues_after_restart(fresh_server: ServerProcess, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    name, job_dir = _start(fresh_server, gate)
    fresh_server.stop(signal.SIGKILL)
    fresh_server.start()
    with fresh_server.client() as client:
        assert client.get(f"/v1/{name}").json()["state"] == "JOB_STATE_RUNNING"
        gate.write_text("go")
        assert wait_job(client, name)["state"] == "JOB_STATE_SUCCEEDED"


def test_replica_lost_while_server_down_restarts_alone(fresh_server: ServerProcess, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    name, job_dir = _start(fresh_server, gate)
    pids = _shim_pids(job_dir)
    fresh_server.stop(signal.SIGKILL)
    os.killpg(pids["workerpool1-0"], signal.SIGKILL)  # supervisor and replica die without a record
    fresh_server.start()
    wait_for(
        lambda: (p := _shim_pids(job_dir).get("workerpool1-0")) != pids["workerpool1-0"] and p,
        what="the lost worker to be started again",
    )
    assert _shim_pids(job_dir)["workerpool0-0"] == pids["workerpool0-0"]  # the primary kept running
    worker = job_dir / "workerpool1-0"
    wait_for(lambda: replica_output(worker).count("waiting") == 2, what="the worker to run again")
    gate.write_text("go")
    with fresh_server.client() as client:
        assert wait_job(client, name)["state"] == "JOB_STATE_SUCCEEDED"


def test_replica_lost_with_retries_disabled_fails_the_job(
    fresh_server: ServerProcess, tmp_path: Path
) -> None:
    gate = tmp_path / "gate"
    name, job_dir = _start(fresh_server, gate, scheduling={"disableRetries": True})
    pids = _shim_pids(job_dir)
    fresh_server.stop(signal.SIGKILL)
    os.killpg(pids["workerpool1-0"], signal.SIGKILL)  # supervisor and replica die without a record
    fresh_server.start()
    with fresh_server.client() as client:
        done = wait_job(client, name)
        assert done["state"] == "JOB_STATE_FAILED"
        assert done["error"]["code"] == 13
        assert "workerpool1-0 was lost" in done["error"]["message"]
    gate.write_text("go")


def test_replica_started_but_not_recorded_is_adopted_not_restarted(tmp_path: Path) -> None:
    """A crash between starting a replica and recording it must not start the replica twice."""
    from trainworks.backends.base import LaunchRequest
    from trainworks.backends.local import LocalBackend

    backend = LocalBackend()
    run_dir = tmp_path / "workerpool0-0"
    gate = tmp_path / "gate"
    request = LaunchRequest(
        job_id="1",
        task_name="workerpool0-0",
        argv=[sys.executable, "-c", GATED, str(gate)],
        env={"PATH": os.environ["PATH"]},
        run_dir=run_dir,
    )
    handle = backend.launch(request)
    found = wait_for(lambda: backend.find(run_dir), what="the supervisor's record")
    assert found == handle
    gate.write_text("go")
    wait_for(lambda: (run_dir / "exit.json").exists(), what="the replica to finish")
    finished = backend.find(run_dir)
    assert finished is not None and backend.poll(finished, run_dir).exit_code == 0
    assert backend.find(tmp_path / "elsewhere") is None
