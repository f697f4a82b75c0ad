"""Replica sandboxing (backends/sandbox.py): what a running replica can and cannot reach.

A real server runs jobs of two projects, A and B, two each, with their buckets made through the storage API
by the official client. A probe replica of job A1 tries everything a hostile job would (other jobs' folders
and logs by host path, the server's database and home, /proc of the server and of another job's replica,
B's bucket through /gcs, unmounting the masks, leaving its memory cgroup, writing the host's files) and
writes what happened to a file in its own working directory; every attempt must fail, while its own
folder, its own project's bucket, /dev/shm and its own /tmp work. Its /tmp is its own: another replica's
/tmp file and a socket in the host's /tmp are out of reach, and what it wrote there is gone when it ends. The
same probe under `serve --no-sandbox` sees the old view. A warm interpreter's replica (zygote.py) runs in the
same sandbox, a shell into a sandboxed replica sees what the replica sees, and a server installed under /tmp
(its code and virtual environment there) stays out of its replicas' reach while they run with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.auth.credentials import AnonymousCredentials
from google.cloud import storage

from tests.support.jobs import MACHINE
from tests.support.logs import replica_output
from tests.support.server import LOCATION, ServerProcess, wait_for, wait_job
from tests.support.slots import wait_for_slots
from tests.support.supervisors import replica_inits
from trainworks.backends import procfs
from trainworks.backends.base import LaunchRequest, Phase
from trainworks.backends.capture import LOG_DIR, segment_name
from trainworks.backends.local import REPLICA_TMP, LocalBackend, cgroup_name
from trainworks.backends.memory_limits import memory_cgroup_of
from trainworks.backends.warm import WarmPool, WarmStartBackend, WarmTarget
from trainworks.config import Settings
from trainworks.kinds.custom_jobs.launcher import host_env

PROJECT_A = "isolation-a"
PROJECT_B = "isolation-b"
BUCKET_A = "iso-bucket-a"
BUCKET_B = "iso-bucket-b"
SECRET = "b-secret-value"
OTHER_TMP_FILE = "/tmp/replica-note.txt"  # every gated replica writes one in its own /tmp
LOG_SEGMENT = f"{LOG_DIR}/{segment_name(0)}"  # a replica's log: its first segment, there from its start

# The probe: each attempt is recorded as {"ok": bool, "value" or "error"}; the results go to probe.json in
# the replica's own working directory. TARGETS (JSON) names what to try.
PROBE = r"""
import ctypes, json, os, sys
T = json.loads(os.environ["TARGETS"])
results = {}
libc = ctypes.CDLL(None, use_errno=True)

def attempt(name, fn):
    try:
        results[name] = {"ok": True, "value": fn()}
    except Exception as exc:
        results[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}

def read(path):
    with open(path, "rb") as handle:
        return handle.read().decode(errors="replace")

def write(path, text="x"):
    with open(path, "w") as handle:
        handle.write(text)
    return read(path)

def append(path):
    with open(path, "r+") as handle:
        handle.seek(0, 2)
        handle.write("x")
    return read(path)

def connect(path):
    import socket
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(path)
    return path

def sys_call(fn, *args):
    if fn(*args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))

home = T["home"]
attempt("list /gcs", lambda: sorted(os.listdir("/gcs")))
attempt("list the server home", lambda: sorted(os.listdir(home)))
attempt("open the database", lambda: read(T["database"]))
attempt("list another job's folder", lambda: os.listdir(T["other_run_dir"]))
attempt("read another job's log", lambda: read(os.path.join(T["other_run_dir"], T["log_segment"])))
attempt("write into another job's folder", lambda: write(os.path.join(T["other_run_dir"], "planted.txt")))
attempt("list another project's job folder", lambda: os.listdir(T["b_run_dir"]))
attempt("read another project's job log", lambda: read(os.path.join(T["b_run_dir"], T["log_segment"])))
attempt("read the server's database through /proc", lambda: read(T["server_root"] + T["database"]))
attempt("read the server's environment", lambda: read(f"/proc/{T['server_pid']}/environ"))
attempt("read another replica's environment", lambda: read(f"/proc/{T['b_pid']}/environ"))
attempt("list the other project's bucket", lambda: os.listdir(f"/gcs/{T['bucket_b']}"))
attempt("read the other project's bucket", lambda: read(f"/gcs/{T['bucket_b']}/secret.txt"))
attempt("write the other project's bucket", lambda: write(f"/gcs/{T['bucket_b']}/planted.txt"))
attempt("read the bucket root by its host path", lambda: os.listdir(T["bucket_root"]))
attempt("unmount /gcs", lambda: sys_call(libc.umount2, b"/gcs", 2))
attempt("unmount the home mask", lambda: sys_call(libc.umount2, home.encode(), 2))
attempt("mount a tmpfs", lambda: sys_call(libc.mount, b"tmpfs", b"/mnt", b"tmpfs", 0, None))
attempt("leave the memory cgroup", lambda: write(T["server_cgroup_procs"], "0"))
attempt("list /sys/fs/cgroup", lambda: os.listdir("/sys/fs/cgroup"))
attempt("write the host's files", lambda: write(T["host_file"]))
attempt("write the server's code", lambda: write(T["code_file"]))
attempt("write the server's venv", lambda: write(T["venv_file"]))
attempt("read another replica's /tmp file", lambda: read(T["other_tmp_file"]))
attempt("write another replica's /tmp file", lambda: append(T["other_tmp_file"]))
attempt("connect to a socket in the host's /tmp", lambda: connect(T["host_socket"]))
attempt("open a disk", lambda: os.open(T["disk"], os.O_RDONLY) if T["disk"] else 1 / 0)
attempt("my processes", lambda: sorted(int(p) for p in os.listdir("/proc") if p.isdigit()))
attempt("my cgroup", lambda: read("/proc/self/cgroup"))
attempt("my capabilities", lambda: [l for l in read("/proc/self/status").splitlines() if l.startswith("Cap")])
attempt("write my own folder", lambda: write("own.txt", "mine"))
attempt("list my own folder", lambda: sorted(os.listdir(".")))
attempt("read my project's bucket", lambda: read(f"/gcs/{T['bucket_a']}/hello.txt"))
attempt("write my project's bucket", lambda: write(f"/gcs/{T['bucket_a']}/from-a1.txt", "from a1"))
attempt("use /dev/shm", lambda: write("/dev/shm/probe", "shared memory"))
attempt("write my own /tmp", lambda: write("/tmp/" + T["tmp_name"], "tmp"))
attempt("write my own /var/tmp", lambda: write("/var/tmp/" + T["tmp_name"], "var tmp"))
with open("probe.json.tmp", "w") as handle:
    json.dump(results, handle)
os.replace("probe.json.tmp", "probe.json")
"""

MUST_FAIL = [
    "open the database",
    "list another job's folder",
    "read another job's log",
    "write into another job's folder",
    "list another project's job folder",
    "read another project's job log",
    "read the server's database through /proc",
    "read the server's environment",
    "read another replica's environment",
    "list the other project's bucket",
    "read the other project's bucket",
    "write the other project's bucket",
    "read the bucket root by its host path",
    "unmount /gcs",
    "unmount the home mask",
    "mount a tmpfs",
    "leave the memory cgroup",
    "write the host's files",
    "write the server's code",
    "write the server's venv",
    "read another replica's /tmp file",
    "write another replica's /tmp file",
    "connect to a socket in the host's /tmp",
    "open a disk",
]
MUST_WORK = [
    "list the server home",  # it works, but shows only what the replica needs (checked below)
    "write my own folder",
    "list my own folder",
    "read my project's bucket",
    "write my project's bucket",
    "list /gcs",
    "use /dev/shm",
    "write my own /tmp",
    "write my own /var/tmp",
    "my processes",
    "my cgroup",
    "my capabilities",
    "list /sys/fs/cgroup",
]


def gated_pool(folder: Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    """A replica that writes its log and a note in its /tmp, says it is up, and runs until the gate file
    exists."""
    code = (
        "import os, sys, time; print('log line of', os.getcwd(), flush=True); "
        f"open({OTHER_TMP_FILE!r}, 'w').write('note'); "
        "open(sys.argv[1] + '.tmp', 'w').write(os.getcwd()); os.replace(sys.argv[1] + '.tmp', sys.argv[1]); "
        "[time.sleep(0.05) for _ in iter(lambda: os.path.exists(sys.argv[2]), True)]"
    )
    container: dict[str, Any] = {
        "imageUri": "python:3.11",
        "command": [sys.executable, "-c", code, str(folder / "up"), str(folder / "gate")],
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
    }
    return {"machineSpec": MACHINE, "replicaCount": "1", "containerSpec": container}


def create(client: httpx.Client, project: str, pool: dict[str, Any], name: str) -> str:
    body = {"displayName": name, "jobSpec": {"workerPoolSpecs": [pool]}}
    created = client.post(f"/v1/projects/{project}/locations/{LOCATION}/customJobs", json=body)
    assert created.status_code == 200, created.text
    return str(created.json()["name"])


def run_dir(server: ServerProcess, name: str) -> Path:
    return server.home / "jobs" / name.rsplit("/", 1)[-1] / "workerpool0-0"


def command_pid(run: Path) -> int:
    """The host PID of a replica's command: supervisor -> the init of its PID namespace -> the command."""
    init = wait_for(lambda: replica_inits(run), what="the replica's init")[0]
    return int(wait_for(lambda: procfs.children(init), what="the replica's command")[0])


def gcs_client(server: ServerProcess, project: str) -> storage.Client:
    return storage.Client(
        project=project, credentials=AnonymousCredentials(), client_options={"api_endpoint": server.url}
    )


def host_disk() -> str:
    """A block device of this host (the probe must not be able to open any)."""
    for entry in sorted(Path("/sys/block").iterdir()):
        if not entry.name.startswith(("loop", "ram")) and Path(f"/dev/{entry.name}").exists():
            return f"/dev/{entry.name}"
    return ""


class GatedJobs:
    """Gated jobs of this module: every gate opens at the end, whatever happened."""

    def __init__(self, server: ServerProcess, client: httpx.Client, root: Path) -> None:
        self.server, self.client, self.root = server, client, root
        self.folders: list[Path] = []

    def start(self, project: str, label: str, env: dict[str, str] | None = None) -> tuple[str, Path]:
        folder = self.root / label
        folder.mkdir(parents=True)
        self.folders.append(folder)
        name = create(self.client, project, gated_pool(folder, env), label)
        wait_for((folder / "up").exists, timeout=90, what=f"{label} to start")
        return name, folder

    def release(self) -> None:
        for folder in self.folders:
            (folder / "gate").touch()


@pytest.fixture(scope="module")
def iso_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    yield from _iso_server(tmp_path_factory, ["--replica-slots", "0"])  # every replica cold


@pytest.fixture(scope="module")
def slot_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server whose python replicas start in replica slots (backends/slots.py)."""
    yield from _iso_server(tmp_path_factory, ["--replica-slots", "1"])


def _iso_server(tmp_path_factory: pytest.TempPathFactory, args: list[str]) -> Iterator[ServerProcess]:
    proc = ServerProcess(home=tmp_path_factory.mktemp("iso-home"), args=args).start()
    try:
        for project, bucket in ((PROJECT_A, BUCKET_A), (PROJECT_B, BUCKET_B)):
            made = gcs_client(proc, project).create_bucket(bucket)
            text = SECRET if project == PROJECT_B else "hello from a"
            made.blob("secret.txt" if project == PROJECT_B else "hello.txt").upload_from_string(text)
        yield proc
    finally:
        proc.stop()


@contextlib.contextmanager
def host_socket(path: str) -> Iterator[None]:
    """A listening Unix socket in the host's /tmp, as another program would leave one."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(path)
        sock.listen()
        try:
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(path)  # the target is real: the host reaches it
            yield
        finally:
            os.unlink(path)


def probe_targets(server: ServerProcess, others: dict[str, Path], b_pid: int, tmp: Path) -> dict[str, Any]:
    import trainworks

    server_cgroup = memory_cgroup_of(server.process.pid if server.process else "self")
    return {
        "home": str(server.home),
        "database": str(server.home / "trainworks.db"),
        "other_run_dir": str(others["a2"]),
        "b_run_dir": str(others["b1"]),
        "log_segment": LOG_SEGMENT,
        "server_pid": server.process.pid if server.process else 0,
        "server_root": f"/proc/{server.process.pid if server.process else 0}/root",
        "b_pid": b_pid,
        "bucket_a": BUCKET_A,
        "bucket_b": BUCKET_B,
        "bucket_root": str(server.home / "buckets"),
        "server_cgroup_procs": os.path.join(server_cgroup or "/sys/fs/cgroup/memory", "cgroup.procs"),
        "host_file": f"/etc/trainworks-isolation-{uuid.uuid4().hex[:8]}",
        "code_file": str(Path(trainworks.__file__).parent / f"planted_{uuid.uuid4().hex[:8]}.py"),
        "venv_file": str(Path(sys.prefix) / f"planted_{uuid.uuid4().hex[:8]}"),
        "disk": host_disk(),
        "tmp_name": f"trainworks-probe-{uuid.uuid4().hex[:8]}.txt",
        "other_tmp_file": OTHER_TMP_FILE,
        "host_socket": str(Path(tempfile.gettempdir()) / f"trainworks-iso-{uuid.uuid4().hex[:8]}.sock"),
    }


def run_probe(
    server: ServerProcess, client: httpx.Client, targets: dict[str, Any]
) -> tuple[dict[str, Any], Path]:
    try:
        return _run_probe(server, client, targets)
    finally:
        planted = [targets["host_file"], targets["code_file"], targets["venv_file"]]
        planted += [f"{tmp}/{targets['tmp_name']}" for tmp in ("/tmp", "/var/tmp")]
        for path in planted:  # only an unsandboxed probe gets there
            Path(path).unlink(missing_ok=True)


def _run_probe(
    server: ServerProcess, client: httpx.Client, targets: dict[str, Any]
) -> tuple[dict[str, Any], Path]:
    pool = {
        "machineSpec": MACHINE,
        "replicaCount": "1",
        "containerSpec": {
            "imageUri": "python:3.11",
            "command": [sys.executable, "-c", PROBE],
            "env": [{"name": "TARGETS", "value": json.dumps(targets)}],
        },
    }
    name = create(client, PROJECT_A, pool, "a1-probe")
    done = wait_job(client, name, timeout=120)
    run = run_dir(server, name)
    assert done["state"] == "JOB_STATE_SUCCEEDED", (done, replica_output(run, "stderr"))
    return json.loads((run / "probe.json").read_text()), run


def test_a_replica_reaches_nothing_of_other_jobs_projects_or_the_server(
    iso_server: ServerProcess, tmp_path: Path
) -> None:
    check_isolation(iso_server, tmp_path, slot=False)


def test_a_replica_started_in_a_slot_reaches_no_more(slot_server: ServerProcess, tmp_path: Path) -> None:
    """The same probe, handed to a sandbox built before the replica was known."""
    check_isolation(slot_server, tmp_path, slot=True)


def check_isolation(iso_server: ServerProcess, tmp_path: Path, slot: bool) -> None:
    with iso_server.client() as client:
        jobs = GatedJobs(iso_server, client, tmp_path)
        try:
            b1, _ = jobs.start(PROJECT_B, "b1", env={"B_SECRET": SECRET})
            jobs.start(PROJECT_B, "b2")
            a2, _ = jobs.start(PROJECT_A, "a2")  # the last: the slots are built for project A's replicas
            others = {"a2": run_dir(iso_server, a2), "b1": run_dir(iso_server, b1)}
            b_pid = command_pid(others["b1"])
            assert SECRET in Path(f"/proc/{b_pid}/environ").read_text()  # the targets are real
            assert all((others[key] / LOG_SEGMENT).exists() for key in ("a2", "b1"))
            assert (others["a2"] / REPLICA_TMP / "tmp" / "replica-note.txt").read_text() == "note"
            targets = probe_targets(iso_server, others, b_pid, tmp_path)
            if slot:
                wait_for_slots(iso_server, 1)
            with host_socket(targets["host_socket"]):
                results, own = run_probe(iso_server, client, targets)
        finally:
            jobs.release()

    assert bool(json.loads((own / "shim.json").read_text()).get("slot")) is slot

    opened = [name for name in MUST_FAIL if results[name]["ok"]]
    assert not opened, {name: results[name] for name in opened}
    failed = [name for name in MUST_WORK if not results[name]["ok"]]
    assert not failed, {name: results[name] for name in failed}
    # The home shows only the replica's own folder (and the executor environment it runs from).
    assert "trainworks.db" not in results["list the server home"]["value"]
    assert "buckets" not in results["list the server home"]["value"]
    assert results["list /gcs"]["value"] == [BUCKET_A]
    assert results["read my project's bucket"]["value"] == "hello from a"
    assert results["use /dev/shm"]["value"] == "shared memory"
    # A PID namespace of its own: the init and the probe, nothing else of the host.
    assert results["my processes"]["value"] == [1, 2]
    assert results["list /sys/fs/cgroup"]["value"] == []
    memory_line = next(line for line in results["my cgroup"]["value"].splitlines() if ":memory:" in line)
    assert memory_line.endswith("/" + cgroup_name(own)), memory_line  # still in its own memory cgroup
    assert all(line.split()[1] == "0" * 16 for line in results["my capabilities"]["value"])
    # What it did reached the host where it was allowed to, and nowhere else.
    assert (own / "own.txt").read_text() == "mine"
    assert (iso_server.home / "buckets" / BUCKET_A / "from-a1.txt").read_text() == "from a1"
    assert results["write my own /tmp"]["value"] == "tmp"
    # Its /tmp was its own, and went with it.
    assert not (Path("/tmp") / targets["tmp_name"]).exists()
    assert not (Path("/var/tmp") / targets["tmp_name"]).exists()
    assert not (own / REPLICA_TMP).exists()
    assert results["connect to a socket in the host's /tmp"]["error"].startswith("FileNotFoundError")
    assert not (others["a2"] / "planted.txt").exists()
    assert not (iso_server.home / "buckets" / BUCKET_B / "planted.txt").exists()
    assert results["write the host's files"]["error"].startswith("OSError: [Errno 30] Read-only file system")


def test_no_sandbox_restores_the_old_view(tmp_path: Path) -> None:
    proc = ServerProcess(home=tmp_path / "home", args=["--no-sandbox"]).start()
    try:
        for project, bucket in ((PROJECT_A, BUCKET_A), (PROJECT_B, BUCKET_B)):
            made = gcs_client(proc, project).create_bucket(bucket)
            made.blob("secret.txt" if project == PROJECT_B else "hello.txt").upload_from_string(SECRET)
        with proc.client() as client:
            targets = probe_targets(proc, {"a2": tmp_path / "none", "b1": tmp_path / "none"}, 0, tmp_path)
            # Unsandboxed it could: keep its writes out of the host's and the server's files.
            targets.update(
                host_file=str(tmp_path / "host-file"),
                code_file=str(tmp_path / "code-file"),
                venv_file=str(tmp_path / "venv-file"),
            )
            with host_socket(targets["host_socket"]):
                results, _ = run_probe(proc, client, targets)
    finally:
        proc.stop()
    assert results["open the database"]["ok"]
    assert results["read the other project's bucket"]["value"] == SECRET
    assert results["list /gcs"]["value"] == [BUCKET_A, BUCKET_B]
    assert len(results["my processes"]["value"]) > 2  # the host's processes
    assert results["unmount /gcs"]["ok"]  # with every capability
    assert results["connect to a socket in the host's /tmp"]["ok"]  # the host's /tmp


def test_a_warm_replica_runs_in_the_same_sandbox(tmp_path: Path) -> None:
    """A replica forked from a persistent resource's warm interpreter: hidden home, own PID namespace, no
    capabilities, memory cgroup made and removed."""
    settings = Settings(home=tmp_path / "home", replica_memory_scale=0.05)
    settings.ensure_dirs()
    pool = WarmPool(settings.home / "persistent", host_env)
    target = WarmTarget(("1", LOCATION, "iso"), 0, ())
    try:
        wait_for(lambda: pool.ensure(target)[0], timeout=60, what="the warm interpreter to be ready")
        backend = WarmStartBackend(LocalBackend("host", settings), pool, lambda _job: target)
        run = settings.jobs_dir / "77" / "workerpool0-0"
        code = (
            "import os, json; json.dump({'pids': sorted(p for p in os.listdir('/proc') if p.isdigit()), "
            f"'home': sorted(os.listdir({str(settings.home)!r})), "
            "'cap': [l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1], "
            "'cgroup': open('/proc/self/cgroup').read()}, open('seen.json', 'w'))"
        )
        argv = [sys.executable, "-c", code]
        request = LaunchRequest(
            "77",
            "workerpool0-0",
            argv,
            host_env(),
            run,
            run,
            memory_bytes=1 << 30,
            persistent_resource=target.key,
        )
        handle = backend.launch(request)
        status = wait_for(
            lambda: (s := backend.poll(handle, run)).phase != Phase.RUNNING and s,
            timeout=60,
            what="the replica",
        )
        assert status.exit_code == 0, replica_output(run, "stderr")
        assert "warm" in json.loads((run / "launch.json").read_text())  # it was forked, not started cold
        seen = json.loads((run / "seen.json").read_text())
    finally:
        pool.drop(target.key, forget=True)
    assert seen["pids"] == ["1", "2"]
    assert seen["home"] == ["jobs"]  # the home shows only the way to the replica's own folder
    assert seen["cap"] == "0" * 16
    assert f"/{cgroup_name(run)}" in seen["cgroup"]
    assert not any(Path(memory_cgroup_of("self") or "/").glob(f"trainworks-*/{cgroup_name(run)}"))


def test_a_shell_into_a_sandboxed_replica_sees_what_it_sees(
    iso_server: ServerProcess, tmp_path: Path
) -> None:
    with iso_server.client() as client:
        jobs = GatedJobs(iso_server, client, tmp_path)
        try:
            name, _ = jobs.start(PROJECT_A, f"shell-{uuid.uuid4().hex[:6]}")
            script = (
                f"ls {iso_server.home}; ls /gcs; ls /proc | grep -c '^[0-9]'; "
                "grep CapEff /proc/self/status; cat /proc/self/cgroup | grep :memory:"
            )
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "trainworks.cli.main",
                    "custom-jobs",
                    "shell",
                    name,
                    "--command",
                    script,
                    "--endpoint",
                    iso_server.url,
                ],  # fmt: skip
                capture_output=True,
                text=True,
                timeout=60,
            )
        finally:
            jobs.release()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "trainworks.db" not in lines and "buckets" not in lines
    assert BUCKET_A in lines and BUCKET_B not in lines
    assert "CapEff:\t" + "0" * 16 in lines
    assert any(line.endswith("/" + cgroup_name(run_dir(iso_server, name))) for line in lines)


@pytest.mark.parametrize(
    "path", ["{home}/jobs", "{home}", "{home}/cache/host-python/x/../../..", "{home}/cache/venvs/../../bin"]
)
def test_a_job_cannot_open_the_masks_through_its_path_or_command(
    iso_server: ServerProcess, path: str
) -> None:
    """Regression: the folders bound back into a sandbox came from the replica's PATH and command, which the
    job sets itself; a PATH naming the server's home bound the whole home back, read-only. Only the server's
    own interpreter environments are bound back now, and never by a path that climbs out with ".."."""
    home = iso_server.home
    code = (
        "import json, os, sys; home = sys.argv[1]; "
        "print(json.dumps({'home': sorted(os.listdir(home)), 'jobs': os.listdir(home + '/jobs')}))"
    )
    hostile = path.format(home=home)
    (home / "jobs" / "0-another-job").mkdir(parents=True, exist_ok=True)  # there is always another job
    pool = {
        "machineSpec": MACHINE,
        "replicaCount": "1",
        "containerSpec": {
            "imageUri": "python:3.11",
            "command": [sys.executable, "-c", code, str(home)],
            "env": [{"name": "PATH", "value": hostile}],
        },
    }
    with iso_server.client() as client:
        name = create(client, PROJECT_A, pool, "hostile-path")
        done = wait_job(client, name, timeout=120)
    run = run_dir(iso_server, name)
    assert done["state"] == "JOB_STATE_SUCCEEDED", (done, replica_output(run, "stderr"))
    seen = json.loads(replica_output(run))
    assert seen["home"] == ["jobs"]
    assert seen["jobs"] == [name.rsplit("/", 1)[-1]]  # its own job's folder, no other


# Run by the server's own interpreter from the server's installation: it imports the server's package,
# then tries to change it and its virtual environment.
INSTALL_PROBE = r"""
import json, os, sys, trainworks
results = {"package": trainworks.__file__, "prefix": sys.prefix, "home": sorted(os.listdir(sys.argv[1]))}
try:
    results["database"] = open(os.path.join(sys.argv[1], "trainworks.db"), "rb").read(4).decode()
except OSError as exc:
    results["database"] = exc.strerror
for name, path in (("code", os.path.dirname(trainworks.__file__)), ("venv", os.path.join(sys.prefix, "bin"))):
    try:
        with open(os.path.join(path, "planted.txt"), "w") as handle:
            handle.write("x")
        results[name] = "written"
    except OSError as exc:
        results[name] = exc.strerror
json.dump(results, open("seen.json", "w"))
"""


def install_under_tmp(root: Path) -> Path:
    """A server installation in the host's /tmp, as a clone there with its .venv would be: a virtual
    environment whose package is a copy of this one, the other dependencies from this environment. Its
    interpreter is returned."""
    import sysconfig

    import trainworks

    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    shutil.copytree(
        Path(trainworks.__file__).parent,
        root / "src" / "trainworks",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    python = root / "venv" / "bin" / "python"
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # .pth files are read in name order: the copy comes first on sys.path, then this environment's packages.
    (site / "00-trainworks.pth").write_text(f"{root / 'src'}\n")
    dependencies = sysconfig.get_paths()["purelib"]
    (site / "zz-dependencies.pth").write_text(f"import site; site.addsitedir({dependencies!r})\n")
    return python


def test_a_server_installed_under_tmp_is_read_only_to_its_replicas() -> None:
    # Not under tmp_path: the test run's folders are bound into every replica (tests/conftest.py).
    root = Path(tempfile.mkdtemp(prefix="trainworks-install-", dir=tempfile.gettempdir()))
    try:
        python = install_under_tmp(root)
        # As `make run` in a checkout under /tmp: its home inside the checkout, started there with
        # `python -m` (the checkout is then on its import path), its own package, not one a PYTHONPATH of the
        # test run names.
        home = root / ".trainworks-run"
        proc = ServerProcess(home=home, python=str(python), env={"PYTHONPATH": ""}, cwd=root).start()
        try:
            command = [str(python), "-c", INSTALL_PROBE, str(home)]
            pool = {
                "machineSpec": MACHINE,
                "replicaCount": "1",
                "containerSpec": {"imageUri": "python:3.11", "command": command},
            }
            with proc.client() as client:
                name = create(client, PROJECT_A, pool, "installed-under-tmp")
                done = wait_job(client, name, timeout=120)
            run = run_dir(proc, name)
            assert done["state"] == "JOB_STATE_SUCCEEDED", (done, replica_output(run, "stderr"))
            seen = json.loads((run / "seen.json").read_text())
        finally:
            proc.stop()
        # The replica ran the server's installation (the copy in /tmp), and could not change it.
        assert seen["package"] == str(root / "src" / "trainworks" / "__init__.py")
        assert seen["prefix"] == str(root / "venv")
        assert seen["code"] == seen["venv"] == "Read-only file system", seen
        # The checkout shows (read-only), the home in it stays masked: only the way to its own folder and the
        # executor environment it runs from.
        assert set(seen["home"]) <= {"jobs", "cache"}, seen
        assert seen["database"] == "No such file or directory", seen
        assert not list(root.rglob("planted.txt"))
    finally:
        shutil.rmtree(root, ignore_errors=True)
