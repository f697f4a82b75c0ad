"""Replica sandbox: the namespaces, mounts and capabilities a host replica runs under.

The server describes what a replica may see as a plan (a JSON object; backends/local.py builds it) and the
replica's supervisor (shim.py, or a warm interpreter's fork in zygote.py) starts the replica with `spawn`:

    supervisor      host PID, the server's mount namespace: waits, writes the exit record
      └─ init       PID 1 of a new PID namespace, in a private mount namespace and the memory cgroup (born
         │          in it on v2, else it moves in), hides the server's files, binds back what the replica
         │          needs, drops every capability
         └─ command the replica's command (exec'd, or the warm interpreter's training function)

Inside: a fresh /proc (only the replica's own processes), the server's home and other private paths behind
empty read-only tmpfs masks with only the replica's working directory (read-write) and its interpreter
environments (read-only) bound back at their own paths, /gcs holding only the buckets its project may see,
a minimal /dev (no disks), private /dev/shm, a /tmp and /var/tmp of its own (folders in its run folder), the
folders the server binds into every replica, /sys and the host filesystem read-only (the replica's $HOME is an
overlay whose changes stay in its run folder), /sys/fs/cgroup hidden. The init then drops the capability
bounding set, ambient, effective, permitted and inheritable capabilities and sets no_new_privs, so a root
replica can neither undo a mount nor gain privileges back.

When the command ends the init reports its wait status (and whether a stop signal came while the command
ran: shim.StopWatch) through a pipe and exits; the kernel then kills
whatever else still runs in the namespace. The supervisor stays outside every namespace, so the server
tracks and signals the replica by the supervisor's host PID and process group as before (init catches
SIGTERM/SIGINT/SIGHUP only to note whether they came while the command ran; the command gets them through
the process group; SIGKILL ends everything). Until the command runs they are held: the supervisor passes
those that came before the init existed on to it, the init those that came before the command existed on
to the command (StopWatch.fork).

Stdlib only: the supervisor loads this file by path, and it is on every replica's start path.
"""

from __future__ import annotations

import ctypes
import os
import signal

TYPE_CHECKING = False  # typing itself is not imported: this module is on every replica's start path
if TYPE_CHECKING:
    import socket
    from collections.abc import Callable
    from typing import Any

    from trainworks.backends.shim import StopWatch

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_NOATIME = 1024
MS_NODIRATIME = 2048
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MS_RELATIME = 1 << 21
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# statvfs f_flag bits, and the mount flags a read-only bind remount must repeat to keep them.
_ST_TO_MS = (
    (1, MS_RDONLY),
    (2, MS_NOSUID),
    (4, MS_NODEV),
    (8, MS_NOEXEC),
    (1024, MS_NOATIME),
    (2048, MS_NODIRATIME),
    (4096, MS_RELATIME),
)

# Device nodes a replica gets (bind-mounted from the host); GPUs are added when present.
_DEVICES = ("null", "zero", "full", "random", "urandom", "tty")
_GPU_DEVICE_PREFIXES = ("nvidia",)
# Parts of /proc that write to the kernel: read-only, as container runtimes make them.
_PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
# Mounts the read-only pass leaves alone: rebuilt by the sandbox itself, or about to be replaced.
_OWN_TREES = ("/proc", "/dev", "/sys/fs/cgroup")
# A replica's own temporary folders (plan "tmp"): the folder under its tmp root, and where it is bound.
PRIVATE_TMP = (("tmp", "/tmp"), ("var-tmp", "/var/tmp"))

_libc: ctypes.CDLL | None = None


class SandboxError(OSError):
    """A step of the sandbox could not be taken: the replica must not start without it."""


class CloneRefused(OSError):
    """The kernel would not start the process in the cgroup (clone_into_cgroup): no process was made."""


def _lib() -> ctypes.CDLL:
    global _libc
    if _libc is None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mount.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_ulong,
            ctypes.c_char_p,
        ]
        libc.unshare.argtypes = [ctypes.c_int]
        libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
        _libc = libc
    return _libc


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise SandboxError(errno, f"{what}: {os.strerror(errno)}")


def _enc(path: str | bytes) -> bytes:
    return path.encode() if isinstance(path, str) else path


def mount(
    source: str | None,
    target: str,
    fstype: str | None,
    flags: int,
    data: str | None = None,
    what: str | None = None,
) -> None:
    libc = _lib()
    result = libc.mount(
        _enc(source) if source is not None else None,
        _enc(target),
        _enc(fstype) if fstype is not None else None,
        flags,
        _enc(data) if data is not None else None,
    )
    _check(result, what or f"mounting {target}")


def unshare(flags: int, what: str) -> None:
    _check(_lib().unshare(flags), what)


def _prctl(option: int, arg2: int = 0, arg3: int = 0, what: str = "prctl") -> None:
    _check(_lib().prctl(option, arg2, arg3, 0, 0), what)


def _flags_of(path: str) -> int:
    """The mount flags of the mount holding `path`, as a bind remount must repeat them."""
    value = os.statvfs(path).f_flag
    return sum(ms for st, ms in _ST_TO_MS if value & st)


def remount_read_only(path: str) -> None:
    mount(
        None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY | _flags_of(path), what=f"making {path} read-only"
    )


def remount_writable(path: str, what: str) -> None:
    mount(None, path, None, MS_REMOUNT | MS_BIND | (_flags_of(path) & ~MS_RDONLY), what=what)


def _bind(source: str, target: str, read_only: bool, what: str) -> None:
    mount(source, target, None, MS_BIND | MS_REC, what=what)
    if read_only:
        remount_read_only(target)


def _tmpfs(
    target: str, mode: str = "0755", flags: int = MS_NOSUID | MS_NODEV, size: str | None = None
) -> None:
    options = f"mode={mode}" + (f",size={size}" if size else "")
    mount("tmpfs", target, "tmpfs", flags, options, what=f"mounting a tmpfs at {target}")


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _touch(path: str) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o644))


def _unescape(field: str) -> str:
    """A mountinfo path: spaces, tabs, newlines and backslashes come as octal escapes."""
    if "\\" not in field:
        return field
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 4 <= len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points() -> list[str]:
    """Every mount point of this process's mount namespace, in mount order."""
    with open("/proc/self/mountinfo") as handle:
        return [_unescape(line.split()[4]) for line in handle if line.strip()]


# ------------------------------------------------------------------ the plan
def format_plan(plan: dict[str, Any]) -> str:
    """The plan as the supervisor reads it: one tab-separated record a line (no json on the start path).

    {"cgroup": {"dir", "version"} | None, "gcs_root": legacy /gcs folder | None, "sandbox": {"hide": [path],
    "keep": [(path, writable)], "gcs": {"root", "buckets"} | None, "home": path | None, "home_layer": path,
    "binds": [(path, writable)], "tmp": the replica's own /tmp root | None} | None}"""
    lines: list[tuple[str, ...]] = []
    cgroup = plan.get("cgroup")
    if cgroup:
        lines.append(("cgroup", cgroup["dir"], str(cgroup["version"])))
    if plan.get("gcs_root"):
        lines.append(("gcs_root", plan["gcs_root"]))
    view = plan.get("sandbox")
    if view is not None:
        lines.append(("sandbox",))
        lines += [("hide", path) for path in view.get("hide", [])]
        lines += [("keep", path, "1" if writable else "0") for path, writable in view.get("keep", [])]
        lines += [("bind", path, "1" if writable else "0") for path, writable in view.get("binds", [])]
        if view.get("tmp"):
            lines.append(("tmp", view["tmp"]))
        if view.get("home"):
            lines.append(("home", view["home"], view["home_layer"]))
        if view.get("gcs") is not None:
            lines.append(("gcs", view["gcs"]["root"]))
            lines += [("bucket", name) for name in view["gcs"]["buckets"]]
    for record in lines:
        if any("\t" in field or "\n" in field for field in record):
            raise ValueError(f"a sandbox path holds a tab or a newline: {record[1]!r}")
    return "".join("\t".join(record) + "\n" for record in lines)


def parse_plan(text: str) -> dict[str, Any]:
    plan: dict[str, Any] = {"cgroup": None, "gcs_root": None, "sandbox": None}
    view: Any = None  # the "sandbox" record's dict, once it came
    for line in text.splitlines():
        kind, *fields = line.split("\t")
        if kind == "cgroup":
            plan["cgroup"] = {"dir": fields[0], "version": int(fields[1])}
        elif kind == "gcs_root":
            plan["gcs_root"] = fields[0]
        elif kind == "sandbox":
            view = plan["sandbox"] = {"hide": [], "keep": [], "binds": [], "gcs": None, "home": None}
            view["tmp"] = None
        elif kind == "hide":
            view[kind].append(fields[0])
        elif kind == "keep":
            view["keep"].append((fields[0], fields[1] == "1"))
        elif kind == "bind":
            view["binds"].append((fields[0], fields[1] == "1"))
        elif kind == "tmp":
            view["tmp"] = fields[0]
        elif kind == "home":
            view["home"], view["home_layer"] = fields
        elif kind == "gcs":
            view["gcs"] = {"root": fields[0], "buckets": []}
        elif kind == "bucket":
            view["gcs"]["buckets"].append(fields[0])
    return plan


# ------------------------------------------------------------------ capabilities
class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def _last_cap() -> int:
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            return int(handle.read())
    except (OSError, ValueError):
        return 63


def drop_privileges() -> None:
    """Empty every capability set, for good: the bounding set (exec cannot give them back, even to root),
    the ambient set, then effective/permitted/inheritable; and no_new_privs (no setuid, no file caps)."""
    for cap in range(_last_cap() + 1):
        # EINVAL: a capability this kernel does not know.
        if _lib().prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:
            _check(-1, f"dropping capability {cap} from the bounding set")
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, what="clearing the ambient capabilities")
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_lib().capset(ctypes.byref(header), ctypes.byref(data)), "clearing the capabilities")
    _prctl(PR_SET_NO_NEW_PRIVS, 1, what="setting no_new_privs")


# ------------------------------------------------------------------ the mount namespace
class _Mounts:
    """Builds the replica's view in the init's fresh mount namespace, following the plan."""

    def __init__(self, plan: dict[str, Any], root: str | None = None) -> None:
        self.plan = plan
        # A folder whose subfolders can still be bound in later (`attach`, a replica slot's run folders):
        # opened before the masks hide it.
        self.root = root
        self.root_fd: int | None = None
        self.masks: list[str] = []
        self.ours: set[str] = (
            set()
        )  # mount points this sandbox made: the read-only pass leaves them as they are
        self.notes: list[str] = []  # what the replica should know about its sandbox (written to its stderr)
        self.fds: list[int] = []

    def _source(self, path: str) -> str:
        """An O_PATH descriptor of `path`, taken before a mask hides it, as a bind source."""
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        self.fds.append(fd)
        return f"/proc/self/fd/{fd}"

    def build(self) -> None:
        mount("none", "/", None, MS_REC | MS_PRIVATE, what="making the mounts private")
        plan = self.plan
        # Sources first: the private /tmp, the home overlay and the masks below would hide (or stand in
        # for) them.
        binds = [(path, bool(flag), self._source(path)) for path, flag in plan.get("binds", [])]
        keep = [(path, bool(flag), self._source(path)) for path, flag in plan.get("keep", [])]
        gcs = plan.get("gcs")
        buckets = []
        if gcs:
            buckets = [(name, self._source(os.path.join(gcs["root"], name))) for name in gcs["buckets"]]
        devices = self._device_sources()
        if self.root is not None:
            self.root_fd = os.open(self.root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        tmp = plan.get("tmp")
        if tmp:
            self._private_tmp(tmp)
        for path, flag, source in binds:
            # A mount of its own, so that making the host's filesystem read-only leaves it as it was given;
            # the masks come after, so a bound folder never uncovers the server's own places inside it.
            self._mkdirs(path)
            _bind(source, path, not flag, f"binding {path}")
            self.ours.add(path)
        home = plan.get("home") or ""
        if home:
            self._home_overlay(home, plan["home_layer"])
        masks = self.masks = self._hide(plan.get("hide", []))
        for path, flag, source in keep:
            self._mkdirs(path)
            _bind(source, path, not flag, f"binding {path} back")
            self.ours.add(path)
        for mask in masks:
            remount_read_only(mask)
        if gcs is not None:
            self._gcs(buckets)
        self._dev(devices)
        self._mask_cgroups()
        self._read_only_pass()
        self._proc()
        for fd in self.fds:
            os.close(fd)
        os.chdir("/")

    def attach(self, binds: list[tuple[str, str, bool]]) -> None:
        """Bind folders under the root in after the view was built: (path relative to the root, target,
        writable), as `build` binds a replica's own folders (a target inside a mask is made in its tmpfs)."""
        assert self.root_fd is not None
        for relative, target, writable in binds:
            flags = os.O_PATH | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(relative, flags, dir_fd=self.root_fd)
            try:
                if not os.path.isdir(target):
                    self._mount_point(target)
                _bind(f"/proc/self/fd/{fd}", target, not writable, f"binding {target}")
                if writable:  # a bind takes its source mount's flags: the read-only pass made that read-only
                    remount_writable(target, f"making {target} writable")
            finally:
                os.close(fd)
            self.ours.add(target)

    def _mount_point(self, target: str) -> None:
        """Make `target`'s folders; in a mask (read-only once built), between two remounts."""
        mask = max((m for m in self.masks if _under(target, m)), key=len, default=None)
        if mask is None:
            os.makedirs(target, exist_ok=True)
            return
        remount_writable(mask, f"making {mask} writable for a moment")
        try:
            os.makedirs(target, exist_ok=True)
        finally:
            remount_read_only(mask)

    def _mkdirs(self, path: str) -> None:
        """The bind target inside a mask: its folders are made in the mask's tmpfs."""
        if not os.path.isdir(path):
            os.makedirs(path, exist_ok=True)

    def _private_tmp(self, root: str) -> None:
        """/tmp and /var/tmp of the replica's own: folders under `root` (in its run folder), bound over the
        host's, as a separate machine's would be. Nothing of the host's /tmp shows (other jobs' files, other
        programs' sockets, a server installed there: that is bound back read-only like a masked one)."""
        sources = []
        for name, target in PRIVATE_TMP:
            folder = os.path.join(root, name)
            os.makedirs(folder, exist_ok=True)
            os.chmod(folder, 0o1777)
            if os.path.isdir(target):
                sources.append((target, self._source(folder)))  # before either bind: root may be under /tmp
        for target, source in sources:
            _bind(source, target, False, f"binding the replica's own {target}")
            self.ours.add(target)

    def _hide(self, paths: list[str]) -> list[str]:
        """An empty tmpfs over each folder (made read-only once the binds are back), /dev/null over files."""
        masks = []
        for path in paths:
            if os.path.isdir(path):
                _tmpfs(path, size="1m")
                masks.append(path)
            elif os.path.lexists(path):
                _bind("/dev/null", path, True, f"hiding {path}")
            self.ours.add(path)
        return masks

    def _home_overlay(self, home: str, layer: str) -> None:
        """$HOME as an overlay: the host's files show, the replica's changes go to its own layer (like a
        container's writable layer) and never reach the host's home. The layer is on a tmpfs of its own
        when the disk cannot hold it (a layer inside the home it covers, a filesystem overlayfs refuses);
        where no overlay can be made at all, $HOME stays read-only like the rest of the host."""
        upper, work = os.path.join(layer, "upper"), os.path.join(layer, "work")
        options = f"lowerdir={home},upperdir={upper},workdir={work}"
        for attempt in ("disk", "tmpfs"):
            try:
                if attempt == "tmpfs":
                    _tmpfs(layer, mode="0700", size="50%")
                for folder in (upper, work):
                    os.makedirs(folder, exist_ok=True)
                mount("overlay", home, "overlay", MS_NOSUID | MS_NODEV, options, what=f"overlaying {home}")
            except OSError as exc:
                failure = exc
                continue
            self.ours.add(home)
            return
        self.notes.append(f"$HOME ({home}) is read-only in this replica: {failure}")

    def _gcs(self, buckets: list[tuple[str, str]]) -> None:
        """/gcs: an empty tmpfs with each visible bucket bound in, then made read-only (buckets stay
        writable: new buckets are made through the storage API, not by mkdir)."""
        try:
            os.makedirs("/gcs", exist_ok=True)
        except OSError as exc:
            raise SandboxError(exc.errno, f"/gcs cannot be made: {exc.strerror}") from None
        _tmpfs("/gcs", size="1m")
        for name, source in buckets:
            target = os.path.join("/gcs", name)
            os.mkdir(target)
            _bind(source, target, False, f"binding bucket {name} at /gcs")
            self.ours.add(target)
        remount_read_only("/gcs")
        self.ours.add("/gcs")

    @staticmethod
    def _device_sources() -> list[tuple[str, int]]:
        names = [name for name in _DEVICES if os.path.exists(f"/dev/{name}")]
        try:
            entries = sorted(os.listdir("/dev"))
        except OSError:
            entries = []
        names += [name for name in entries if name.startswith(_GPU_DEVICE_PREFIXES)]
        if os.path.isdir("/dev/dri"):
            names += [f"dri/{name}" for name in sorted(os.listdir("/dev/dri"))]
        return [(name, os.open(f"/dev/{name}", os.O_PATH | os.O_CLOEXEC)) for name in names]

    def _dev(self, devices: list[tuple[str, int]]) -> None:
        """A minimal /dev: the usual character devices and GPUs, no disks; private shm and pts."""
        _tmpfs("/dev", flags=MS_NOSUID | MS_NOEXEC)
        for name, fd in devices:
            self.fds.append(fd)
            target = f"/dev/{name}"
            if os.path.isdir(f"/proc/self/fd/{fd}"):
                os.makedirs(target, exist_ok=True)
            else:
                os.makedirs(os.path.dirname(target), exist_ok=True)
                _touch(target)
            _bind(f"/proc/self/fd/{fd}", target, False, f"binding {target}")
        os.mkdir("/dev/shm")
        _tmpfs("/dev/shm", mode="1777", flags=MS_NOSUID | MS_NODEV)
        os.mkdir("/dev/pts")
        mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620")
        for link, target in (
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
            ("ptmx", "pts/ptmx"),
        ):
            os.symlink(target, f"/dev/{link}")
        remount_read_only("/dev")

    def _mask_cgroups(self) -> None:
        """Nothing of the cgroup hierarchies shows: the replica cannot leave its memory cgroup."""
        if os.path.isdir("/sys/fs/cgroup"):
            _tmpfs("/sys/fs/cgroup", size="4k", flags=MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY)

    def _read_only_pass(self) -> None:
        """Every other mount read-only: the host's files (/etc, /usr, the server's code) can be read, as an
        image's can, but not changed. What this sandbox mounted itself keeps the mode it was given."""
        for point in mount_points():
            if any(_under(point, own) for own in self.ours) or any(_under(point, t) for t in _OWN_TREES):
                continue
            try:
                remount_read_only(point)
            except (SandboxError, FileNotFoundError) as exc:
                # Hidden under a mask (ENOENT) or no longer a mount point there (EINVAL): nothing to protect.
                if getattr(exc, "errno", None) not in (2, 22):
                    raise

    def _proc(self) -> None:
        """A /proc of the new PID namespace, with its kernel-facing parts read-only."""
        mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, what="mounting /proc")
        for name in _PROC_READ_ONLY:
            path = f"/proc/{name}"
            if os.path.exists(path):
                _bind(path, path, True, f"making {path} read-only")


# ------------------------------------------------------------------ starting the replica
CLONE_INTO_CGROUP = 0x200000000
_SYS_CLONE3 = 435  # one number on every architecture (the generic table)


class _CloneArgs(ctypes.Structure):
    """struct clone_args up to `cgroup` (CLONE_ARGS_SIZE_VER2)."""

    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "flags",
            "pidfd",
            "child_tid",
            "parent_tid",
            "exit_signal",
            "stack",
            "stack_size",
            "tls",
            "set_tid",
            "set_tid_size",
            "cgroup",
        )
    ]


def clone_into_cgroup(directory_fd: int) -> int:
    """clone3 (below) with the child born in the cgroup v2 folder open as `directory_fd`."""
    return clone3(CLONE_INTO_CGROUP, directory_fd)


def clone3(flags: int, directory_fd: int = 0) -> int:
    """os.fork with clone3's `flags`: CLONE_NEWPID (the child is PID 1 of a new PID namespace, and the
    caller's later children stay in its own), CLONE_INTO_CGROUP (the child is born in the cgroup v2 folder
    open as `directory_fd`, Linux 5.7+). Moving a process into a cgroup takes the kernel's threadgroup lock
    for writing, which waits for an RCU grace period (8-20 ms) unless another move came just before; a process
    born in the cgroup takes no such lock. Raises CloneRefused when the kernel refuses (no clone3, a seccomp
    filter, a cgroup it may not enter): the caller forks and moves instead.

    Python's own fork steps are taken (PyOS_BeforeFork/AfterFork_*, as os.fork does), not glibc's: only for
    a process with one thread, whose child runs only this module's code before its next fork or exec (the
    child's glibc thread record keeps the parent's thread id, which pthread_kill of itself does not use but
    thread affinity and clock calls would)."""
    args = _CloneArgs(flags=flags, exit_signal=signal.SIGCHLD, cgroup=directory_fd)
    api = ctypes.pythonapi
    for name in ("PyOS_BeforeFork", "PyOS_AfterFork_Child", "PyOS_AfterFork_Parent"):
        getattr(api, name).restype = None
    syscall = ctypes.PyDLL(None, use_errno=True).syscall  # PyDLL: the interpreter lock stays held, as os.fork
    api.PyOS_BeforeFork()
    pid = syscall(_SYS_CLONE3, ctypes.byref(args), ctypes.c_size_t(ctypes.sizeof(args)))
    errno = ctypes.get_errno()
    if pid == 0:
        api.PyOS_AfterFork_Child()
        return 0
    api.PyOS_AfterFork_Parent()
    if pid < 0:
        raise CloneRefused(errno, f"starting the replica's first process: {os.strerror(errno)}")
    return int(pid)


def _single_threaded() -> bool:
    try:
        return len(os.listdir("/proc/self/task")) == 1
    except OSError:
        return False


def _fork_into(cgroup: dict[str, Any] | None, stops: StopWatch) -> tuple[int, bool]:
    """stops.fork() for the replica's first process, and whether the child was born in the replica's memory
    cgroup (`clone_into_cgroup`). If not, the child must join it itself (`_join_cgroup`): cgroup v1, a
    kernel that refuses, a folder that cannot be opened (the child's join then says why)."""
    if cgroup and cgroup["version"] == 2 and _single_threaded():
        try:
            fd = os.open(cgroup["dir"], os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return stops.fork(), False
        try:
            return stops.fork(lambda: clone_into_cgroup(fd)), True
        except CloneRefused:
            pass
        finally:
            os.close(fd)  # in the parent and in the child
    return stops.fork(), False


def _join_cgroup(cgroup: dict[str, Any] | None) -> None:
    """Move the calling process into the replica's cgroup ("0" names the writer: in a new PID namespace the
    caller's own number would name another process)."""
    if not cgroup:
        return
    path = os.path.join(cgroup["dir"], "cgroup.procs")
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, b"0")
    finally:
        os.close(fd)


def _start_command(start: Callable[[], None], log_fd: int, report_fd: int, stops: StopWatch) -> int:
    """Fork the command; `start` never returns (it execs, or runs the training code and exits)."""
    child = stops.fork()
    if child == 0:
        try:
            os.close(report_fd)
            start()
        except BaseException as exc:  # noqa: BLE001 - the command never started
            os.write(log_fd, f"[trainworks] could not start the replica: {exc}\n".encode())
        os._exit(127)
    return child


def _init(
    plan: dict[str, Any],
    start: Callable[[], None],
    log_fd: int,
    report_fd: int,
    stops: StopWatch,
    joined: bool = False,
) -> None:
    """PID 1 of the replica's namespace: set the sandbox up, start the command, report how it ended (its wait
    status, and whether a stop signal came while it ran: `stops`, shim.StopWatch). Stop signals are held
    until the command exists, then caught, never left at their default: for PID 1 that would ignore them,
    and the command gets them anyway."""
    try:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, what="tying the replica to its supervisor")
        if not joined:  # born in it otherwise (_fork_into)
            _join_cgroup(plan.get("cgroup"))
        view = plan.get("sandbox")
        if view is not None:
            unshare(CLONE_NEWNS, "unsharing the mount namespace")
            mounts = _Mounts(view)
            mounts.build()
            drop_privileges()
            for note in mounts.notes:
                os.write(log_fd, f"[trainworks] {note}\n".encode())
    except BaseException as exc:  # noqa: BLE001 - never run a replica outside the sandbox it was given
        os.write(log_fd, f"[trainworks] the replica's sandbox could not be set up: {exc}\n".encode())
        os._exit(127)
    # The command is this process's child: only here is its end seen without a race.
    _report(_start_command(start, log_fd, report_fd, stops), report_fd, stops)


def _report(command: int, report_fd: int, stops: StopWatch) -> None:
    """The init's last part: wait for the command, report its wait status to the supervisor, exit."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except ChildProcessError:
            os._exit(0)
        if pid == command:
            os.write(report_fd, f"{status} {int(stops.ended(status))}".encode())
            os._exit(0)


def spawn_slot(
    plan: dict[str, Any], root: str, spare: list[str], env: dict[str, str], log_fd: int, stops: StopWatch
) -> tuple[int, int, socket.socket, socket.socket]:
    """A replica slot's sandbox (slots.py), built under `plan` before its replica is known: its init, the
    first process of a new PID namespace (the caller's later children, its logger, stay in the caller's),
    builds the view and starts `spare` (argv; the socket's fd and a pipe's are appended) with `env` and no
    privileges, then waits on its control socket for the hand-off (`parse_hand_off`: the replica's own
    folders under `root`, bound in; the slot's cgroup renamed to the replica's), drops its own privileges,
    lets the spare go (the pipe) and reports the spare's end as `spawn`'s init reports the command's.
    Returns the init's pid, the read end of its report (`collect`), its control socket and the spare's
    socket."""
    import socket

    control, control_init = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    spare_sock, spare_init = socket.socketpair()
    read_fd, write_fd = os.pipe()
    init = stops.fork(lambda: clone3(CLONE_NEWPID))
    if init == 0:
        try:
            control.close()
            spare_sock.close()
            os.close(read_fd)
            _slot_init(plan, root, control_init, spare_init, spare, env, log_fd, write_fd, stops)
        except BaseException as exc:  # noqa: BLE001 - the slot is dropped: its supervisor sees the end
            os.write(log_fd, f"[trainworks] the slot's sandbox failed: {exc}\n".encode())
        os._exit(127)
    control_init.close()
    spare_init.close()
    os.close(write_fd)
    return init, read_fd, control, spare_sock


def format_hand_off(binds: list[tuple[str, str, bool]], cgroup: tuple[str, str] | None) -> bytes:
    """A slot's hand-off to its init (spawn_slot): `bind\trelative\ttarget\twritable` lines, and a
    `cgroup\tslot's name\treplica's name` line; never empty (an empty message is the slot's end)."""
    lines = [f"bind\t{relative}\t{target}\t{int(writable)}\n" for relative, target, writable in binds]
    if cgroup is not None:
        lines.append(f"cgroup\t{cgroup[0]}\t{cgroup[1]}\n")
    return ("hand-off\n" + "".join(lines)).encode()


def parse_hand_off(text: str) -> tuple[list[tuple[str, str, bool]], tuple[str, str] | None]:
    binds, cgroup = [], None
    for line in text.splitlines():
        kind, *fields = line.split("\t")
        if kind == "bind":
            binds.append((fields[0], fields[1], fields[2] == "1"))
        elif kind == "cgroup":
            cgroup = (fields[0], fields[1])
    return binds, cgroup


def _slot_init(  # noqa: PLR0913 - what spawn_slot hands its init
    plan: dict[str, Any],
    root: str,
    control: socket.socket,
    spare_sock: socket.socket,
    spare: list[str],
    env: dict[str, str],
    log_fd: int,
    report_fd: int,
    stops: StopWatch,
) -> None:
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, what="tying the slot to its supervisor")
    cgroup = plan.get("cgroup")
    _join_cgroup(cgroup)
    # The cgroups' folder, renamed in at the hand-off: opened before the view hides it.
    flags = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC
    cgroups = os.open(os.path.dirname(cgroup["dir"]), flags) if cgroup else -1
    unshare(CLONE_NEWNS, "unsharing the mount namespace")
    mounts = _Mounts(plan["sandbox"], root)
    mounts.build()
    go_r, go_w = os.pipe()

    def start() -> None:  # the spare: no privileges, then a fresh interpreter that waits for its command
        control.close()
        os.close(go_w)
        drop_privileges()
        for fd in (spare_sock.fileno(), go_r):
            os.set_inheritable(fd, True)
        os.execve(spare[0], [*spare, str(spare_sock.fileno()), str(go_r)], env)

    command = _start_command(start, log_fd, report_fd, stops)
    spare_sock.close()
    os.close(go_r)
    import socket

    try:
        text, fds, _flags, _address = socket.recv_fds(control, 1 << 16, 1)
        if not text:
            os._exit(0)  # the slot was dropped before it had a replica
        if fds:
            log_fd = fds[0]
        binds, rename = parse_hand_off(text.decode())
        mounts.attach(binds)
        if rename is not None:  # the server's empty cgroup goes, the slot's (the replica's) takes its name
            os.rmdir(rename[1], dir_fd=cgroups)
            os.rename(rename[0], rename[1], src_dir_fd=cgroups, dst_dir_fd=cgroups)
        drop_privileges()
        for note in mounts.notes:
            os.write(log_fd, f"[trainworks] {note}\n".encode())
        os.write(go_w, b"g")  # the spare runs its command now
        control.send(b"ok")
    except BaseException as exc:  # noqa: BLE001 - the replica must not run in a view it was not given
        try:  # noqa: SIM105 - contextlib is not loaded on the start path
            control.send(f"{type(exc).__name__}: {exc}".encode())
        except OSError:
            pass
        os._exit(127)
    control.close()
    _report(command, report_fd, stops)


def spawn(
    plan: dict[str, Any],
    start: Callable[[], None],
    log_fd: int,
    stops: StopWatch,
    started: Callable[[], None] | None = None,
    execs: bool = False,
) -> int:
    """Start the replica under `plan` (parse_plan's dict: its "cgroup" and "sandbox" may be None) and return
    the command's wait status. `start` runs in the command's process and must not return (it releases the
    held stop signals last thing before the command runs; `execs`: it execs the command); `started` runs in
    the supervisor once the replica's processes exist; `stops` (shim.StopWatch, installed: the stop signals
    held) starts them and learns whether a stop signal came while the command ran. The replica's first
    process is born in its memory cgroup where it can be (`_fork_into`: the sandbox's init, or a command
    that is exec'd), else it joins the cgroup first thing."""
    if plan.get("sandbox") is None:
        # No namespaces: the command is the supervisor's own child, as without a sandbox. Training code run
        # in this very process (a warm interpreter's) needs a fork of glibc's own (clone_into_cgroup).
        child, joined = _fork_into(plan.get("cgroup"), stops) if execs else (stops.fork(), False)
        if child == 0:
            try:
                if not joined:
                    _join_cgroup(plan.get("cgroup"))
            except OSError as exc:
                message = f"[trainworks] the replica's memory limit could not be applied: {exc}\n"
                os.write(log_fd, message.encode())
                os._exit(127)
            start()
            os._exit(127)
        if started is not None:
            started()
        return _wait(child)
    unshare(CLONE_NEWPID, "unsharing the PID namespace")
    read_fd, write_fd = os.pipe()
    # stops.command: the init, until the init's own report says better
    init, joined = _fork_into(plan.get("cgroup"), stops)
    if init == 0:
        os.close(read_fd)
        _init(plan, start, log_fd, write_fd, stops, joined)
        os._exit(127)
    os.close(write_fd)
    if started is not None:
        started()
    return collect(init, read_fd, stops)


def collect(init: int, read_fd: int, stops: StopWatch) -> int:
    """The command's wait status, once the sandbox's `init` has ended: from the init's report on `read_fd`
    (closed here), else the init's own status (it failed before it could start the command)."""
    init_status = _wait(init)
    try:
        reported = os.read(read_fd, 64).split()
    finally:
        os.close(read_fd)
    if not reported:
        return init_status
    if len(reported) > 1:
        stops.interrupted = reported[1] == b"1"
    return int(reported[0])


def _wait(pid: int) -> int:
    while True:
        try:
            return os.waitpid(pid, 0)[1]
        except InterruptedError:
            continue


def available() -> bool:
    """Whether this process may build sandboxes: it needs CAP_SYS_ADMIN (mounts, namespaces)."""
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << 21))
    except (OSError, ValueError):
        return False
    return False
