"""`entries:list` of the Cloud Logging API v2 over the jobs' logs: which jobs a request's query reaches, and
one page of their entries in time order.

Which jobs: those the query names by `resource.labels.job_id` (a CustomJob's ID; a tuning job's, which
brings its own `service` log and every trial's CustomJob, their entries labelled with the trial ID; a trial's
CustomJob by its own ID too), else every custom and tuning job of the projects that ran in the query's time
range. Only their logs are opened, each from the query's time bound (store.py `read_entries`).

A page holds `pageSize` matching entries, or what matched among SCAN_LIMIT entries read, or about
PAGE_BYTES of them (a line may be 256 KiB), whichever comes first: a query that matches rarely answers a
short (even empty) page with a nextPageToken to go on from, as Cloud Logging does, so that no request reads
a whole log. The page token carries the position of the last entry read, the order, and a fingerprint of
the filter and the projects it was issued for.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

from trainworks.kernel.errors import ApiError, FieldViolation, invalid_argument
from trainworks.kernel.projects import Projects
from trainworks.kinds.log_entries.query import (
    JOB_ID,
    RESOURCE_TYPE,
    TASK_NAME,
    EntryView,
    LogQuery,
    parse_query,
)
from trainworks.kinds.log_entries.store import (
    Entry,
    JobCatalog,
    JobLog,
    LogSource,
    job_sources,
    read_entries,
)
from trainworks.store.tables import CustomJobRow, TuningJobRow, TuningTrialRow
from trainworks.tuning.trial_jobs import TRIAL_LABEL, TUNING_JOB_LABEL

#: Cloud Logging's page sizes: 50 unless asked, at most 1000.
DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000
#: Entries one request reads at most before it answers what matched so far (with a token to go on).
SCAN_LIMIT = 20_000
#: About how much of the entries' text one page holds at most (a thousand 256 KiB lines would be 256 MiB).
PAGE_BYTES = 8 << 20
MAX_RESOURCE_NAMES = 100
# Entries fall within their job's life; the slack covers the last lines a replica's logger writes as it ends.
_SLACK = timedelta(minutes=5)
_ORDERS = {"timestamp asc": False, "timestamp": False, "timestamp desc": True}
_FIELDS = {
    "resourceNames": "resourceNames",
    "resource_names": "resourceNames",
    "projectIds": "projectIds",
    "project_ids": "projectIds",
    "filter": "filter",
    "orderBy": "orderBy",
    "order_by": "orderBy",
    "pageSize": "pageSize",
    "page_size": "pageSize",
    "pageToken": "pageToken",
    "page_token": "pageToken",
}
_PROJECT_NAME = re.compile(r"projects/([^/]+)")


class CustomJobs(Protocol):
    """What the log reads of the custom jobs' service."""

    def job_row(self, job_id: int) -> CustomJobRow | None: ...


class TuningJobs(Protocol):
    """What the log reads of the tuning jobs' service."""

    def job_row(self, job_id: int) -> TuningJobRow | None: ...

    def trials_of(self, job_id: int) -> list[TuningTrialRow]: ...


@dataclass(frozen=True)
class ListRequest:
    """A ListLogEntriesRequest, checked: the projects as named (by ID or number), in order."""

    projects: tuple[str, ...]
    filter: str = ""
    descending: bool = False
    page_size: int = DEFAULT_PAGE_SIZE
    page_token: str = ""
    order_by: str = "timestamp asc"


@dataclass
class _Scope:
    """The projects of a request: their numbers, and the ID that entries name each by."""

    numbers: set[str]
    ids: dict[str, str] = field(default_factory=dict)

    def project_id(self, number: str) -> str:
        return self.ids.get(number, number)


def _violation(where: str, what: str) -> ApiError:
    return invalid_argument([FieldViolation(where, what)])


def _string(body: Mapping[str, Any], key: str) -> str:
    value = body.get(key, "")
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _violation(key, f"expected a string, got {json.dumps(value)[:60]}")
    return value


def _page_size(value: Any) -> int:
    if value is None:
        return DEFAULT_PAGE_SIZE
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,12}", value.strip()):
        value = int(value)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _violation("pageSize", f"expected an integer, got {json.dumps(value)[:60]}")
    if value < 0 or value > MAX_PAGE_SIZE:
        raise _violation("pageSize", f"must be between 0 and {MAX_PAGE_SIZE}, got {value}")
    return value or DEFAULT_PAGE_SIZE


def _names(body: Mapping[str, Any], key: str) -> list[str]:
    value = body.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _violation(key, "expected a list of strings")
    return list(value)


def parse_request(body: Any) -> ListRequest:
    """The request's JSON body (the proto JSON mapping of ListLogEntriesRequest); INVALID_ARGUMENT naming the
    field at fault."""
    if not isinstance(body, dict):
        raise _violation("body", "expected a JSON object (ListLogEntriesRequest)")
    fields: dict[str, Any] = {}
    for key, value in body.items():
        name = _FIELDS.get(key)
        if name is None:
            raise invalid_argument(
                [FieldViolation(str(key)[:100], "no such field of ListLogEntriesRequest")],
                f'Invalid JSON payload received. Unknown name "{str(key)[:100]}": Cannot find field.',
            )
        fields[name] = value
    projects: list[str] = []
    for index, name in enumerate(_names(fields, "resourceNames")):
        match = _PROJECT_NAME.fullmatch(name)
        if match is None:
            raise _violation(
                f"resourceNames[{index}]",
                f"{name[:100]!r} is not a resource name this server serves: use projects/PROJECT_ID "
                "or projects/PROJECT_NUMBER",
            )
        projects.append(match.group(1))
    projects += _names(fields, "projectIds")  # the deprecated form
    if not projects:
        raise _violation("resourceNames", "name at least one resource, such as projects/PROJECT_ID")
    if len(projects) > MAX_RESOURCE_NAMES:
        raise _violation("resourceNames", f"at most {MAX_RESOURCE_NAMES} resource names, got {len(projects)}")
    order_by = " ".join(_string(fields, "orderBy").lower().split()) or "timestamp asc"
    if order_by not in _ORDERS:
        raise _violation("orderBy", f'{order_by[:60]!r}: use "timestamp asc" or "timestamp desc"')
    return ListRequest(
        projects=tuple(dict.fromkeys(projects)),
        filter=_string(fields, "filter"),
        descending=_ORDERS[order_by],
        page_size=_page_size(fields.get("pageSize")),
        page_token=_string(fields, "pageToken"),
        order_by="timestamp desc" if _ORDERS[order_by] else "timestamp asc",
    )


# ------------------------------------------------------------------------------------------ tokens
def _fingerprint(filter_text: str, numbers: set[str]) -> str:
    raw = json.dumps([filter_text, sorted(numbers)])
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def page_token(key: tuple[int, str], order_by: str, fingerprint: str) -> str:
    raw = json.dumps({"k": [key[0], key[1]], "o": order_by, "f": fingerprint}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def read_page_token(token: str, order_by: str, fingerprint: str) -> tuple[int, str]:
    """The position (timestamp ns, insertId) after which the next page starts."""
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        ns, insert_id = data["k"]
        order, issued = data["o"], data["f"]
        if not isinstance(ns, int) or isinstance(ns, bool) or not isinstance(insert_id, str):
            raise TypeError("bad position")
        if not isinstance(order, str) or not isinstance(issued, str):
            raise TypeError("bad token")
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise _violation("pageToken", "invalid page token: pass nextPageToken as it was given") from None
    if order != order_by:
        raise _violation("pageToken", f'the page token was issued for orderBy "{order}", not "{order_by}"')
    if issued != fingerprint:
        raise _violation(
            "pageToken", "the page token was issued for a different filter or different resourceNames"
        )
    return ns, insert_id


def _moment(ns: int | None, slack: timedelta) -> datetime | None:
    """A time bound of the query as a datetime widened by `slack`; None for none (or beyond any date)."""
    if ns is None:
        return None
    try:
        return datetime.fromtimestamp(ns / 1e9, UTC) + slack
    except (OverflowError, ValueError, OSError):
        return None


# ------------------------------------------------------------------------------------------ service
class LogEntryService:
    def __init__(
        self,
        jobs_dir: Path,
        projects: Projects,
        catalog: JobCatalog,
        custom_jobs: CustomJobs,
        tuning_jobs: TuningJobs | None = None,
    ) -> None:
        self.jobs_dir = jobs_dir
        self.projects = projects
        self.catalog = catalog
        self.custom_jobs = custom_jobs
        self.tuning_jobs = tuning_jobs

    def list_entries(self, request: ListRequest) -> dict[str, Any]:
        """One page of the entries the request asks for: `{"entries": [...], "nextPageToken": "..."}`, each
        left out when empty."""
        query = parse_query(request.filter)
        numbers: set[str] = set()
        for index, project in enumerate(request.projects):
            try:
                numbers.add(self.projects.number(project))
            except ApiError:
                raise _violation(f"resourceNames[{index}]", f"invalid project {project[:100]!r}") from None
        fingerprint = _fingerprint(request.filter, numbers)
        after = None
        if request.page_token:
            after = read_page_token(request.page_token, request.order_by, fingerprint)
        types = query.allowed(RESOURCE_TYPE)
        if query.empty_range or (types is not None and "ml_job" not in types):
            return {}
        scope = _Scope(numbers, self.catalog.project_ids(numbers))
        jobs = self._job_logs(query, scope)
        stream = read_entries(jobs, request.descending, query.since_ns, query.until_ns, after)
        found, last = _page(stream, query, request.page_size)
        out: dict[str, Any] = {}
        if found:
            out["entries"] = found
        if last is not None:
            out["nextPageToken"] = page_token(last, request.order_by, fingerprint)
        return out

    # ---------------------------------------------------------------- which logs
    def _job_logs(self, query: LogQuery, scope: _Scope) -> list[JobLog]:
        """The logs of the jobs the query names (or else of every job of the projects in its time range),
        with only the sources of the tasks it names, when it names some."""
        job_ids, tasks = query.allowed(JOB_ID), query.allowed(TASK_NAME)
        if job_ids is not None:
            jobs = [log for job_id in sorted(job_ids) for log in self._by_id(job_id, scope)]
        else:
            jobs = self._in_projects(scope, query.since_ns, query.until_ns)
        if tasks is not None:
            jobs = [
                JobLog(job.job_id, job.project_id, job.labels, _tasks(job.sources, tasks)) for job in jobs
            ]
        return [job for job in jobs if job.sources]

    def _by_id(self, job_id: str, scope: _Scope) -> list[JobLog]:
        if not (job_id.isascii() and job_id.isdigit() and len(job_id) <= 19 and int(job_id) < 2**63):
            return []  # no job has such an ID
        found: list[JobLog] = []
        custom = self.custom_jobs.job_row(int(job_id))
        if custom is not None and custom.project_number in scope.numbers:
            found.append(self._custom_log(custom, scope))
        tuning = self.tuning_jobs.job_row(int(job_id)) if self.tuning_jobs is not None else None
        if tuning is not None and tuning.project_number in scope.numbers:
            found.append(self._tuning_log(tuning, scope))
        return found

    def _in_projects(self, scope: _Scope, since_ns: int | None, until_ns: int | None) -> list[JobLog]:
        since, until = _moment(since_ns, -_SLACK), _moment(until_ns, _SLACK)
        found = [
            self._custom_log(row, scope)
            for row in self.catalog.custom_jobs(scope.numbers, since, until)
            if TUNING_JOB_LABEL not in (row.labels or {})  # a trial's: its entries are its tuning job's
        ]
        if self.tuning_jobs is not None:
            found += [
                self._tuning_log(row, scope) for row in self.catalog.tuning_jobs(scope.numbers, since, until)
            ]
        return found

    def _custom_log(self, row: CustomJobRow, scope: _Scope) -> JobLog:
        labels = dict(row.labels or {})
        trial = labels.get(TRIAL_LABEL, "") if TUNING_JOB_LABEL in labels else ""
        sources = job_sources(self.jobs_dir / str(row.id), trial)
        return JobLog(str(row.id), scope.project_id(row.project_number), labels, tuple(sources))

    def _tuning_log(self, row: TuningJobRow, scope: _Scope) -> JobLog:
        sources = job_sources(self.jobs_dir / f"tuning-{row.id}")
        assert self.tuning_jobs is not None
        for trial in self.tuning_jobs.trials_of(row.id):
            if trial.custom_job_id is not None:
                sources += job_sources(self.jobs_dir / str(trial.custom_job_id), str(trial.trial_id))
        return JobLog(
            str(row.id), scope.project_id(row.project_number), dict(row.labels or {}), tuple(sources)
        )


def _page(
    stream: Iterator[Entry], query: LogQuery, page_size: int
) -> tuple[list[dict[str, Any]], tuple[int, str] | None]:
    """The entries of one page, and the position of the last entry read when more may follow."""
    found: list[dict[str, Any]] = []
    last: tuple[int, str] | None = None
    size = 0
    for scanned, entry in enumerate(stream, start=1):
        last = entry.key
        view = EntryView(entry)
        if query.matches(view):
            found.append(view.json())
            size += len(entry.record.data)
        if len(found) >= page_size or scanned >= SCAN_LIMIT or size >= PAGE_BYTES:
            break
    else:
        return found, None  # the end of the log as written now
    if next(stream, None) is None:
        return found, None
    return found, last


def _tasks(sources: tuple[LogSource, ...], tasks: frozenset[str]) -> tuple[LogSource, ...]:
    return tuple(source for source in sources if source.task.casefold() in tasks)
