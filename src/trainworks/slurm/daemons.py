"""The daemons of one local Slurm cluster (munged, slurmctld, one slurmd per node), managed by PID.

Each daemon daemonizes itself and writes a pid file under <base_dir>/run; we only ever signal a PID from those
files, and only when its command line names this cluster's files (a stale pid file may point at a reused PID).
PID 1 in these sandboxes reaps orphans late, so a stopped daemon can linger as a zombie: "alive" means a
/proc entry that is not a zombie (trainworks.backends.procfs.start_time).

apply() records what the running daemons were configured with in <base_dir>/run/applied.json, written only
after they are up; that, not the slurm.conf on disk, decides between reconfigure and restart, so a caller that
crashed between writing the file and acting gets the right action on its next apply.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from trainworks.backends.procfs import start_time
from trainworks.slurm.conf import (
    ClusterDef,
    ClusterLayout,
    compact_hostlist,
    render_scripts,
    render_slurm_conf,
)

log = logging.getLogger(__name__)

COMMAND_TIMEOUT = 30.0  # any single Slurm client command
START_TIMEOUT = 30.0  # daemons up and every static node registered
STOP_TIMEOUT = 10.0  # SIGTERM -> gone, before SIGKILL
JOB_DRAIN_TIMEOUT = 30.0  # cancelled/killed jobs leave their nodes (KillWait=5 plus epilogs)
POLL = 0.05

# Node state flags that mean "its slurmd has not (re)registered yet".
_UNREGISTERED = ("UNKNOWN", "NOT_RESPONDING", "POWERING_UP")


class SlurmError(RuntimeError):
    """A Slurm command or daemon failed; the message has the command's stderr or the daemon's log tail."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


@dataclass(frozen=True)
class NodeInfo:
    name: str
    # scontrol's State=, upper case: "IDLE", "MIXED", "IDLE+DRAIN", "MIXED+DRAIN", "IDLE+CLOUD+POWERED_DOWN"
    state: str
    reason: str
    partitions: tuple[str, ...]
    slurmd_pid: int | None  # our slurmd for it, when running

    @property
    def base_state(self) -> str:
        """The part before the first '+': IDLE, ALLOCATED, MIXED, DOWN, ..."""
        return self.state.split("+", 1)[0]

    @property
    def flags(self) -> frozenset[str]:
        """The '+'-separated flags after the base state: DRAIN, CLOUD, POWERED_DOWN, NOT_RESPONDING, ..."""
        return frozenset(self.state.split("+")[1:])

    @property
    def drained(self) -> bool:
        """Drain requested and nothing runs any more (sinfo's "drained")."""
        return (
            "DRAIN" in self.flags and self.base_state in ("IDLE", "DOWN") and "COMPLETING" not in self.flags
        )

    @property
    def draining(self) -> bool:
        """Drain requested but jobs still run (sinfo's "draining")."""
        return "DRAIN" in self.flags and not self.drained

    @property
    def powered_down(self) -> bool:
        return "POWERED_DOWN" in self.flags


def _alive(pid: int | None) -> bool:
    return pid is not None and start_time(pid) is not None


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _listens(pid: int, port: int) -> bool:
    """True when process pid holds a listening TCP socket on port (from /proc, without connecting to it)."""
    inodes: set[str] = set()
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
    except OSError:
        return False
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                # local_address is HEXADDR:HEXPORT; state 0A is LISTEN; field 9 is the socket inode
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port and fields[9] in inodes:
                    return True
    return False


def _wait_until(
    what: str, check: Callable[[], bool], timeout: float, detail: Callable[[], str] | None = None
) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            extra = f"\n{detail()}" if detail else ""
            raise SlurmError(f"timed out after {timeout:.0f}s waiting for {what}{extra}")
        time.sleep(POLL)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path} is missing)"
    return f"last lines of {path}:\n" + "\n".join(text[-lines:])


def _parse_pairs(line: str) -> dict[str, str]:
    """One `scontrol show ... -o` line as Key=Value pairs; values may contain spaces (OS=Linux 6.1 #1 ...)."""
    pairs: dict[str, str] = {}
    for m in re.finditer(r"(?:^|\s)([A-Za-z][\w:/.]*)=(.*?)(?=\s+[A-Za-z][\w:/.]*=|\s*$)", line):
        pairs.setdefault(m.group(1), m.group(2))
    return pairs


def _write_atomic(path: Path, text: str, mode: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    tmp.chmod(mode)
    os.replace(tmp, path)


def _node_signature(cluster: ClusterDef) -> dict[str, list[int | bool]]:
    """What a running slurmctld/slurmd cannot take through `scontrol reconfigure`."""
    return {n.name: [n.port, n.cpus, n.dynamic] for n in cluster.nodes}


class LocalSlurm:
    """One cluster's daemons under base_dir. Methods are blocking; every wait has a deadline."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = Path(base_dir)
        self.layout = ClusterLayout(self.base_dir)

    @property
    def conf_path(self) -> Path:
        return self.layout.conf

    @property
    def _applied_path(self) -> Path:
        return self.layout.run / "applied.json"

    def env(self) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf_path)}

    # ---- commands ------------------------------------------------------------------------------------------

    def _run(
        self, *argv: str, timeout: float = COMMAND_TIMEOUT, check: bool = True, conf: Path | None = None
    ) -> str:
        cmd = " ".join(argv)
        env = self.env() if conf is None else {**os.environ, "SLURM_CONF": str(conf)}
        try:
            proc = subprocess.run(
                list(argv),
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except FileNotFoundError as exc:
            raise SlurmError(f"{argv[0]} not found: install the Debian packages slurm-wlm and munge") from exc
        except subprocess.TimeoutExpired as exc:
            raise SlurmError(f"`{cmd}` timed out after {timeout:.0f}s") from exc
        if check and proc.returncode != 0:
            stderr = proc.stderr.strip()
            raise SlurmError(
                f"`{cmd}` failed (exit {proc.returncode}): {stderr or proc.stdout.strip()}", stderr
            )
        return proc.stdout

    def _start_daemon(self, name: str, argv: Sequence[str]) -> None:
        """Run a self-daemonizing command; its own output goes to a file, so no pipe can keep us waiting."""
        out = self.layout.log / f"start-{name}.out"
        with out.open("w") as handle:
            try:
                proc = subprocess.run(
                    list(argv),
                    env=self.env(),
                    stdin=subprocess.DEVNULL,
                    stdout=handle,
                    stderr=subprocess.STDOUT,
                    timeout=COMMAND_TIMEOUT,
                )
            except FileNotFoundError as exc:
                raise SlurmError(
                    f"{argv[0]} not found: install the Debian packages slurm-wlm and munge"
                ) from exc
            except subprocess.TimeoutExpired as exc:
                raise SlurmError(f"starting {name} timed out after {COMMAND_TIMEOUT:.0f}s") from exc
        if proc.returncode != 0:
            text = out.read_text(errors="replace").strip()
            raise SlurmError(f"starting {name} failed (exit {proc.returncode}): {text}", text)

    # ---- pid files -----------------------------------------------------------------------------------------

    def _marker(self, pid_file: Path) -> str:
        """A string the daemon's command line must contain for it to be ours."""
        return str(self.layout.munge_key) if pid_file == self.layout.munged_pid else str(self.conf_path)

    def _pid(self, pid_file: Path) -> int | None:
        """The live PID in pid_file, if it is one of our daemons."""
        pid = _read_pid(pid_file)
        if pid is None or not _alive(pid) or self._marker(pid_file) not in _cmdline(pid):
            return None
        return pid

    def _stop_pid_file(self, pid_file: Path) -> None:
        pid = self._pid(pid_file)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(POLL)
            if _alive(pid):
                log.warning(
                    "%s: pid %d still alive %.0fs after SIGTERM, sending SIGKILL", pid_file, pid, STOP_TIMEOUT
                )
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                _wait_until(f"pid {pid} ({pid_file.name}) to exit after SIGKILL", lambda: not _alive(pid), 5)
        pid_file.unlink(missing_ok=True)

    def _slurmd_pid_files(self) -> dict[str, Path]:
        if not self.layout.run.is_dir():
            return {}
        return {p.name[len("slurmd-") : -len(".pid")]: p for p in self.layout.run.glob("slurmd-*.pid")}

    def slurmd_pid(self, name: str) -> int | None:
        return self._pid(self.layout.slurmd_pid(name))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """One apply/recreate/down at a time per cluster, also across processes."""
        self.base_dir.mkdir(parents=True, exist_ok=True)
        with (self.base_dir / ".lock").open("w") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    # ---- daemons -------------------------------------------------------------------------------------------

    def _ensure_munged(self) -> bool:
        """Start munged unless it runs; True when it had to be started."""
        lay = self.layout
        if self._pid(lay.munged_pid) is not None:
            return False
        lay.munge.mkdir(parents=True, exist_ok=True)
        # munged refuses a socket whose directories are not all searchable by everyone
        for directory in (lay.munge, self.base_dir):
            directory.chmod(directory.stat().st_mode | 0o755)
        blocked = [d for d in lay.munge.parents if d.exists() and not d.stat().st_mode & 0o001]
        if blocked:
            raise SlurmError(f"munged needs {blocked[0]} to be searchable by all users (chmod o+x)")
        if not lay.munge_key.is_file() or lay.munge_key.stat().st_size == 0:
            lay.munge_key.unlink(missing_ok=True)
            fd = os.open(lay.munge_key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            with os.fdopen(fd, "wb") as handle:
                handle.write(os.urandom(1024))
        lay.munge_socket.unlink(missing_ok=True)
        self._start_daemon(
            "munged",
            [
                "munged",
                f"--key-file={lay.munge_key}",
                f"--socket={lay.munge_socket}",
                f"--pid-file={lay.munged_pid}",
                f"--log-file={lay.munge / 'munged.log'}",
                f"--seed-file={lay.munge / 'munged.seed'}",
                "--num-threads=10",
            ],
        )
        _wait_until(
            "munged",
            lambda: self._pid(lay.munged_pid) is not None and lay.munge_socket.is_socket(),
            START_TIMEOUT,
            lambda: _tail(lay.munge / "munged.log"),
        )
        return True

    def _ctld_responds(self) -> bool:
        try:
            return "is UP" in self._run("scontrol", "ping", timeout=10, check=False)
        except SlurmError:
            return False

    def _start_slurmctld(self) -> None:
        lay = self.layout
        lay.slurmctld_pid.unlink(missing_ok=True)  # stale after a crash; the wait below reads the new one
        # no -c: recover jobs and node states from StateSaveLocation, so running jobs survive a restart
        self._start_daemon("slurmctld", ["slurmctld", "-f", str(self.conf_path)])

        def up() -> bool:
            if self._pid(lay.slurmctld_pid) is None:
                pid = _read_pid(lay.slurmctld_pid)
                if pid is not None and not _alive(pid):
                    raise SlurmError(f"slurmctld exited during start-up\n{_tail(lay.log / 'slurmctld.log')}")
                return False
            return self._ctld_responds()

        _wait_until(
            "slurmctld to answer `scontrol ping`", up, START_TIMEOUT, lambda: _tail(lay.log / "slurmctld.log")
        )

    def _start_slurmd(self, name: str) -> None:
        self.layout.spool(name).mkdir(parents=True, exist_ok=True)
        self.layout.node_disk(name).mkdir(parents=True, exist_ok=True)
        self.layout.slurmd_pid(name).unlink(missing_ok=True)
        self._start_daemon(f"slurmd-{name}", ["slurmd", "-f", str(self.conf_path), "-N", name])

    def _wait_slurmds(self, ports: Mapping[str, int], names: Sequence[str]) -> None:
        """Each named node's slurmd runs, listens on its port, and slurmctld has its registration."""
        for name in names:
            pid_file = self.layout.slurmd_pid(name)

            def listening(name: str = name, pid_file: Path = pid_file) -> bool:
                pid = self._pid(pid_file)
                if pid is None:
                    stale = _read_pid(pid_file)
                    if stale is not None and not _alive(stale):
                        raise SlurmError(
                            f"slurmd for {name} exited\n{_tail(self.layout.log / f'slurmd-{name}.log')}"
                        )
                    return False
                return _listens(pid, ports[name])

            _wait_until(
                f"slurmd for {name} to listen on port {ports[name]}",
                listening,
                START_TIMEOUT,
                functools.partial(_tail, self.layout.log / f"slurmd-{name}.log"),
            )

        _wait_until(
            f"nodes {compact_hostlist(names)} to register with slurmctld",
            lambda: self._registered(names),
            START_TIMEOUT,
            self._node_states,
        )

    def _registered(self, names: Sequence[str], also_down: bool = False) -> bool:
        """slurmctld has heard from each node's slurmd (with also_down: and none is DOWN)."""
        states = {n.name: n for n in self.nodes()}
        pending = set(_UNREGISTERED) | ({"DOWN"} if also_down else set())
        return all(n in states and not (states[n].flags | {states[n].base_state}) & pending for n in names)

    def _node_states(self) -> str:
        try:
            return "\n".join(f"{n.name}: {n.state} {n.reason}".rstrip() for n in self.nodes())
        except SlurmError as exc:
            return str(exc)

    # ---- apply ---------------------------------------------------------------------------------------------

    def _load_applied(self) -> dict[str, object] | None:
        try:
            data = json.loads(self._applied_path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) else None

    def _check_conf(self, conf: str) -> None:
        """Have Slurm's own parser read the new slurm.conf before it replaces the live one.

        An unknown key would otherwise break every client command, `scontrol reconfigure` included.
        """
        candidate = self.layout.etc / ".slurm.conf.check"
        _write_atomic(candidate, conf, 0o644)
        try:
            self._run("scontrol", "show", "hostnames", "localhost", conf=candidate, timeout=10)
        except SlurmError as exc:
            raise SlurmError(
                f"Slurm rejects the rendered slurm.conf: {exc.stderr or exc}", exc.stderr
            ) from exc
        finally:
            candidate.unlink(missing_ok=True)

    def _write_files(self, cluster: ClusterDef, conf: str, scripts: dict[Path, str]) -> None:
        lay = self.layout
        for directory in (lay.etc, lay.state, lay.spool_root, lay.nodes_root, lay.log, lay.run):
            directory.mkdir(parents=True, exist_ok=True)
        # scripts first: the new slurm.conf may name them
        for path, text in scripts.items():
            _write_atomic(path, text, 0o755)
        _write_atomic(lay.conf, conf, 0o644)

    def _remove_stale_scripts(self, scripts: dict[Path, str]) -> None:
        lay = self.layout
        candidates = [lay.prolog, lay.epilog, lay.resume_program, lay.suspend_program]
        for directory in (lay.prolog_dir, lay.epilog_dir):
            if directory.is_dir():
                candidates += list(directory.iterdir())
        for path in candidates:
            if path not in scripts:
                path.unlink(missing_ok=True)

    def apply(self, cluster: ClusterDef) -> str:
        """Make the running cluster match `cluster`: "started", "restarted", "reconfigured" or "unchanged".

        started: slurmctld was not running (first start, or after it died; its saved state is recovered).
        restarted: slurmctld was restarted because the node set (names, ports, CPUs, dynamic) changed, or a
            dead munged/slurmd had to be started again.
        reconfigured: slurm.conf or the prolog/epilog scripts changed: `scontrol reconfigure` (jobs go on).
        unchanged: nothing to do.
        """
        if Path(cluster.base_dir).resolve() != self.base_dir.resolve():
            raise ValueError(f"cluster.base_dir {cluster.base_dir} is not this LocalSlurm's {self.base_dir}")
        conf = render_slurm_conf(cluster)
        scripts = render_scripts(cluster)
        scripts_hash = hashlib.sha256(
            json.dumps(sorted((str(p), t) for p, t in scripts.items())).encode()
        ).hexdigest()
        signature = _node_signature(cluster)
        lay = self.layout
        with self._locked():
            applied = self._load_applied() or {}
            old_signature = applied.get("nodes")
            self.layout.etc.mkdir(parents=True, exist_ok=True)
            self._check_conf(conf)
            self._write_files(cluster, conf, scripts)

            revived = self._ensure_munged()
            ctld_running = self._pid(lay.slurmctld_pid) is not None
            nodes_changed = old_signature != signature
            if ctld_running and nodes_changed:
                # reconfigure with another node count makes slurmctld exit (MaxNodeCount has changed)
                self._stop_pid_file(lay.slurmctld_pid)

            # slurmd of removed nodes, and of nodes whose port/CPUs/power saving changed
            old_nodes = old_signature if isinstance(old_signature, dict) else {}
            for name, pid_file in self._slurmd_pid_files().items():
                before, after = old_nodes.get(name), signature.get(name)
                # a static node that becomes dynamic keeps running: Slurm powers it down once it is idle
                scaled_down = (
                    before is not None and after is not None and before[:2] == after[:2] and after[2]
                )
                if after is None or (before is not None and before != after and not scaled_down):
                    self._stop_pid_file(pid_file)
            survivors = [n for n in self._slurmd_pid_files() if self.slurmd_pid(n) is not None]

            if not ctld_running or nodes_changed:
                self._start_slurmctld()
                result = "started" if not ctld_running else "restarted"
            elif applied.get("conf") != conf or applied.get("scripts") != scripts_hash:
                self._run("scontrol", "reconfigure")
                result = "reconfigured"
            else:
                result = "unchanged"

            static = [n.name for n in cluster.nodes if not n.dynamic]
            to_start = [n for n in static if self.slurmd_pid(n) is None]
            for name in to_start:
                self._start_slurmd(name)
            if result in ("started", "restarted") and survivors:
                # slurmd that kept running hold the previous slurm.conf: make them re-read it and re-register
                self._run("scontrol", "reconfigure")
            if result in ("reconfigured", "unchanged") and (to_start or revived):
                result = "restarted"
            self._wait_slurmds({n.name: n.port for n in cluster.nodes}, static)
            self._remove_stale_scripts(scripts)
            _write_atomic(
                self._applied_path,
                json.dumps({"conf": conf, "scripts": scripts_hash, "nodes": signature}, indent=1),
                0o644,
            )
        log.info("slurm cluster %s at %s: %s", cluster.cluster_name, self.base_dir, result)
        return result

    # ---- queries -------------------------------------------------------------------------------------------

    def is_up(self) -> bool:
        """munged and slurmctld run and answer, and every static node's slurmd runs."""
        lay = self.layout
        if self._pid(lay.munged_pid) is None or self._pid(lay.slurmctld_pid) is None:
            return False
        applied = self._load_applied() or {}
        nodes = applied.get("nodes")
        if isinstance(nodes, dict):
            for name, (_port, _cpus, dynamic) in nodes.items():
                if not dynamic and self.slurmd_pid(name) is None:
                    return False
        return self._ctld_responds()

    def nodes(self) -> list[NodeInfo]:
        out = self._run("scontrol", "show", "node", "-o")
        infos = []
        for line in out.splitlines():
            if not line.startswith("NodeName="):
                continue
            # Reason is the last field and free text (may hold '='): cut it off before parsing the rest
            head, _, reason = line.partition(" Reason=")
            pairs = _parse_pairs(head)
            name = pairs["NodeName"]
            parts = pairs.get("Partitions", "")
            infos.append(
                NodeInfo(
                    name=name,
                    state=pairs.get("State", "UNKNOWN").upper(),
                    reason=reason.strip(),
                    partitions=tuple(p for p in parts.split(",") if p),
                    slurmd_pid=self.slurmd_pid(name),
                )
            )
        return infos

    def show_config(self) -> dict[str, str]:
        config: dict[str, str] = {}
        for line in self._run("scontrol", "show", "config").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() and " " not in key.strip():
                config.setdefault(key.strip(), value.strip())
        return config

    def show_partitions(self) -> dict[str, dict[str, str]]:
        parts: dict[str, dict[str, str]] = {}
        for line in self._run("scontrol", "show", "partition", "-o").splitlines():
            pairs = dict(tok.split("=", 1) for tok in line.split() if "=" in tok)
            if "PartitionName" in pairs:
                parts[pairs["PartitionName"]] = pairs
        return parts

    def jobs_on(self, names: Sequence[str]) -> list[str]:
        """Ids of jobs holding any of these nodes: running, completing, configuring (power-up), suspended."""
        if not names:
            return []
        out = self._run("squeue", "-h", "-t", "R,CG,CF,S", "-w", compact_hostlist(names), "-o", "%A")
        return sorted({line.strip() for line in out.splitlines() if line.strip()}, key=int)

    # ---- node operations -----------------------------------------------------------------------------------

    def drain(self, names: Sequence[str], reason: str) -> None:
        if not names:
            return
        if not reason.strip():
            raise ValueError("Slurm needs a reason to drain a node")
        self._run(
            "scontrol", "update", f"NodeName={compact_hostlist(names)}", "State=DRAIN", f"Reason={reason}"
        )

    def resume(self, names: Sequence[str]) -> None:
        """Return drained/down nodes to service; nodes already in service are left alone."""
        wanted = set(names)
        todo = [
            n.name
            for n in self.nodes()
            if n.name in wanted and ({"DRAIN", "FAIL"} & n.flags or n.base_state in ("DOWN", "DRAIN", "FAIL"))
        ]
        if not todo:
            return
        try:
            self._run("scontrol", "update", f"NodeName={compact_hostlist(todo)}", "State=RESUME")
        except SlurmError as exc:
            # a node may have returned by itself meanwhile (ReturnToService=2 on re-registration)
            if "Invalid node state" not in str(exc):
                raise

    def recreate_node(self, name: str) -> None:
        """Replace the node's "VM": kill its jobs, wipe its spool and boot disk, restart its slurmd, resume.

        A powered-down dynamic node only gets its directories wiped; Slurm starts it when jobs need it.
        """
        applied = self._load_applied() or {}
        nodes = applied.get("nodes")
        if not isinstance(nodes, dict) or name not in nodes:
            raise SlurmError(f"node {name} is not part of the applied cluster at {self.base_dir}")
        port, _cpus, dynamic = nodes[name]
        with self._locked():
            if self.jobs_on([name]):
                # like a VM going away: Slurm kills (or requeues) whatever runs there
                self._run("scontrol", "update", f"NodeName={name}", "State=DOWN", "Reason=node recreated")
                _wait_until(f"jobs on {name} to end", lambda: not self.jobs_on([name]), JOB_DRAIN_TIMEOUT)
            restart = not dynamic or self.slurmd_pid(name) is not None
            self._stop_pid_file(self.layout.slurmd_pid(name))
            for directory in (self.layout.spool(name), self.layout.node_disk(name)):
                shutil.rmtree(directory, ignore_errors=True)
                directory.mkdir(parents=True, exist_ok=True)
            if restart:
                self._start_slurmd(name)
                self._wait_slurmds({name: int(port)}, [name])
            self.resume([name])
            if restart:
                # a resumed DOWN node stays NOT_RESPONDING until slurmctld's next ping (well under a second)
                _wait_until(
                    f"{name} to return to service",
                    lambda: self._registered([name], also_down=True),
                    START_TIMEOUT,
                    self._node_states,
                )

    def down(self) -> None:
        """Cancel all jobs, stop every daemon of this cluster by its pid file, and remove base_dir."""
        lay = self.layout
        if not self.base_dir.exists():
            return
        with self._locked():
            if self._pid(lay.slurmctld_pid) is not None:
                with contextlib.suppress(SlurmError):
                    ids = self._run("squeue", "-h", "-o", "%A", timeout=10).split()
                    if ids:
                        self._run("scancel", *ids, timeout=10, check=False)
                        with contextlib.suppress(SlurmError):
                            _wait_until(
                                "cancelled jobs to finish",
                                lambda: (
                                    not self._run(
                                        "squeue", "-h", "-t", "R,CG,CF,S", "-o", "%A", timeout=10
                                    ).split()
                                ),
                                JOB_DRAIN_TIMEOUT,
                            )
            # slurmctld first: it no longer runs ResumeProgram to start slurmd behind our back
            self._stop_pid_file(lay.slurmctld_pid)
            for pid_file in self._slurmd_pid_files().values():
                self._stop_pid_file(pid_file)
            self._stop_pid_file(lay.munged_pid)
            self._kill_stray_stepds()
        shutil.rmtree(self.base_dir, ignore_errors=True)

    def _kill_stray_stepds(self) -> None:
        """slurmstepd that outlived their slurmd (jobs that did not end in time); ours hold base_dir files."""
        root = str(self.base_dir) + "/"
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            pid = int(entry)
            try:
                if not Path(f"/proc/{pid}/comm").read_text().startswith("slurmstepd"):
                    continue
                fds = os.listdir(f"/proc/{pid}/fd")
            except OSError:
                continue
            targets = []
            for fd in fds:
                with contextlib.suppress(OSError):
                    targets.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
            if any(t.startswith(root) for t in targets) and _alive(pid):
                log.warning("killing stray slurmstepd %d (%s) of %s", pid, _cmdline(pid), self.base_dir)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
