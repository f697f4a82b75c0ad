"""A replica's log: every line it writes, timestamped as it is read from the replica's pipes, kept in order.

The supervisor (shim.py, zygote.py, slurm/task.py) gives the command two pipes for stdout and stderr and a
thread of its own (`Capture`) reads them as the command writes: each line becomes a record with the time it
was read (nanoseconds, never going back within a replica) and its stream. Records live in the replica's run
folder under `log/`, in segment files named by the byte offset where they start in the replica's whole log,
so an entry's offset names it for good (the API's insertId) and a time range is found by binary search
(records are appended in time order). The supervisor outlives the server, so a server killed with SIGKILL
loses nothing the replica wrote; the records are in the page cache as soon as they are read.

A record is one line: `<time ns> <kind> <bytes>\n`. Kind `o`/`e`: a line on stdout/stderr; a line longer than
LINE_LIMIT, or a partial line left waiting for IDLE_FLUSH seconds, is cut into pieces: `O<i>@<first>` and
`E<i>@<first>` for a piece `i` that more pieces follow (`<first>`: the offset of the first piece), the last
piece `o<i>@<first>`/`e<i>@<first>`. Kind `p`: a platform message, `<bytes>` a JSON object
`{"severity", "message"}` (the job's `service` log is made of these).

Limits: `limits.json` in the log folder (written by the server before the replica starts) may give
`max_bytes`; the log then keeps its newest part: segments of a quarter of the limit, the oldest removed as
new ones fill, and `dropped.json` counts what was removed (lines, bytes, until when) so that readers can
say so.

Stdlib only: the supervisor loads this file by path and it is on every replica's start path.
"""

from __future__ import annotations

import os
import select
import time

TYPE_CHECKING = False  # typing itself is not imported: this module is on every replica's start path
if TYPE_CHECKING:
    import threading
    from collections.abc import Callable, Iterator
    from typing import Any, BinaryIO

LOG_DIR = ".trainworks-log"
SEGMENT_SUFFIX = ".entries"
LIMITS_FILE = "limits.json"
DROPPED_FILE = "dropped.json"
#: Cloud Logging's largest entry is 256 KB: a longer line is cut into pieces of this size.
LINE_LIMIT = 256 * 1024
#: A partial line (no newline yet) waits this long for the rest before it is written as a piece.
IDLE_FLUSH = 1.0
#: Without a limit a segment grows to this size before the next one starts.
UNLIMITED_SEGMENT = 64 << 20
_MIN_SEGMENT = 16 * 1024
_READ = 1 << 16
_PIPE_SIZE = 1 << 20
_F_SETPIPE_SZ = 1031
_STREAMS = ((b"o", b"O"), (b"e", b"E"))  # stdout, stderr: (last piece or whole line, a piece more follow)
#: The logger's process name (/proc/PID/comm): it is the supervisor's child beside the replica's command.
LOGGER_NAME = "trainworks-log"


def log_dir(run_dir: str) -> str:
    return os.path.join(run_dir, LOG_DIR)


def segments(directory: str) -> list[tuple[int, str]]:
    """The log's segment files as (start offset, path), oldest first."""
    try:
        names = os.listdir(directory)
    except OSError:
        return []
    found = []
    for name in names:
        if name.endswith(SEGMENT_SUFFIX):
            try:
                found.append((int(name[: -len(SEGMENT_SUFFIX)], 16), os.path.join(directory, name)))
            except ValueError:
                continue
    found.sort()
    return found


def segment_name(start: int) -> str:
    return f"{start:016x}{SEGMENT_SUFFIX}"


def read_flat_json(path: str) -> dict[str, float]:
    """A flat JSON object of numbers (limits.json, dropped.json), read without the json module."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read().strip()
    except OSError:
        return {}
    fields: dict[str, float] = {}
    for part in text.strip("{}").split(","):
        key, _, value = part.partition(":")
        key = key.strip().strip('"')
        try:
            fields[key] = int(value)  # exact: a time in nanoseconds is past a float's 53 bits
        except ValueError:
            try:
                fields[key] = float(value)
            except ValueError:
                continue
    return fields


def write_limits(run_dir: str, max_bytes: int) -> None:
    """The server's word on how much log the replica keeps, read by its supervisor's capture."""
    directory = log_dir(run_dir)
    os.makedirs(directory, exist_ok=True)
    _write_flat_json(os.path.join(directory, LIMITS_FILE), {"max_bytes": max(max_bytes, 0)})


def _write_flat_json(path: str, fields: dict[str, float]) -> None:
    text = "{" + ", ".join(f'"{key}": {int(value)}' for key, value in fields.items()) + "}"
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, path)


class LogWriter:
    """Appends records to a log folder, in time order, rotating and trimming segments under its limit.

    One writer per log at a time (the replica's supervisor; the server for a job's `service` log, under
    its own lock)."""

    def __init__(self, directory: str, max_bytes: int | None = None) -> None:
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        if max_bytes is None:
            max_bytes = int(read_flat_json(os.path.join(directory, LIMITS_FILE)).get("max_bytes", 0))
        self.max_bytes = max(max_bytes, 0)
        self.segment_bytes = max(self.max_bytes // 4, _MIN_SEGMENT) if self.max_bytes else UNLIMITED_SEGMENT
        self.last_ns = 0
        found = segments(directory)
        if found:
            start, path = found[-1]
            size = os.path.getsize(path)
            self.last_ns = _last_time(path)
        else:
            start, size = 0, 0
        self.start = start
        self.offset = start + size  # where the next record goes, in the whole log
        self.kept = [(s, os.path.getsize(p)) for s, p in found]
        self.fd = _open_segment(directory, start)

    def now(self) -> int:
        """The time of the next records: now, but never before the last one (the wall clock may step back)."""
        ns = time.time_ns()
        if ns < self.last_ns:
            ns = self.last_ns
        self.last_ns = ns
        return ns

    def write(self, data: bytes) -> int:
        """Append whole records; returns the offset of the first."""
        at = self.offset
        view = memoryview(data)
        while view:
            written = os.write(self.fd, view)
            view = view[written:]
        self.offset += len(data)
        if self.offset - self.start >= self.segment_bytes:
            self._rotate()
        return at

    def _rotate(self) -> None:
        os.close(self.fd)
        if self.kept and self.kept[-1][0] == self.start:
            self.kept[-1] = (self.start, self.offset - self.start)
        else:
            self.kept.append((self.start, self.offset - self.start))
        self.start = self.offset
        self.fd = _open_segment(self.directory, self.start)
        if not self.max_bytes:
            return
        total = sum(size for _, size in self.kept)
        dropped_path = os.path.join(self.directory, DROPPED_FILE)
        while self.kept and total > self.max_bytes - self.segment_bytes:
            start, size = self.kept.pop(0)
            path = os.path.join(self.directory, segment_name(start))
            lines, until = _count(path)
            dropped = read_flat_json(dropped_path)
            dropped = {
                "lines": dropped.get("lines", 0) + lines,
                "bytes": dropped.get("bytes", 0) + size,
                "until_ns": max(dropped.get("until_ns", 0), until),
                "max_bytes": self.max_bytes,
            }
            _write_flat_json(dropped_path, dropped)  # said before it is done: a count may exceed, never miss
            _quietly(os.unlink, path)
            total -= size

    def close(self) -> None:
        os.close(self.fd)


def _open_segment(directory: str, start: int) -> int:
    return os.open(
        os.path.join(directory, segment_name(start)), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644
    )


def _quietly(action: Callable[[Any], object], argument: Any) -> None:
    """`action(argument)`, an OSError ignored (contextlib is not imported on the start path)."""
    try:
        action(argument)
    except OSError:
        return


def _name_process(name: str) -> None:
    with open("/proc/self/comm", "w", encoding="ascii") as handle:
        handle.write(name)


def _last_time(path: str) -> int:
    """The time of a segment's last record (0 if none)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            end = handle.tell()
            handle.seek(max(end - LINE_LIMIT - 64, 0))
            tail = handle.read()
    except OSError:
        return 0
    lines = tail.rstrip(b"\n").rsplit(b"\n", 1)
    head = lines[-1].split(b" ", 1)[0]
    try:
        return int(head)
    except ValueError:
        return 0


def _count(path: str) -> tuple[int, int]:
    """How many records a segment holds (pieces of a cut line count once) and the time of its last."""
    lines = 0
    with open(path, "rb") as handle:
        for record in handle:
            kind = record.split(b" ", 2)[1][:1] if record.count(b" ") >= 2 else b""
            if kind not in (b"O", b"E"):
                lines += 1
    return lines, _last_time(path)


class _Stream:
    __slots__ = ("fd", "whole", "piece", "pending", "since", "index", "first")

    def __init__(self, fd: int, kinds: tuple[bytes, bytes]) -> None:
        self.fd = fd
        self.whole, self.piece = kinds
        self.pending = b""
        self.since = 0.0  # when the pending partial line began waiting
        self.index = 0  # pieces of the current cut line written so far
        self.first = 0  # offset of its first piece


class Capture:
    """The replica's stdout and stderr pipes, and the process that turns what comes through them into records.

    `stdout`/`stderr` are the write ends for the command (dup2 them onto 1 and 2, then `close_in_child`);
    `start()` before the command starts: it forks the logger, a process of its own (a thread could not be
    started once the supervisor has unshared its PID namespace, and a forked command must not inherit one);
    `finish()` once the command has ended: the logger reads what is left in the pipes, writes the last
    partial lines and exits. The logger ignores the stop signals sent to the replica's process group, so it
    keeps reading while the command stops; only a SIGKILL ends it early."""

    def __init__(self, run_dir: str) -> None:
        self.directory = log_dir(run_dir)
        os.makedirs(self.directory, exist_ok=True)
        out_r, self.stdout = os.pipe()
        err_r, self.stderr = os.pipe()
        for fd in (out_r, err_r):
            try:
                import fcntl

                fcntl.fcntl(fd, _F_SETPIPE_SZ, _PIPE_SIZE)  # fewer wake-ups, and room while we write
            except OSError:
                pass
        self.streams = [_Stream(out_r, _STREAMS[0]), _Stream(err_r, _STREAMS[1])]
        self._wake_r, self._wake_w = os.pipe()
        self._logger = 0  # the logger's pid once started
        self.writer: LogWriter | None = None

    def _supervisor_ends(self) -> tuple[int, ...]:
        return (self.streams[0].fd, self.streams[1].fd, self._wake_r, self._wake_w)

    def close_in_child(self) -> None:
        """In a forked command: drop the ends that are the supervisor's and the logger's."""
        for fd in self._supervisor_ends():
            _quietly(os.close, fd)

    def start(self) -> None:
        if self._logger:
            return
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                import signal

                for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    signal.signal(signum, signal.SIG_IGN)
                _quietly(_name_process, LOGGER_NAME)
                for fd in (self.stdout, self.stderr, self._wake_w):
                    os.close(fd)
                self.writer = LogWriter(self.directory)
                self._run()
                self._drain()
                code = 0
            finally:
                os._exit(code)
        self._logger = pid
        for fd in (self.streams[0].fd, self.streams[1].fd, self._wake_r):
            os.close(fd)

    def finish(self) -> None:
        """The command has ended: everything it wrote is in the pipes; have it written, then stop."""
        if self._logger:
            os.write(self._wake_w, b"x")
            os.close(self._wake_w)
            while True:
                try:
                    os.waitpid(self._logger, 0)
                    break
                except InterruptedError:
                    continue
                except ChildProcessError:
                    break
        else:  # never started (the replica could not start): write what is there from here
            self.writer = LogWriter(self.directory)
            self._drain()
            for fd in (self.streams[0].fd, self.streams[1].fd, self._wake_r, self._wake_w):
                _quietly(os.close, fd)

    def _drain(self) -> None:
        for stream in self.streams:
            os.set_blocking(stream.fd, False)
            while self._read(stream):
                pass
            if stream.pending:
                self._emit_pending(stream, last=True)
        assert self.writer is not None
        self.writer.close()

    def _run(self) -> None:
        poller = select.poll()
        by_fd = {stream.fd: stream for stream in self.streams}
        for fd in by_fd:
            poller.register(fd, select.POLLIN)
        poller.register(self._wake_r, select.POLLIN)
        open_streams = len(by_fd)
        while open_streams:
            waiting = [s for s in self.streams if s.pending]
            timeout = None
            if waiting:
                due = min(s.since for s in waiting) + IDLE_FLUSH
                timeout = max(int((due - time.monotonic()) * 1000) + 1, 0)
            try:
                events = poller.poll(timeout)
            except InterruptedError:
                continue
            for fd, _ in events:
                if fd == self._wake_r:
                    return  # the command has ended (or the supervisor is gone): drain and stop
                stream = by_fd.get(fd)
                if stream is not None and not self._read(stream):
                    poller.unregister(fd)
                    open_streams -= 1
            now = time.monotonic()
            for stream in self.streams:
                if stream.pending and now - stream.since >= IDLE_FLUSH:
                    self._emit_pending(stream, last=False)

    def _read(self, stream: _Stream) -> bool:
        """Read what is there and write its whole lines; False at end of file (or nothing, not blocking)."""
        try:
            data = os.read(stream.fd, _READ)
        except BlockingIOError:
            return False
        except OSError:
            return False
        if not data:
            return False
        if not stream.pending:
            stream.since = time.monotonic()
        data = stream.pending + data
        cut = data.rfind(b"\n")
        if cut < 0:
            stream.pending = data
        else:
            stream.pending = data[cut + 1 :]
            if stream.pending:
                stream.since = time.monotonic()
            self._emit_lines(stream, data[:cut])
        while len(stream.pending) > LINE_LIMIT:
            piece, stream.pending = stream.pending[:LINE_LIMIT], stream.pending[LINE_LIMIT:]
            self._emit_piece(stream, piece, last=False)
        return True

    def _emit_lines(self, stream: _Stream, block: bytes) -> None:
        """Whole lines (`block` without its final newline); the first may end a cut line."""
        assert self.writer is not None
        ns = self.writer.now()
        if stream.index:
            first, newline, block = block.partition(b"\n")
            while len(first) > LINE_LIMIT:  # pending (up to LINE_LIMIT) and a whole read before the newline
                self._emit_piece(stream, first[:LINE_LIMIT], last=False, ns=ns)
                first = first[LINE_LIMIT:]
            self._emit_piece(stream, first, last=True, ns=ns)
            if not newline:
                return
        if len(block) <= LINE_LIMIT:  # the common case: one write for every line read at once
            prefix = b"%d %s " % (ns, stream.whole)
            self.writer.write(prefix + block.replace(b"\n", b"\n" + prefix) + b"\n")
            return
        for line in block.split(b"\n"):
            while len(line) > LINE_LIMIT:
                self._emit_piece(stream, line[:LINE_LIMIT], last=False, ns=ns)
                line = line[LINE_LIMIT:]
            self._emit_piece(stream, line, last=True, ns=ns)

    def _emit_piece(self, stream: _Stream, piece: bytes, last: bool, ns: int = 0) -> None:
        """A piece of a cut line (`last`: the piece that ends it); a line never cut is written whole."""
        assert self.writer is not None
        ns = ns or self.writer.now()
        if last and not stream.index:
            self.writer.write(b"%d %s %s\n" % (ns, stream.whole, piece))
            return
        kind = stream.whole if last else stream.piece
        at = self.writer.write(b"%d %s%d@%d %s\n" % (ns, kind, stream.index, stream.first, piece))
        if stream.index == 0:
            stream.first = at  # the later pieces carry the first one's offset: the line's name
        stream.index = 0 if last else stream.index + 1
        if last:
            stream.first = 0

    def _emit_pending(self, stream: _Stream, last: bool) -> None:
        piece, stream.pending = stream.pending, b""
        self._emit_piece(stream, piece, last=last)


_PLATFORM_LOCK: list[threading.Lock] = []


def write_platform_message(directory: str, message: str, severity: str = "INFO") -> None:
    """Append a platform message (kind `p`) to a log: the job's `service` log, or a replica's own log for
    what the platform says about it. Thread-safe within a process; one process writes a given log."""
    import threading

    if not _PLATFORM_LOCK:
        _PLATFORM_LOCK.append(threading.Lock())
    with _PLATFORM_LOCK[0]:
        writer = LogWriter(directory)
        try:
            writer.write(platform_record(writer.now(), message, severity))
        finally:
            writer.close()


def platform_record(ns: int, message: str, severity: str) -> bytes:
    """A platform message's record (kind `p`): its JSON payload, as the log readers parse it."""
    import json

    payload = json.dumps({"severity": severity, "message": message}, ensure_ascii=False).encode()
    return b"%d p %s\n" % (ns, payload)


# ------------------------------------------------------------------ reading


class Record:
    """One record of a log: where it is, when, its kind (`o`, `e`, `p`), its bytes, and for a piece of a cut
    line its index, whether more pieces follow and the offset of the first piece."""

    __slots__ = ("offset", "ns", "kind", "data", "index", "more", "first")

    def __init__(  # noqa: PLR0913 - a record's fields
        self, offset: int, ns: int, kind: str, data: bytes, index: int, more: bool, first: int
    ) -> None:
        self.offset = offset
        self.ns = ns
        self.kind = kind
        self.data = data
        self.index = index
        self.more = more
        self.first = first

    @property
    def piece(self) -> bool:
        return self.more or self.index > 0


def parse_record(offset: int, line: bytes) -> Record | None:
    head, sep, rest = line.partition(b" ")
    if not sep:
        return None
    tag, sep, data = rest.partition(b" ")
    if not sep or not tag:
        return None
    try:
        ns = int(head)
    except ValueError:
        return None
    kind = chr(tag[0])
    index, first, more = 0, 0, False
    if len(tag) > 1:
        number, _, start = tag[1:].partition(b"@")
        try:
            index, first = int(number), int(start or b"0")
        except ValueError:
            return None
        if index == 0:
            first = offset
    if kind in "OE":
        more = True
        kind = kind.lower()
    elif kind != "p" and data[-1:] == b"\r":
        data = data[:-1]  # a CRLF line ending's; a piece that more pieces follow keeps its bytes
    return Record(offset, ns, kind, data, index, more, first)


class LogReader:
    """Reads a log folder: records from a time or an offset, forward or backward, and what was dropped."""

    def __init__(self, directory: str) -> None:
        self.directory = directory

    def dropped(self) -> dict[str, float]:
        return read_flat_json(os.path.join(self.directory, DROPPED_FILE))

    def first_offset_at(self, ns: int) -> int:
        """The offset of the first record at or after time `ns` (the log's end if none)."""
        found = segments(self.directory)
        if not found:
            return 0
        # The segment: the last whose first record is before ns.
        chosen = 0
        for i, (_, path) in enumerate(found):
            first = _first_time(path)
            if first is not None and first < ns:
                chosen = i
        start, path = found[chosen]
        try:
            with open(path, "rb") as handle:
                low, high = 0, os.fstat(handle.fileno()).st_size
                while low < high:  # the first position whose next record is at or after ns
                    mid = (low + high) // 2
                    record = _next_record(handle, mid)[1]
                    if record is None or record.ns >= ns:
                        high = mid
                    else:
                        low = mid + 1
                return start + _next_record(handle, low)[0]
        except OSError:
            return start

    def forward(self, offset: int = 0) -> Iterator[Record]:
        """Records from `offset` (a record's start) to the end of what is written now."""
        for start, path in segments(self.directory):
            try:
                size = os.path.getsize(path)
            except OSError:
                continue
            if start + size <= offset:
                continue
            try:
                with open(path, "rb") as handle:
                    local = max(offset - start, 0)
                    handle.seek(local)
                    at = local
                    for line in handle:
                        if not line.endswith(b"\n"):
                            break  # a record being written
                        record = parse_record(start + at, line[:-1])
                        at += len(line)
                        if record is not None:
                            yield record
            except OSError:
                continue

    def backward(self, before: int | None = None) -> Iterator[Record]:
        """Records that start before offset `before` (the end when None), newest first."""
        for start, path in reversed(segments(self.directory)):
            if before is not None and start >= before:
                continue
            try:
                with open(path, "rb") as handle:
                    end = os.fstat(handle.fileno()).st_size
                    if before is not None:
                        end = min(end, before - start)
                    yield from _backward(handle, start, end)
            except OSError:
                continue


def _next_record(handle: BinaryIO, position: int) -> tuple[int, Record | None]:
    """The first record that starts at or after `position` in a segment: (its start, the record or None)."""
    if position:
        handle.seek(position - 1)
        handle.readline()  # to the end of the record holding position - 1
    else:
        handle.seek(0)
    at = handle.tell()
    line = handle.readline()
    if not line.endswith(b"\n"):
        return at, None  # the end, or a record being written
    return at, parse_record(at, line[:-1])


def _backward(handle: BinaryIO, start: int, end: int) -> Iterator[Record]:
    """The records of one segment that end before `end` (a record's start, or the segment's size), newest
    first; a last record still being written is left out."""
    position = end
    buffer = b""
    trimmed = False
    while position > 0:
        size = min(_READ * 4, position)
        position -= size
        handle.seek(position)
        buffer = handle.read(size) + buffer
        if not trimmed:
            cut = buffer.rfind(b"\n")
            if cut < 0:
                continue
            buffer = buffer[: cut + 1]
            trimmed = True
        if position:
            cut = buffer.find(b"\n")
            if cut < 0:
                continue
            head, body, at = buffer[: cut + 1], buffer[cut + 1 :], position + cut + 1
        else:
            head, body, at = b"", buffer, 0
        lines = body.split(b"\n")[:-1]
        offsets = []
        for line in lines:
            offsets.append(at)
            at += len(line) + 1
        for offset, line in zip(reversed(offsets), reversed(lines), strict=True):
            record = parse_record(start + offset, line)
            if record is not None:
                yield record
        buffer = head


def _first_time(path: str) -> int | None:
    try:
        with open(path, "rb") as handle:
            line = handle.readline()
    except OSError:
        return None
    record = parse_record(0, line.rstrip(b"\n"))
    return None if record is None else record.ns


def read_output(run_dir: str, stream: str = "stdout") -> str:
    """What a replica wrote on one stream ("stdout" or "stderr"), its lines joined again, as text."""
    kind = stream[3]  # "o" / "e"
    out: list[bytes] = []
    open_line = False  # the last piece read left its line open
    for record in LogReader(log_dir(run_dir)).forward():
        if record.kind == kind:
            if open_line and record.index == 0:
                out.append(b"\n")  # that line never ended (its replica stopped mid-line): this is another
            out.append(record.data if record.more else record.data + b"\n")
            open_line = record.more
    return b"".join(out).decode("utf-8", "replace")


def tail_text(run_dir: str, stream: str = "stderr", lines: int = 20, max_bytes: int = 8192) -> str:
    """The last `lines` lines (at most about `max_bytes`) a replica wrote on one stream, as text."""
    kind = stream[3]
    parts: list[bytes] = []
    size = count = 0
    for record in LogReader(log_dir(run_dir)).backward():
        if record.kind != kind:
            continue
        parts.append(record.data if record.more else record.data + b"\n")
        size += len(record.data)
        count += 0 if record.more else 1
        if count > lines or size >= max_bytes:
            break
    text = b"".join(reversed(parts))[-max_bytes:].decode("utf-8", "replace")
    return "\n".join(text.rstrip().strip("\n").splitlines()[-lines:])  # a traceback keeps its indent
