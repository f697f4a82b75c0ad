"""CustomJobs on a real Slurm cluster (4 emulated nodes x 2 CPUs) through a real server process.

The server has the cluster (--slurm-conf) but runs jobs locally by default: these jobs are labelled
`trainworks-executor: slurm`. Each job is one (het) Slurm job; every wait has a deadline.
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.jobs import job, python_pool
from tests.support.logs import assert_ddp_replicas_agree, replica_output, service_text
from tests.support.paths import EXAMPLES
from tests.support.server import ServerProcess, wait_for, wait_job
from tests.support.slurm import SlurmTestCluster, slurm_test_cluster
from trainworks.slurm.jobs import SlurmJob, SlurmPhase, parse_squeue

# Starts Slurm daemons: one such module at a time across test workers (tests/conftest.py).
pytestmark = pytest.mark.slurm_daemons

EXAMPLE = EXAMPLES / "ddp_train.py"
SLURM = {"trainworks-executor": "slurm"}
SLEEP = "import time; time.sleep(300)"


@pytest.fixture(scope="module")
def cluster() -> Iterator[SlurmTestCluster]:
    # Not under pytest's tmp dirs: munged wants every folder above its socket world-executable.
    base = Path(tempfile.mkdtemp(prefix="trainworks-slurm-"))
    base.chmod(0o755)
    try:
        with slurm_test_cluster(base, nodes=4, cpus=2) as running:
            yield running
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def slurm_server(
    cluster: SlurmTestCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("home")
    proc = ServerProcess(home=home, args=["--slurm-conf", str(cluster.conf)]).start()
    try:
        yield proc
    finally:
        proc.stop()


def create(client: httpx.Client, server: ServerProcess, body: dict[str, Any]) -> str:
    response = client.post(f"/v1/{server.parent}/customJobs", json={**body, "labels": SLURM})
    assert response.status_code == 200, response.text
    return str(response.json()["name"])


def slurm_job(cluster: SlurmTestCluster, name: str, attempt: int = 0) -> list[SlurmJob]:
    """The Slurm components (het offset order) of a CustomJob's attempt."""
    suffix = f"-{name.rsplit('/', 1)[-1]}-a{attempt}"
    jobs = parse_squeue(json.loads(cluster.run("squeue", "--json").stdout))
    return sorted((j for j in jobs if j.name.endswith(suffix)), key=lambda j: j.het_offset)


def state(client: httpx.Client, name: str) -> str:
    return str(client.get(f"/v1/{name}").json()["state"])


def logs(client: httpx.Client, name: str) -> list[dict[str, Any]]:
    response = client.get(f"/trainworks/v1/{name}/logs")
    assert response.status_code == 200, response.text
    return [json.loads(line) for line in response.text.splitlines() if line]


@pytest.fixture(scope="module", autouse=True)
def time_limited(slurm_server: ServerProcess, cluster: SlurmTestCluster) -> Iterator[tuple[str, SlurmJob]]:
    """A job that Slurm's time limit ends: started first, checked by the last test. Its limit is cut to 0
    (Slurm's limits are whole minutes), so Slurm ends it at its next time-limit check (every 30 s), while the
    other tests run on the 3 other nodes."""
    body = job(python_pool(SLEEP), name="time-limited", scheduling={"timeout": "600s"})
    with slurm_server.client() as client:
        name = create(client, slurm_server, body)
        wait_job(client, name, {"JOB_STATE_RUNNING"}, timeout=30)
    (component,) = slurm_job(cluster, name)
    cluster.run("scontrol", "update", f"JobId={component.job_id}", "TimeLimit=0")
    yield name, component


def test_three_replicas_run_as_one_het_job_with_a_consistent_contract(
    slurm_server: ServerProcess, cluster: SlurmTestCluster
) -> None:
    keys = (
        "CLUSTER_SPEC",
        "TF_CONFIG",
        "RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "SLURMD_NODENAME",
    )
    show = (
        f"import json, os; print('ENV ' + json.dumps({{k: os.environ.get(k) for k in {keys!r}}}), flush=True)"
    )
    # The primary waits (with a deadline) for both workers' output in their logs (backends/capture.py's
    # segment files): its exit ends the job and stops them.
    primary = (
        show + "\nimport glob, time\ndeadline = time.time() + 30\n"
        "while time.time() < deadline and sum(b'ENV' in open(p, 'rb').read() "
        "for p in glob.glob('../workerpool1-*/.trainworks-log/*.entries')) < 2:\n    time.sleep(0.05)"
    )
    with slurm_server.client() as client:
        name = create(client, slurm_server, job(python_pool(primary), python_pool(show, replicas=2)))
        done = wait_job(client, name, timeout=60)
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        entries = logs(client, name)
    seen = {
        e["task"]: json.loads(e["text"][4:])
        for e in entries
        if e["task"] != "service" and e["text"][:4] == "ENV "
    }
    assert sorted(seen) == ["workerpool0-0", "workerpool1-0", "workerpool1-1"]
    specs = {task: json.loads(env["CLUSTER_SPEC"]) for task, env in seen.items()}
    tf = {task: json.loads(env["TF_CONFIG"]) for task, env in seen.items()}
    cluster_spec = specs["workerpool0-0"]["cluster"]
    assert list(cluster_spec) == ["workerpool0", "workerpool1"] and len(cluster_spec["workerpool1"]) == 2
    assert all(spec["cluster"] == cluster_spec for spec in specs.values())
    assert all(
        t["cluster"] == {"chief": cluster_spec["workerpool0"], "worker": cluster_spec["workerpool1"]}
        for t in tf.values()
    )
    for task, spec in specs.items():
        assert f"{spec['task']['type']}-{spec['task']['index']}" == task
    assert [seen[t]["RANK"] for t in sorted(seen)] == ["0", "1", "2"]
    assert {seen[t]["WORLD_SIZE"] for t in seen} == {"3"}
    assert {f"{seen[t]['MASTER_ADDR']}:{seen[t]['MASTER_PORT']}" for t in seen} == set(
        cluster_spec["workerpool0"]
    )
    nodes = [seen[t]["SLURMD_NODENAME"] for t in sorted(seen)]
    assert len(set(nodes)) == 3, nodes  # one node per replica
    components = slurm_job(cluster, name)  # one het job: a component per worker pool
    assert [(c.leader, c.het_offset) for c in components] == [
        (components[0].job_id, 0),
        (components[0].job_id, 1),
    ]
    assert [
        len(cluster.run("scontrol", "show", "hostnames", c.nodes).stdout.split()) for c in components
    ] == [1, 2]
    assert any("Submitted as Slurm job" in e["text"] for e in entries if e["task"] == "service")


def test_failing_replica_fails_the_job_with_its_exit_code(
    slurm_server: ServerProcess, cluster: SlurmTestCluster
) -> None:
    fail = "import sys; print('bad input', file=sys.stderr); sys.exit(3)"
    with slurm_server.client() as client:
        name = create(client, slurm_server, job(python_pool(SLEEP), python_pool(fail)))
        done = wait_job(client, name, timeout=60)
    assert done["state"] == "JOB_STATE_FAILED", done
    assert done["error"]["code"] == 3
    assert "workerpool1-0 exited with a non-zero status of 3" in done["error"]["message"]
    assert "bad input" in done["error"]["message"]
    # The sleeping primary was stopped with the rest of the Slurm job.
    wait_for(lambda: all(c.phase.ended for c in slurm_job(cluster, name)), timeout=30, what="Slurm job end")


def test_cancel_uses_scancel_and_the_slurm_job_ends_cancelled(
    slurm_server: ServerProcess, cluster: SlurmTestCluster
) -> None:
    with slurm_server.client() as client:
        name = create(client, slurm_server, job(python_pool(SLEEP), python_pool(SLEEP)))
        wait_job(client, name, {"JOB_STATE_RUNNING"}, timeout=30)
        assert client.post(f"/v1/{name}:cancel", json={}).status_code == 200
        done = wait_job(client, name, timeout=30)
    assert done["state"] == "JOB_STATE_CANCELLED", done
    wait_for(
        lambda: [c.state for c in slurm_job(cluster, name)] == ["CANCELLED", "CANCELLED"],
        timeout=30,
        what="squeue to show the Slurm job CANCELLED",
    )


def test_job_queued_behind_a_full_cluster_stays_pending_with_slurms_reason(
    slurm_server: ServerProcess, cluster: SlurmTestCluster
) -> None:
    def node_states() -> list[str]:
        return cluster.run("sinfo", "-h", "-N", "-o", "%T").stdout.split()

    # Earlier jobs' nodes first go back to idle; then one blocker takes every idle node.
    wait_for(lambda: set(node_states()) <= {"idle", "allocated"}, timeout=30, what="nodes to settle")
    idle = node_states().count("idle")
    with slurm_server.client() as client:
        workers = [python_pool(SLEEP, replicas=idle - 1)] if idle > 1 else []
        blocker = create(client, slurm_server, job(python_pool(SLEEP), *workers, name="blocker"))
        wait_job(client, blocker, {"JOB_STATE_RUNNING"}, timeout=30)
        assert "idle" not in node_states()
        # Two nodes each: more than the time-limited job gives back when Slurm ends it meanwhile.
        two = (python_pool("print('finally')"), python_pool("print('worker')"))
        waiting = create(client, slurm_server, job(*two, name="waiting"))

        def reason() -> str | None:
            texts = [e["text"] for e in logs(client, waiting) if e["task"] == "service"]
            return next((t for t in texts if "(Resources)" in t or "(Priority)" in t), None)

        message = wait_for(reason, timeout=30, what="Slurm's pending reason")
        assert message.startswith("Waiting for the job to start: Slurm job"), message
        assert state(client, waiting) == "JOB_STATE_PENDING"
        assert [c.state for c in slurm_job(cluster, waiting)] == ["PENDING", "PENDING"]
        # Cancelled while queued: scancel takes it out of the queue.
        doomed = create(client, slurm_server, job(*two, name="doomed"))
        wait_for(lambda: slurm_job(cluster, doomed), timeout=30, what="the job to reach Slurm")
        client.post(f"/v1/{doomed}:cancel", json={})
        assert wait_job(client, doomed, timeout=30)["state"] == "JOB_STATE_CANCELLED"
        assert [c.state for c in slurm_job(cluster, doomed)] == ["CANCELLED", "CANCELLED"]
        # Once the blocker is gone the waiting job runs.
        client.post(f"/v1/{blocker}:cancel", json={})
        done = wait_job(client, waiting, timeout=60)
        assert done["state"] == "JOB_STATE_SUCCEEDED", done


def test_requeue_is_a_preemption_and_the_job_restarts(
    slurm_server: ServerProcess, cluster: SlurmTestCluster, tmp_path: Path
) -> None:
    # Each replica sleeps on its first run and exits at once when run again.
    code = (
        "import json, os, pathlib, time\n"
        "t = json.loads(os.environ['CLUSTER_SPEC'])['task']\n"
        "mark = pathlib.Path(os.environ['MARKS']) / f\"{t['type']}-{t['index']}\"\n"
        "first = not mark.exists()\nmark.touch()\n"
        "print('first run' if first else 'run again', flush=True)\n"
        "time.sleep(300 if first else 0)"
    )
    env = {"MARKS": str(tmp_path)}
    with slurm_server.client() as client:
        name = create(client, slurm_server, job(python_pool(code, env=env), python_pool(code, env=env)))
        wait_job(client, name, {"JOB_STATE_RUNNING"}, timeout=30)
        wait_for(lambda: len(list(tmp_path.iterdir())) == 2, timeout=30, what="both replicas to start")
        first = slurm_job(cluster, name)
        cluster.run("scontrol", "requeue", str(first[0].leader))
        done = wait_job(client, name, timeout=60)
        status = client.get(f"/trainworks/v1/{name}/status").json()
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert status["attempt"] == 1
    assert [r["kind"] for r in status["restarts"]] == ["preemption"]
    assert f"Slurm requeued job {first[0].leader}" in status["restarts"][0]["reason"]
    # The requeued Slurm job was removed rather than run again; the new attempt is a new Slurm job.
    again = slurm_job(cluster, name)
    assert [(c.state, c.restart_count) for c in again] == [("CANCELLED", 1), ("CANCELLED", 1)]
    assert slurm_job(cluster, name, attempt=1)[0].leader != first[0].leader


def test_ddp_training_on_slurm_ends_with_identical_weights(
    slurm_server: ServerProcess, cluster: SlurmTestCluster
) -> None:
    container = {
        "imageUri": "pytorch:cpu",
        "command": [sys.executable, str(EXAMPLE)],
        "args": ["--epochs", "30"],
    }
    pool = {"machineSpec": {"machineType": "n1-standard-4"}, "containerSpec": container}
    body = job(
        {**pool, "replicaCount": "1"},
        {**pool, "replicaCount": "1"},
        name="ddp",
        baseOutputDirectory={"outputUriPrefix": "gs://slurm-ddp/run"},
    )
    with slurm_server.client() as client:
        name = create(client, slurm_server, body)
        done = wait_job(client, name, timeout=120)
    job_dir = slurm_server.home / "jobs" / name.rsplit("/", 1)[-1]
    assert done["state"] == "JOB_STATE_SUCCEEDED", service_text(job_dir) + replica_output(
        job_dir / "workerpool0-0", "stderr"
    )
    model = slurm_server.home / "buckets" / "slurm-ddp" / "run" / "model"
    result = json.loads((model / "result.json").read_text())  # written through /gcs inside the Slurm task
    assert result["world_size"] == 2
    assert abs(result["weight"] - 3.0) < 0.05 and abs(result["bias"] + 2.0) < 0.05
    assert "rank 1 of 2" in replica_output(job_dir / "workerpool1-0")
    assert_ddp_replicas_agree(job_dir)
    nodes = {
        json.loads((job_dir / t / "task.json").read_text())["node"]
        for t in ("workerpool0-0", "workerpool1-0")
    }
    assert len(nodes) == 2


def test_slurm_time_limit_is_the_jobs_timeout_failure(
    slurm_server: ServerProcess, cluster: SlurmTestCluster, time_limited: tuple[str, SlurmJob]
) -> None:
    name, component = time_limited
    with slurm_server.client() as client:
        done = wait_job(client, name, timeout=120)
    assert done["state"] == "JOB_STATE_FAILED", done
    assert done["error"]["code"] == 4  # DEADLINE_EXCEEDED, as the server's own timeout
    assert "timeout" in done["error"]["message"] and "time limit" in done["error"]["message"]
    # Slurm ended it for its time limit: TIMEOUT, or COMPLETING with the reason TimeLimit while its
    # processes are still being reaped (the job may end here before squeue moves on).
    assert [c.phase for c in slurm_job(cluster, name)] == [SlurmPhase.TIMEOUT]
