"""The customJobs methods of the REST client, with Trainworks' job extensions (status, tensorboard, logs,
preempt)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx

from trainworks.kernel.client import EXTENSIONS, Client, JsonObject


class CustomJobsClient(Client):
    """customJobs (create is synchronous; delete returns the long-running Operation)."""

    def create_custom_job(self, parent: str, body: JsonObject) -> JsonObject:
        return self._create(parent, "/customJobs", body)

    def get_custom_job(self, name: str) -> JsonObject:
        return self._get(name)

    def list_custom_jobs(self, parent: str, filter: str = "", page_size: int = 0) -> Iterator[JsonObject]:
        """Every job matching `filter`, fetching pages lazily (following nextPageToken)."""
        return self._list(parent, "/customJobs", {"filter": filter, "pageSize": page_size or None})

    def cancel_custom_job(self, name: str) -> JsonObject:
        return self._cancel(name)

    def delete_custom_job(self, name: str) -> JsonObject:
        """Starts the deletion; returns the long-running Operation."""
        return self._delete(name)

    # ------------------------------------------------------------------ Trainworks extensions
    def get_custom_job_status(self, name: str) -> JsonObject:
        """Trainworks' status of a job: attempt, restart history, zone, waiting reason, replicas."""
        return self._get(name, "/status", api=EXTENSIONS)

    def get_custom_job_tensorboard(self, name: str) -> JsonObject:
        """The job's AIP_TENSORBOARD_LOG_DIR (logDir) and, with local buckets, its folder (localPath)."""
        return self._get(name, "/tensorboard", api=EXTENSIONS)

    def preempt_custom_job(self, name: str, replica: str | None = None) -> JsonObject:
        """Preempts a running SPOT job's replica (all of them when `replica` is None), for chaos tests."""
        return self._verb(name, "preempt", {"replica": replica} if replica else {}, api=EXTENSIONS)

    def stream_logs(self, name: str, task: str | None = None, follow: bool = True) -> Iterator[JsonObject]:
        """Log entries `{task, severity, stream?, text, time?}` of a job as they come.

        With `follow`, the stream stays open until the job ends, so there is no read timeout.
        """
        params: dict[str, str] = {"follow": "true" if follow else "false"}
        if task:
            params["task"] = task
        timeout = httpx.Timeout(self.timeout, read=None) if follow else httpx.Timeout(self.timeout)
        for line in self._lines(self._url(name, "/logs", EXTENSIONS), params, timeout):
            try:
                entry = json.loads(line)
            except ValueError:
                entry = {"task": "", "severity": "DEFAULT", "text": line}
            if isinstance(entry, dict):
                yield entry


__all__ = ["CustomJobsClient"]
