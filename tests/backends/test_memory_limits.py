"""Replica memory limits (backends/memory_limits.py): a memory cgroup per host replica, sized from its machine
type times `serve --replica-memory-scale`.

A real server with a scale that makes an n1-standard-4 replica's limit about 150 MiB: a replica that
allocates beyond it fails the job with the documented out-of-memory error while the server keeps serving,
and its cgroup is gone afterwards; a replica within it succeeds, its limit visible on its cgroup while it
runs. After a server restart, the cgroup of a replica whose supervisor died is removed, and so is a stale
one left behind empty. A podman replica gets the same limit from podman and the same error.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.jobs import MACHINE, job, python_pool
from tests.support.memory import HOG, LIMIT, OOM, SCALE, members, replica_cgroups
from tests.support.podman import BUSYBOX_IMAGE, podman_backed_server
from tests.support.server import ServerProcess, wait_for, wait_job
from trainworks.backends.memory_limits import memory_cgroup_of, moves_are_fast

pytestmark = pytest.mark.skipif(memory_cgroup_of("self") is None, reason="no memory cgroup hierarchy here")


def job_dir(server: ServerProcess, name: str) -> Path:
    return server.home / "jobs" / name.rsplit("/", 1)[-1]


@pytest.fixture(scope="module")
def small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("mem-home")
    proc = ServerProcess(home=home, args=["--replica-memory-scale", str(SCALE)]).start()
    try:
        yield proc
    finally:
        proc.stop()


def create(client: httpx.Client, server: ServerProcess, body: dict[str, Any]) -> str:
    created = client.post(f"/v1/{server.parent}/customJobs", json=body)
    assert created.status_code == 200, created.text
    return str(created.json()["name"])


def test_a_replica_past_its_limit_fails_with_the_out_of_memory_error(small_server: ServerProcess) -> None:
    with small_server.client() as client:
        name = create(client, small_server, job(python_pool(HOG)))
        started = time.monotonic()
        done = wait_job(client, name, timeout=120)
        elapsed = time.monotonic() - started
        assert done["state"] == "JOB_STATE_FAILED", done
        assert done["error"]["message"] == OOM
        assert client.get("/healthz").status_code == 200  # the server is unharmed
    cgroup = replica_cgroups(small_server.home) / f"{name.rsplit('/', 1)[-1]}-workerpool0-0"
    assert not cgroup.exists()
    exit_record = json.loads((job_dir(small_server, name) / "workerpool0-0" / "exit.json").read_text())
    assert exit_record["oom_kill"] == 1 and exit_record["signal"] == signal.SIGKILL
    print(f"OOM job failed {elapsed:.1f}s after its creation")


def test_a_replica_within_its_limit_runs_under_it(small_server: ServerProcess, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    code = (
        "import os, sys, time; data = b'y' * (40 << 20); "
        "[time.sleep(0.05) for _ in iter(lambda: os.path.exists(sys.argv[1]), True)]; print(len(data))"
    )
    with small_server.client() as client:
        name = create(client, small_server, job(python_pool(code, args=[str(gate)])))
        cgroup = replica_cgroups(small_server.home) / f"{name.rsplit('/', 1)[-1]}-workerpool0-0"
        try:
            # The init joins first, then starts the command: wait for both.
            wait_for(lambda: len(members(cgroup)) == 2, timeout=60, what="the replica in its cgroup")
            assert int((cgroup / "memory.limit_in_bytes").read_text()) == LIMIT // 4096 * 4096
            memsw = cgroup / "memory.memsw.limit_in_bytes"
            if memsw.exists():  # swap counts against the limit too
                assert int(memsw.read_text()) == LIMIT // 4096 * 4096
            # Everything of the replica is in it: the supervisor is not, its init and the command are.
            inside = members(cgroup)
            supervisor = json.loads((job_dir(small_server, name) / "workerpool0-0" / "shim.json").read_text())
            assert supervisor["pid"] not in inside
        finally:
            gate.touch()
        done = wait_job(client, name, timeout=120)
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    wait_for(lambda: not cgroup.exists(), timeout=10, what="the replica's cgroup to be removed")


def test_cgroups_of_replicas_that_ended_while_the_server_was_down_are_removed(tmp_path: Path) -> None:
    home = tmp_path / "home"
    gate = tmp_path / "gate"
    code = "import os, sys, time; [time.sleep(0.05) for _ in iter(lambda: os.path.exists(sys.argv[1]), True)]"
    body = job(python_pool(code, args=[str(gate)]), scheduling={"disableRetries": True})
    proc = ServerProcess(home=home, args=["--replica-memory-scale", str(SCALE)]).start()
    parent = replica_cgroups(home)
    try:
        with proc.client() as client:
            name = create(client, proc, body)
            run = job_dir(proc, name) / "workerpool0-0"
            cgroup = parent / f"{name.rsplit('/', 1)[-1]}-workerpool0-0"
            # The init joins first, then starts the command: wait for both.
            wait_for(lambda: len(members(cgroup)) == 2, timeout=60, what="the replica in its cgroup")
        proc.stop(signal.SIGKILL)
        # While the server is down the replica's supervisor dies: its init and command go with it, and
        # nobody is left to remove the cgroup. A stale empty cgroup from long ago sits beside it.
        os.kill(json.loads((run / "shim.json").read_text())["pid"], signal.SIGKILL)
        wait_for(lambda: not members(cgroup), timeout=10, what="the replica's processes to end")
        stale = parent / "12345-workerpool0-0"
        stale.mkdir()
        os.utime(stale, (time.time() - 3600, time.time() - 3600))
        assert cgroup.exists() and stale.exists()
        proc.start()
        wait_for(lambda: not stale.exists(), timeout=30, what="the stale cgroup to be swept")
        with proc.client() as client:
            done = wait_job(client, name, timeout=60)
        assert done["state"] == "JOB_STATE_FAILED" and "was lost" in done["error"]["message"]
        wait_for(lambda: not cgroup.exists(), timeout=10, what="the lost replica's cgroup to be removed")
        assert [p for p in parent.iterdir() if p.is_dir()] == []
    finally:
        gate.touch()
        proc.stop()


# ------------------------------------------------------------------------------ podman
@pytest.fixture(scope="module")
def podman_small_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    with podman_backed_server(tmp_path_factory, ["--replica-memory-scale", str(SCALE)]) as proc:
        yield proc


def busybox_pool(script: str) -> dict[str, Any]:
    container = {"imageUri": BUSYBOX_IMAGE, "command": ["sh", "-c", script]}
    return {"machineSpec": MACHINE, "replicaCount": "1", "containerSpec": container}


def test_a_podman_replica_gets_the_limit_and_the_same_error(podman_small_server: ServerProcess) -> None:
    with podman_small_server.client() as client:
        # A shell variable that never stops growing: the OOM killer ends the container's shell.
        name = create(client, podman_small_server, job(busybox_pool("x=$(cat /dev/urandom); echo never")))
        done = wait_job(client, name, timeout=120)
        assert done["state"] == "JOB_STATE_FAILED", done
        assert done["error"]["message"] == OOM
        within = create(client, podman_small_server, job(busybox_pool("echo fine")))
        assert wait_job(client, within, timeout=120)["state"] == "JOB_STATE_SUCCEEDED"
    run = job_dir(podman_small_server, name) / "workerpool0-0"
    argv = json.loads((run / "launch.json").read_text())["argv"]
    assert f"--memory={LIMIT}" in argv and f"--memory-swap={LIMIT}" in argv
    assert json.loads((run / "container.json").read_text())["oom_killed"] is True


# /proc/self/mountinfo lines as Linux 6.x writes them (a hybrid host: the v1 memory hierarchy, v2 beside it).
MOUNTINFO = """\
35 24 0:30 / /sys/fs/cgroup rw,relatime shared:9 - tmpfs tmpfs rw,mode=755
40 35 0:35 / /sys/fs/cgroup/memory rw,relatime shared:14 - cgroup cgroup rw,memory
45 35 0:40 / /sys/fs/cgroup/unified rw,relatime shared:19 - cgroup2 cgroup2 {options}
"""


@pytest.mark.parametrize(
    ("options", "fast"),
    [
        ("rw", False),
        ("rw,nsdelegate", False),
        ("rw,favordynmods", True),
        ("rw,nsdelegate,favordynmods", True),
    ],
)
def test_fast_cgroup_moves_are_told_from_the_cgroup2_mount(tmp_path: Path, options: str, fast: bool) -> None:
    mountinfo = tmp_path / "mountinfo"
    mountinfo.write_text(MOUNTINFO.format(options=options))
    assert moves_are_fast(str(mountinfo)) is fast
    assert moves_are_fast(str(tmp_path / "missing")) is False  # no /proc: the hint is given, nothing breaks
