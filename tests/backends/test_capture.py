"""A replica's log (backends/capture.py), written by real processes through the real supervisor.

The supervisor (shim.py) is started as the local backend starts it, with and without the sandbox (which needs
root), and what its command writes is read back from the log folder: every line once and in order per
stream, the stream's kind, partial lines (at the end, and left waiting: written as pieces after
IDLE_FLUSH), lines longer than LINE_LIMIT cut into pieces that join back exactly, bytes kept as written,
limits that drop the oldest segments and count what they dropped, a restarted replica's log that goes on,
the supervisor's own messages, stop signals that leave the logger reading until the command ends, the warm
(zygote) path, the reader against a plain scan, and a burst without newlines that the logger cuts without
holding it in memory.
"""

from __future__ import annotations

import json
import math
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.processes import group_members
from tests.support.server import wait_for
from tests.support.supervisors import start_supervisor, warm_interpreter
from trainworks.backends import sandbox
from trainworks.backends.base import LaunchRequest, Phase
from trainworks.backends.capture import (
    IDLE_FLUSH,
    LINE_LIMIT,
    LOGGER_NAME,
    Capture,
    LogReader,
    LogWriter,
    Record,
    log_dir,
    parse_record,
    read_output,
    segments,
    tail_text,
    write_limits,
)
from trainworks.backends.local import SHIM, LocalBackend
from trainworks.backends.warm import WarmPool, WarmStartBackend, WarmTarget
from trainworks.kinds.custom_jobs.launcher import host_env
from trainworks.kinds.log_entries.store import JobLog, LogSource, read_entries
from trainworks.kinds.log_entries.wire import to_log_entry

PLANS = ["none", "sandbox"]
#: The logger reads a pipe this much at a time (capture._READ): a write may carry a segment past its size
#: by up to one read's lines.
READ_SIZE = 1 << 16
#: A record is `<19-digit ns> <kind> <bytes>\n`: this many bytes around a whole line's own.
RECORD_OVERHEAD = 19 + 1 + 1 + 1 + 1
COPY_TO_STDOUT = "import sys; sys.stdout.buffer.write(open(sys.argv[1], 'rb').read())"


class Supervisor:
    """A replica's supervisor, started as backends/local.py starts it: its own session, the plan on stdin."""

    def __init__(self, run_dir: Path, argv: list[str], sandboxed: bool) -> None:
        self.run_dir = run_dir
        run_dir.mkdir(parents=True, exist_ok=True)
        self.process = start_supervisor(run_dir, argv, sandboxed)

    def wait(self, timeout: float = 120) -> dict[str, float]:
        """The exit record, once the supervisor has ended."""
        self.process.wait(timeout=timeout)
        return dict(json.loads((self.run_dir / "exit.json").read_text()))

    def members(self) -> list[int]:
        """The supervisor's process group: itself, its logger, the sandbox's init if any, the command."""
        return group_members(self.process.pid)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()


Start = Callable[..., Supervisor]


@pytest.fixture(params=PLANS)
def start(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Start]:
    """Starts supervisors under one plan ("none" or "sandbox"), in tmp_path/run unless told otherwise."""
    sandboxed = request.param == "sandbox"
    if sandboxed and not sandbox.available():
        pytest.skip("building a sandbox needs CAP_SYS_ADMIN")
    started: list[Supervisor] = []

    def run(argv: list[str], run_dir: Path | None = None) -> Supervisor:
        supervisor = Supervisor(run_dir or tmp_path / "run", argv, sandboxed)
        started.append(supervisor)
        return supervisor

    try:
        yield run
    finally:
        for supervisor in started:
            supervisor.stop()


def python(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def records(run_dir: Path, kind: str | None = None) -> list[Record]:
    found = list(LogReader(log_dir(str(run_dir))).forward())
    return [r for r in found if kind is None or r.kind == kind]


def fields(record: Record) -> tuple[Any, ...]:
    return (record.offset, record.ns, record.kind, record.data, record.index, record.more, record.first)


def assert_in_log_order(found: list[Record]) -> None:
    """Records as a log keeps them: each after the last, never earlier in time."""
    assert all(a.offset < b.offset for a, b in zip(found, found[1:], strict=False))
    assert all(a.ns <= b.ns for a, b in zip(found, found[1:], strict=False))


# ------------------------------------------------------------------ lines and streams
def test_every_line_once_and_in_order_on_each_stream(start: Start) -> None:
    code = (
        "import sys\n"
        "for i in range(int(sys.argv[1])):\n"
        "    print(f'out {i}')\n"  # block-buffered on a pipe, as it was on a file
        "    if i % 3 == 0:\n"
        "        print(f'err {i}', file=sys.stderr)\n"  # line-buffered: a write per line
    )
    lines = 20_000
    replica = start(python(code, str(lines)))
    assert replica.wait()["exit_code"] == 0
    run_dir = str(replica.run_dir)
    assert read_output(run_dir, "stdout") == "".join(f"out {i}\n" for i in range(lines))
    assert read_output(run_dir, "stderr") == "".join(f"err {i}\n" for i in range(0, lines, 3))
    found = records(replica.run_dir)
    assert_in_log_order(found)
    assert {r.kind for r in found} == {"o", "e"}
    assert not any(r.piece for r in found)
    # As Vertex AI's agent has it: a stdout line is INFO, a stderr line ERROR.
    job = JobLog("1", "capture", sources=(LogSource("workerpool0-0", replica.run_dir),))
    severities: dict[str, set[str]] = {"out": set(), "err": set()}
    for entry in read_entries([job]):
        wire = to_log_entry(entry)
        severities[wire["textPayload"].split()[0]].add(wire["severity"])
    assert severities == {"out": {"INFO"}, "err": {"ERROR"}}


def test_a_last_line_without_newline_is_a_line(start: Start) -> None:
    code = "import os; os.write(1, b'first\\nno newline at the end'); os.write(2, b'stderr without one')"
    replica = start(python(code))
    assert replica.wait()["exit_code"] == 0
    out = records(replica.run_dir, "o")
    assert [(r.data, r.piece) for r in out] == [(b"first", False), (b"no newline at the end", False)]
    assert [(r.data, r.piece) for r in records(replica.run_dir, "e")] == [(b"stderr without one", False)]
    assert read_output(str(replica.run_dir)) == "first\nno newline at the end\n"


def test_a_partial_line_left_waiting_is_written_then_continued(start: Start, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    code = (
        "import os, sys, time, pathlib\n"
        "gate = pathlib.Path(sys.argv[1])\n"
        "print(time.time_ns(), file=sys.stderr, flush=True)\n"  # before the partial line is written
        "os.write(1, b'half a line')\n"
        "deadline = time.time() + 60\n"
        "while not gate.exists() and time.time() < deadline: time.sleep(0.01)\n"
        "os.write(1, b', then the rest\\nnext\\n')\n"
    )
    replica = start(python(code, str(gate)))
    first = wait_for(
        lambda: next((r for r in records(replica.run_dir, "o") if r.data == b"half a line"), None),
        what="the partial line to be written",
    )
    assert first.more and first.index == 0 and first.first == first.offset
    written = int(records(replica.run_dir, "e")[0].data)
    assert first.ns - written >= IDLE_FLUSH * 1e9  # it waited for the rest first
    gate.write_text("go")
    assert replica.wait()["exit_code"] == 0
    out = records(replica.run_dir, "o")
    assert [(r.data, r.index, r.more, r.first) for r in out] == [
        (b"half a line", 0, True, first.offset),
        (b", then the rest", 1, False, first.offset),  # the line's last piece names its first
        (b"next", 0, False, 0),  # a whole line
    ]
    assert read_output(str(replica.run_dir)) == "half a line, then the rest\nnext\n"


def random_line(rng: random.Random, size: int) -> bytes:
    return bytes(rng.choices(range(32, 127), k=size))


def test_long_lines_are_cut_into_pieces_that_join_back_exactly(start: Start, tmp_path: Path) -> None:
    rng = random.Random(7)
    sizes = [10, LINE_LIMIT, LINE_LIMIT + 1, 3 * LINE_LIMIT + 12_345, 2 * LINE_LIMIT, 5]
    lines = [random_line(rng, size) for size in sizes]
    source = tmp_path / "lines"
    source.write_bytes(b"".join(line + b"\n" for line in lines))
    replica = start(python(COPY_TO_STDOUT, str(source)))
    assert replica.wait()["exit_code"] == 0
    out = records(replica.run_dir, "o")
    assert all(len(r.data) <= LINE_LIMIT for r in out)
    expected = []  # (index, more, length) of every record: full pieces, then the rest
    for size in sizes:
        count = max(math.ceil(size / LINE_LIMIT), 1)
        for index in range(count):
            length = LINE_LIMIT if index < count - 1 else size - LINE_LIMIT * (count - 1)
            expected.append((index if count > 1 else 0, index < count - 1, length))
    assert [(r.index, r.more, len(r.data)) for r in out] == expected
    first = 0
    for record in out:  # every piece names the offset of its line's first piece
        first = record.offset if record.index == 0 else first
        assert record.first == (first if record.piece else 0)
    assert read_output(str(replica.run_dir)).encode() == source.read_bytes()


def test_a_cut_lines_end_read_with_a_whole_read_is_cut_too(tmp_path: Path) -> None:
    """Regression: the end of a cut line came in one read after up to LINE_LIMIT of it was pending, and was
    written as one piece of up to LINE_LIMIT + a read. Drained by the capture itself, reads are whole."""
    capture = Capture(str(tmp_path))
    line = random_line(random.Random(3), 2 * LINE_LIMIT + READ_SIZE - 1) + b"\n"
    os.write(capture.stdout, line)  # the pipe holds it all (1 MiB)
    capture.finish()  # never started: it drains here, a read at a time
    out = records(tmp_path)
    assert [(r.index, r.more, len(r.data)) for r in out] == [
        (0, True, LINE_LIMIT),
        (1, True, LINE_LIMIT),
        (2, False, READ_SIZE - 1),
    ]
    assert read_output(str(tmp_path)).encode() == line


def test_bytes_are_kept_as_written(start: Start) -> None:
    lines = [
        b"\xff\xfe not utf-8 \x80",
        b"nul \x00 inside",
        b"caf\xc3\xa9 \xf0\x9f\x8e\x89",
        b"\x1b[31mred\x1b[0m",
        b"a lone \r inside, tab\there",
        b"",
        b"ends in a space ",
    ]
    payload = b"".join(line + b"\n" for line in lines)
    code = f"import os; data = {payload!r}; os.write(1, data); os.write(2, data[::-1])"
    replica = start(python(code))
    assert replica.wait()["exit_code"] == 0
    assert [r.data for r in records(replica.run_dir, "o")] == lines
    # Reversed, the newline comes first: an empty line, then the lines reversed, the last without newline.
    reversed_lines = payload[::-1].split(b"\n")
    assert [r.data for r in records(replica.run_dir, "e")] == reversed_lines
    assert read_output(str(replica.run_dir)) == payload.decode("utf-8", "replace")


def test_crlf_line_endings(start: Start, tmp_path: Path) -> None:
    cut = b"x" * (LINE_LIMIT - 1) + b"\r" + b"y" * 10  # its first piece ends in \r: a byte of the line
    payload = b"one\r\ntwo\r\n\r\nthree\r\r\n" + cut + b"\r\n"
    source = tmp_path / "crlf"
    source.write_bytes(payload)
    replica = start(python(COPY_TO_STDOUT, str(source)))
    assert replica.wait()["exit_code"] == 0
    out = records(replica.run_dir, "o")
    assert [r.data for r in out] == [b"one", b"two", b"", b"three\r", cut[:LINE_LIMIT], cut[LINE_LIMIT:]]
    assert read_output(str(replica.run_dir)).encode() == b"one\ntwo\n\nthree\r\n" + cut + b"\n"


# ------------------------------------------------------------------ limits
def test_a_limited_log_keeps_its_newest_lines_and_counts_the_rest(start: Start, tmp_path: Path) -> None:
    max_bytes = 256 * 1024
    lines = 40_000
    run_dir = tmp_path / "run"
    write_limits(str(run_dir), max_bytes)  # as the server does before the replica starts
    code = "import sys\nfor i in range(int(sys.argv[1])): print(f'line {i:07d}')"
    replica = start(python(code, str(lines)), run_dir)
    assert replica.wait()["exit_code"] == 0
    record_size = len("line 0000000") + RECORD_OVERHEAD  # every record the same size
    kept = records(run_dir, "o")
    first_kept = int(kept[0].data.split()[1])
    assert 0 < first_kept < lines
    assert [r.data for r in kept] == [f"line {i:07d}".encode() for i in range(first_kept, lines)]
    found = segments(log_dir(str(run_dir)))
    assert found[0][0] == first_kept * record_size  # the oldest segments are gone, whole
    kept_bytes = sum(os.path.getsize(path) for _, path in found)
    assert kept_bytes == (lines - first_kept) * record_size
    assert kept_bytes <= max_bytes + READ_SIZE
    dropped = LogReader(log_dir(str(run_dir))).dropped()
    assert dropped["lines"] == first_kept
    assert dropped["bytes"] == first_kept * record_size
    assert dropped["max_bytes"] == max_bytes
    assert 0 < dropped["until_ns"] <= kept[0].ns


def test_the_writer_drops_whole_segments_by_the_numbers(tmp_path: Path) -> None:
    """One record a write: which segments go follows from the sizes alone."""
    max_bytes, count, size = 64 * 1024, 3_000, 100
    writer = LogWriter(str(tmp_path), max_bytes)
    segment_bytes = writer.segment_bytes
    for i in range(count):
        data = f"{i:06d}".encode().ljust(size - RECORD_OVERHEAD, b".")
        writer.write(b"%d o %s\n" % (1_700_000_000_000_000_000 + i, data))
    writer.close()
    per_segment = math.ceil(segment_bytes / size)  # a segment closes with the record that fills it
    closed = count // per_segment
    kept_closed = (max_bytes - segment_bytes) // (per_segment * size)  # room beside the open segment
    dropped_lines = (closed - kept_closed) * per_segment
    dropped = LogReader(str(tmp_path)).dropped()
    assert dropped == {
        "lines": dropped_lines,
        "bytes": dropped_lines * size,
        "until_ns": 1_700_000_000_000_000_000 + dropped_lines - 1,
        "max_bytes": max_bytes,
    }
    kept = list(LogReader(str(tmp_path)).forward())
    assert [int(r.data[:6]) for r in kept] == list(range(dropped_lines, count))


# ------------------------------------------------------------------ restarts and time
def test_a_replica_restarted_in_its_folder_goes_on_with_its_log(start: Start) -> None:
    code = "import sys\nfor i in range(500): print(f'{sys.argv[1]} {i}')"
    first = start(python(code, "first"))
    assert first.wait()["exit_code"] == 0
    before = records(first.run_dir)
    second = start(python(code, "second"), first.run_dir)
    assert second.wait()["exit_code"] == 0
    found = records(first.run_dir)
    assert [fields(r) for r in found[: len(before)]] == [fields(r) for r in before]
    assert_in_log_order(found)  # offsets keep growing, times never go back
    expected = "".join(f"{run} {i}\n" for run in ("first", "second") for i in range(500))
    assert read_output(str(first.run_dir)) == expected


def test_times_never_go_back_when_the_clock_does(start: Start, tmp_path: Path) -> None:
    """A log whose last record is ahead of the clock (the clock was stepped back since): what follows is
    stamped no earlier."""
    run_dir = tmp_path / "run"
    ahead = time.time_ns() + 3600 * 10**9
    writer = LogWriter(log_dir(str(run_dir)))
    writer.write(b"%d o from before the step\n" % ahead)
    writer.close()
    replica = start(python("print('after'); import sys; print('after', file=sys.stderr)"), run_dir)
    assert replica.wait()["exit_code"] == 0
    found = records(run_dir)
    assert [r.data for r in found if r.kind == "o"] == [b"from before the step", b"after"]
    assert [r.ns for r in found] == [ahead] * 3
    assert_in_log_order(found)


# ------------------------------------------------------------------ the supervisor's messages and signals
def test_the_supervisors_own_messages_are_in_the_log(start: Start) -> None:
    replica = start(["/nonexistent/train-binary", "--flag"])
    assert replica.wait()["exit_code"] == 127
    errors = [r.data.decode() for r in records(replica.run_dir, "e")]
    assert len(errors) == 1
    assert errors[0].startswith("[trainworks] could not start '/nonexistent/train-binary'")
    assert records(replica.run_dir, "o") == []


def test_the_logger_reads_until_the_command_ends_through_stop_signals(start: Start) -> None:
    code = (
        "import signal, sys\n"
        "def stop(*_):\n"
        "    for i in range(int(sys.argv[1])):\n"  # well over the pipe's 1 MiB: the logger must keep reading
        "        sys.stdout.write(f'after the stop {i:06d}\\n')\n"
        "    sys.exit(0)\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('ready', flush=True)\n"
        "while True: signal.pause()\n"
    )
    lines = 150_000
    replica = start(python(code, str(lines)))
    wait_for(lambda: "ready" in read_output(str(replica.run_dir)), what="the command to start")
    for signum in (signal.SIGHUP, signal.SIGINT, signal.SIGTERM):  # the whole group, logger included
        os.killpg(replica.process.pid, signum)
    record = replica.wait()
    assert record["exit_code"] == 0 and record["interrupted"] == 1
    expected = "ready\n" + "".join(f"after the stop {i:06d}\n" for i in range(lines))
    assert read_output(str(replica.run_dir)) == expected


# ------------------------------------------------------------------ the warm path
@pytest.fixture(scope="module")
def warm_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[WarmPool, WarmTarget]]:
    with warm_interpreter(tmp_path_factory.mktemp("warm"), "capture") as warm:
        yield warm


def test_a_replica_forked_from_a_warm_interpreter_is_captured_alike(
    warm_pool: tuple[WarmPool, WarmTarget], tmp_path: Path
) -> None:
    pool, target = warm_pool
    backend = WarmStartBackend(LocalBackend(), pool, lambda _job: target)
    run_dir = tmp_path / "warm"
    code = (
        "import os, sys\n"
        "for i in range(2000):\n"
        "    print(f'out {i}')\n"
        "    print(f'err {i}', file=sys.stderr)\n"
        "sys.stdout.flush()\n"
        "os.write(1, b'partial')\n"
    )
    argv = [sys.executable, "-c", code]
    request = LaunchRequest(
        "1", "workerpool0-0", argv, host_env(), run_dir, run_dir, persistent_resource=target.key
    )
    handle = backend.launch(request)

    def ended() -> Any:
        status = backend.poll(handle, run_dir)
        return status if status.phase != Phase.RUNNING else None

    status = wait_for(ended, what="the replica to end")
    assert "warm" in json.loads((run_dir / "launch.json").read_text())  # forked, not started cold
    assert status.exit_code == 0, read_output(str(run_dir), "stderr")
    assert read_output(str(run_dir)) == "".join(f"out {i}\n" for i in range(2000)) + "partial\n"
    assert read_output(str(run_dir), "stderr") == "".join(f"err {i}\n" for i in range(2000))
    assert_in_log_order(records(run_dir))


# ------------------------------------------------------------------ reading
_TAGS = [b"o", b"e", b"p", b"O0@0", b"E0@0", b"o1@0", b"e2@0"]
_RECORD = st.tuples(
    st.integers(0, 3),  # how far in time after the last one: often the same nanosecond
    st.sampled_from(_TAGS),
    st.binary(max_size=30).map(lambda data: data.replace(b"\n", b"")),
)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    steps=st.lists(_RECORD, max_size=80),
    writes=st.lists(st.integers(1, 6), max_size=80),
    segment_bytes=st.integers(30, 300),
    dropped=st.integers(0, 3),
    partial=st.binary(max_size=12).map(lambda data: data.replace(b"\n", b"")),
)
def test_the_reader_agrees_with_a_scan_of_the_whole_log(  # noqa: PLR0913 - hypothesis' arguments
    steps: list[tuple[int, bytes, bytes]], writes: list[int], segment_bytes: int, dropped: int, partial: bytes
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        writer = LogWriter(folder, max_bytes=0)
        writer.segment_bytes = segment_bytes  # many segments
        ns = 1_700_000_000_000_000_000
        lines = []
        for step, tag, data in steps:
            ns += step
            lines.append(b"%d %s %s\n" % (ns, tag, data))
        sizes = iter(writes)
        while lines:  # a few records a write, as the capture writes what one read brought
            size = next(sizes, 1)
            writer.write(b"".join(lines[:size]))
            lines = lines[size:]
        writer.close()
        found = segments(folder)
        for _, path in found[: min(dropped, len(found) - 1)]:  # trimmed: the log starts later
            os.unlink(path)
        found = segments(folder)
        if partial:  # a record being written at the end: no reader sees it yet
            with open(found[-1][1], "ab") as handle:
                handle.write(b"%d o " % ns + partial)

        scan: list[Record] = []
        blob = b""
        for start, path in found:
            assert start == found[0][0] + len(blob)
            blob += Path(path).read_bytes()
        at = found[0][0]
        for line in blob.split(b"\n")[:-1]:
            record = parse_record(at, line)
            at += len(line) + 1
            assert record is not None
            scan.append(record)
        end = at  # past the last whole record

        def key(records: Iterator[Record] | list[Record]) -> list[tuple[Any, ...]]:
            return [fields(r) for r in records]

        reader = LogReader(folder)
        offsets = [r.offset for r in scan]
        for position in [0, found[0][0], *offsets, end]:
            assert key(reader.forward(position)) == key([r for r in scan if r.offset >= position])
        for before in [None, *offsets, end]:
            expected = [r for r in reversed(scan) if before is None or r.offset < before]
            assert key(reader.backward(before)) == key(expected)
        times = {0, ns + 5} | {r.ns + d for r in scan for d in (-1, 0, 1)}
        for at_ns in sorted(times):
            expected_offset = next((r.offset for r in scan if r.ns >= at_ns), end)
            assert reader.first_offset_at(at_ns) == expected_offset, at_ns


def test_tail_text_gives_the_last_lines_of_a_stream(start: Start, tmp_path: Path) -> None:
    long_line = bytes(random.Random(5).choices(range(33, 127), k=LINE_LIMIT + 20_000))  # no space to strip
    source = tmp_path / "long"
    source.write_bytes(long_line + b"\n")
    code = (
        "import sys\n"
        "for i in range(100):\n"
        "    print(f'error line {i}', file=sys.stderr)\n"
        "    print(f'output line {i}')\n"
    )
    replica = start(python(code))
    assert replica.wait()["exit_code"] == 0
    run_dir = str(replica.run_dir)
    assert tail_text(run_dir, "stderr", lines=20) == "\n".join(f"error line {i}" for i in range(80, 100))
    assert tail_text(run_dir, "stdout", lines=3) == "output line 97\noutput line 98\noutput line 99"
    short = tail_text(run_dir, "stderr", lines=20, max_bytes=100)
    full = "".join(f"error line {i}\n" for i in range(100)).strip()
    assert len(short) <= 100 and full.endswith(short) and short.endswith("error line 99")
    # A cut line at the end: its last bytes, its pieces joined.
    code = "import sys; sys.stderr.buffer.write(open(sys.argv[1], 'rb').read())"
    again = start(python(code, str(source)), tmp_path / "again")
    assert again.wait()["exit_code"] == 0
    tail = tail_text(str(again.run_dir), "stderr", lines=1, max_bytes=8192)
    assert tail == long_line[-8191:].decode()  # the newline is one of the 8192 bytes


# ------------------------------------------------------------------ a replica cannot break the server
def test_a_burst_without_newlines_is_cut_without_holding_it(tmp_path: Path) -> None:
    """A replica writing without newlines: the logger cuts pieces as it reads, its memory stays its own size
    (a logger that held the burst would hold all of it)."""
    burst = 24 << 20
    gate = tmp_path / "gate"
    code = (
        "import os, sys, time, pathlib\n"
        "chunk = b'x' * (1 << 20)\n"
        "for _ in range(int(sys.argv[2])): sys.stdout.buffer.write(chunk)\n"
        "sys.stdout.flush()\n"
        "gate = pathlib.Path(sys.argv[1])\n"
        "deadline = time.time() + 60\n"
        "while not gate.exists() and time.time() < deadline: time.sleep(0.01)\n"
    )
    replica = Supervisor(tmp_path / "run", python(code, str(gate), str(burst >> 20)), sandboxed=False)
    try:
        # Everything read and written, the last partial piece after IDLE_FLUSH, while the command still runs.
        wait_for(lambda: sum(len(r.data) for r in records(replica.run_dir)) == burst, what="the burst")
        loggers = [
            pid
            for pid in replica.members()
            if pid != replica.process.pid and str(SHIM).encode() in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]
        assert len(loggers) == 1
        assert Path(f"/proc/{loggers[0]}/comm").read_text().strip() == LOGGER_NAME  # as ps shows it
        status = Path(f"/proc/{loggers[0]}/status").read_text()
        peak = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) * 1024
        assert peak < burst, peak
        gate.write_text("go")
        assert replica.wait()["exit_code"] == 0
    finally:
        replica.stop()
    out = records(replica.run_dir)
    assert all(len(r.data) <= LINE_LIMIT for r in out) and len(out) >= burst // LINE_LIMIT
    assert all(r.piece and r.kind == "o" for r in out)
    assert b"".join(r.data for r in out) == b"x" * burst
