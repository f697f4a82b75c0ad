"""A sandboxed replica's init is born in its memory cgroup (backends/sandbox.py `_fork_into`) on cgroup v2.

Moving a process into a cgroup waits for an RCU grace period after a quiet spell (8-20 ms); clone3 with
CLONE_INTO_CGROUP starts the child there without a move. The child reads its cgroup first thing, before any
code of the replica's could join it, and is a working Python process after the raw clone (its threads, its
native thread id, a fork of its own). It falls back to a fork and a move where the kernel cannot: a cgroup
v1 folder, a folder that is not a cgroup, a process with more than one thread. A supervisor whose plan names
a v2 cgroup runs its command in it (with the sandbox's init, in a sandbox), itself outside.

The cgroups are made in a cgroup2 hierarchy the test may write to (no memory controller needed: the birth
is the same in any v2 cgroup), skipped where there is none.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import wait_for
from tests.support.supervisors import start_supervisor
from trainworks.backends import sandbox
from trainworks.backends.memory_limits import _directory, remove_dir


def _own_v2_path() -> str:
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        if line.startswith("0::"):
            return line[3:]
    return "/"


@pytest.fixture
def v2_cgroup() -> Iterator[Path]:
    """A fresh cgroup v2 folder beside the test's own."""
    found = _directory((2, _own_v2_path()))  # this test's cgroup in the cgroup2 hierarchy
    if found is None or not os.access(found, os.W_OK) or not sandbox.available():
        pytest.skip("no writable cgroup2 hierarchy here")
    parent = Path(found)
    folder = parent / f"trainworks-test-{uuid.uuid4().hex[:8]}"
    try:
        folder.mkdir()
    except OSError as exc:
        pytest.skip(f"cannot make a cgroup under {parent}: {exc}")
    try:
        yield folder
    finally:
        # A supervisor removes its replica's cgroup itself once the replica ended.
        wait_for(lambda: remove_dir(str(folder), wait=0.0), what="the cgroup to be removed")


# Forks with sandbox._fork_into in a fresh interpreter (one thread, or two with THREADED); the child reports
# its cgroup before anything else, then whether it works as a Python process.
PROBE = """
import json, os, sys, threading
from trainworks.backends import sandbox, shim
cgroup = json.loads(sys.argv[1])
if len(sys.argv) > 2:
    gate = threading.Event()
    threading.Thread(target=gate.wait, daemon=True).start()
stops = shim.StopWatch()
stops.install()
read_fd, write_fd = os.pipe()
child, joined = sandbox._fork_into(cgroup, stops)
if child == 0:
    born = open("/proc/self/cgroup").read()
    stops.release()
    seen = []
    worker = threading.Thread(target=lambda: seen.append(threading.get_native_id()))
    worker.start()
    worker.join()
    grandchild = os.fork()
    if grandchild == 0:
        os._exit(7)
    _, status = os.waitpid(grandchild, 0)
    report = {
        "born": born, "joined": joined, "thread": bool(seen) and seen[0] != os.getpid(),
        "native_id": threading.get_native_id() == os.getpid(), "fork": os.waitstatus_to_exitcode(status),
    }
    os.write(write_fd, json.dumps(report).encode())
    os._exit(0)
os.close(write_fd)
_, status = os.waitpid(child, 0)
report = json.loads(os.read(read_fd, 65536))
report["parent_joined"] = joined
report["status"] = status
print(json.dumps(report))
"""


def probe(cgroup: dict[str, object], threaded: bool = False) -> dict[str, object]:
    argv = [sys.executable, "-c", PROBE, json.dumps(cgroup)] + (["threaded"] if threaded else [])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return dict(json.loads(done.stdout))


def v2_line(born: object) -> str:
    return next(line for line in str(born).splitlines() if line.startswith("0::"))


def test_the_child_is_born_in_a_v2_cgroup_and_is_a_working_python_process(v2_cgroup: Path) -> None:
    report = probe({"dir": str(v2_cgroup), "version": 2})
    assert report["joined"] is True and report["parent_joined"] is True
    assert v2_line(report["born"]).endswith("/" + v2_cgroup.name)
    assert report["thread"] and report["native_id"] and report["fork"] == 7 and report["status"] == 0


@pytest.mark.parametrize("case", ["v1", "not a cgroup", "two threads"])
def test_it_forks_without_joining_where_the_kernel_cannot_start_it_there(
    v2_cgroup: Path, tmp_path: Path, case: str
) -> None:
    cgroup = {
        "v1": {"dir": str(v2_cgroup), "version": 1},
        "not a cgroup": {"dir": str(tmp_path), "version": 2},
        "two threads": {"dir": str(v2_cgroup), "version": 2},
    }[case]
    report = probe(cgroup, threaded=case == "two threads")
    assert report["joined"] is False and report["parent_joined"] is False
    assert not v2_line(report["born"]).endswith("/" + v2_cgroup.name)  # the caller's join is still to come
    assert report["thread"] and report["native_id"] and report["fork"] == 7 and report["status"] == 0


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandbox", "no sandbox"])
def test_a_replica_runs_in_its_v2_cgroup_its_supervisor_outside(
    v2_cgroup: Path, tmp_path: Path, sandboxed: bool
) -> None:
    gate = tmp_path / "gate"
    command = (
        f"import os, time\n[time.sleep(0.02) for _ in iter(lambda: os.path.exists({str(gate)!r}), True)]\n"
    )
    plan = f"cgroup\t{v2_cgroup}\t2\n" + (f"sandbox\nbind\t{tmp_path}\t1\n" if sandboxed else "")
    process = start_supervisor(tmp_path, [sys.executable, "-c", command], plan=plan)
    try:
        procs = v2_cgroup / "cgroup.procs"
        # In a sandbox, its init and the command; without one, the command.
        wait_for(
            lambda: len(procs.read_text().split()) == (2 if sandboxed else 1), what="the replica's processes"
        )
        assert process.pid not in {int(pid) for pid in procs.read_text().split()}
    finally:
        gate.touch()
    assert process.wait(timeout=60) == 0
    exit_record = json.loads((tmp_path / "exit.json").read_text())
    assert exit_record["exit_code"] == 0, exit_record
