"""Local backend: every replica is a real process on this host, under the replica supervisor (shim.py).

With a container runtime of "podman", container tasks run inside `podman run`; with "host" the command
runs directly and the image URI is recorded but not used.

Given the server's settings, host replicas are confined (`ReplicaIsolation`): each gets a memory cgroup
limited to its machine type's memory (memory_limits.py) and, unless the server runs with --no-sandbox, a
sandbox (sandbox.py) in which the server's home, the other jobs and other projects' buckets do not exist.
Podman replicas get podman's own memory limit and only their project's buckets at /gcs instead.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from trainworks.backends import capture, procfs, sandbox, shim
from trainworks.backends.base import (
    Capability,
    LaunchError,
    LaunchRequest,
    Phase,
    ProcessHandle,
    ReplicaStatus,
    write_launch_record,
)
from trainworks.backends.forkserver import ForkServer
from trainworks.backends.memory_limits import OUT_OF_MEMORY, ReplicaCgroups, moves_are_fast
from trainworks.backends.warm import find_warm
from trainworks.config import Settings

log = logging.getLogger(__name__)

SHIM = Path(__file__).with_name("shim.py")
#: The replica's own $HOME layer (its changes to the home folder), inside its run folder.
HOME_LAYER = ".trainworks-home"
#: The replica's own /tmp and /var/tmp (sandbox.py binds them), inside its run folder; gone when it ends.
REPLICA_TMP = ".trainworks-tmp"
#: The host's temporary folders: each replica gets its own (`serve --replica-tmp shared`: the host's).
HOST_TMP = tuple(Path(target) for _, target in sandbox.PRIVATE_TMP)
#: How a podman replica's container ended, as podman told it before the container was removed.
CONTAINER_RECORD = "container.json"


def _base_interpreter() -> str:
    """An interpreter for the shim; the shim runs isolated (-I -S) so any CPython 3 will do."""
    return sys.executable


def cgroup_name(run_dir: Path) -> str:
    """A replica's cgroup name: `<job>-<task>` (its run folder is <home>/jobs/<job>/<task>)."""
    return f"{run_dir.parent.name}-{run_dir.name}"


def _under(path: Path, folder: Path) -> bool:
    """`path == folder or folder in path.parents`, on strings: a replica's plan asks it dozens of times."""
    inner, outer = str(path), str(folder)
    return inner == outer or inner.startswith(outer if outer.endswith("/") else outer + "/")


def _server_install() -> list[Path]:
    """The server's own interpreter and code: a replica in the host runtime runs with them (its import path
    too: folders a .pth or an editable install put there)."""
    import site

    import trainworks

    paths = {Path(sys.prefix), Path(sys.base_prefix), Path(trainworks.__file__).resolve().parents[1]}
    paths |= {Path(p) for p in [*site.getsitepackages(), *sys.path] if p and os.path.isabs(p)}
    return sorted({p.resolve() for p in paths if p.is_dir()})


def _sqlite_files(url: str) -> list[Path]:
    """The database file of a SQLite URL and its journals, which replicas must not reach either."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or url == prefix + ":memory:":
        return []
    db = Path(url[len(prefix) :].split("?", 1)[0]).resolve()
    return [db, *(db.with_name(db.name + suffix) for suffix in ("-wal", "-shm", "-journal"))]


def project_buckets(root: Path, project: str) -> list[str]:
    """The buckets a replica of `project` sees at /gcs: its project's own and unowned ones. A bucket its
    project claimed (as a job's output) but never made is made now, as its job would have made it."""
    from trainworks.storage.bucket_projects import bucket_owners, visible_buckets

    for name, owner in bucket_owners(root).items():
        if project and owner.includes(project) and not (root / name).exists():
            with contextlib.suppress(OSError):
                (root / name).mkdir()
    return visible_buckets(root, project)


class ReplicaIsolation:
    """What a host replica may see and use: the plan the server sends its supervisor."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.scale = settings.replica_memory_scale
        self.sandboxed = settings.sandbox and sandbox.available()
        if settings.sandbox and not self.sandboxed:
            log.warning(
                "replica sandboxing is off: the server lacks CAP_SYS_ADMIN (run it as root, or pass "
                "--no-sandbox to silence this)"
            )
        self.cgroups = ReplicaCgroups.detect(self.tag) if self.scale > 0 else None
        if self.cgroups is not None:
            # On cgroup v2 a replica is born in its cgroup (sandbox.clone_into_cgroup): nothing to tune.
            if self.cgroups.version == 1 and not moves_are_fast():
                log.info(
                    "each replica started after a pause waits ~10-20 ms to join its memory cgroup (v1); "
                    "mounting the cgroup hierarchies with favordynmods removes the wait (docs/scaling.md, "
                    "host tuning)"
                )
            removed = self.cgroups.sweep()
            if removed:
                log.info("removed the memory cgroups of %d ended replica(s)", len(removed))
        home = settings.home.resolve()
        # The server's own places: its home (database, jobs, logs, registry, datasets, warm state), and the
        # bucket root, training clusters' Slurm state and SQLite database where they lie outside it.
        places = [
            settings.buckets.resolve(),
            settings.clusters_dir.resolve(),
            *_sqlite_files(settings.db_url),
        ]
        self.hidden = [home, *(p for p in places if not _under(p, home))]  # masked where they exist
        self.private_tmp = settings.replica_tmp == "private"
        # Host folders every replica sees (`serve --replica-bind`), where they exist.
        self.binds = [(path.resolve(), writable) for path, writable in settings.replica_binds]
        if not self.private_tmp:
            self.binds += [(p, True) for p in HOST_TMP]
        # The server's interpreter and code, bound back read-only if a hidden folder (or the replica's own
        # /tmp) covers them: wherever it is installed, a replica can run it but never change it.
        # Never / or a temporary root itself (a `python -m` started there has it on its import path): that
        # would undo the private /tmp.
        roots = {Path("/"), *HOST_TMP}
        self.install = [p for p in _server_install() if p not in roots and self._unseen(p)]
        self._pending: set[str] = set()  # cgroups whose removal has to wait for their last processes

    @property
    def tag(self) -> str:
        """Names this server's replica cgroups apart from another server's on the same host (as podman
        container names are)."""
        return hashlib.sha256(str(self.settings.home).encode()).hexdigest()[:8]

    def _hidden(self, path: Path) -> bool:
        return any(_under(path, folder) for folder in self.hidden)

    def _unseen(self, path: Path) -> bool:
        """Whether a replica cannot see the host's `path`: masked, or in the host's /tmp behind its own
        (and not in a folder bound into every replica)."""
        if self._hidden(path):
            return True
        bound = any(_under(path, folder) for folder, _ in self.binds)
        return self.private_tmp and not bound and any(_under(path, tmp) for tmp in HOST_TMP)

    def memory_limit(self, request: LaunchRequest) -> int | None:
        if not request.memory_bytes or self.scale <= 0:
            return None
        return max(int(request.memory_bytes * self.scale), 16 << 20)

    def _environments(self, request: LaunchRequest) -> list[Path]:
        """The interpreter environments the replica runs from, when a hidden folder holds them: the host
        executor environment on its PATH and the python package environment its command runs (both in the
        server's cache), bound back read-only. Nothing else the job names is: PATH and the command come
        from the job, and must not open the masks."""
        cache = self.settings.cache_dir.resolve()
        words = [e for e in request.env.get("PATH", "").split(os.pathsep) if os.path.isabs(e)]
        if request.argv and os.path.isabs(request.argv[0]):
            words.append(os.path.dirname(request.argv[0]))
        entries = [Path(os.path.normpath(word)) for word in words]  # no way out through ".."
        found: list[Path] = []
        for entry in entries:
            for kind in ("host-python", "venvs"):
                folder = cache / kind
                if not _under(entry, folder) or entry == folder:
                    continue
                root = folder / entry.relative_to(folder).parts[0]
                if root.is_dir() and self._unseen(root) and root not in found:
                    found.append(root)
        return found

    def plan(self, request: LaunchRequest) -> str:
        """The plan for one start (sandbox.format_plan's text); makes the replica's cgroup."""
        self.retry_removals()
        plan: dict[str, object] = {"cgroup": None, "gcs_root": None, "sandbox": None}
        limit = self.memory_limit(request)
        if self.cgroups is not None and limit is not None:
            try:
                plan["cgroup"] = self.cgroups.prepare(cgroup_name(request.run_dir), limit)
            except OSError as exc:
                raise LaunchError(f"the replica's memory cgroup could not be made: {exc}") from exc
        if not self.sandboxed:
            plan["gcs_root"] = str(request.gcs_root) if request.gcs_root else None
            return sandbox.format_plan(plan)
        # What the replica needs of what it cannot see: bound back after the masks when a mask covers it
        # (`keep`); bound before them when only the private /tmp does (`binds`), so that a server's home
        # inside it (a checkout's home under /tmp) is still masked.
        # The replica's log is written from outside (capture.py): inside, it may read it, never change it.
        log = Path(capture.log_dir(str(request.run_dir)))
        log.mkdir(parents=True, exist_ok=True)
        wanted = [(request.run_dir, True), (log, False)]
        if request.cwd and request.cwd != request.run_dir and self._unseen(request.cwd):
            wanted.append((request.cwd, True))
        wanted += [(p, False) for p in [*self.install, *self._environments(request)]]
        keep = [(str(p), writable) for p, writable in wanted if self._hidden(p)]
        binds = [(str(p), writable) for p, writable in self.binds if p.is_dir()]
        binds += [(str(p), writable) for p, writable in wanted if not self._hidden(p)]
        view: dict[str, object] = {
            "hide": [str(p) for p in self.hidden if p.exists()],
            "keep": keep,
            "binds": binds,
            "gcs": None,
            "home": None,
            "tmp": None,
        }
        if self.private_tmp:
            tmp = request.run_dir / REPLICA_TMP
            shutil.rmtree(tmp, ignore_errors=True)  # a restarted replica starts with an empty /tmp
            view["tmp"] = str(tmp)
        home = request.env.get("HOME", "")
        if (
            home
            and os.path.isabs(home)
            and os.path.isdir(home)
            and home != "/"
            and not self._unseen(Path(home))
        ):
            layer = request.run_dir / HOME_LAYER
            shutil.rmtree(layer, ignore_errors=True)  # a restarted replica starts from the image again
            view["home"], view["home_layer"] = home, str(layer)
        if request.gcs_root is not None:
            view["gcs"] = {"root": str(request.gcs_root), "buckets": self.buckets(request)}
        plan["sandbox"] = view
        try:
            return sandbox.format_plan(plan)
        except ValueError as exc:
            raise LaunchError(str(exc)) from exc

    @staticmethod
    def buckets(request: LaunchRequest) -> list[str]:
        assert request.gcs_root is not None
        return project_buckets(request.gcs_root, request.project or "")

    def ended(self, run_dir: Path) -> None:
        """The replica has ended: its own /tmp goes, and its cgroup (now, or once its last processes have
        exited)."""
        shutil.rmtree(run_dir / REPLICA_TMP, ignore_errors=True)
        if self.cgroups is None:
            return
        self.retry_removals()
        name = cgroup_name(run_dir)
        if not self.cgroups.remove(name):
            self._pending.add(name)

    def retry_removals(self) -> None:
        if self.cgroups is None:
            return
        for name in list(self._pending):
            if self.cgroups.remove(name):
                self._pending.discard(name)


class LocalBackend:
    name = "local"
    capabilities = frozenset({Capability.MULTI_REPLICA, Capability.GCS_MOUNT, Capability.ADOPT})

    def __init__(self, container_runtime: str = "host", settings: Settings | None = None) -> None:
        self.container_runtime = container_runtime
        self.settings = settings
        if container_runtime == "podman":
            self.capabilities = self.capabilities | {Capability.CONTAINERS}
        self.isolation = (
            ReplicaIsolation(settings) if settings is not None and container_runtime == "host" else None
        )
        # A server forks its replicas' supervisors from its fork server (forkserver.py); without one (a
        # backend made for a test, `serve --cold-supervisors`) each supervisor is a new interpreter.
        self.fork_server = (
            ForkServer(
                settings.home / "fork-server",
                _base_interpreter(),
                slots=settings.replica_slots if self.isolation and self.isolation.sandboxed else 0,
                runs_root=settings.jobs_dir,
            )
            if settings is not None and settings.fork_server
            else None
        )

    def start(self) -> None:
        """The server starts: so does its fork server, in the background."""
        if self.fork_server is not None:
            self.fork_server.start_soon()

    def close(self) -> None:
        """Stop the fork server (replicas go on: a restarted server adopts them)."""
        if self.fork_server is not None:
            self.fork_server.close()

    def plan(self, request: LaunchRequest) -> str | None:
        """The supervisor's plan for a host replica, or None when this backend confines nothing."""
        return self.isolation.plan(request) if self.isolation is not None else None

    def launch(self, request: LaunchRequest) -> ProcessHandle:
        request.run_dir.mkdir(parents=True, exist_ok=True)
        for stale in ("exit.json", "shim.json", CONTAINER_RECORD):
            (request.run_dir / stale).unlink(missing_ok=True)
        argv = request.argv
        if self.container_runtime == "podman" and self.settings is not None:
            argv = self._confine_container(request)
        plan = self.plan(request)
        write_launch_record(request, argv)  # the supervisor takes all of it from its command line
        if self.fork_server is not None:
            handle = self.fork_server.launch(request, argv, plan)
            if handle is not None:
                return handle
        setup = "-" if plan is not None else str(request.gcs_root or "")
        # The supervisor starts with the stop signals blocked (it unblocks them once it can act on them,
        # backends/shim.py): a cancel that lands while its interpreter starts up waits, it does not kill it
        # before it could write an exit record.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, shim.STOPS)
        try:
            process = subprocess.Popen(
                [
                    _base_interpreter(),
                    "-I",
                    "-S",
                    str(SHIM),
                    str(request.run_dir),
                    str(request.cwd or ""),
                    setup,
                ]
                + argv,
                env=request.env,
                stdin=subprocess.PIPE if plan is not None else subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=open(request.run_dir / "shim.log", "ab"),  # noqa: SIM115 - the child keeps it
                start_new_session=True,
                close_fds=True,
            )
        except OSError as exc:
            raise LaunchError(f"could not start the replica supervisor: {exc}") from exc
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        if plan is not None:
            assert process.stdin is not None
            with contextlib.suppress(BrokenPipeError):  # a supervisor that died at once: the poll reports it
                process.stdin.write(plan.encode())
            with contextlib.suppress(BrokenPipeError):
                process.stdin.close()
        start = procfs.start_time(process.pid)
        if start is None:
            # Exited already (a crash of the shim itself); the poll will report it.
            start = 0
        return ProcessHandle(pid=process.pid, pid_start=start)

    def _confine_container(self, request: LaunchRequest) -> list[str]:
        """`podman run` with the replica's memory limit, only its project's buckets at /gcs, and the folders
        bound into every replica (`serve --replica-bind`)."""
        from trainworks.backends.podman import confine

        assert self.settings is not None
        memory = None
        if request.memory_bytes and self.settings.replica_memory_scale > 0:
            memory = max(int(request.memory_bytes * self.settings.replica_memory_scale), 16 << 20)
        root = self.settings.buckets if self.settings.gcs_protocol == "file" else None
        buckets = (
            project_buckets(root, request.project or "")
            if root is not None and self.settings.sandbox
            else None
        )
        binds = [(path, writable) for path, writable in self.settings.replica_binds if path.is_dir()]
        return confine(request.argv, memory, root, buckets, binds)

    def find(self, run_dir: Path) -> ProcessHandle | None:
        try:
            record = json.loads((run_dir / "shim.json").read_text())
            pid = int(record["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if "zygote" in record:  # forked by the fork server or a warm interpreter: its record says its start
            return find_warm(run_dir)
        if (run_dir / "exit.json").exists():
            return ProcessHandle(pid=pid, pid_start=0)  # it already ran to the end: poll reads its record
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        if str(SHIM).encode() not in cmdline or str(run_dir).encode() not in cmdline:
            return None  # the pid now belongs to some other process
        start = procfs.start_time(pid)
        return ProcessHandle(pid=pid, pid_start=start) if start is not None else None

    def poll(self, handle: ProcessHandle, run_dir: Path) -> ReplicaStatus:
        procfs.reap(handle.pid)
        record = run_dir / "exit.json"
        if record.exists():
            try:
                data = json.loads(record.read_text())
            except (OSError, ValueError):
                data = None
            if data is not None:
                code = int(data["exit_code"])
                detail = ""
                if "signal" in data:
                    detail = f"killed by signal {signal.Signals(int(data['signal'])).name}"
                if data.get("oom_kill") or self._container_oom(run_dir, code):
                    detail = OUT_OF_MEMORY
                self._ended(run_dir)
                interrupted = bool(data["interrupted"]) if "interrupted" in data else None
                return ReplicaStatus(Phase.EXITED, exit_code=code, detail=detail, interrupted=interrupted)
        if handle.pid_start and procfs.is_alive(handle.pid, handle.pid_start):
            return ReplicaStatus(Phase.RUNNING)
        if record.exists():  # written between the two checks
            return self.poll(handle, run_dir)
        self._ended(run_dir)
        return ReplicaStatus(Phase.LOST, detail="the replica's supervisor ended without an exit record")

    def _ended(self, run_dir: Path) -> None:
        if self.isolation is not None:
            self.isolation.ended(run_dir)

    def _container_oom(self, run_dir: Path, code: int) -> bool:
        """Whether podman says the replica's container was OOM-killed; the container is removed once asked
        (its answer is kept in the run folder, so asking again gives the same answer)."""
        if self.container_runtime != "podman" or self.settings is None:
            return False
        record = run_dir / CONTAINER_RECORD
        with contextlib.suppress(OSError, ValueError):
            return bool(json.loads(record.read_text())["oom_killed"])
        from trainworks.backends.podman import Podman, container_of

        try:
            name = container_of(json.loads((run_dir / "launch.json").read_text())["argv"])
        except (OSError, ValueError, KeyError):
            return False
        if name is None:
            return False
        podman = Podman.from_settings(self.settings)
        oom = podman.oom_killed(name) if code != 0 else False
        record.write_text(json.dumps({"container": name, "oom_killed": oom}))
        podman.remove_containers([name])
        return oom

    def signal(self, handle: ProcessHandle, signum: int) -> None:
        if not handle.pid_start or not procfs.is_alive(handle.pid, handle.pid_start):
            return
        try:
            os.killpg(handle.pid, signum)
        except ProcessLookupError:
            # A supervisor the fork server forked a moment ago may not lead its group yet: it holds the signal
            # until it can pass it on (zygote.py).
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(handle.pid, signum)
        except PermissionError:
            pass
