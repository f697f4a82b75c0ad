"""Replica slots: sandboxes built before their replicas are known, each with a new interpreter waiting inside.

Most of a host replica's start is set-up its command never sees: the supervisor, the memory cgroup, the
sandbox's namespaces and mounts, then the command's own interpreter start-up (docs/scaling.md). The fork
server (zygote.py) keeps up to N slots (`serve --replica-slots N`, 2 by default) built for the plan of the
last replica it started, and hands the next replica with that plan to one of them. Only what differs from
one replica to the next is done then: its /tmp and $HOME layer renamed from the slot's folder into its run
folder, its run folder and log bound into the view and the slot's memory cgroup renamed to the replica's
(by the init), and the waiting interpreter runs the command as `python -c/-m/SCRIPT` would
(zygote._run_training).

    supervisor  forked from the fork server, leads the slot's process group; from the hand-off on it is the
      │         replica's supervisor (shim.json, its log, exit.json), as a forked shim is
      └─ init   PID 1 of the slot's namespaces, in the slot's memory cgroup (sandbox.spawn_slot)
         └─ spare  `python slots.py FD GO`: a new interpreter (its own hash seed, site imported, none of the
                   server's modules), no privileges, the stop signals held; it waits for its command (FD),
                   then for the init to have made the slot the replica's (GO)

A slot takes a sandboxed host replica whose command is `python [-u] [-B] (-c CODE | -m MODULE | SCRIPT)` of
the slot's interpreter (warm.python_invocation), with the same start-up variables and $HOME, a working
folder in its run folder, and a plan equal to the slot's but for the replica's own folders, with a memory
cgroup on v1 or none (a v2 cgroup cannot be renamed, and the cgroup's name is how the server knows a
replica's connections, api/peer_identity.py). Any other replica, and one whose hand-off fails, starts the
usual way, once the slot is killed and gone (Pool._end). What the command could notice: `sys.modules`
holds the few standard modules the spare loaded to wait (json, socket, ...), and /proc/self/cmdline is the
spare's.

Slots are built (up to four at a time) once the fork server has been idle for a moment, so a burst of
launches is not slowed by them. A slot ends when the fork server drops it (another plan came) or ends;
once it has a replica its supervisor outlives the server like any other. Stdlib only: the fork server
loads it by path.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import socket
import struct
import sys
import time
import traceback

TYPE_CHECKING = False  # typing is not imported: the spare's command would find it in sys.modules
if TYPE_CHECKING:
    import types
    from collections.abc import Callable
    from typing import Any

_DIR = os.path.dirname(os.path.abspath(__file__))
SPARE = os.path.abspath(__file__)
STATE = "slots.json"  # the fork server's slots, in their folder: {"ready": [pid], "building": [pid]}
_HAND_OFF_SECONDS = 5.0  # the fork server waits this long for a slot to take a replica, then forks as usual
_END_SECONDS = 60.0  # how long the fork server waits for a slot it killed to be gone before it goes on
_READY_SECONDS = 120.0  # a slot whose spare is not waiting by then is dropped
_IDLE_SECONDS = 0.05  # slots are built once no launch came for this long
_BACKOFF_SECONDS = 30.0  # after a slot failed to build, the next try waits this long
_BUILDING = 4  # slots built at once: much of a build is waiting (the cgroup join), not work
_STARTUP = ("PYTHON", "LANG", "LC_")
_MAX_MESSAGE = 64 * 1024 * 1024


def _load(name: str) -> types.ModuleType:
    """shim.py (by path, under the private name zygote.py gives it), or a sibling through shim._load."""
    shim = sys.modules.get("_trainworks_shim")
    if shim is None:  # the spare, as it starts
        import importlib.util

        spec = importlib.util.spec_from_file_location("_trainworks_shim", os.path.join(_DIR, "shim.py"))
        assert spec is not None and spec.loader is not None  # a .py path always has both
        shim = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = shim
        spec.loader.exec_module(shim)
    return shim if name == "shim" else shim._load(name)


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _relative(path: str | None, folder: str) -> str | None:
    if not path or path == folder or not _inside(path, folder):
        return None
    return os.path.relpath(path, folder)


def startup_env(env: dict[str, str]) -> dict[str, str]:
    """What of a replica's environment a new interpreter reads as it starts (and $HOME: the user site)."""
    return {k: v for k, v in env.items() if k.startswith(_STARTUP) or k == "HOME"}


def form(request: dict[str, Any]) -> dict[str, Any] | None:
    """What a slot must have been built with to take this launch request (the fork server's `exec` request,
    with the server's `slot` part), or None when no slot can take it. `key`: equal for launches a slot
    built for one takes; `view`: the sandbox plan to build (the replica's /tmp and $HOME layer relative to
    its run folder); `attach`: the replica's own folders, bound in at the hand-off."""
    slot = request.get("slot")
    if not slot or not request.get("plan"):
        return None
    plan = _load("sandbox").parse_plan(request["plan"])
    view, cgroup = plan["sandbox"], plan["cgroup"]
    if view is None or plan["gcs_root"] or (cgroup is not None and cgroup["version"] != 1):
        return None
    root = os.path.normpath(slot["runs_root"])
    run_dir = os.path.normpath(request["run_dir"])
    cwd = os.path.normpath(request.get("cwd") or "/")
    if _relative(run_dir, root) is None or not _inside(cwd, run_dir):
        return None
    if any(_inside(path, run_dir) for path in view["hide"]):
        return None  # a mask inside the run folder: only a view built with it has it
    own = [(path, writable) for path, writable in (*view["binds"], *view["keep"]) if _inside(path, run_dir)]
    template = dict(view)
    template["binds"] = [entry for entry in view["binds"] if not _inside(entry[0], run_dir)]
    template["keep"] = [entry for entry in view["keep"] if not _inside(entry[0], run_dir)]
    for key in ("tmp", "home_layer"):
        if view.get(key):
            template[key] = _relative(view[key], run_dir)
            if template[key] is None:
                return None
    startup = startup_env(request["env"])
    user_base = _relative(startup.get("PYTHONUSERBASE"), run_dir)
    if user_base is not None and not os.path.exists(os.path.join(run_dir, user_base)):
        # The replica's own user base (host_python.py): not there yet at its start, so no user site is on
        # sys.path, as in the spare; the spare's `site` then finds the replica's from its environment.
        startup["PYTHONUSERBASE"] = os.path.join("$RUN", user_base)
    limits = None
    if cgroup is not None:
        with open(os.path.join(cgroup["dir"], "memory.limit_in_bytes")) as handle:
            limits = {"parent": os.path.dirname(cgroup["dir"]), "limit": int(handle.read())}
    described = {
        "view": template,
        "cgroup": limits,
        "python": slot["python"],
        "startup": startup,
        "root": root,
    }
    return {
        **described,
        "key": json.dumps(described, sort_keys=True),
        "attach": [(os.path.relpath(path, root), path, writable) for path, writable in own],
        "cgroup_dir": cgroup["dir"] if cgroup is not None else None,
    }


# ------------------------------------------------------------------ the fork server's side
class _Slot:
    def __init__(self, pid: int, sock: socket.socket, key: str) -> None:
        self.pid = pid
        try:  # its supervisor: a child of the fork server, not reaped yet
            self.pidfd = os.pidfd_open(pid)
        except OSError:
            self.pidfd = -1
        self.sock = sock
        self.key = key
        self.ready = False
        self.init = -1  # a pidfd of the slot's init, once it is ready: its end is the end of the spare too

    def close(self) -> None:
        """The fork server's ends of it: its socket and pidfds."""
        self.sock.close()
        for fd in (self.pidfd, self.init):
            if fd >= 0:
                os.close(fd)
        self.pidfd = self.init = -1


class Pool:
    """The fork server's slots: built for the plan of the last launch a slot could take (`take`)."""

    def __init__(self, size: int, folder: str, start_time: Callable[[int], int | None]) -> None:
        self.size = size
        self.folder = folder
        self.start_time = start_time
        self.slots: list[_Slot] = []
        self.wanted: dict[str, Any] | None = None  # form() of the last launch a slot could take
        self.last_launch = 0.0
        self.failed_at = -_BACKOFF_SECONDS
        self.disks: dict[str, bool] = {}  # runs root: whether it is on the slots' disk
        self._sweep()
        self.save()

    def _sweep(self, keep: int = 0) -> None:
        """Folders of slots whose supervisor is gone (one that failed, or was killed before it could remove
        its own), but `keep`'s."""
        try:
            entries = os.listdir(self.folder)
        except OSError:
            return
        for entry in entries:
            if entry.isdigit() and entry != str(keep) and self.start_time(int(entry)) is None:
                shutil.rmtree(os.path.join(self.folder, entry), ignore_errors=True)

    def watched(self) -> list[int]:
        return [slot.sock.fileno() for slot in self.slots]

    def timeout(self) -> float:
        """How long the fork server may wait for a request before it should build a slot."""
        if not self._short():
            return 1.0
        return max(0.0, min(1.0, self.last_launch + _IDLE_SECONDS - time.monotonic()))

    def _short(self) -> bool:
        if self.wanted is None or sum(1 for slot in self.slots if not slot.ready) >= _BUILDING:
            return False  # nothing to build for, or enough are being built
        if time.monotonic() - self.failed_at < _BACKOFF_SECONDS:
            return False
        return sum(1 for slot in self.slots if slot.key == self.wanted["key"]) < self.size

    def readable(self, fd: int) -> None:
        """A slot said it is ready, or ended."""
        slot = next((slot for slot in self.slots if slot.sock.fileno() == fd), None)
        if slot is None:
            return
        try:
            said = slot.sock.recv(64, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError:
            said = b""
        if said.startswith(b"ready "):
            slot.ready = True
            with contextlib.suppress(OSError, ValueError):  # its child, not reaped while the slot waits
                slot.init = os.pidfd_open(int(said[6:]))
            self.save()
            return
        self._drop(slot)
        self.save()
        if not slot.ready:
            self.failed_at = time.monotonic()
            print(f"[trainworks] a replica slot ended before it was ready: {self._log(slot.pid)}", flush=True)
            self._sweep(keep=slot.pid)

    def _same_disk(self, root: str) -> bool:
        """Whether the slots' folders can be renamed into run folders under `root` (once per root)."""
        if root not in self.disks:
            try:
                os.makedirs(self.folder, exist_ok=True)
                self.disks[root] = os.stat(self.folder).st_dev == os.stat(root).st_dev
            except OSError:
                self.disks[root] = False
            if not self.disks[root]:
                print(f"[trainworks] no replica slots: {self.folder} is not on {root}'s disk", flush=True)
        return self.disks[root]

    def _log(self, pid: int) -> str:
        return os.path.join(self.folder, str(pid), "slot.log")

    def _drop(self, slot: _Slot) -> None:
        """Close its socket: the slot's supervisor ends it (a slot with a replica no longer listens)."""
        if slot in self.slots:
            self.slots.remove(slot)
        slot.close()

    def take(self, request: dict[str, Any]) -> dict[str, int] | None:
        """Hand the launch to a ready slot built for its plan: the slot's supervisor pid and start time, or
        None (start it the usual way). Slots of another plan are dropped: the next ones are built for this."""
        self.last_launch = time.monotonic()
        try:
            found = form(request)
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"[trainworks] no replica slot for {request.get('run_dir')}: {exc}", flush=True)
            return None
        if found is None or not self._same_disk(found["root"]):
            return None
        key = found["key"]
        if self.wanted is None or self.wanted["key"] != key:
            self.wanted = found
            for slot in [slot for slot in self.slots if slot.key != key]:
                self._drop(slot)
            self.save()
        for slot in [slot for slot in self.slots if slot.ready and slot.key == key]:
            self.slots.remove(slot)
            try:
                slot.sock.setblocking(True)
                slot.sock.settimeout(_HAND_OFF_SECONDS)
                slot.sock.send(json.dumps({"request": request, "form": found}).encode())
                answer = slot.sock.recv(4096)
            except OSError as exc:
                answer = f"no {exc}".encode()
            if answer == b"ok":
                self._drop(slot)
                return {"pid": slot.pid, "pid_start": self.start_time(slot.pid) or 0}
            self._end(slot, found)
            said = f"{answer.decode(errors='replace')} ({self._log(slot.pid)})"
            print(f"[trainworks] a replica slot did not take {request['run_dir']}: {said}", flush=True)
            return None
        return None

    def _end(self, slot: _Slot, found: dict[str, Any]) -> None:
        """A slot that did not take the launch it was given: killed, its init (and with it the spare) gone,
        and the replica's memory cgroup as the server made it, before the launch starts the usual way. A slot
        that was only slow (stalled, or waiting for a CPU) must not go on to run the command beside it."""
        for fd in (slot.pidfd, slot.init):  # the init's end is its namespace's: the spare's too
            if fd >= 0:
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                select.select([fd], [], [], _END_SECONDS)  # readable once it has ended
        self._drop(slot)
        if found["cgroup"] is not None:
            parent = found["cgroup"]["parent"]
            _load("memory_limits").remove_dir(os.path.join(parent, cgroup_name(slot.pid)))  # not renamed
            _remake_cgroup(found["cgroup"], found["cgroup_dir"])  # maybe the slot's, renamed

    def build(self, close_in_child: Callable[[], None]) -> None:
        """Build one slot for the wanted plan, if one is missing and none is being built."""
        if not self._short() or time.monotonic() - self.last_launch < _IDLE_SECONDS:
            return
        assert self.wanted is not None
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            try:
                close_in_child()
                ours.close()
                self.close_in_child()
                _supervise_slot(theirs, self.wanted, self.folder)
            except BaseException:  # noqa: BLE001 - the fork server sees the slot end
                traceback.print_exc()
            os._exit(127)
        theirs.close()
        self.slots.append(_Slot(pid, ours, self.wanted["key"]))
        self.save()

    def save(self) -> None:
        """Write which slots are ready and which are being built (STATE), for whoever looks from outside."""
        state = {
            "ready": [slot.pid for slot in self.slots if slot.ready],
            "building": [slot.pid for slot in self.slots if not slot.ready],
        }
        path = os.path.join(self.folder, STATE)
        with contextlib.suppress(OSError):
            os.makedirs(self.folder, exist_ok=True)
            with open(path + ".tmp", "w") as handle:
                json.dump(state, handle)
            os.replace(path + ".tmp", path)

    def close_in_child(self) -> None:
        """In a process forked from the fork server: the slots' sockets are the fork server's."""
        for slot in self.slots:
            slot.close()


def cgroup_name(supervisor: int) -> str:
    """A slot's memory cgroup, beside the replicas' (peer identity looks only at `<job>-<task>` names)."""
    return f"slot-{supervisor}"


def _remake_cgroup(limits: dict[str, Any], named: str) -> None:
    """The replica's memory cgroup `named` made anew as the server made it (`limits`: form()'s "cgroup"):
    after a hand-off that did not happen, the init may have removed it, or given the slot's its name."""
    cgroups = _load("memory_limits").ReplicaCgroups(limits["parent"], 1)
    cgroups.prepare(os.path.basename(named), limits["limit"])


# ------------------------------------------------------------------ the slot's supervisor
def _send(sock: socket.socket, payload: dict[str, Any], fds: list[int]) -> None:
    """A length-prefixed JSON message on a stream socket, with `fds` (SCM_RIGHTS) on its first byte."""
    data = json.dumps(payload).encode()
    socket.send_fds(sock, [struct.pack("!Q", len(data))], fds)
    sock.sendall(data)


def _receive(sock: socket.socket) -> tuple[dict[str, Any], list[int]]:
    header, fds, _flags, _address = socket.recv_fds(sock, 8, 4)
    while len(header) < 8:
        more = sock.recv(8 - len(header))
        if not more:
            raise EOFError("the slot's supervisor ended")
        header += more
    (size,) = struct.unpack("!Q", header)
    if size > _MAX_MESSAGE:
        raise ValueError("message too large")
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise EOFError("the slot's supervisor ended")
        chunks.append(chunk)
        left -= len(chunk)
    return json.loads(b"".join(chunks)), fds


def _supervise_slot(control: socket.socket, built: dict[str, Any], folder: str) -> None:
    """The slot's supervisor (forked from the fork server): build the slot, say so, wait for a replica or
    the end of the fork server (`control`), then supervise the replica as shim.supervise does."""
    shim = _load("shim")
    sandbox = _load("sandbox")
    limits = _load("memory_limits")
    os.setsid()
    slot_dir = os.path.join(folder, str(os.getpid()))
    shutil.rmtree(slot_dir, ignore_errors=True)
    os.makedirs(slot_dir)
    log = os.open(os.path.join(slot_dir, "slot.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    stops = shim.StopWatch()  # held since the fork (the fork server holds them)
    stops.install()
    view = dict(built["view"])
    for key in ("tmp", "home_layer"):
        if view.get(key):
            view[key] = os.path.join(slot_dir, view[key])
    # Only what the interpreter reads as it starts (and nothing of the replica the slot was built after: its
    # environment would show in the next one's /proc/self/environ); the replica's own comes at the hand-off.
    spare_env = dict(built["startup"])
    if spare_env.get("PYTHONUSERBASE", "").startswith("$RUN/"):
        spare_env["PYTHONUSERBASE"] = os.path.join(slot_dir, spare_env["PYTHONUSERBASE"][5:])  # not there
    cgroup = None
    try:
        if built["cgroup"] is not None:
            cgroups = limits.ReplicaCgroups(built["cgroup"]["parent"], 1)
            cgroup = cgroups.prepare(cgroup_name(os.getpid()), built["cgroup"]["limit"])
        plan = {"cgroup": cgroup, "gcs_root": None, "sandbox": view}
        spare = [built["python"], SPARE]
        init, report, init_control, spare_sock = sandbox.spawn_slot(
            plan, built["root"], spare, spare_env, 2, stops
        )
    except BaseException:
        if cgroup is not None:
            limits.remove_dir(cgroup["dir"])
        raise  # its folder stays, for its slot.log, until the fork server sweeps it

    def drop(why: str, failed: bool = False) -> None:
        os.write(2, f"[trainworks] slot dropped: {why}\n".encode())
        os.kill(init, signal.SIGKILL)  # and with it the spare (the end of its PID namespace)
        sandbox.collect(init, report, stops)
        if cgroup is not None:
            limits.remove_dir(cgroup["dir"])
        if not failed:  # else its folder stays, for its slot.log, until the fork server sweeps it
            shutil.rmtree(slot_dir, ignore_errors=True)
        os._exit(0)

    # The spare is ready, or fails, or the fork server ends meanwhile (its socket's end: the slot goes too).
    readable, _, _ = select.select([spare_sock, control], [], [], _READY_SECONDS)
    if control in readable:
        drop("the fork server dropped it")
    try:
        ready = spare_sock in readable and spare_sock.recv(1) == b"r"
    except OSError:
        ready = False
    if not ready:
        drop("its spare interpreter did not start", failed=True)
    try:
        control.send(b"ready %d" % init)
    except OSError:
        drop("the fork server dropped it")
    readable, _, _ = select.select([control, report], [], [])
    if report in readable:
        drop("its init ended")
    try:
        message = control.recv(1 << 18)
    except OSError:
        message = b""
    if not message:
        drop("the fork server dropped it")
    try:
        handed = json.loads(message)
        replica, found = handed["request"], handed["form"]  # the fork server's form() of it
        if found["key"] != built["key"]:
            raise ValueError("not a replica for this slot")
        capture = _load("capture").Capture(replica["run_dir"])
        before = limits.oom_kills(cgroup["dir"], 1) if cgroup is not None else None
        cgroup_dir = _hand_off(replica, found, slot_dir, init_control, spare_sock, capture, cgroup, built)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        with contextlib.suppress(OSError):
            control.send(f"no {type(exc).__name__}: {exc}".encode())
        drop(f"its hand-off failed: {exc}")
    try:
        control.send(b"ok")
    except OSError:  # the fork server gave up waiting (and kills the slot): stop the command at once
        drop("the fork server gave up on the hand-off")
    control.close()
    _run_replica(replica, capture, cgroup_dir, before, init, report, stops)
    shutil.rmtree(slot_dir, ignore_errors=True)
    os._exit(0)


def _hand_off(  # noqa: PLR0913 - the slot's parts
    replica: dict[str, Any],
    found: dict[str, Any],
    slot_dir: str,
    init_control: socket.socket,
    spare_sock: socket.socket,
    capture: Any,
    cgroup: dict[str, Any] | None,
    built: dict[str, Any],
) -> str | None:
    """Make the slot the replica's: its /tmp and $HOME layer moved into its run folder, its record written,
    the command sent to the spare, and the init told to bind the replica's own folders in and give the slot's
    memory cgroup the replica's name; the init then lets the spare go. Returns the replica's cgroup folder.
    Undone where it can be (the mounts go with the slot) when a step fails, the server's cgroup made again."""
    run_dir = replica["run_dir"]
    moved: list[tuple[str, str]] = []
    try:
        for key in ("tmp", "home_layer"):
            relative = found["view"].get(key)
            source, target = os.path.join(slot_dir, relative or ""), os.path.join(run_dir, relative or "")
            # Not there: made inside the slot's own /tmp (a run folder under /tmp), which moves with it.
            if relative and os.path.lexists(source):
                os.rename(source, target)
                moved.append((target, source))
        # Before the command runs, as the shim writes it: a restarted server adopts the replica by it.
        _load("shim").write_forked_record(run_dir, [("slot", 1)])
        named = found["cgroup_dir"]
        rename = (os.path.basename(cgroup["dir"]), os.path.basename(named)) if cgroup is not None else None
        sandbox = _load("sandbox")
        socket.send_fds(init_control, [sandbox.format_hand_off(found["attach"], rename)], [capture.stderr])
        invocation = replica["slot"]["invocation"]
        command = {"env": replica["env"], "cwd": replica.get("cwd") or "", "python": invocation}
        _send(spare_sock, command, [capture.stdout, capture.stderr])  # it runs once the init says so
        spare_sock.close()
        init_control.settimeout(_HAND_OFF_SECONDS)
        answer = init_control.recv(4096)
        if answer != b"ok":
            if cgroup is not None and not os.path.isdir(named):  # the server's, as it was
                _remake_cgroup(built["cgroup"], named)
            raise OSError(answer.decode(errors="replace") or "the slot's init ended")
        return str(named) if cgroup is not None else None
    except BaseException:
        for target, source in moved:
            with contextlib.suppress(OSError):
                os.rename(target, source)
        raise


def _run_replica(  # noqa: PLR0913 - the slot's parts
    replica: dict[str, Any],
    capture: Any,
    cgroup_dir: str | None,
    before: int | None,
    init: int,
    report: int,
    stops: Any,
) -> None:
    """The supervisor's part once the slot is the replica's: as zygote._supervise and shim.supervise."""
    shim, sandbox = _load("shim"), _load("sandbox")
    run_dir = replica["run_dir"]
    log = os.open(os.path.join(run_dir, "shim.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 2)
    os.close(log)
    os.environ.clear()  # the replica's, as the shim's
    os.environ.update(replica["env"])
    capture.start()
    shim._fsync(os.path.join(run_dir, "shim.json"))
    status = sandbox.collect(init, report, stops)
    cgroup = {"dir": cgroup_dir, "version": 1} if cgroup_dir else None
    shim.finish(status, run_dir, cgroup, before, stops, capture)


# ------------------------------------------------------------------ the spare interpreter
def _spare(fd: int, go: int) -> None:
    """`python slots.py FD GO`: wait on the socket FD for the command, then on the pipe GO for the init to
    have made the sandbox the replica's, then run it as the interpreter would."""
    sock = socket.socket(fileno=fd)
    zygote = _load("zygote")
    shim = _load("shim")
    base_path = sys.path[1:]  # what `python -c` has after its first entry (PYTHONPATH already in it)
    sock.sendall(b"r")
    try:
        command, fds = _receive(sock)
    except (OSError, ValueError, EOFError):
        os._exit(127)  # the slot was dropped, or its supervisor ended
    sock.close()
    if not os.read(go, 1):
        os._exit(127)  # the init ended: the hand-off failed
    os.close(go)
    site = sys.modules.get("site")
    if site is not None:  # what it found at start-up was the first replica's user base (form): look again
        site.USER_BASE = site.USER_SITE = None  # type: ignore[attr-defined]
    zygote._run_training(command, fds[0], fds[1], lambda: None, shim.StopWatch.release, base_path)


if __name__ == "__main__":
    _spare(int(sys.argv[1]), int(sys.argv[2]))
