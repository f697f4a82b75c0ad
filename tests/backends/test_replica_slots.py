"""Replica slots (backends/slots.py): a python replica handed to a sandbox built before it was known runs as
it would have cold (its output, argv, paths, environment, exit status, its stop signals), other replicas start
the usual way, and the slots end with their server. Isolation of a slot's replica: test_isolation.py."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.jobs import job, python_pool
from tests.support.logs import replica_output
from tests.support.memory import HOG, LIMIT, OOM, SCALE, members, replica_cgroups
from tests.support.server import ServerProcess, cancel_when_running, wait_for, wait_job
from tests.support.slots import slot_folders, wait_for_slots
from trainworks.backends import procfs
from trainworks.backends.memory_limits import memory_cgroup_of
from trainworks.backends.slots import SPARE, cgroup_name

# What a cold `python -c` shows of itself; the run folder is replaced by RUN to compare two replicas.
REPORT = r"""
import json, os, sys, threading, atexit
run = os.getcwd()
def clean(value):
    return json.loads(json.dumps(value).replace(run, "RUN"))
print(json.dumps(clean({
    "argv": sys.argv,
    "path0": sys.path[0],
    "path": [p for p in sys.path[1:]],
    "main": sorted(k for k in vars(sys.modules["__main__"]) if not k.startswith("__") or k == "__name__"),
    "name": __name__,
    "cwd": os.getcwd(),
    "env": sorted(k for k in os.environ if k != "TRAINWORKS_NONCE"),
    "user_base": __import__("site").getuserbase(),
    "stdout_tty": sys.stdout.isatty(),
    "line_buffering": sys.stderr.line_buffering,
    "flags": [sys.flags.isolated, sys.flags.no_site, sys.flags.dont_write_bytecode],
    "pid1": os.path.exists("/proc/1"),
})), flush=True)
print("to stderr", file=sys.stderr)
threading.Thread(target=lambda: print("thread joined", flush=True)).start()
atexit.register(lambda: print("atexit ran", flush=True))
sys.exit(int(sys.argv[1]))
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    home = tmp_path_factory.mktemp("slots") / "home"
    proc = ServerProcess(home=home, args=["--replica-slots", "2", "--cancel-grace", "600"]).start()
    try:
        yield proc
    finally:
        proc.stop()


def run(server: ServerProcess, pool: dict, name: str) -> tuple[dict, Path]:
    with server.client() as client:
        created = client.post(f"/v1/{server.parent}/customJobs", json=job(pool, name=name)).json()["name"]
        done = wait_job(client, created, timeout=120)
    return done, server.home / "jobs" / created.rsplit("/", 1)[-1] / "workerpool0-0"


def in_slot(run_dir: Path) -> bool:
    return bool(json.loads((run_dir / "shim.json").read_text()).get("slot"))


def test_a_replica_in_a_slot_runs_as_it_would_cold(server: ServerProcess) -> None:
    pool = python_pool(REPORT, args=["3"], env={"PYTHONUNBUFFERED": "1", "TRAINWORKS_NONCE": "a"})
    cold, cold_dir = run(server, pool, "cold")  # the first of its plan: no slot was built for it yet
    wait_for_slots(server, 2)
    warm, warm_dir = run(server, pool, "warm")
    assert not in_slot(cold_dir) and in_slot(warm_dir)
    for done in (cold, warm):
        assert done["state"] == "JOB_STATE_FAILED", done
        assert "non-zero status of 3" in done["error"]["message"], done
    outputs = [replica_output(folder).splitlines() for folder in (cold_dir, warm_dir)]
    assert outputs[0][1:] == outputs[1][1:] == ["thread joined", "atexit ran"], outputs
    reports = [json.loads(lines[0]) for lines in outputs]
    assert reports[0] == reports[1], reports
    assert reports[1]["argv"] == ["-c", "3"] and reports[1]["cwd"] == "RUN" and reports[1]["path0"] == ""
    assert reports[1]["user_base"] == "RUN/.local"  # its own user base, not the first replica's
    assert [replica_output(folder, "stderr") for folder in (cold_dir, warm_dir)] == ["to stderr\n"] * 2


def test_a_stop_reaches_a_replica_in_a_slot(server: ServerProcess) -> None:
    env = {"PYTHONUNBUFFERED": "1", "TRAINWORKS_NONCE": "a"}
    pool = python_pool("import time; time.sleep(3600)", env=env)
    wait_for_slots(server, 2)
    done, run_dir = cancel_when_running(server, job(pool, name="stop"))
    assert done["state"] == "JOB_STATE_CANCELLED", done
    assert in_slot(run_dir)
    record = json.loads((run_dir / "exit.json").read_text())
    assert record["exit_code"] == 128 + signal.SIGTERM and record["interrupted"] == 1, record


def test_other_commands_start_the_usual_way(server: ServerProcess) -> None:
    wait_for_slots(server, 2)
    shell = python_pool("unused")
    shell["containerSpec"]["command"] = ["/bin/sh", "-c", "echo from a shell"]
    done, run_dir = run(server, shell, "shell")
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert not in_slot(run_dir)
    assert replica_output(run_dir) == "from a shell\n"
    code = "import sys; print(sys.flags.isolated)"
    isolated = python_pool(code)
    isolated["containerSpec"]["command"] = [sys.executable, "-I", "-c", code]
    done, run_dir = run(server, isolated, "isolated")
    assert done["state"] == "JOB_STATE_SUCCEEDED", done
    assert not in_slot(run_dir) and replica_output(run_dir) == "1\n"


def slot_cgroups(home: Path) -> list[Path]:
    if memory_cgroup_of("self") is None:
        return []
    parent = replica_cgroups(home)
    return sorted(parent.glob("slot-*")) if parent.is_dir() else []


def test_slots_end_with_their_server(tmp_path: Path) -> None:
    proc = ServerProcess(home=tmp_path / "home", args=["--replica-slots", "2"]).start()
    try:
        run(proc, python_pool("print('first')"), "first")
        wait_for_slots(proc, 2)
        supervisors = [int(entry.name) for entry in slot_folders(proc.home)]
        spares = [
            child
            for pid in supervisors
            for init in procfs.children(pid)
            for child in procfs.children(init)
            if (procfs.cmdline(child) or [])[1:2] == [SPARE]
        ]
        assert spares, "no spare interpreter found"
        assert len(slot_cgroups(proc.home)) == (2 if memory_cgroup_of("self") else 0)
    finally:
        proc.stop()
    gone = lambda: all(procfs.start_time(pid) is None for pid in supervisors + spares)  # noqa: E731
    wait_for(gone, timeout=30, what="the slots to end")
    wait_for(lambda: not slot_folders(proc.home), timeout=30, what="the slots' folders to go")
    wait_for(lambda: not slot_cgroups(proc.home), timeout=30, what="the slots' cgroups to go")


def test_slots_being_built_end_with_a_killed_server(tmp_path: Path) -> None:
    """Killed while its slots are still being built: they go too, cgroups and folders (they wait on the fork
    server as well as on their spare)."""
    proc = ServerProcess(home=tmp_path / "home", args=["--replica-slots", "2"]).start()
    try:
        run(proc, python_pool("print('first')"), "first")
        wait_for(lambda: slot_folders(proc.home), timeout=60, what="a slot being built")
        supervisors = [int(entry.name) for entry in slot_folders(proc.home)]
    finally:
        proc.stop(signal.SIGKILL)
    gone = lambda: all(procfs.start_time(pid) is None for pid in supervisors)  # noqa: E731
    wait_for(gone, timeout=60, what="the slots to end")
    wait_for(lambda: not slot_folders(proc.home), timeout=30, what="the slots' folders to go")
    wait_for(lambda: not slot_cgroups(proc.home), timeout=30, what="the slots' cgroups to go")


def test_a_slot_keeps_nothing_of_the_replica_it_was_built_after(server: ServerProcess) -> None:
    """Slots are built with the plan of the last replica started, never with its environment: the next
    replica's /proc/self/environ (the spare's start) holds no variable of the one before."""
    secret = f"s-{uuid.uuid4().hex}"
    read = "print(open('/proc/self/environ').read().count(sys.argv[1]), os.environ.get('SECRET', '-'))"
    code = f"import os, sys; {read}"
    first, first_dir = run(server, python_pool(code, env={"SECRET": secret}, args=[secret]), "secret")
    wait_for_slots(server, 2)
    second, second_dir = run(server, python_pool(code, args=[secret]), "next")
    assert first["state"] == second["state"] == "JOB_STATE_SUCCEEDED", (first, second)
    assert in_slot(second_dir)
    assert replica_output(second_dir) == "0 -\n"
    assert replica_output(first_dir).endswith(f" {secret}\n")  # its own variable: there


GATED = (
    "import pathlib, sys, time\n"
    "gate = pathlib.Path(sys.argv[1])\n"
    "print('waiting', flush=True)\n"
    "while not gate.exists(): time.sleep(0.02)\n"
    "print('released', flush=True)\n"
)


def test_a_replica_in_a_slot_outlives_a_killed_server_and_is_adopted(tmp_path: Path) -> None:
    proc = ServerProcess(home=tmp_path / "home", args=["--replica-slots", "1"]).start()
    gate = tmp_path / "gate"
    try:
        run(proc, python_pool("print('first')"), "first")
        wait_for_slots(proc, 1)
        with proc.client() as client:
            body = job(python_pool(GATED, args=[str(gate)]), name="gated")
            name = client.post(f"/v1/{proc.parent}/customJobs", json=body).json()["name"]
            wait_for(lambda: client.get(f"/v1/{name}").json()["state"] == "JOB_STATE_RUNNING", what="RUNNING")
        run_dir = proc.home / "jobs" / name.rsplit("/", 1)[-1] / "workerpool0-0"
        assert in_slot(run_dir)
        supervisor = json.loads((run_dir / "shim.json").read_text())["pid"]
        wait_for(lambda: "waiting" in replica_output(run_dir), what="the replica's first line")
        proc.stop(signal.SIGKILL)
        assert procfs.start_time(supervisor) is not None  # the replica goes on without its server
        gate.touch()
        wait_for(lambda: (run_dir / "exit.json").exists(), what="the replica to end while no server runs")
        proc.start()
        with proc.client() as client:
            done = wait_job(client, name, timeout=120)
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        assert json.loads((run_dir / "shim.json").read_text())["pid"] == supervisor  # adopted
        assert replica_output(run_dir) == "waiting\nreleased\n"
    finally:
        gate.touch()
        proc.stop()


def test_a_replica_in_a_slot_has_its_memory_limit(tmp_path: Path) -> None:
    if memory_cgroup_of("self") is None:
        pytest.skip("no memory cgroup hierarchy here")
    args = ["--replica-slots", "1", "--replica-memory-scale", str(SCALE)]
    proc = ServerProcess(home=tmp_path / "home", args=args).start()
    gate = tmp_path / "gate"
    try:
        run(proc, python_pool("print('first')"), "first")
        wait_for_slots(proc, 1)
        done, run_dir = run(proc, python_pool(HOG), "hog")
        assert in_slot(run_dir)
        assert done["state"] == "JOB_STATE_FAILED" and done["error"]["message"] == OOM, done
        assert json.loads((run_dir / "exit.json").read_text())["oom_kill"] == 1
        assert not (replica_cgroups(proc.home) / f"{run_dir.parent.name}-workerpool0-0").exists()

        wait_for_slots(proc, 1)
        with proc.client() as client:
            body = job(python_pool(GATED, args=[str(gate)]), name="within")
            name = client.post(f"/v1/{proc.parent}/customJobs", json=body).json()["name"]
            run_dir = proc.home / "jobs" / name.rsplit("/", 1)[-1] / "workerpool0-0"
            cgroup = replica_cgroups(proc.home) / f"{run_dir.parent.name}-workerpool0-0"
            wait_for(lambda: len(members(cgroup)) == 2, timeout=60, what="the replica in its named cgroup")
            assert in_slot(run_dir)
            assert int((cgroup / "memory.limit_in_bytes").read_text()) == LIMIT // 4096 * 4096
            assert json.loads((run_dir / "shim.json").read_text())["pid"] not in members(cgroup)
            gate.touch()
            done = wait_job(client, name, timeout=120)
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        wait_for(lambda: not cgroup.exists(), timeout=10, what="the replica's cgroup to be removed")
    finally:
        gate.touch()
        proc.stop()


def test_a_slot_that_cannot_be_built_is_told(tmp_path: Path) -> None:
    """An interpreter that is not there fails the replica as it would cold, and its slot says why in the fork
    server's log, keeping its own log (the next try waits: a failing build is not repeated at once)."""
    proc = ServerProcess(home=tmp_path / "home", args=["--replica-slots", "1"]).start()
    try:
        missing = python_pool("print('never')")
        missing["containerSpec"]["command"] = [str(tmp_path / "no-such" / "python3"), "-c", "print('never')"]
        done, run_dir = run(proc, missing, "missing")
        assert done["state"] == "JOB_STATE_FAILED", done
        assert not in_slot(run_dir)
        log = proc.home / "fork-server" / "fork-server.log"
        said = "a replica slot ended before it was ready: "
        wait_for(lambda: said in log.read_text(), timeout=60, what="the failed slot in the fork server's log")
        slot_log = Path(log.read_text().split(said, 1)[1].split("\n", 1)[0])
        assert "could not start" in slot_log.read_text(), slot_log.read_text()
    finally:
        proc.stop()


def test_a_slot_that_does_not_take_its_replica_in_time_is_ended_first(tmp_path: Path) -> None:
    """A slot that has not taken its replica when the fork server stops waiting (its supervisor stopped here)
    is killed, its init and spare with it, before the replica starts the usual way: the command runs once,
    and nothing of the slot is left to run it again. The next slot built takes the next replica."""
    proc = ServerProcess(home=tmp_path / "home", args=["--replica-slots", "1"]).start()
    try:
        run(proc, python_pool("print('first')"), "first")
        (supervisor,) = wait_for_slots(proc, 1)
        slot = [supervisor, *procfs.children(supervisor)]
        slot += [spare for init in slot[1:] for spare in procfs.children(init)]
        assert len(slot) == 3, slot  # the supervisor, the init, the spare
        os.kill(supervisor, signal.SIGSTOP)
        try:
            done, run_dir = run(proc, python_pool("print('ran once')"), "stalled")
            gone = lambda: all(procfs.start_time(pid) is None for pid in slot)  # noqa: E731
            wait_for(gone, timeout=30, what="the stalled slot to be ended")
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(supervisor, signal.SIGCONT)
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        assert not in_slot(run_dir)
        assert replica_output(run_dir) == "ran once\n"
        log = (proc.home / "fork-server" / "fork-server.log").read_text()
        assert f"a replica slot did not take {run_dir}: no timed out" in log, log
        assert not (replica_cgroups(proc.home) / cgroup_name(supervisor)).exists()

        (supervisor,) = wait_for_slots(proc, 1)
        assert supervisor not in slot
        done, run_dir = run(proc, python_pool("print('in the next slot')"), "next")
        assert done["state"] == "JOB_STATE_SUCCEEDED", done
        assert in_slot(run_dir) and replica_output(run_dir) == "in the next slot\n"
    finally:
        proc.stop()
