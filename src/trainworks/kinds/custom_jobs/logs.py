"""A CustomJob's log on Trainworks' own endpoint (`GET .../customJobs/{id}/logs`, NDJSON): its entries in time
order across replicas and streams, filtered, paged with insertId cursors, and followed until the job ends.

The entries are the job's log as kinds/log_entries keeps it (a log per replica and the job's `service` log),
merged by (timestamp, insertId). A line is
`{"time", "insertId", "task", "severity", "stream"?, "text", "json"?, "more"?, "dropped"?, "trialId"?}`:
`text` is what the replica wrote (a structured line's JSON too, whose payload is also in `json`); `stream`
(stdout/stderr) marks replica output; `more` a piece of a line cut for length that the next piece of the
same task continues; `dropped` the entry saying the log's retention removed lines.

Reading a page costs a binary search per log and the entries it returns. Following reads each log from its
own position (a log's records are appended in time order), polling the logs' sizes, and holds back the
newest LAG of entries so that a line another replica's logger is writing at the same moment is still put in
its place; and what is newer than the last look for new logs, less the LAG: a replica that starts has its
log made before its first line, but a follower sees it only at its next look (every LAG while it follows).
"""

from __future__ import annotations

import heapq
import re
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from trainworks.backends.capture import LogReader, segments
from trainworks.config import Settings
from trainworks.jobs.enums import JobState
from trainworks.jobs.service_log import SERVICE_TASK
from trainworks.kernel.errors import FieldViolation, invalid_argument, not_found
from trainworks.kernel.names import custom_job_name, numeric_id
from trainworks.kernel.projects import Projects
from trainworks.kinds.custom_jobs.store import JobStore
from trainworks.kinds.log_entries import (
    Entry,
    JobLog,
    LogSource,
    dropped_entry,
    insert_id,
    job_sources,
    read_entries,
)
from trainworks.kinds.log_entries.wire import SEVERITIES, format_second, payload, severity_name
from trainworks.tuning.trial_jobs import trial_of

Key = tuple[int, str]  # (timestamp ns, insertId): an entry's place in its job's log

#: Entries newer than this are held back while following (see the module's docstring).
LAG_NS = 200_000_000
#: An entry stamped further ahead than this (a clock ahead of the server's) is not held back.
SKEW_NS = 1_000_000_000
#: How often a follower looks at the logs' sizes, and at the job's state when they do not change.
POLL_SECONDS = 0.1
STATE_SECONDS = 0.5
#: After the job ends, how long its last platform messages may take to be written.
END_GRACE_SECONDS = 0.3
#: Lines per batch handed to the response, and entries a batch may read past without finding one.
BATCH = 2000
SCAN_BATCH = 20_000

_STREAM_NAMES = {"o": "stdout", "e": "stderr"}
_TASK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
_INSERT_ID = re.compile(r"^([0-9]{19})\.[A-Za-z0-9_.-]+\.(?:[0-9a-f]{12}|dropped)$")
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|µs|ms|s|m|h|d)")
_DURATION_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
}
_RFC3339 = re.compile(
    r"^([0-9]{4}-[0-9]{2}-[0-9]{2})[Tt ]([0-9]{2}:[0-9]{2}:[0-9]{2})(?:\.([0-9]{1,9}))?"
    r"([Zz]|[+-][0-9]{2}:?[0-9]{2})?$"
)
_TRUE = ("1", "true", "yes")
_FALSE = ("", "0", "false", "no")
_MAX_COUNT = 2**31 - 1
FORMATS = ("json", "text")


# ------------------------------------------------------------------------------------------ the query
@dataclass(frozen=True)
class LogQuery:
    """What a reader asks of a job's log: which entries (tasks, minimum severity, text, since), where to
    start (after / before an insertId, the last `tail`), how many (`limit`) and whether to follow."""

    tasks: frozenset[str] = frozenset()  # empty: every task; else these and the service's messages
    min_severity: int = 0
    since_ns: int | None = None
    after: Key | None = None
    before: Key | None = None
    limit: int | None = None
    tail: int | None = None
    text: str = ""  # lowercase: a line matches when its text contains it, whatever the case
    follow: bool = False


def _bad(field_name: str, description: str) -> Exception:
    return invalid_argument([FieldViolation(field_name, description)])


def _bool(name: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise _bad(name, f"expected true or false, got {raw!r}")


def _count(name: str, raw: str, minimum: int) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise _bad(name, f"expected a whole number, got {raw!r}") from None
    if not minimum <= value <= _MAX_COUNT:
        raise _bad(name, f"expected a number from {minimum} to {_MAX_COUNT}, got {raw!r}")
    return value


def _key(name: str, raw: str) -> Key:
    match = _INSERT_ID.match(raw.strip())
    if match is None:
        raise _bad(name, f"expected the insertId of a log line (as this endpoint gives it), got {raw!r}")
    return int(match.group(1)), raw.strip()


def parse_time_or_duration(raw: str, now_ns: int | None = None) -> int:
    """`since`: an RFC 3339 time (nanoseconds kept; UTC when it names no offset) or a duration back from now
    (`10m`, `1h30m`, `90s`, `2d`), as nanoseconds since the epoch. ValueError when it is neither."""
    text = raw.strip()
    if text and _DURATION_PART.sub("", text) == "":
        span = sum(float(n) * _DURATION_UNITS[unit] for n, unit in _DURATION_PART.findall(text))
        if not span < 1e30:  # infinite, or past any log
            raise ValueError(text)
        return (time.time_ns() if now_ns is None else now_ns) - int(span)
    match = _RFC3339.match(text)
    if match is None:
        raise ValueError(text)
    day, clock, fraction, zone = match.groups()
    offset = "+00:00" if zone in (None, "Z", "z") else zone
    if len(offset) == 5:  # +hhmm
        offset = offset[:3] + ":" + offset[3:]
    stamp = datetime.fromisoformat(f"{day}T{clock}{offset}")
    nanos = int((fraction or "0").ljust(9, "0"))
    return int(stamp.timestamp()) * 1_000_000_000 + nanos


def parse_log_query(params: Any) -> LogQuery:
    """The query from request parameters (a starlette QueryParams, or any mapping of name to a list of
    values); a bad value is an INVALID_ARGUMENT naming its parameter."""

    def values(name: str) -> list[str]:
        if hasattr(params, "getlist"):
            return [str(v) for v in params.getlist(name)]
        found = params.get(name) if isinstance(params, Mapping) else None
        if found is None:
            return []
        return [str(v) for v in found] if isinstance(found, list | tuple) else [str(found)]

    def one(name: str) -> str | None:
        found = values(name)
        return found[-1] if found else None

    tasks: set[str] = set()
    for listed in values("task"):
        for task in (t.strip() for t in listed.split(",")):
            if not task:
                continue
            if not _TASK.match(task):
                raise _bad("task", f"expected a task name such as workerpool0-0, got {task!r}")
            tasks.add(task)
    min_severity = 0
    level = (one("severity") or "").strip()
    if level:
        name = severity_name(level)
        if name is None:
            raise _bad("severity", f"expected a LogSeverity such as INFO, WARNING or ERROR, got {level!r}")
        min_severity = SEVERITIES[name]
    since_ns = None
    since = (one("since") or "").strip()
    if since:
        try:
            since_ns = parse_time_or_duration(since)
        except ValueError:
            raise _bad(
                "since", f"expected an RFC 3339 time or a duration such as 10m or 1h30m, got {since!r}"
            ) from None
    raw = {name: (one(name) or "").strip() for name in ("after", "before", "limit", "tail")}
    after = _key("after", raw["after"]) if raw["after"] else None
    before = _key("before", raw["before"]) if raw["before"] else None
    limit = _count("limit", raw["limit"], 1) if raw["limit"] else None
    tail = _count("tail", raw["tail"], 0) if raw["tail"] else None
    follow = _bool("follow", one("follow") or "")
    if after and before:
        raise _bad("before", "cannot be combined with after: a page is either after or before a line")
    if tail is not None and (after or before):
        raise _bad("tail", "cannot be combined with after or before")
    if tail is not None and limit is not None:
        raise _bad("limit", "cannot be combined with tail (tail is the size of the last page)")
    if before and follow:
        raise _bad("before", "cannot be combined with follow, which reads forward")
    return LogQuery(
        tasks=frozenset(tasks),
        min_severity=min_severity,
        since_ns=since_ns,
        after=after,
        before=before,
        limit=limit,
        tail=tail,
        text=(one("q") or "").lower(),
        follow=follow,
    )


def parse_format(params: Any) -> tuple[str, bool]:
    """(`format`: json or text, `download`: whether the answer is a file to save)."""
    raw = (params.get("format") or "json").strip().lower()
    if raw not in FORMATS:
        raise _bad("format", f"expected json or text, got {raw!r}")
    return raw, _bool("download", params.get("download") or "")


# ------------------------------------------------------------------------------------------ lines
_SECOND_CACHE: list[tuple[int, str]] = [(-1, "")]


def _time(ns: int) -> str:
    seconds, fraction = divmod(ns, 1_000_000_000)
    cached_second, stamp = _SECOND_CACHE[0]
    if cached_second != seconds:  # one formatting per second of log, not per line
        stamp = format_second(seconds)
        _SECOND_CACHE[0] = (seconds, stamp)
    return f"{stamp}.{fraction:09d}Z"


def text_line(line: Mapping[str, Any]) -> str:
    """The `format=text` form of a line: time, task, severity and text."""
    return f"{line['time']} {line['task']} {line['severity']} {line['text']}\n"


@dataclass
class _Cursor:
    """Where a follower is in one log: where to read from (the last record it took, or where to start), and
    the key every entry it hands out must be past."""

    source: LogSource
    reader: Any  # LogReader, or the store's LegacyReader for a log from before entries were kept
    offset: int
    floor: Key | None
    inclusive: bool  # the floor itself is wanted (a start), else only what is past it (a last entry)
    last: int = -1  # the offset of the record taken last: reading from it again skips it
    emitted: bool = False
    gap: int = 0  # where the log resumes after the retention's gap whose notice was last handed out

    def past(self, key: Key) -> bool:
        if self.floor is None:
            return True
        return key >= self.floor if self.inclusive else key > self.floor

    def advance(self, entry: Entry) -> None:
        self.emitted = True
        if entry.dropped is not None:  # the notice of a gap is taken: go on where the log resumes
            self.offset, self.last = max(self.offset, self.gap), -1
            return
        self.offset = self.last = entry.record.offset
        self.floor, self.inclusive = entry.key, False

    def signature(self) -> tuple[Any, ...]:
        """What changes when the log grows: its segments and the size of the last."""
        if not isinstance(self.reader, LogReader):
            return ()
        found = segments(self.reader.directory)
        if not found:
            return ()
        try:
            size = Path(found[-1][1]).stat().st_size
        except OSError:
            size = -1
        return (found[0][0], found[-1][0], size)


@dataclass
class LogStream:
    """One reader's answer: `next_batch()` until it returns None. A batch is a list of lines (possibly empty
    while following); `waiting` says to poll again after POLL_SECONDS, not at once: the job is quiet, or its
    newest lines are still held back (the lag)."""

    service: LogService
    job_id: int
    job: JobLog
    query: LogQuery
    trial_id: str = ""
    waiting: bool = False
    _snapshot: Iterator[dict[str, Any]] | None = None
    _cursors: dict[str, _Cursor] | None = None
    _start: Key | None = None
    _start_inclusive: bool = True
    _sent: int = 0
    _done: bool = False
    _dirty: bool = True
    _seen: tuple[Any, ...] | None = None
    _next_state_check: float = 0.0
    _ending_at: float | None = None
    _held: bool = False  # the last round stopped at a line still within the lag
    _listed_ns: int = 0  # when logs were last looked for (wall clock): a log made since has newer lines only
    _fresh: list[LogSource] = field(default_factory=list)

    # --------------------------------------------------------------- lines
    def _sources(self) -> tuple[LogSource, ...]:
        found = job_sources(self.service.job_dir(self.job_id), self.trial_id)
        wanted = self.query.tasks
        return tuple(s for s in found if not wanted or s.task in wanted or s.task == SERVICE_TASK)

    def line(self, entry: Entry) -> dict[str, Any] | None:
        """The NDJSON line of `entry`, or None when the query's filters leave it out."""
        query = self.query
        if query.since_ns is not None and entry.ns < query.since_ns:
            return None
        severity, body = payload(entry)
        if query.min_severity and SEVERITIES.get(severity, 0) < query.min_severity:
            return None
        record = entry.record
        text = body if isinstance(body, str) else record.data.decode("utf-8", "replace")
        if query.text and query.text not in text.lower():
            return None
        out: dict[str, Any] = {
            "time": _time(entry.ns),
            "insertId": entry.insert_id,
            "task": entry.source.task,
            "severity": severity,
        }
        stream = _STREAM_NAMES.get(record.kind) if entry.dropped is None else None
        if stream:
            out["stream"] = stream
        out["text"] = text
        if isinstance(body, dict):
            out["json"] = body
        if record.more:
            out["more"] = True
        if entry.dropped is not None:
            out["dropped"] = {k: int(entry.dropped.get(k, 0)) for k in ("lines", "bytes")}
        if self.trial_id:
            out["trialId"] = self.trial_id
        return out

    # --------------------------------------------------------------- batches
    def next_batch(self) -> list[dict[str, Any]] | None:
        if self._done:
            return None
        if self.query.limit is not None and self._sent >= self.query.limit:
            self._done = True
            return None
        batch = self._follow() if self.query.follow else self._from_snapshot()
        if batch is None:
            self._done = True
            return None
        self._sent += len(batch)
        return batch

    def _from_snapshot(self) -> list[dict[str, Any]] | None:
        if self._snapshot is None:
            self._snapshot = self._read_snapshot()
        batch: list[dict[str, Any]] = []
        room = BATCH if self.query.limit is None else min(BATCH, self.query.limit - self._sent)
        for line in self._snapshot:
            batch.append(line)
            if len(batch) >= room:
                return batch
        return batch or None

    def _entries(self, descending: bool = False, after: Key | None = None) -> Iterator[Entry]:
        job = JobLog(self.job.job_id, self.job.project_id, self.job.labels, self._sources())
        since = self.query.since_ns
        return read_entries([job], descending=descending, since_ns=since, after=after)

    def _back(self, count: int, before: Key | None) -> tuple[Key | None, Key | None]:
        """Walking back from `before` (the end when None): the key of the `count`-th newest line the filters
        keep (the oldest kept when there are fewer), and the newest entry seen at all."""
        found: Key | None = None
        newest: Key | None = None
        kept = 0
        for entry in self._entries(descending=True, after=before):
            if newest is None:
                newest = entry.key
            if count <= 0:
                break
            if self.line(entry) is None:
                continue
            found = entry.key
            kept += 1
            if kept >= count:
                break
        return found, newest

    def _read_snapshot(self) -> Iterator[dict[str, Any]]:
        """The lines of a read that does not follow: from the start (or since, or after a line), the page
        before a line, or the last `tail`, in time order; read forward so that nothing is held in memory."""
        query = self.query
        start: Key | None = None
        stop = query.before
        if query.tail is not None or (query.before is not None and query.limit is not None):
            count = query.tail if query.tail is not None else query.limit or 0
            start, _ = self._back(count, query.before)
            if start is None:
                return
        after = query.after
        if start is not None:
            after = (start[0] - 1, "")  # reads from start's nanosecond; what is before start is skipped
        for entry in self._entries(after=after):
            key = entry.key
            if start is not None and key < start:
                continue
            if stop is not None and key >= stop:
                return
            line = self.line(entry)
            if line is not None:
                yield line

    # --------------------------------------------------------------- following
    def _start_position(self) -> None:
        """Where following starts: after `after`, at the `tail`-th last line, at `since`, or at the start."""
        query = self.query
        if query.after is not None:
            self._start, self._start_inclusive = query.after, False
        elif query.tail is not None:
            found, newest = self._back(query.tail, None)
            if found is not None and query.tail > 0:
                self._start, self._start_inclusive = found, True
            elif newest is not None:  # no line to show yet: only what comes after the end as it is now
                self._start, self._start_inclusive = newest, False
        elif query.since_ns is not None:
            self._start, self._start_inclusive = (query.since_ns, ""), True

    def _add_cursors(self) -> None:
        assert self._cursors is not None
        self._listed_ns = time.time_ns()  # before the look: a log made during it holds only later lines
        for source in self._sources():
            if source.key in self._cursors:
                continue
            reader = source.reader()
            start = self._start
            offset = 0
            if start is not None:
                dropped = reader.dropped()
                until = int(dropped.get("until_ns", 0)) if dropped.get("lines") else 0
                if start[0] > until:  # else from 0: the gap tells that the start was dropped
                    offset = reader.first_offset_at(start[0])
            self._cursors[source.key] = _Cursor(source, reader, offset, start, self._start_inclusive)
            self._dirty = True

    def _records(self, cursor: _Cursor) -> Iterator[tuple[Entry, _Cursor]]:
        reader = cursor.reader
        if isinstance(reader, LogReader):
            found = segments(reader.directory)
            if found and found[0][0] > cursor.offset:
                # The retention removed what this reader had not read: say so, once per gap. The cursor
                # moves past the gap only when the notice is taken (advance): a round that stops before
                # it (heapq.merge reads each stream's first entry ahead) finds the gap again next time.
                notice = dropped_entry(self.job, cursor.source, reader.dropped())
                if notice is not None and (cursor.emitted or cursor.past(notice.key)):
                    cursor.gap = found[0][0]
                    yield notice, cursor
        skip = cursor.last
        for record in reader.forward(cursor.offset):
            if record.offset <= skip:
                continue  # the record taken last
            entry = Entry(self.job, cursor.source, record, insert_id(record.ns, cursor.source, record.offset))
            if cursor.past(entry.key):
                yield entry, cursor

    def _signature(self) -> tuple[Any, ...]:
        assert self._cursors is not None
        return tuple(c.signature() for c in self._cursors.values())

    def _round(self, final: bool) -> list[dict[str, Any]]:
        """Read what the logs hold past each cursor, merged; unless `final`, stop at entries newer than the
        lag. Leaves `_dirty` set when there is more to read now."""
        assert self._cursors is not None
        seen = self._signature()
        now = time.time_ns()
        hold_from, hold_until = min(now, self._listed_ns) - LAG_NS, now + SKEW_NS
        streams = [self._records(c) for c in self._cursors.values()]
        batch: list[dict[str, Any]] = []
        room = BATCH if self.query.limit is None else min(BATCH, self.query.limit - self._sent)
        self._dirty = self._held = False
        merged = heapq.merge(*streams, key=lambda item: item[0].key)
        for scanned, (entry, cursor) in enumerate(merged, 1):
            if not final and hold_from < entry.ns <= hold_until:
                # Wait for the lag to pass (another log may still bring an earlier line): the reader looks
                # again after its poll, not at once (`waiting`).
                self._dirty = self._held = True
                break
            cursor.advance(entry)
            line = self.line(entry)
            if line is not None:
                batch.append(line)
            if len(batch) >= room or scanned >= SCAN_BATCH:
                self._dirty = True
                break
        self._seen = None if self._dirty else seen
        return batch

    def _follow(self) -> list[dict[str, Any]] | None:
        self.waiting = False
        if self._cursors is None:
            self._start_position()
            self._cursors = {}
            self._add_cursors()
        clock = time.monotonic()
        if self._ending_at is not None and clock >= self._ending_at:
            self._add_cursors()
            batch = self._round(final=True)
            if not self._dirty:
                self._done = True  # after this batch: the job has ended and its log is read
            return batch
        if time.time_ns() - self._listed_ns > LAG_NS:
            self._add_cursors()
        if self._dirty or self._signature() != self._seen:
            batch = self._round(final=False)
            if batch or self._dirty:
                self.waiting = self._held
                return batch
        if self._ending_at is None and clock >= self._next_state_check:
            self._next_state_check = clock + STATE_SECONDS
            if self.service.ended(self.job_id):
                self._ending_at = clock + END_GRACE_SECONDS
        self.waiting = True
        return []


# ------------------------------------------------------------------------------------------ the service
class LogService:
    def __init__(self, settings: Settings, jobs: JobStore, projects: Projects) -> None:
        self.settings = settings
        self.jobs = jobs
        self.projects = projects

    def job_dir(self, job_id: int) -> Path:
        return self.settings.jobs_dir / str(job_id)

    def ended(self, job_id: int) -> bool:
        row = self.jobs.get(job_id)
        return row is None or JobState(row.state).terminal

    def open(self, project: str, location: str, job_id: str, query: LogQuery) -> LogStream:
        """A reader of the job's log (NOT_FOUND when there is no such job)."""
        jid = numeric_id(job_id, "CustomJob")
        number = self.projects.number(project, location)
        row = self.jobs.get(jid, number, location)
        if row is None:
            raise not_found(f"CustomJob {custom_job_name(number, location, jid)}")
        labels = dict(row.labels or {})
        job = JobLog(job_id=str(jid), project_id=project, labels=labels)
        return LogStream(self, jid, job, query, trial_id=trial_of(labels) or "")

    def entries(
        self,
        project: str,
        location: str,
        job_id: str,
        task: str | Sequence[str] | None = None,
        follow: bool = False,
        poll_seconds: float = POLL_SECONDS,
        query: LogQuery | None = None,
    ) -> Iterator[dict[str, Any]]:
        """The job's log lines (`query`, or every line of `task`, followed when `follow`), as they come."""
        if query is None:
            tasks = [task] if isinstance(task, str) else list(task or ())
            query = LogQuery(tasks=frozenset(t for t in tasks if t), follow=follow)
        stream = self.open(project, location, job_id, query)
        return _lines(stream, poll_seconds)


def _lines(stream: LogStream, poll_seconds: float) -> Iterator[dict[str, Any]]:
    while True:
        batch = stream.next_batch()
        if batch is None:
            return
        yield from batch
        if stream.waiting:
            time.sleep(poll_seconds)
