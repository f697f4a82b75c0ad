"""The customJobs methods of the REST client, with Trainworks' job extensions (status, tensorboard, logs,
preempt) and the shapes of their answers (no proto describes them: TypedDicts of the JSON as it comes)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any, NotRequired, cast

import httpx

# typing's TypedDict is not one pydantic can check on Python 3.11 (the tests check the server's answers).
from typing_extensions import TypedDict

from trainworks.kernel.client import EXTENSIONS, Client, JsonObject, QueryValue
from trainworks.kernel.longrunning import Operation
from trainworks.kinds.custom_jobs.wire import CustomJob


# ------------------------------------------------------------------ extension answers
class CostFigures(TypedDict):
    """What every cost summary has (catalog/billing.py totals_wire): hours and USD."""

    machineHours: float
    acceleratorHours: dict[str, float]  # by accelerator type
    costUsd: float
    onDemandEquivalentUsd: float
    coveredUsd: NotRequired[float]


class CostGroup(CostFigures):
    """One machine shape of a job's pool (`pool`) or of a persistent resource's pool (`resourcePool`)."""

    pool: NotRequired[str]
    resourcePool: NotRequired[str]
    machineType: str
    acceleratorType: NotRequired[str]
    acceleratorCount: NotRequired[int]
    spot: bool
    intervals: int
    running: NotRequired[int]
    priced: NotRequired[bool]  # false: the catalog has no price for the shape
    hourlyPriceUsd: NotRequired[float]


class JobCost(CostFigures):
    """A job's machine-hours and approximate cost so far."""

    currency: str
    spot: bool
    billedTo: NotRequired[str | list[str]]  # the persistent resource(s) billed instead
    running: bool
    asOf: str
    pools: list[CostGroup]


class Restart(TypedDict):
    """One restart of the job's history."""

    attempt: int
    kind: str
    reason: str
    time: str


class ReplicaStatus(TypedDict):
    task: str  # workerpool0-0
    attempt: int
    phase: str
    address: str
    restarts: int
    pid: NotRequired[int]
    exitCode: NotRequired[int]
    detail: NotRequired[str]
    preempted: NotRequired[bool]
    startTime: NotRequired[str]
    endTime: NotRequired[str]


class JobStatus(TypedDict):
    """Trainworks' status of a job: attempt, restart history, replicas, cost, zone, why it waits."""

    name: str
    state: str
    attempt: int
    priority: int
    restarts: list[Restart]
    replicas: list[ReplicaStatus]
    cost: JobCost
    zone: NotRequired[str]
    waitingReason: NotRequired[str]


class TensorboardInfo(TypedDict):
    name: str
    logDir: str  # the job's AIP_TENSORBOARD_LOG_DIR
    localPath: NotRequired[str]  # its folder, with local buckets


class Preempted(TypedDict):
    preempted: list[str]  # the replicas preempted


class LogDropped(TypedDict):
    lines: int
    bytes: int


class LogEntry(TypedDict):
    """One entry of a job's log, in time order across its replicas: a replica's line (`stream`), or a
    platform message (task `service`). `json`: a structured line's payload; `more`: a piece of a line cut
    for length that the next piece continues; `dropped`: what the log's retention removed."""

    time: str  # RFC 3339, nanoseconds
    insertId: str  # its place in the job's log (a cursor for `after`)
    task: str
    severity: str
    text: str
    stream: NotRequired[str]
    json: NotRequired[dict[str, Any]]
    more: NotRequired[bool]
    dropped: NotRequired[LogDropped]
    trialId: NotRequired[str]


# ------------------------------------------------------------------ the methods
class CustomJobsClient(Client):
    """customJobs (create is synchronous; delete returns the long-running Operation)."""

    def create_custom_job(self, parent: str, body: JsonObject) -> CustomJob:
        return self._create(CustomJob, parent, "/customJobs", body)

    def get_custom_job(self, name: str) -> CustomJob:
        return self._get(CustomJob, name)

    def list_custom_jobs(self, parent: str, filter: str = "", page_size: int = 0) -> Iterator[CustomJob]:
        """Every job matching `filter`, fetching pages lazily (following nextPageToken)."""
        return self._list(CustomJob, parent, "/customJobs", page_size, {"filter": filter})

    def cancel_custom_job(self, name: str) -> None:
        self._cancel(name)

    def delete_custom_job(self, name: str) -> Operation:
        """Starts the deletion; returns the long-running Operation."""
        return self._delete(name)

    # ------------------------------------------------------------------ Trainworks extensions
    def get_custom_job_status(self, name: str) -> JobStatus:
        """Trainworks' status of a job: attempt, restart history, zone, waiting reason, replicas."""
        return cast(JobStatus, self._get_json(name, "/status", api=EXTENSIONS))

    def get_custom_job_tensorboard(self, name: str) -> TensorboardInfo:
        """The job's AIP_TENSORBOARD_LOG_DIR (logDir) and, with local buckets, its folder (localPath)."""
        return cast(TensorboardInfo, self._get_json(name, "/tensorboard", api=EXTENSIONS))

    def preempt_custom_job(
        self, name: str, replica: str | None = None, attempt: int | None = None
    ) -> Preempted:
        """Preempts a running SPOT job's replica (all of them when `replica` is None), for chaos tests; with
        `attempt`, only while the job still runs that attempt."""
        body: dict[str, Any] = {"replica": replica} if replica else {}
        if attempt is not None:
            body["attempt"] = attempt
        return cast(Preempted, self._verb(name, "preempt", body, api=EXTENSIONS))

    def stream_logs(
        self,
        name: str,
        task: str | Sequence[str] | None = None,
        follow: bool = True,
        *,
        severity: str | None = None,
        since: str | None = None,
        tail: int | None = None,
        after: str | None = None,
        contains: str | None = None,
    ) -> Iterator[LogEntry]:
        """A job's log entries in time order, as they come: only `task` (one or several; `service` messages
        come too), at least `severity`, from `since` (RFC 3339 or a duration such as 10m), the last `tail`,
        after the entry `after` (an insertId), with `contains` in their text.

        With `follow`, the stream stays open until the job ends, so there is no read timeout.
        """
        tasks = [task] if isinstance(task, str) else list(task or [])
        params: dict[str, QueryValue] = {
            "follow": "true" if follow else "false",
            "task": ",".join(tasks) or None,
            "severity": severity,
            "since": since,
            "tail": tail,
            "after": after,
            "q": contains,
        }
        timeout = httpx.Timeout(self.timeout, read=None) if follow else httpx.Timeout(self.timeout)
        for line in self._lines(self._url(name, "/logs", EXTENSIONS), params, timeout):
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"time": "", "insertId": "", "task": "", "severity": "DEFAULT", "text": line}
            if isinstance(entry, dict):
                yield cast(LogEntry, entry)


__all__ = [
    "CostFigures",
    "CostGroup",
    "CustomJobsClient",
    "JobCost",
    "JobStatus",
    "LogDropped",
    "LogEntry",
    "Preempted",
    "ReplicaStatus",
    "Restart",
    "TensorboardInfo",
]
