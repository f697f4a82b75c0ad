"""Memory limits of host replicas: one memory cgroup per replica, limited to its machine type's memory.

Server side (`ReplicaCgroups`): the replica cgroups live under the memory cgroup the server itself runs in
(read from /proc/self/cgroup), as `<that cgroup>/trainworks-<server tag>/<job>-<task>`: on the cgroup v1
memory hierarchy (limit in memory.limit_in_bytes and memory.memsw.limit_in_bytes, so swap counts too), or on
cgroup v2 when that hierarchy has the memory controller (memory.max, memory.swap.max=0, memory.oom.group).
A replica's cgroup is made afresh before each start and removed when the replica ends; `sweep` removes
those of replicas that ended while no supervisor was left to do it (a server restart runs it). Where
neither hierarchy is writable the server logs one warning and replicas run without a limit.

Supervisor side: the replica's init joins the cgroup before anything of the replica runs (sandbox.py), the
supervisor reads the cgroup's OOM kill count before and after (`oom_kills`), writes `oom_kill` into the exit
record when the count grew, and removes the cgroup (`remove_dir`). Those functions import nothing beyond
the os module: shim.py loads this file by path on every replica start.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import time

TYPE_CHECKING = False  # typing is not imported: the supervisor loads this file on every replica start
if TYPE_CHECKING:
    from collections.abc import Iterator

#: ReplicaStatus.detail of a replica the OOM killer ended; the job fails with the documented message.
OUT_OF_MEMORY = "out of memory"
#: How long removing a cgroup waits for its last processes to finish exiting.
_REMOVE_WAIT = 2.0
#: An empty replica cgroup younger than this may belong to a replica that is just starting.
_SWEEP_MIN_AGE = 10.0

_warned: set[str] = set()


def _warn_once(key: str, message: str) -> None:
    if key in _warned:
        return
    _warned.add(key)
    import logging

    logging.getLogger("trainworks").warning(message)


def _read(path: str) -> str:
    with open(path) as handle:
        return handle.read()


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _field(text: str, key: str) -> int | None:
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key:
            return int(value)
    return None


def procs(directory: str) -> list[int]:
    try:
        return [int(p) for p in _read(os.path.join(directory, "cgroup.procs")).split()]
    except (OSError, ValueError):
        return []


# ------------------------------------------------------------------ supervisor side
def oom_kills(directory: str, version: int) -> int | None:
    """How many processes the OOM killer has ended in this cgroup; None where the kernel does not say."""
    name = "memory.events" if version == 2 else "memory.oom_control"
    try:
        return _field(_read(os.path.join(directory, name)), "oom_kill")
    except (OSError, ValueError):
        return None


def hit_limit(directory: str, version: int) -> bool:
    """Whether the cgroup ever reached its limit (the fallback on kernels without an oom_kill count)."""
    try:
        if version == 2:
            return bool(_field(_read(os.path.join(directory, "memory.events")), "max"))
        return int(_read(os.path.join(directory, "memory.failcnt"))) > 0
    except (OSError, ValueError):
        return False


def ran_out_of_memory(directory: str, version: int, before: int | None, status: int) -> bool:
    """Whether the replica that ended with wait status `status` was ended by the OOM killer."""
    after = oom_kills(directory, version)
    if after is not None and before is not None:
        return after > before
    # No count: a SIGKILL after the limit was reached is the OOM killer's mark.
    killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    return killed and hit_limit(directory, version)


def remove_dir(directory: str, wait: float = _REMOVE_WAIT) -> bool:
    """Remove a cgroup once its last processes are gone (True when it is gone)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            os.rmdir(directory)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)  # processes of a namespace that just ended are still exiting


def kernel_logged_oom_kill(cgroup_marker: str) -> bool:
    """Whether the kernel log has an OOM kill in a memory cgroup whose path contains `cgroup_marker` (for
    runtimes that do not report it themselves: conmon misses them on hybrid cgroup v1 hosts)."""
    try:
        fd = os.open("/dev/kmsg", os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return False
    try:
        while True:
            try:
                record = os.read(fd, 8192)
            except BlockingIOError:
                return False
            except OSError as exc:
                if exc.errno == errno.EPIPE:  # overwritten while reading: go on with the next record
                    continue
                return False
            if not record:
                return False
            if b"oom-kill:" in record and b"oom_memcg=" in record:
                memcg = record.split(b"oom_memcg=", 1)[1].split(b",", 1)[0]
                if cgroup_marker.encode() in memcg:
                    return True
    finally:
        os.close(fd)


# ------------------------------------------------------------------ server side
def _own_cgroup(pid: int | str = "self") -> tuple[int, str] | None:
    """(hierarchy version, path) of a process's memory cgroup: v1 when the memory controller is on a v1
    hierarchy, else the v2 path."""
    try:
        lines = _read(f"/proc/{pid}/cgroup").splitlines()
    except OSError:
        return None
    unified = None
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if "memory" in parts[1].split(","):
            return 1, parts[2]
        if parts[0] == "0" and parts[1] == "":
            unified = parts[2]
    return (2, unified) if unified is not None else None


def _mounts(mountinfo: str = "/proc/self/mountinfo") -> Iterator[tuple[list[str], str, list[str]]]:
    """Each mount's mountinfo fields, file system type and super options; nothing when it cannot be read."""
    try:
        lines = _read(mountinfo).splitlines()
    except OSError:
        return
    for line in lines:
        if " - " not in line:
            continue
        after = line.split(" - ", 1)[1].split()
        yield line.split(), after[0], (after[2] if len(after) > 2 else "").split(",")


def _mount_of(version: int) -> tuple[str, str] | None:
    """(mount point, root inside the hierarchy) of the memory hierarchy's mount."""
    for fields, fstype, options in _mounts():
        if version == 1 and fstype == "cgroup" and "memory" in options:
            return fields[4], fields[3]
        if version == 2 and fstype == "cgroup2":
            return fields[4], fields[3]
    return None


def moves_are_fast(mountinfo: str = "/proc/self/mountinfo") -> bool:
    """Whether the cgroup2 hierarchy is mounted with `favordynmods` (Linux >= 6.0). Without it, the first
    move of a process into a cgroup after a quiet spell waits for an RCU grace period (the kernel's
    threadgroup lock; 8-21 ms measured): a replica started after a pause into a v1 memory cgroup pays it (on
    v2 it is born in the cgroup instead; docs/scaling.md)."""
    return any(fstype == "cgroup2" and "favordynmods" in options for _, fstype, options in _mounts(mountinfo))


def _directory(found: tuple[int, str]) -> str | None:
    """The folder of a cgroup (version, path) in this process's view of the hierarchy."""
    version, path = found
    mount = _mount_of(version)
    if mount is None:
        return None
    point, root = mount
    relative = os.path.relpath(path, root) if root != "/" else path.lstrip("/")
    return os.path.normpath(os.path.join(point, relative))


def memory_cgroup_of(pid: int | str = "self") -> str | None:
    """The folder of a process's memory cgroup, or None where that cannot be told."""
    found = _own_cgroup(pid)
    return _directory(found) if found is not None else None


class ReplicaCgroups:
    """The memory cgroups of one server's replicas, under `parent` (`.../trainworks-<tag>`)."""

    def __init__(self, parent: str, version: int) -> None:
        self.parent = parent
        self.version = version

    @classmethod
    def detect(cls, tag: str) -> ReplicaCgroups | None:
        """The server's replica cgroups, made ready; None (after one logged warning) where limits cannot
        be applied here."""
        found = _own_cgroup()
        base = _directory(found) if found is not None else None
        if found is None or base is None:
            _warn_once("none", "replica memory limits are off: no memory cgroup hierarchy is mounted here")
            return None
        version = found[0]
        parent = os.path.join(base, f"trainworks-{tag}")
        try:
            if version == 2:
                if "memory" not in _read(os.path.join(base, "cgroup.controllers")).split():
                    raise OSError("the memory controller is not available in this cgroup v2 hierarchy")
                _enable_memory(base)
            os.makedirs(parent, exist_ok=True)
            if version == 2:
                _enable_memory(parent)
            elif not os.path.exists(os.path.join(parent, "memory.limit_in_bytes")):
                raise OSError(f"{parent} has no memory.limit_in_bytes")
        except OSError as exc:
            _warn_once(
                "unwritable",
                f"replica memory limits are off: cannot make replica cgroups under {base}: {exc}",
            )
            return None
        return cls(parent, version)

    def path(self, name: str) -> str:
        return os.path.join(self.parent, name)

    def prepare(self, name: str, limit: int) -> dict[str, object]:
        """A fresh cgroup for one replica start, limited to `limit` bytes (swap included); what the replica's
        plan says about it. Leftovers of an earlier run of the same replica are killed first."""
        directory = self.path(name)
        if os.path.isdir(directory):
            for pid in procs(directory):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            remove_dir(directory)
        os.makedirs(directory, exist_ok=True)
        value = str(int(limit))
        if self.version == 1:
            memsw = os.path.join(directory, "memory.memsw.limit_in_bytes")
            has_memsw = os.path.exists(memsw)
            if has_memsw:
                _write(memsw, "-1")  # a reused cgroup's old memsw limit may be lower than the new limit
            _write(os.path.join(directory, "memory.limit_in_bytes"), value)
            if has_memsw:
                _write(memsw, value)
        else:
            _write(os.path.join(directory, "memory.max"), value)
            # Swap counts against the limit (as memsw does in v1); an OOM kill ends the whole replica.
            for file_name, setting in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                if os.path.exists(os.path.join(directory, file_name)):
                    _write(os.path.join(directory, file_name), setting)
        return {"dir": directory, "version": self.version}

    def remove(self, name: str) -> bool:
        return remove_dir(self.path(name), wait=0.0)

    def sweep(self, min_age: float = _SWEEP_MIN_AGE) -> list[str]:
        """Remove the cgroups of replicas that have ended (no process left). Idempotent."""
        removed: list[str] = []
        try:
            entries = list(os.scandir(self.parent))
        except OSError:
            return removed
        now = time.time()
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False) or procs(entry.path):
                continue
            try:
                if now - entry.stat().st_mtime < min_age:
                    continue
            except OSError:
                continue
            if remove_dir(entry.path, wait=0.0):
                removed.append(entry.name)
        return removed


def _enable_memory(directory: str) -> None:
    """Give a v2 cgroup's children the memory controller."""
    control = os.path.join(directory, "cgroup.subtree_control")
    if "memory" not in _read(control).split():
        _write(control, "+memory")
