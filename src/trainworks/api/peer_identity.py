"""Peer identity: which replica, if any, is at the other end of a local connection to the server.

Replicas reach the server's storage API (STORAGE_EMULATOR_HOST) and REST API over loopback and present no
credentials. The server tells who they are from what a replica cannot change, never from its environment:
the memory cgroup its init joined before anything of the replica ran (memory_limits.py; the replica cannot
leave it: /sys/fs/cgroup is hidden from it and its capabilities are dropped). For one connection:

1. The client's socket: the kernel's socket table looked up by the connection's exact addresses (a
   NETLINK_SOCK_DIAG request, about 15 µs, or /proc/net/tcp and tcp6 where netlink is refused) gives the
   socket's inode, 0 once no process holds it.
2. Its holder: the processes of the replica cgroups (`cgroup.procs` of each `<job>-<task>` folder under the
   server's replica cgroups, nothing else on the host) are searched for an fd that is `socket:[inode]`.
3. Its project: the job's project number, from the custom jobs' service (a job never changes project).

The answer is cached per connection, keyed by the client's address, port and socket inode (a port reused
by another process comes with another inode) and kept for `ttl` seconds, so keep-alive requests cost one
socket-table look-up. A socket held by the processes of two different jobs names neither.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import functools
import ipaddress
import os
import socket
import struct
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from trainworks.backends.memory_limits import procs

_NETLINK_SOCK_DIAG = 4
_SOCK_DIAG_BY_FAMILY = 20
_NLM_F_REQUEST = 1
_NLMSG_ERROR = 2
_NO_COOKIE = 0xFFFFFFFF
_ALL_STATES = 0xFFFFFFFF
_HEADER = struct.Struct("=IHHII")  # struct nlmsghdr
# struct inet_diag_msg: family, state, timer, retrans, the 48-byte sockid, expires, rqueue, wqueue, uid, inode
_INODE_OFFSET = 4 + 48 + 4 * 4
_CACHE_SIZE = 4096
_REFUSED = (errno.EPERM, errno.EACCES, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT)


@dataclass(frozen=True)
class Replica:
    """A replica of a job: the connection's socket is held by processes of its memory cgroup."""

    job_id: str
    task: str
    project: str | None  # the job's project number; None when no job has that ID (any more)

    @property
    def label(self) -> str:
        return f"replica {self.job_id}/{self.task}"


class Caller(enum.Enum):
    """A connection that is not a replica's."""

    REMOTE = "remote"  # from another host (or a transport without addresses)
    LOCAL = "local"  # a process of this host outside every replica
    UNKNOWN = "unknown"  # a local connection no process holds any more (closed early): who made it is unknown


Peer = Replica | Caller


def _parse_task(name: str) -> tuple[str, str] | None:
    """(job ID, task) of a replica cgroup's name, `<job>-<task>` (local.cgroup_name)."""
    job, sep, task = name.partition("-")
    return (job, task) if sep and job.isdigit() and task else None


class SocketTable:
    """The inode of a local TCP socket, found by its exact addresses in the kernel's socket table."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._netlink: socket.socket | None = None
        self._netlink_refused = False
        self._seq = 0

    @property
    def fast(self) -> bool:
        """Whether a look-up is a netlink query (not a read of /proc's whole table)."""
        return not self._netlink_refused

    def inode(self, local: tuple[str, int], remote: tuple[str, int]) -> int | None:
        """The inode of the socket bound to `local` and connected to `remote`: 0 when it has no holder any
        more, None when there is no such socket here."""
        for family, src, dst in _address_forms(local[0], remote[0]):
            found = self._ask(family, src, local[1], dst, remote[1])
            if found is not None:
                return found
        return None

    def _ask(self, family: int, src: bytes, sport: int, dst: bytes, dport: int) -> int | None:
        if not self._netlink_refused:
            try:
                return self._ask_netlink(family, src, sport, dst, dport)
            except (OSError, struct.error) as exc:
                self._close()
                # Refused for good (no netlink here, a seccomp filter): /proc has the same table, slower.
                self._netlink_refused = getattr(exc, "errno", None) in _REFUSED
        return _proc_net_inode(family, src, sport, dst, dport)

    def _ask_netlink(self, family: int, src: bytes, sport: int, dst: bytes, dport: int) -> int | None:
        sockid = struct.pack("!HH", sport, dport) + src.ljust(16, b"\0") + dst.ljust(16, b"\0")
        sockid += struct.pack("=III", 0, _NO_COOKIE, _NO_COOKIE)
        request = struct.pack("=BBBBI", family, socket.IPPROTO_TCP, 0, 0, _ALL_STATES) + sockid
        with self._lock:
            if self._netlink is None:
                self._netlink = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, _NETLINK_SOCK_DIAG)
                self._netlink.settimeout(2.0)
            self._seq = (self._seq + 1) & 0xFFFFFFFF
            seq = self._seq
            header = _HEADER.pack(_HEADER.size + len(request), _SOCK_DIAG_BY_FAMILY, _NLM_F_REQUEST, seq, 0)
            self._netlink.send(header + request)
            while True:
                reply = self._netlink.recv(65536)
                length, kind, _flags, reply_seq, _pid = _HEADER.unpack_from(reply)
                if reply_seq == seq:  # an answer to an earlier request that timed out is skipped
                    break
        if kind == _NLMSG_ERROR:
            (error,) = struct.unpack_from("=i", reply, _HEADER.size)
            if error in (0, -2):  # ENOENT: no such socket
                return None
            raise OSError(-error, os.strerror(-error))
        if length < _HEADER.size + _INODE_OFFSET + 4:
            raise OSError("short sock_diag reply")
        (found,) = struct.unpack_from("=I", reply, _HEADER.size + _INODE_OFFSET)
        return int(found)

    def _close(self) -> None:
        with self._lock:
            if self._netlink is not None:
                self._netlink.close()
                self._netlink = None


@functools.lru_cache(maxsize=4096)  # a client's address pair recurs on every request of its connection
def _address_forms(local: str, remote: str) -> tuple[tuple[int, bytes, bytes], ...]:
    """The (family, local, remote) packed addresses a socket of this connection may have: an IPv4 client
    of a dual-stack server shows as ::ffff:a.b.c.d there and holds an AF_INET socket."""
    try:
        mine, theirs = ipaddress.ip_address(local), ipaddress.ip_address(remote)
    except ValueError:
        return ()
    forms: list[tuple[int, bytes, bytes]] = []
    if isinstance(mine, ipaddress.IPv6Address) and isinstance(theirs, ipaddress.IPv6Address):
        forms.append((socket.AF_INET6, mine.packed, theirs.packed))
        if mine.ipv4_mapped is not None and theirs.ipv4_mapped is not None:
            mine, theirs = mine.ipv4_mapped, theirs.ipv4_mapped
    if isinstance(mine, ipaddress.IPv4Address) and isinstance(theirs, ipaddress.IPv4Address):
        forms.append((socket.AF_INET, mine.packed, theirs.packed))
    return tuple(forms)


def _proc_hex(address: bytes, port: int) -> str:
    """An address as /proc/net/tcp writes it: each 32-bit word in host order, then the port."""
    words = [address[i : i + 4] for i in range(0, len(address), 4)]
    text = "".join(struct.pack("=I", struct.unpack("!I", w)[0]).hex().upper() for w in words)
    return f"{text}:{port:04X}"


def _proc_net_inode(family: int, src: bytes, sport: int, dst: bytes, dport: int) -> int | None:
    name = "/proc/net/tcp" if family == socket.AF_INET else "/proc/net/tcp6"
    wanted = (_proc_hex(src, sport), _proc_hex(dst, dport))
    try:
        with open(name) as table:
            next(table, None)
            for line in table:
                fields = line.split()
                if len(fields) > 9 and (fields[1], fields[2]) == wanted:
                    return int(fields[9])
    except OSError:
        return None
    return None


class CgroupReplicas:
    """The running replicas of one server, by their memory cgroups `<parent>/<job>-<task>`."""

    def __init__(self, parent: str) -> None:
        self.parent = parent

    def members(self) -> Iterator[tuple[str, list[int]]]:
        """(cgroup name, its processes) of each replica cgroup (not the replica slots' beside them: a slot's
        is named for its replica when it takes one, backends/slots.py)."""
        try:
            entries = list(os.scandir(self.parent))
        except OSError:
            return
        for entry in entries:
            if entry.is_dir(follow_symlinks=False) and _parse_task(entry.name) is not None:
                yield entry.name, procs(entry.path)

    def exists(self, name: str) -> bool:
        return os.path.isdir(os.path.join(self.parent, name))


def holders(replicas: CgroupReplicas, inode: int) -> set[str]:
    """The replica cgroups whose processes hold the socket `inode`."""
    target = f"socket:[{inode}]"
    found: set[str] = set()
    for name, pids in replicas.members():
        for pid in pids:
            folder = f"/proc/{pid}/fd"
            try:
                fds = os.listdir(folder)
            except OSError:
                continue  # exited meanwhile
            for fd in fds:
                with contextlib.suppress(OSError):
                    if os.readlink(f"{folder}/{fd}") == target:
                        found.add(name)
                        break
            if name in found:
                break
    return found


class JobProjects:
    """A job's project number, looked up once (a job never moves to another project)."""

    def __init__(self, custom_jobs: Any) -> None:
        self.custom_jobs = custom_jobs  # the CustomJobService: its jobs by ID, whatever their project
        self._known: dict[str, str] = {}

    def __call__(self, job_id: str) -> str | None:
        found = self._known.get(job_id)
        if found is None:
            found = self.custom_jobs.project_of(int(job_id))
            if found is not None:
                self._known[job_id] = found
        return found


@functools.lru_cache(maxsize=1024)
def is_loopback(host: str) -> bool:
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


class PeerIdentity:
    """Who is at the other end of a connection: a replica (job, task, project) or some other caller."""

    def __init__(
        self,
        replicas: CgroupReplicas,
        project_of: Callable[[str], str | None],
        ttl: float = 30.0,
        table: SocketTable | None = None,
    ) -> None:
        self.replicas = replicas
        self.project_of = project_of
        self.ttl = ttl
        self.table = table or SocketTable()
        self._lock = threading.Lock()
        self._cache: OrderedDict[tuple[str, int, int], tuple[float, Peer, str | None]] = OrderedDict()

    def of(self, client: tuple[str, int] | None, server: tuple[str, int] | None) -> Peer:
        """The peer of the connection from `client` to `server` (ASGI scope's addresses)."""
        found = self._of(client, server, look=True)
        assert found is not None
        return found

    def known(self, client: tuple[str, int] | None, server: tuple[str, int] | None) -> Peer | None:
        """`of` when it needs no look at the replicas' processes (no addresses, no socket, or a cached
        answer), else None: one netlink query at most, cheap enough for the event loop."""
        if not self.table.fast:
            return None
        return self._of(client, server, look=False)

    def _of(self, client: tuple[str, int] | None, server: tuple[str, int] | None, look: bool) -> Peer | None:
        if not client or not server or not isinstance(client[1], int) or not isinstance(server[1], int):
            return Caller.REMOTE  # no TCP addresses (a unix socket): no replica reaches the server that way
        local = is_loopback(client[0]) or client[0] == server[0]
        inode = self.table.inode((client[0], client[1]), (server[0], server[1]))
        if not inode:
            # No socket here: another host's, unless the address is ours; inode 0: its holder closed it
            # before we looked, and whether that was a replica cannot be told any more.
            return Caller.UNKNOWN if local or inode == 0 else Caller.REMOTE
        key = (client[0], client[1], inode)
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(key)
        if cached is not None and cached[0] > now and (cached[2] is None or self.replicas.exists(cached[2])):
            return cached[1]
        if not look:
            return None
        peer, cgroup = self._find(inode)
        with self._lock:
            self._cache[key] = (now + self.ttl, peer, cgroup)
            self._cache.move_to_end(key)
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return peer

    def _find(self, inode: int) -> tuple[Peer, str | None]:
        names = holders(self.replicas, inode)
        if not names:
            return Caller.LOCAL, None
        tasks = {_parse_task(name) for name in names}
        if None in tasks or len({task[0] for task in tasks if task is not None}) != 1:
            return Caller.UNKNOWN, None  # held by the processes of two jobs (or of a cgroup of no job)
        name = min(names)
        job_id, task = _parse_task(name) or ("", "")
        return Replica(job_id, task, self.project_of(job_id)), name


def replica_cgroups_of(services: Any) -> CgroupReplicas | None:
    """The replica cgroups of the server's local backend, or None where replicas get none (memory limits
    off, no writable memory cgroup hierarchy, podman replicas)."""
    backend = getattr(getattr(services, "controller", None), "backend", None)
    isolation = getattr(backend, "isolation", None) if backend is not None else None
    cgroups = getattr(isolation, "cgroups", None) if isolation is not None else None
    parent = getattr(cgroups, "parent", None)
    return CgroupReplicas(parent) if isinstance(parent, str) else None


def peer_identity_for(services: Any) -> PeerIdentity | None:
    """The server's PeerIdentity, or None where its replicas cannot be recognised."""
    replicas = replica_cgroups_of(services)
    custom_jobs = getattr(services, "custom_jobs", None)
    if replicas is None or custom_jobs is None:
        return None
    return PeerIdentity(replicas, JobProjects(custom_jobs))
