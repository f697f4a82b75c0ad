"""slurm.conf and the helper scripts of one local Slurm cluster, rendered from a ClusterDef (pure: no I/O).

Everything of a cluster lives under its base_dir (see ClusterLayout): config, controller state, per-node spool
and "boot disk" directories, pid files, logs, and its own munge key and socket. One slurmd per emulated node
runs on this host (Debian's Slurm 22.05 is built with --enable-multiple-slurmd); no cgroups
(proctrack/linuxproc, task/none); declared CPUs are trusted over the real core count
(SlurmdParameters=config_overrides).

Prolog/Epilog each point at one generated wrapper that runs the cluster's scripts in the given order, in the
node's boot disk directory ($TRAINWORKS_NODE_DISK), logging to log/prolog-<node>.log. Slurm 22.05 also accepts
a glob (`Prolog=/dir/prolog.d/*`, verified) but runs the matches in reverse alphabetical order and cannot tell
a script which directory is its node's disk. PrologFlags=Alloc runs the prolog on every allocated node when
the job starts, not only where a step is launched.

Dynamic nodes use Slurm's power saving: they are declared State=CLOUD, and slurmctld runs the generated
ResumeProgram/SuspendProgram, which start/stop `slurmd -N <node>` for the hostlist they are given. Measured
with 22.05: a job that needs a powered-down node has it resumed and registered within 1-2 s; an srun step
starts then, but a batch job stays CONFIGURING until slurmctld's periodic job check (every 30 s) or a
deferred-launch recheck (at most every 10 s, and only when the job table changes), so a batch job on a
resumed node starts 10-30 s after submission. After suspend_time idle the node is POWERING_DOWN for
SuspendTimeout (5 s unless config says otherwise), then IDLE+CLOUD+POWERED_DOWN.
"""

from __future__ import annotations

import re
import shlex
import socket
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

# Longest unix socket path (sun_path is 108 bytes with its terminating NUL).
MAX_SOCKET_PATH = 107

# PATH for scripts that slurmd/slurmctld run: they get a bare environment.
SCRIPT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

# Keys that tie slurm.conf to ClusterLayout and LocalSlurm: overriding them through ClusterDef.config breaks
# the cluster, so a caller validating user input should refuse them (render_slurm_conf writes what it gets).
MANAGED_KEYS = frozenset(
    {
        "ClusterName",
        "SlurmctldHost",
        "SlurmctldPort",
        "SlurmUser",
        "SlurmdUser",
        "AuthType",
        "AuthInfo",
        "CredType",
        "StateSaveLocation",
        "SlurmdSpoolDir",
        "SlurmctldPidFile",
        "SlurmdPidFile",
        "SlurmctldLogFile",
        "SlurmdLogFile",
        "ProctrackType",
        "TaskPlugin",
        "Prolog",
        "Epilog",
        "ResumeProgram",
        "SuspendProgram",
        "PrivateData",
    }
)


@dataclass(frozen=True)
class NodeDef:
    name: str  # Slurm NodeName, unique in the cluster
    port: int  # its slurmd port
    cpus: int
    real_memory_mb: int
    features: tuple[str, ...] = ()
    # Power-saved: State=CLOUD, started by ResumeProgram when jobs need it, stopped after suspend_time idle.
    dynamic: bool = False
    extra: Mapping[str, str] = field(default_factory=dict)  # extra Key=Value pairs on its NodeName= line


@dataclass(frozen=True)
class PartitionDef:
    name: str
    nodes: tuple[str, ...]
    default: bool
    extra: Mapping[str, str] = field(default_factory=dict)  # extra pairs on its PartitionName= line


@dataclass(frozen=True)
class ClusterDef:
    cluster_name: str  # ClusterName (lowercase alnum)
    base_dir: Path
    controller_port: int
    nodes: tuple[NodeDef, ...]
    partitions: tuple[PartitionDef, ...]
    # Global slurm.conf pairs, keys canonical; each replaces the default line of the same key.
    config: Mapping[str, str] = field(default_factory=dict)
    prolog_scripts: tuple[
        str, ...
    ] = ()  # bash script bodies run in order before each job on every allocated node
    epilog_scripts: tuple[str, ...] = ()  # same, after each job
    suspend_time: int = 60  # seconds idle before a dynamic node is powered down


@dataclass(frozen=True)
class ClusterLayout:
    """Where each file and directory of a cluster lives under base_dir."""

    base_dir: Path

    @property
    def etc(self) -> Path:
        return self.base_dir / "etc"

    @property
    def conf(self) -> Path:
        return self.etc / "slurm.conf"

    @property
    def state(self) -> Path:
        return self.base_dir / "state"

    @property
    def spool_root(self) -> Path:
        return self.base_dir / "spool"

    def spool(self, node: str) -> Path:
        return self.spool_root / node

    @property
    def nodes_root(self) -> Path:
        return self.base_dir / "nodes"

    def node_disk(self, node: str) -> Path:
        return self.nodes_root / node / "disk"

    @property
    def log(self) -> Path:
        return self.base_dir / "log"

    @property
    def run(self) -> Path:
        return self.base_dir / "run"

    @property
    def munge(self) -> Path:
        return self.base_dir / "munge"

    @property
    def munge_socket(self) -> Path:
        return self.munge / "munge.socket"

    @property
    def munge_key(self) -> Path:
        return self.munge / "munge.key"

    @property
    def munged_pid(self) -> Path:
        return self.run / "munged.pid"

    @property
    def slurmctld_pid(self) -> Path:
        return self.run / "slurmctld.pid"

    def slurmd_pid(self, node: str) -> Path:
        return self.run / f"slurmd-{node}.pid"

    @property
    def prolog_dir(self) -> Path:
        return self.etc / "prolog.d"

    @property
    def epilog_dir(self) -> Path:
        return self.etc / "epilog.d"

    @property
    def prolog(self) -> Path:
        return self.etc / "prolog.sh"

    @property
    def epilog(self) -> Path:
        return self.etc / "epilog.sh"

    @property
    def resume_program(self) -> Path:
        return self.etc / "resume.sh"

    @property
    def suspend_program(self) -> Path:
        return self.etc / "suspend.sh"


def short_hostname() -> str:
    return socket.gethostname().split(".")[0]


def canonical_key(key: str) -> str:
    """The form in which two slurm.conf keys compare equal: case-insensitive (as Slurm), '_' ignored."""
    return key.replace("_", "").lower()


def compact_hostlist(names: Iterable[str]) -> str:
    """Slurm hostlist expression for names, e.g. ["c1", "c2", "c3", "g0"] -> "c[1-3],g0".

    Only names with the same prefix and the same number of digits share brackets, so zero padding is never
    guessed: "n9,n10" renders as "n9,n10" and "n08,n09" as "n[08-09]".
    """
    groups: dict[tuple[str, int], list[int]] = {}
    plain: list[str] = []
    order: list[tuple[str, int] | str] = []
    for name in names:
        m = re.fullmatch(r"(.*?)(\d+)", name)
        if not m:
            plain.append(name)
            order.append(name)
            continue
        key = (m.group(1), len(m.group(2)))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(m.group(2)))
    parts: list[str] = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
            continue
        prefix, width = item
        numbers = sorted(set(groups[item]))
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}")
            continue
        ranges: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{start:0{width}d}" if start == prev else f"{start:0{width}d}-{prev:0{width}d}")
            if n is not None:
                start = prev = n
        parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)


def _check_token(what: str, text: str, *, allow_space: bool) -> None:
    if "\n" in text or "\r" in text or (not allow_space and (not text or any(c.isspace() for c in text))):
        raise ValueError(f"invalid {what} for slurm.conf: {text!r}")


def _merge_pairs(
    defaults: Sequence[tuple[str, str]], extra: Mapping[str, str], where: str
) -> list[tuple[str, str]]:
    """defaults, each extra pair replacing the default of the same (canonical) key or appended in order."""
    pairs = list(defaults)
    index = {canonical_key(k): i for i, (k, _) in enumerate(pairs)}
    seen: set[str] = set()
    for key, value in extra.items():
        _check_token(f"key in {where}", key, allow_space=False)
        _check_token(f"value of {key} in {where}", value, allow_space=True)
        ck = canonical_key(key)
        if ck in seen:
            raise ValueError(
                f"{where}: key {key!r} given twice (keys compare case- and underscore-insensitively)"
            )
        seen.add(ck)
        if ck in index:
            pairs[index[ck]] = (key, value)
        else:
            index[ck] = len(pairs)
            pairs.append((key, value))
    return pairs


def _line(pairs: Sequence[tuple[str, str]]) -> str:
    return " ".join(f"{k}={v}" for k, v in pairs)


def _validate(cluster: ClusterDef) -> None:
    if not re.fullmatch(r"[a-z][a-z0-9]*", cluster.cluster_name):
        raise ValueError(f"cluster_name must be lowercase alphanumeric: {cluster.cluster_name!r}")
    if not cluster.nodes:
        raise ValueError("a cluster needs at least one node")
    names = [n.name for n in cluster.nodes]
    for name in names:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9-]*", name):
            raise ValueError(f"invalid node name {name!r}")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ValueError(f"node names used twice: {', '.join(dupes)}")
    ports = [cluster.controller_port, *(n.port for n in cluster.nodes)]
    if len(set(ports)) != len(ports):
        raise ValueError("the controller and every node need distinct ports")
    known = set(names)
    part_names = [p.name for p in cluster.partitions]
    if len(set(part_names)) != len(part_names):
        raise ValueError("partition names must be unique")
    for part in cluster.partitions:
        _check_token("partition name", part.name, allow_space=False)
        unknown = [n for n in part.nodes if n not in known]
        if unknown:
            raise ValueError(f"partition {part.name!r} names unknown nodes: {', '.join(unknown)}")
    if sum(p.default for p in cluster.partitions) > 1:
        raise ValueError("at most one partition can be the default")
    if cluster.suspend_time < 1:
        raise ValueError("suspend_time must be at least 1 second")
    # unix socket paths hold at most 107 bytes: munged's, and each step's <spool>/<node>/<node>_<job>.<step>
    # (job ids stay below the default MaxJobId 67043328; the batch step is numbered 4294967291)
    longest = max(len(n) for n in names)
    worst = max(
        len(str(ClusterLayout(cluster.base_dir).munge_socket)),
        len(f"{cluster.base_dir}/spool/{'n' * longest}/{'n' * longest}_67043328.4294967291"),
    )
    if worst > MAX_SOCKET_PATH:
        raise ValueError(
            f"base_dir {cluster.base_dir} is too long for unix socket paths under it ({worst} > "
            f"{MAX_SOCKET_PATH} bytes with node names of {longest} characters): use a shorter directory"
        )


def _node_line(node: NodeDef, host: str) -> str:
    pairs = [
        ("NodeName", node.name),
        ("NodeHostname", host),
        ("NodeAddr", "127.0.0.1"),
        ("Port", str(node.port)),
        ("CPUs", str(node.cpus)),
        ("RealMemory", str(node.real_memory_mb)),
    ]
    if node.features:
        pairs.append(("Features", ",".join(node.features)))
    pairs.append(("State", "CLOUD" if node.dynamic else "UNKNOWN"))
    return _line(_merge_pairs(pairs, node.extra, f"node {node.name}"))


def _partition_line(part: PartitionDef) -> str:
    pairs = [("PartitionName", part.name)]
    if part.nodes:
        pairs.append(("Nodes", compact_hostlist(part.nodes)))
    pairs += [("Default", "YES" if part.default else "NO"), ("MaxTime", "INFINITE"), ("State", "UP")]
    return _line(_merge_pairs(pairs, part.extra, f"partition {part.name}"))


def _global_defaults(cluster: ClusterDef, host: str) -> list[tuple[str, str]]:
    lay = ClusterLayout(cluster.base_dir)
    pairs = [
        ("ClusterName", cluster.cluster_name),
        ("SlurmctldHost", f"{host}(127.0.0.1)"),
        ("SlurmctldPort", str(cluster.controller_port)),
        ("SlurmUser", "root"),
        ("SlurmdUser", "root"),
        ("AuthType", "auth/munge"),
        ("AuthInfo", f"socket={lay.munge_socket}"),
        ("CredType", "cred/munge"),
        ("StateSaveLocation", str(lay.state)),
        ("SlurmdSpoolDir", f"{lay.spool_root}/%n"),
        ("SlurmctldPidFile", str(lay.slurmctld_pid)),
        ("SlurmdPidFile", f"{lay.run}/slurmd-%n.pid"),
        ("SlurmctldLogFile", f"{lay.log}/slurmctld.log"),
        ("SlurmdLogFile", f"{lay.log}/slurmd-%n.log"),
        ("SlurmctldDebug", "info"),
        ("SlurmdDebug", "info"),
        ("MailProg", "/bin/true"),
        ("ProctrackType", "proctrack/linuxproc"),
        ("TaskPlugin", "task/none"),
        ("JobAcctGatherType", "jobacct_gather/none"),
        ("AccountingStorageType", "accounting_storage/none"),
        ("JobCompType", "jobcomp/none"),
        ("MpiDefault", "none"),
        ("SelectType", "select/cons_tres"),
        ("SelectTypeParameters", "CR_CPU"),
        ("SchedulerType", "sched/backfill"),
        # het jobs are only started by backfill, whose default interval is 30 s
        ("SchedulerParameters", "bf_interval=1"),
        # trust declared CPUs over the real core count
        ("SlurmdParameters", "config_overrides"),
        ("ReturnToService", "2"),
        ("MinJobAge", "300"),
        ("MaxJobCount", "100000"),
        ("KillWait", "5"),
        ("SlurmdTimeout", "60"),
        # all slurmd share one host: no message forwarding through other (maybe powered-down) nodes
        ("TreeWidth", "65533"),
        # run the prolog on every allocated node when the job starts, not at its first step
        ("PrologFlags", "Alloc"),
    ]
    if cluster.prolog_scripts:
        pairs.append(("Prolog", str(lay.prolog)))
    if cluster.epilog_scripts:
        pairs.append(("Epilog", str(lay.epilog)))
    if any(n.dynamic for n in cluster.nodes):
        static = [n.name for n in cluster.nodes if not n.dynamic]
        pairs += [
            ("ResumeProgram", str(lay.resume_program)),
            ("SuspendProgram", str(lay.suspend_program)),
            ("SuspendTime", str(cluster.suspend_time)),
            # a node stays POWERING_DOWN for SuspendTimeout (our SuspendProgram is done within a second);
            # a resumed node must register within ResumeTimeout or it is set DOWN
            ("SuspendTimeout", "5"),
            ("ResumeTimeout", "60"),
            ("ResumeRate", "0"),
            ("SuspendRate", "0"),
            # idle_on_node_suspend: a suspended node can be resumed again at once; cloud_dns: NodeAddr is
            # known, no address aliases for jobs; power_save_interval: look for work every second (default 10)
            (
                "SlurmctldParameters",
                "idle_on_node_suspend,cloud_dns,power_save_interval=1,power_save_min_interval=0",
            ),
            # powered-down cloud nodes are hidden from sinfo/scontrol without this
            ("PrivateData", "cloud"),
        ]
        if static:
            pairs.append(("SuspendExcNodes", compact_hostlist(static)))
    return pairs


def render_slurm_conf(cluster: ClusterDef, hostname: str | None = None) -> str:
    """The whole slurm.conf of the cluster. hostname defaults to this host's short name."""
    _validate(cluster)
    host = hostname or short_hostname()
    pairs = _merge_pairs(_global_defaults(cluster, host), cluster.config, "config")
    lines = [
        "# generated by trainworks (trainworks.slurm.conf): do not edit, it is rewritten on every apply",
        *(f"{k}={v}" for k, v in pairs),
        "# one slurmd per node, all on this host",
        *(_node_line(n, host) for n in cluster.nodes),
        *(_partition_line(p) for p in cluster.partitions),
    ]
    return "\n".join(lines) + "\n"


def _script_body(body: str) -> str:
    return body if body.startswith("#!") else "#!/bin/bash\n" + body


def _hook_wrapper(kind: str, scripts: Sequence[Path], lay: ClusterLayout) -> str:
    run = "\n".join(
        f'{shlex.quote(str(s))} || {{ rc=$?; echo "{kind}: {s.name} failed with exit $rc"; exit $rc; }}'
        for s in scripts
    )
    return f"""#!/bin/bash
# generated by trainworks: slurmd runs this {kind} on each node of a job; it runs the cluster's {kind} scripts
# in order, in the node's boot disk directory, and fails with the first failing script
export PATH={SCRIPT_PATH}
export TRAINWORKS_NODE_DISK={shlex.quote(str(lay.nodes_root))}/"$SLURMD_NODENAME"/disk
mkdir -p "$TRAINWORKS_NODE_DISK" && cd "$TRAINWORKS_NODE_DISK" || exit 1
exec >>{shlex.quote(str(lay.log))}/{kind}-"$SLURMD_NODENAME".log 2>&1
echo "$(date +%FT%T) {kind} job $SLURM_JOB_ID"
{run}
"""


# true while $1 is a live, non-zombie process (PID 1 here reaps orphans late, so kill -0 is not enough)
_ALIVE_FN = (
    """alive() { [ -r "/proc/$1/stat" ] && ! awk '{exit ($3=="Z")?0:1}' "/proc/$1/stat" 2>/dev/null; }"""
)


def _power_program(lay: ClusterLayout, verb: str, about: str, per_node: str, before_exec: str = "") -> str:
    """A power-saving program: slurmctld runs it with a hostlist ("$1"), and it runs `per_node` for each of
    those nodes with $node and $pidfile (where the node's slurmd writes its pid) set. `about`: the rest of
    its header comment; `before_exec`: comment lines before it redirects its output."""
    q = shlex.quote
    return f"""#!/bin/bash
# generated by trainworks: slurmctld runs this with a hostlist of {about}
export PATH={SCRIPT_PATH}
export SLURM_CONF={q(str(lay.conf))}
{_ALIVE_FN}
{before_exec}exec </dev/null >>{q(str(lay.log))}/power.log 2>&1
echo "$(date +%FT%T) {verb} $1"
for node in $(scontrol show hostnames "$1"); do
  pidfile={q(str(lay.run))}/slurmd-$node.pid
{per_node}done
"""


def _resume_program(lay: ClusterLayout) -> str:
    q = shlex.quote
    return _power_program(
        lay,
        "resume",
        about="power-saved nodes that jobs need; start\n"
        "# their slurmd (-b: report a fresh boot, as a resumed node must, although nothing rebooted)",
        per_node=f"""  if [ -s "$pidfile" ] && alive "$(cat "$pidfile")"; then continue; fi
  mkdir -p {q(str(lay.spool_root))}/"$node" {q(str(lay.nodes_root))}/"$node"/disk
  # slurmctld runs us with SIGTERM and others blocked, and slurmd keeps the mask it inherits (it would ignore
  # the SIGTERM that stops it): clear the mask first (perl-base is Essential in Debian)
  perl -MPOSIX -e 'sigprocmask(SIG_SETMASK, POSIX::SigSet->new) or die "sigprocmask: $!"; exec @ARGV or die' \
    slurmd -b -f "$SLURM_CONF" -N "$node" || echo "resume: slurmd -N $node failed"
""",
        before_exec=(
            "# slurmctld starts us with fds 0-2 closed: without this, slurmd opens its log as fd 0-2 "
            "and its\n"
            "# daemonizing then points the log at /dev/null\n"
        ),
    )


def _suspend_program(lay: ClusterLayout) -> str:
    return _power_program(
        lay,
        "suspend",
        about="idle nodes to power down; stop their slurmd",
        per_node="""  [ -s "$pidfile" ] || continue
  pid=$(cat "$pidfile")
  # only our own slurmd: its command line names this cluster's slurm.conf
  if alive "$pid" && tr '\\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "$SLURM_CONF"; then
    kill -TERM "$pid"
    for _ in $(seq 1 100); do alive "$pid" || break; sleep 0.1; done
    alive "$pid" && kill -KILL "$pid"
  fi
  rm -f "$pidfile"
""",
    )


def render_scripts(cluster: ClusterDef) -> dict[Path, str]:
    """Every executable file the rendered slurm.conf refers to, path -> content."""
    lay = ClusterLayout(cluster.base_dir)
    files: dict[Path, str] = {}
    for kind, bodies, directory, wrapper in (
        ("prolog", cluster.prolog_scripts, lay.prolog_dir, lay.prolog),
        ("epilog", cluster.epilog_scripts, lay.epilog_dir, lay.epilog),
    ):
        if not bodies:
            continue
        paths = [directory / f"{i:03d}.sh" for i in range(len(bodies))]
        files.update({p: _script_body(b) for p, b in zip(paths, bodies, strict=True)})
        files[wrapper] = _hook_wrapper(kind, paths, lay)
    if any(n.dynamic for n in cluster.nodes):
        files[lay.resume_program] = _resume_program(lay)
        files[lay.suspend_program] = _suspend_program(lay)
    return files
