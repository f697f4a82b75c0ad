"""Where a job's log entries are, and reading them in time order across its replicas.

Each replica (and the job's `service` log of platform messages) keeps its own log (backends/capture.py):
records in time order, named by their offset. A job's entries are the merge of its sources by
(timestamp, insertId), read forward or backward from a position, so that a page or a time range costs a
binary search per source and the entries it returns, never a read of everything before it.

insertId is `<timestamp ns, 19 digits>.<source>.<offset, 12 hex digits>`: unique within the job, and ordered
as the entries are (by timestamp, then source, then position in the source).
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import or_, select

from trainworks.backends.capture import LOG_DIR, LogReader, Record, log_dir
from trainworks.jobs.service_log import SERVICE_TASK
from trainworks.store.database import Database
from trainworks.store.tables import CustomJobRow, ProjectRow, TuningJobRow

_LEGACY_STREAMS = (("stdout.log", "o"), ("stderr.log", "e"))


@dataclass(frozen=True)
class LogSource:
    """One log of a job: a replica's (task `workerpool0-0`...) or the platform's (`service`); a trial's
    replicas carry its trial ID."""

    task: str
    run_dir: Path
    trial_id: str = ""

    @property
    def key(self) -> str:
        return f"{self.trial_id}-{self.task}" if self.trial_id else self.task

    def reader(self) -> LogReader | LegacyReader:
        directory = log_dir(str(self.run_dir))
        if not os.path.isdir(directory) and any(
            (self.run_dir / name).exists() for name, _ in _LEGACY_STREAMS
        ):
            return LegacyReader(self.run_dir)
        return LogReader(directory)


@dataclass(frozen=True)
class JobLog:
    """What Cloud Logging shows of one job (a CustomJob, or a tuning job with its trials): the resource
    labels of its entries and where they are."""

    job_id: str
    project_id: str
    labels: dict[str, str] = field(default_factory=dict)
    sources: tuple[LogSource, ...] = ()


@dataclass(frozen=True)
class Entry:
    """A record of a source, placed in its job's order."""

    job: JobLog
    source: LogSource
    record: Record
    insert_id: str
    dropped: dict[str, float] | None = None  # set on the entry that says part of the log was dropped

    @property
    def ns(self) -> int:
        return self.record.ns

    @property
    def key(self) -> tuple[int, str]:
        return (self.record.ns, self.insert_id)


def insert_id(ns: int, source: LogSource, offset: int) -> str:
    return f"{ns:019d}.{source.key}.{offset:012x}"


def _holds_log(folder: Path) -> bool:
    """Whether a folder of a job is a log's: a replica's run folder (with its log, or an older server's
    stdout.log and stderr.log), not the job's staged packages or outputs."""
    return (folder / LOG_DIR).is_dir() or any((folder / name).exists() for name, _ in _LEGACY_STREAMS)


def job_sources(job_dir: Path, trial_id: str = "") -> list[LogSource]:
    """The logs in a job's folder: one per replica folder, and the `service` log."""
    found: list[LogSource] = []
    if job_dir.is_dir():
        for entry in sorted(job_dir.iterdir()):
            if entry.name.startswith(".") or not entry.is_dir():
                continue
            if entry.name == SERVICE_TASK or _holds_log(entry):
                found.append(LogSource(entry.name, entry, trial_id))
    if not any(s.task == SERVICE_TASK for s in found):
        found.append(LogSource(SERVICE_TASK, job_dir / SERVICE_TASK, trial_id))
    return found


def dropped_entry(job: JobLog, source: LogSource, dropped: dict[str, float]) -> Entry | None:
    """The entry that says part of `source` was dropped (`dropped`: its dropped.json), if any was."""
    if not dropped.get("lines") and not dropped.get("bytes"):
        return None
    ns = int(dropped.get("until_ns", 0))
    record = Record(-1, ns, "d", b"", 0, False, 0)
    return Entry(job, source, record, f"{ns:019d}.{source.key}.dropped", dropped)


def _forward(job: JobLog, source: LogSource, since_ns: int | None) -> Iterator[Entry]:
    reader = source.reader()
    dropped = dropped_entry(job, source, reader.dropped())
    if dropped is not None and (since_ns is None or dropped.ns >= since_ns):
        yield dropped
    start = reader.first_offset_at(since_ns) if since_ns is not None else 0
    for record in reader.forward(start):
        yield Entry(job, source, record, insert_id(record.ns, source, record.offset))


def _backward(job: JobLog, source: LogSource, until_ns: int | None) -> Iterator[Entry]:
    reader = source.reader()
    before = reader.first_offset_at(until_ns + 1) if until_ns is not None else None
    for record in reader.backward(before):
        yield Entry(job, source, record, insert_id(record.ns, source, record.offset))
    dropped = dropped_entry(job, source, reader.dropped())
    if dropped is not None and (until_ns is None or dropped.ns <= until_ns):
        yield dropped


def read_entries(
    jobs: list[JobLog],
    descending: bool = False,
    since_ns: int | None = None,
    until_ns: int | None = None,
    after: tuple[int, str] | None = None,
) -> Iterator[Entry]:
    """Every entry of `jobs` in (timestamp, insertId) order, newest first when `descending`, from `since_ns`
    to `until_ns` (inclusive; None: unbounded) and strictly past `after` (a page's last key), as written now.

    The bounds only start the reading at the right place: a caller that filters on time still checks each
    entry (entries at the same nanosecond may sit on either side of a bound)."""
    if after is not None:
        if descending:
            until_ns = after[0] if until_ns is None else min(until_ns, after[0])
        else:
            since_ns = after[0] if since_ns is None else max(since_ns, after[0])
    streams: list[Iterator[Entry]] = []
    for job in jobs:
        for source in job.sources:
            if descending:
                streams.append(_backward(job, source, until_ns))
            else:
                streams.append(_forward(job, source, since_ns))
    merged = heapq.merge(*streams, key=lambda e: e.key, reverse=descending)
    for entry in merged:
        if after is not None and (entry.key >= after if descending else entry.key <= after):
            continue
        if descending:
            if since_ns is not None and entry.ns < since_ns:
                return
        elif until_ns is not None and entry.ns > until_ns:
            return
        yield entry


class JobCatalog:
    """Which jobs a project's logs hold: the custom and tuning jobs of a set of projects that ran in a time
    range, read from the job tables (no kind's service lists jobs across every location), and the projects'
    IDs, which entries name."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _jobs(
        self, table: Any, numbers: Iterable[str], since: datetime | None, until: datetime | None
    ) -> list[Any]:
        query = select(table).where(table.project_number.in_(list(numbers)))
        if until is not None:
            query = query.where(table.create_time <= until)
        if since is not None:
            query = query.where(or_(table.end_time.is_(None), table.end_time >= since))
        with self.db.session() as session:
            return list(session.scalars(query.order_by(table.create_time, table.id)))

    def custom_jobs(
        self, numbers: Iterable[str], since: datetime | None, until: datetime | None
    ) -> list[CustomJobRow]:
        """The CustomJobs of the projects (by number) created by `until` and not ended before `since`."""
        return self._jobs(CustomJobRow, numbers, since, until)

    def tuning_jobs(
        self, numbers: Iterable[str], since: datetime | None, until: datetime | None
    ) -> list[TuningJobRow]:
        return self._jobs(TuningJobRow, numbers, since, until)

    def project_ids(self, numbers: Iterable[str]) -> dict[str, str]:
        """Each project number's ID, when the project has one (a project used only by number has none)."""
        with self.db.session() as session:
            rows = session.execute(
                select(ProjectRow.project_number, ProjectRow.project_id).where(
                    ProjectRow.project_number.in_(list(numbers))
                )
            )
            return {number: project_id for number, project_id in rows}


class LegacyReader:
    """A replica log from before entries were kept (stdout.log and stderr.log of an older server): its
    lines, each with the file's modification time."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir

    def dropped(self) -> dict[str, float]:
        return {}

    def _records(self) -> list[Record]:
        """Its lines in order (stdout's, then stderr's, each file at its own time); a line's offset is its
        place in that order (the files never change again)."""
        found: list[tuple[int, int, bytes, str]] = []
        for order, (name, kind) in enumerate(_LEGACY_STREAMS):
            path = self.run_dir / name
            try:
                data = path.read_bytes()
                ns = path.stat().st_mtime_ns
            except OSError:
                continue
            found.extend((ns, order, line.rstrip(b"\r\n"), kind) for line in data.splitlines(keepends=True))
        found.sort(key=lambda item: (item[0], item[1]))
        return [Record(i, ns, kind, line, 0, False, 0) for i, (ns, _, line, kind) in enumerate(found)]

    def first_offset_at(self, ns: int) -> int:
        records = self._records()
        return next((r.offset for r in records if r.ns >= ns), len(records))

    def forward(self, offset: int = 0) -> Iterator[Record]:
        return iter(self._records()[offset:])

    def backward(self, before: int | None = None) -> Iterator[Record]:
        records = self._records()
        return reversed(records if before is None else records[:before])
