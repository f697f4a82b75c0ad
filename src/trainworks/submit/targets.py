"""Where the submitter sends jobs: a Trainworks server (our REST client) or Vertex AI (the official client).

Both take CustomJob bodies as wire JSON (camelCase, enum names) and return the typed CustomJob (read
leniently, as the REST client reads it), so the submitter above them is the same code. Each target also says
what it can do beyond the Vertex API: quota preflight and log streaming are Trainworks extensions.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from trainworks.client import ApiError, TrainworksClient
from trainworks.code_staging.store import CodeStore
from trainworks.kernel.status import Status
from trainworks.kinds.custom_jobs.client import LogEntry
from trainworks.kinds.custom_jobs.wire import CustomJob
from trainworks.submit.capacity import CapacityProblem, Preflight

DEFAULT_ENDPOINT = "http://127.0.0.1:8080"

# Words Vertex AI uses when a zone or region has no machines to give (the job fails with RESOURCE_EXHAUSTED).
_STOCKOUT_WORDS = ("stockout", "stock-out", "resources are insufficient", "does not have enough resources")


def is_stockout_error(error: Status | None) -> bool:
    """Whether a job's google.rpc error says it found no capacity (code 8 RESOURCE_EXHAUSTED)."""
    if error is None:
        return False
    message = error.message.lower()
    return error.code == 8 or any(word in message for word in _STOCKOUT_WORDS)


class JobTarget(Protocol):
    kind: str
    project: str

    def create_custom_job(self, region: str, body: dict[str, Any]) -> CustomJob:
        """Create the job; raises CapacityProblem when the region refuses it for quota or capacity."""
        ...

    def get_custom_job(self, name: str) -> CustomJob: ...

    def cancel_custom_job(self, name: str) -> None: ...

    def waiting_reason(self, name: str) -> str | None:
        """Why a queued job is not running yet, when the target can tell."""
        ...

    def preflight(self, region: str, machine_spec: dict[str, Any], replicas: int) -> Preflight | None:
        """Quota and free capacity for `replicas` machines of this shape; None when the target cannot say."""
        ...

    def stream_logs(self, name: str) -> Iterator[LogEntry] | None:
        """The job's log entries as they come, until it ends; None when the target has no log stream."""
        ...

    def code_store(self) -> CodeStore: ...

    def close(self) -> None: ...


class TrainworksTarget:
    kind = "trainworks"

    def __init__(self, endpoint: str | None, project: str, api_key: str | None = None) -> None:
        self.endpoint = (endpoint or os.environ.get("TRAINWORKS_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        self.project = project
        self.api_key = api_key if api_key is not None else os.environ.get("TRAINWORKS_API_KEY")
        self.client = TrainworksClient(self.endpoint, api_key=self.api_key)

    def create_custom_job(self, region: str, body: dict[str, Any]) -> CustomJob:
        try:
            return self.client.create_custom_job(f"projects/{self.project}/locations/{region}", body)
        except ApiError as exc:
            if exc.status == "RESOURCE_EXHAUSTED" or exc.status_code == 429:
                raise CapacityProblem("quota", exc.message) from exc
            raise

    def get_custom_job(self, name: str) -> CustomJob:
        return self.client.get_custom_job(name)

    def cancel_custom_job(self, name: str) -> None:
        try:
            self.client.cancel_custom_job(name)
        except ApiError as exc:
            if exc.status != "FAILED_PRECONDITION":  # it ended meanwhile
                raise

    def waiting_reason(self, name: str) -> str | None:
        reason = self.client.get_custom_job_status(name).get("waitingReason")
        return str(reason) if reason else None

    def preflight(self, region: str, machine_spec: dict[str, Any], replicas: int) -> Preflight | None:
        report = self.client.get_capacity(
            f"projects/{self.project}/locations/{region}",
            machine_type=machine_spec.get("machineType"),
            accelerator_type=machine_spec.get("acceleratorType"),
            accelerator_count=int(machine_spec.get("acceleratorCount") or 0),
        )
        shape: Mapping[str, Any] = report.get("shape") or {}
        return Preflight(
            region=region,
            served=bool(report.get("served", True)),
            stockout=bool(report.get("stockout", False)),
            max_replicas=shape.get("maxReplicas"),
            quota_replicas=shape.get("quotaReplicas"),
            capacity_replicas=shape.get("capacityReplicas"),
        )

    def stream_logs(self, name: str) -> Iterator[LogEntry] | None:
        return self.client.stream_logs(name, follow=True)

    def code_store(self) -> CodeStore:
        return CodeStore.for_endpoint(self.endpoint, self.api_key)

    def close(self) -> None:
        self.client.close()


class TargetUnavailable(Exception):
    """The target cannot be used from this installation (a missing optional library)."""


def _aiplatform() -> Any:
    try:
        from google.cloud import aiplatform_v1
    except ImportError as exc:
        raise TargetUnavailable(
            "target.kind vertex needs the official client library: pip install 'trainworks[vertex]'"
        ) from exc
    return aiplatform_v1


class VertexTarget:
    """Vertex AI through the official client library (`pip install 'trainworks[vertex]'`).

    `endpoint` overrides the regional endpoint; an http:// one (a Trainworks server spoken to through the
    official client) selects the REST transport and anonymous credentials, as that client requires.
    """

    kind = "vertex"

    def __init__(self, project: str, endpoint: str | None = None, api_key: str | None = None) -> None:
        self.project = project
        self.endpoint = endpoint.rstrip("/") if endpoint else None
        self.api_key = api_key if api_key is not None else os.environ.get("TRAINWORKS_API_KEY")
        self._clients: dict[str, Any] = {}

    def _client(self, region: str) -> Any:
        client = self._clients.get(region)
        if client is None:
            aiplatform_v1 = _aiplatform()
            if self.endpoint and self.endpoint.startswith("http://"):
                from google.auth.credentials import AnonymousCredentials

                credentials: Any = AnonymousCredentials()
                if self.api_key:
                    from google.oauth2.credentials import Credentials

                    credentials = Credentials(token=self.api_key)
                client = aiplatform_v1.JobServiceClient(
                    transport="rest", credentials=credentials, client_options={"api_endpoint": self.endpoint}
                )
            else:
                endpoint = self.endpoint or f"{region}-aiplatform.googleapis.com"
                client = aiplatform_v1.JobServiceClient(client_options={"api_endpoint": endpoint})
            self._clients[region] = client
        return client

    @staticmethod
    def _region_of(name: str) -> str:
        parts = name.split("/")
        return parts[3] if len(parts) > 3 else ""

    @staticmethod
    def _typed(job: Any) -> CustomJob:
        """The official client's CustomJob as ours, read from its wire JSON as the REST client reads it."""
        from google.protobuf import json_format

        aiplatform_v1 = _aiplatform()
        return CustomJob.from_server(json_format.MessageToDict(aiplatform_v1.CustomJob.pb(job)))

    def create_custom_job(self, region: str, body: dict[str, Any]) -> CustomJob:
        aiplatform_v1 = _aiplatform()
        from google.api_core import exceptions
        from google.protobuf import json_format

        message = json_format.ParseDict(body, aiplatform_v1.CustomJob.pb()(), ignore_unknown_fields=False)
        try:
            created = self._client(region).create_custom_job(
                parent=f"projects/{self.project}/locations/{region}",
                custom_job=aiplatform_v1.CustomJob.wrap(message),
            )
        except (exceptions.ResourceExhausted, exceptions.TooManyRequests) as exc:
            raise CapacityProblem("quota", str(exc.message)) from exc
        return self._typed(created)

    def get_custom_job(self, name: str) -> CustomJob:
        return self._typed(self._client(self._region_of(name)).get_custom_job(name=name))

    def cancel_custom_job(self, name: str) -> None:
        from google.api_core import exceptions

        with contextlib.suppress(exceptions.FailedPrecondition, exceptions.BadRequest):  # it ended meanwhile
            self._client(self._region_of(name)).cancel_custom_job(name=name)

    def waiting_reason(self, name: str) -> str | None:
        return None

    def preflight(self, region: str, machine_spec: dict[str, Any], replicas: int) -> Preflight | None:
        return None  # Vertex AI quotas live in Cloud Quotas; the walk learns them from create errors

    def stream_logs(self, name: str) -> Iterator[LogEntry] | None:
        return None  # Vertex AI job logs are in Cloud Logging

    def code_store(self) -> CodeStore:
        emulator = os.environ.get("STORAGE_EMULATOR_HOST")
        if emulator:
            return CodeStore.for_endpoint(emulator, self.api_key)
        if self.endpoint and self.endpoint.startswith("http://"):
            return CodeStore.for_endpoint(self.endpoint, self.api_key)
        return CodeStore.for_cloud(self.project)

    def close(self) -> None:
        for client in self._clients.values():
            client.transport.close()
        self._clients.clear()


def make_target(kind: str, project: str, endpoint: str | None, api_key: str | None = None) -> JobTarget:
    if kind == "vertex":
        return VertexTarget(project, endpoint, api_key)
    return TrainworksTarget(endpoint, project, api_key)
