"""`--container-runtime podman` for real: a server running replicas in containers from a private podman store.

Images are built here without any registry (busybox-static, and the running Python for package tasks). When
podman is not usable these tests fail, unless TRAINWORKS_SKIP_PODMAN=1 says to skip them.
"""

from __future__ import annotations

import json
import logging
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.kinds.custom_jobs.test_python_package import build_wheel
from tests.support.jobs import MACHINE
from tests.support.logs import replica_output
from tests.support.podman import PodmanStore, podman_store_or_skip
from tests.support.server import ServerProcess, wait_for, wait_job
from trainworks.backends.commands import podman_argv
from trainworks.backends.podman import RUNROOT_LIMIT, Podman, check_registry, image_registry, launch_env

ABSENT = "localhost/trainworks-test/absent:1"


# ---------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PodmanStore]:
    podman_store = podman_store_or_skip(tmp_path_factory.mktemp("podman"))
    try:
        podman_store.run("info", "--format", "{{.Host.OCIRuntime.Name}}")
        podman_store.build_busybox()
        yield podman_store
    finally:
        podman_store.teardown()


@pytest.fixture(scope="module")
def busybox(store: PodmanStore) -> str:
    return "localhost/trainworks-test/busybox:1"


@pytest.fixture(scope="module")
def python_image(store: PodmanStore) -> str:
    return store.build_python()


@pytest.fixture(scope="module")
def server(store: PodmanStore, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    proc = ServerProcess(
        home=tmp_path_factory.mktemp("podman-home"),
        args=["--container-runtime", "podman"],  # after ServerProcess's own `host`: the last one wins
        env={"CONTAINERS_STORAGE_CONF": str(store.storage_conf)},
    ).start()
    try:
        yield proc
    finally:
        proc.stop()


# ---------------------------------------------------------------------------------------------- helpers
def container_pool(image: str, command: list[str], args: list[str] | None = None, **env: str) -> dict:
    spec: dict[str, Any] = {"imageUri": image, "command": command}
    if args:
        spec["args"] = args
    if env:
        spec["env"] = [{"name": k, "value": v} for k, v in env.items()]
    return {"machineSpec": MACHINE, "replicaCount": "1", "containerSpec": spec}


def submit(client: httpx.Client, server: ServerProcess, *pools: dict) -> dict:
    response = client.post(
        f"/v1/{server.parent}/customJobs",
        json={"displayName": "podman", "jobSpec": {"workerPoolSpecs": pools}},
    )
    assert response.status_code == 200, response.text
    return response.json()


def run_dir(server: ServerProcess, created: dict, task: str = "workerpool0-0") -> Path:
    return server.home / "jobs" / created["name"].rsplit("/", 1)[-1] / task


def read(path: Path) -> str:
    return path.read_text() if path.exists() else ""


def container_of(server: ServerProcess, created: dict, task: str = "workerpool0-0") -> str:
    argv = json.loads((run_dir(server, created, task) / "launch.json").read_text())["argv"]
    return next(a.split("=", 1)[1] for a in argv if a.startswith("--name="))


def pid_alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] not in "ZX"


# ---------------------------------------------------------------------------------------------- pure parts
def test_podman_argv_passes_env_by_name_and_keeps_words_intact() -> None:
    pool = container_pool(
        "localhost/img:1", ["sh", "-c", "echo $0 $1", "a b"], ["--x", "$(RANK)"], SECRET="hunter2"
    )
    env = {"SECRET": "hunter2", "RANK": "0", "CONTAINERS_CONF": "job-value"}
    argv = podman_argv(
        pool, env, "trainworks-x-1-workerpool0-0", Path("/b"), explicit_env={"CONTAINERS_CONF"}
    )
    assert argv[:2] == ["podman", "run"]
    assert {"--rm", "--init", "--network=host", "--pull=never", "--name=trainworks-x-1-workerpool0-0"} <= set(
        argv
    )
    assert "--env=SECRET" in argv and "--env=RANK" in argv
    assert not any("hunter2" in a for a in argv)
    assert "--env=CONTAINERS_CONF=job-value" in argv  # podman needs that name for itself
    assert "--volume=/b:/gcs" in argv
    assert json.loads(argv[argv.index("localhost/img:1") - 1].split("=", 1)[1]) == [
        "sh",
        "-c",
        "echo $0 $1",
        "a b",
    ]
    assert argv[-3:] == ["localhost/img:1", "--x", "0"]


def test_launch_env_and_registries(tmp_path: Path) -> None:
    podman = Podman(home=tmp_path, insecure_registries=("127.0.0.1:5000",))
    env, explicit = launch_env({"PATH": "/usr/bin"}, {"A": "1", "CONTAINERS_CONF": "mine"}, podman)
    assert env["A"] == "1" and env["CONTAINERS_CONF"] == str(tmp_path / "podman" / "containers.conf")
    assert explicit == {"CONTAINERS_CONF"}
    assert podman.pullable("127.0.0.1:5000/ml/trainer:v1")
    assert not podman.pullable("docker.io/library/python:3.11") and not podman.pullable("python:3.11")
    assert image_registry("python:3.11") is None and image_registry("localhost/x") == "localhost"
    assert check_registry("http://127.0.0.1:5000/") == "127.0.0.1:5000"
    for bad in ("10.0.0.1:5000", "registry.example.com", "127.0.0.1:5000/path"):
        with pytest.raises(ValueError):
            check_registry(bad)
    podman.write_config()
    conf = (tmp_path / "podman" / "containers.conf").read_text()
    for line in (
        'runtime = "runc"',
        'cgroup_manager = "cgroupfs"',
        'events_logger = "file"',
        'netns = "host"',
    ):
        assert line in conf
    assert "nofile=" in conf and "nproc=" in conf
    registries = (tmp_path / "podman" / "registries.conf").read_text()
    assert "unqualified-search-registries = []" in registries
    assert 'location = "127.0.0.1:5000"' in registries and "insecure = true" in registries


# ---------------------------------------------------------------------------------------------- real podman
@pytest.mark.parametrize("long", [True, False])
def test_a_run_root_podman_cannot_clean_up_after_is_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, long: bool
) -> None:
    """Its clean-up refuses a run root longer than 50 characters, and each container job ends 20 s late."""
    podman_store_or_skip(tmp_path / "store").teardown()  # podman is there, or the test is skipped or fails
    run_root = Path(tempfile.mkdtemp(prefix="twpod-", dir="/tmp"))
    if long:
        run_root = run_root / ("x" * (RUNROOT_LIMIT - len(str(run_root))))
    conf = tmp_path / "storage.conf"
    storage = tmp_path / "storage"
    conf.write_text(f'[storage]\ndriver = "overlay"\ngraphroot = "{storage}"\nrunroot = "{run_root}"\n')
    monkeypatch.setenv("CONTAINERS_STORAGE_CONF", str(conf))
    try:
        with caplog.at_level(logging.WARNING, logger="trainworks.backends.podman"):
            works, message = Podman(home=tmp_path / "home", executable=shutil.which("podman")).works()
    finally:
        shutil.rmtree(run_root if not long else run_root.parent, ignore_errors=True)
        shutil.rmtree(storage, ignore_errors=True)
    assert works, message
    warned = [r.getMessage() for r in caplog.records if "run root" in r.getMessage()]
    if long:
        assert len(warned) == 1 and str(run_root) in warned[0] and "ends ~20 s late" in warned[0], warned
    else:
        assert warned == []


def test_server_runs_podman_with_its_own_configuration(server: ServerProcess) -> None:
    with server.client() as client:
        assert client.get("/healthz").json()["containerRuntime"] == "podman"
    conf = server.home / "podman" / "containers.conf"
    assert 'runtime = "runc"' in conf.read_text()
    assert (server.home / "podman" / "registries.conf").exists()
    assert "podman with runc" in server.log_path.read_text()


def test_two_replica_container_job(server: ServerProcess, store: PodmanStore, busybox: str) -> None:
    script = (
        'echo "rank=$RANK secret=$SECRET args=$*"; echo "spec=$CLUSTER_SPEC"; '
        'mkdir -p /gcs/$BUCKET; echo "from $RANK" > /gcs/$BUCKET/x-$RANK; '
        "i=0; while [ ! -e /gcs/$BUCKET/x-1 ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done"
    )
    env = {"SECRET": "hunter2", "BUCKET": "podbucket"}
    (server.home / "buckets" / "podbucket").mkdir(parents=True, exist_ok=True)  # /gcs shows existing buckets
    started = time.monotonic()
    with server.client() as client:
        created = submit(
            client,
            server,
            container_pool(busybox, ["sh", "-c", script, "trainer"], ["--epochs", "$(RANK)"], **env),
            container_pool(busybox, ["sh", "-c", script, "trainer"], **env),
        )
        done = wait_job(client, created["name"])
    elapsed = time.monotonic() - started
    primary = replica_output(run_dir(server, created))
    worker = replica_output(run_dir(server, created, "workerpool1-0"))
    assert done["state"] == "JOB_STATE_SUCCEEDED", (
        done,
        primary,
        replica_output(run_dir(server, created), "stderr"),
    )
    assert "rank=0 secret=hunter2 args=--epochs 0" in primary
    assert "rank=1 secret=hunter2 args=" in worker
    spec = json.loads(primary.split("spec=", 1)[1].splitlines()[0])
    assert set(spec["cluster"]) == {"workerpool0", "workerpool1"}
    assert spec["task"] == {"type": "workerpool0", "index": 0, "trial": ""}
    bucket = server.home / "buckets" / "podbucket"
    assert (bucket / "x-0").read_text() == "from 0\n" and (bucket / "x-1").read_text() == "from 1\n"
    for task in ("workerpool0-0", "workerpool1-0"):
        argv = json.loads((run_dir(server, created, task) / "launch.json").read_text())["argv"]
        assert argv[1] == "run" and "--env=SECRET" in argv and busybox in argv  # no --rm: inspected, then rm
        assert not any("hunter2" in a for a in argv)  # the value travels in podman's environment only
    assert json.loads(read(run_dir(server, created) / "exit.json"))["exit_code"] == 0
    # The worker may still be on its way out when the primary succeeds; teardown then stops it (143).
    assert json.loads(read(run_dir(server, created, "workerpool1-0") / "exit.json"))["exit_code"] in (0, 143)
    assert store.containers() == []
    print(f"two-replica podman job: {elapsed:.2f}s from submit to SUCCEEDED")


def test_container_exit_code_fails_the_job(server: ServerProcess, busybox: str) -> None:
    with server.client() as client:
        created = submit(client, server, container_pool(busybox, ["sh", "-c", "echo broken >&2; exit 3"]))
        done = wait_job(client, created["name"])
    assert done["state"] == "JOB_STATE_FAILED"
    assert "workerpool0-0 exited with a non-zero status of 3" in done["error"]["message"]
    assert "broken" in done["error"]["message"]


@pytest.mark.alone  # times a stop: it runs after the parallel part of `make test`, on an idle machine
def test_cancel_stops_the_container(server: ServerProcess, store: PodmanStore, busybox: str) -> None:
    with server.client() as client:
        created = submit(client, server, container_pool(busybox, ["sleep", "300"]))
        name = container_of_when_running(client, server, store, created)
        started = time.monotonic()
        assert client.post(f"/v1/{created['name']}:cancel", json={}).status_code == 200
        done = wait_job(client, created["name"])
    elapsed = time.monotonic() - started
    assert done["state"] == "JOB_STATE_CANCELLED"
    # SIGTERM reached `sleep` through podman's sig-proxy and --init: it ended by it (143), not by the SIGKILL
    # the grace period ends in (137).
    assert json.loads(read(run_dir(server, created) / "exit.json"))["exit_code"] == 143
    assert name not in store.containers() and store.containers() == []
    print(f"podman cancel (SIGTERM): {elapsed:.2f}s")


def test_cancel_escalation_removes_the_container(
    server: ServerProcess, store: PodmanStore, busybox: str
) -> None:
    script = "trap '' TERM; echo ready; sleep 300"
    with server.client() as client:
        created = submit(client, server, container_pool(busybox, ["sh", "-c", script]))
        name = container_of_when_running(client, server, store, created)
        wait_for(lambda: "ready" in replica_output(run_dir(server, created)), what="the replica to start")
        pid = int(store.run("inspect", "--format", "{{.State.Pid}}", name).strip())
        assert pid_alive(pid)
        started = time.monotonic()
        assert client.post(f"/v1/{created['name']}:cancel", json={}).status_code == 200
        done = wait_job(client, created["name"])
    elapsed = time.monotonic() - started
    assert done["state"] == "JOB_STATE_CANCELLED"
    assert elapsed >= 3  # SIGTERM was ignored; SIGKILL after the grace period killed the podman client
    # ... which alone would leave the container running: the controller removed it before the job ended.
    assert store.containers() == []
    assert not pid_alive(pid)
    print(f"podman cancel (SIGKILL escalation + podman rm): {elapsed:.2f}s")


def container_of_when_running(
    client: httpx.Client, server: ServerProcess, store: PodmanStore, created: dict
) -> str:
    wait_job(client, created["name"], {"JOB_STATE_RUNNING"})
    wait_for(lambda: (run_dir(server, created) / "launch.json").exists(), what="the replica to launch")
    name = container_of(server, created)
    wait_for(lambda: name in store.containers(), timeout=30, what=f"container {name}")
    return name


@pytest.mark.parametrize("kind", ["containerSpec", "pythonPackageSpec"])
def test_missing_image_fails_clearly(server: ServerProcess, store: PodmanStore, kind: str) -> None:
    if kind == "containerSpec":
        pool = container_pool(ABSENT, ["true"])
    else:
        build_wheel(server.home / "buckets" / "pkgs" / "dist")
        wheel = "gs://pkgs/dist/trainer_pkg-0.1-py3-none-any.whl"
        spec = {"executorImageUri": ABSENT, "packageUris": [wheel], "pythonModule": "trainer_pkg.task"}
        pool = {"machineSpec": MACHINE, "replicaCount": "1", "pythonPackageSpec": spec}
    started = time.monotonic()
    with server.client() as client:
        done = wait_job(client, submit(client, server, pool)["name"])
    assert done["state"] == "JOB_STATE_FAILED"
    assert done["error"]["code"] == 9  # FAILED_PRECONDITION
    message = done["error"]["message"]
    assert f"the container image '{ABSENT}' is not present" in message, message
    assert time.monotonic() - started < 10  # no pull was attempted
    assert store.containers() == []


def test_python_package_runs_in_its_executor_image(
    server: ServerProcess, store: PodmanStore, python_image: str
) -> None:
    build_wheel(server.home / "buckets" / "pkgs" / "dist")
    spec = {
        "executorImageUri": python_image,
        "packageUris": ["gs://pkgs/dist/trainer_pkg-0.1-py3-none-any.whl"],
        "pythonModule": "trainer_pkg.task",
        "args": ["--lr", "0.1"],
        # PIP_NO_INDEX: pip must never reach for a package index from a test
        "env": [
            {"name": "GREETING", "value": "hi $(CLOUD_ML_JOB_ID)"},
            {"name": "PIP_NO_INDEX", "value": "1"},
        ],
    }
    pool = {"machineSpec": MACHINE, "replicaCount": "1", "pythonPackageSpec": spec}
    with server.client() as client:
        created = submit(client, server, pool)
        done = wait_job(client, created["name"])
    stdout = replica_output(run_dir(server, created))
    assert done["state"] == "JOB_STATE_SUCCEEDED", (
        done,
        stdout,
        replica_output(run_dir(server, created), "stderr"),
    )
    job_id = created["name"].rsplit("/", 1)[-1]
    assert f'"argv": ["--lr", "0.1"], "job": "{job_id}", "greeting": "hi {job_id}"' in stdout
    argv = json.loads((run_dir(server, created) / "launch.json").read_text())["argv"]
    assert python_image in argv and any(a.endswith(":/trainworks/packages:ro") for a in argv)
    assert not (server.home / "cache" / "venvs").exists()  # nothing was installed on the host
    assert store.containers() == []
