"""A small typed REST client for the Trainworks (Vertex AI v1 compatible) APIs: customJobs,
persistentResources, operations, hyperparameterTuningJobs, trainingPipelines, datasets, models and
modelDevelopmentClusters, plus Trainworks' own extensions (status, logs, costs, capacity)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import httpx

#: Job states after which a CustomJob never changes again.
TERMINAL_STATES = frozenset(
    {
        "JOB_STATE_SUCCEEDED",
        "JOB_STATE_FAILED",
        "JOB_STATE_CANCELLED",
        "JOB_STATE_EXPIRED",
        "JOB_STATE_PARTIALLY_SUCCEEDED",
    }
)

_HTTP_STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "UNIMPLEMENTED",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


class ApiError(Exception):
    """A google.rpc error answer: HTTP status, canonical status name, message and field violations."""

    def __init__(
        self,
        status_code: int,
        status: str,
        message: str,
        violations: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.status = status
        self.message = message
        self.violations: list[tuple[str, str]] = list(violations or [])

    def __str__(self) -> str:
        text = f"{self.status} ({self.status_code}): {self.message}"
        for field, description in self.violations:
            text += f"\n  {field}: {description}"
        return text

    def __repr__(self) -> str:
        return (
            f"ApiError(status_code={self.status_code!r}, status={self.status!r}, "
            f"message={self.message!r}, violations={self.violations!r})"
        )

    @classmethod
    def from_response(cls, response: httpx.Response) -> ApiError:
        """Parse `{"error": {code, message, status, details}}`; tolerate bodies that are not JSON."""
        code = response.status_code
        fallback_status = _HTTP_STATUS_NAMES.get(code, "UNKNOWN")
        try:
            body = response.json()
        except (ValueError, UnicodeDecodeError):
            text = response.text.strip()[:500] if response.text else ""
            return cls(code, fallback_status, text or response.reason_phrase or f"HTTP {code}")
        error = body.get("error") if isinstance(body, dict) else None
        if not isinstance(error, dict):
            return cls(code, fallback_status, json.dumps(body)[:500])
        violations: list[tuple[str, str]] = []
        for detail in error.get("details") or []:
            if not isinstance(detail, dict):
                continue
            if str(detail.get("@type", "")).endswith("google.rpc.BadRequest"):
                for violation in detail.get("fieldViolations") or []:
                    if isinstance(violation, dict):
                        violations.append(
                            (str(violation.get("field", "")), str(violation.get("description", "")))
                        )
        status = error.get("status") or fallback_status
        message = error.get("message") or response.reason_phrase or f"HTTP {code}"
        return cls(code, str(status), str(message), violations)


class TrainworksConnectionError(Exception):
    """The server could not be reached (refused, DNS, TLS, timed out...)."""

    def __init__(self, endpoint: str, cause: Exception) -> None:
        super().__init__(f"cannot reach the Trainworks server at {endpoint}: {cause or type(cause).__name__}")
        self.endpoint = endpoint
        self.cause = cause


def _duration(seconds: float) -> str:
    text = f"{max(seconds, 0.0):.3f}".rstrip("0").rstrip(".")
    return f"{text}s"


class TrainworksClient:
    """Typed access to the /v1 (and v1beta1 cluster) resources, plus the NDJSON logs extension.

    `parent` is `projects/P/locations/L`; job, resource and operation names are full resource names.
    Methods that start a long-running change return the Operation; `wait_operation` waits for it.
    """

    def __init__(
        self,
        endpoint: str,
        api_key: str | None = None,
        token: str | None = None,
        timeout: float = 30,
    ) -> None:
        self.endpoint = endpoint.rstrip("/")
        self.timeout = timeout
        headers = {"user-agent": "trainworks-client"}
        if api_key:
            headers["x-goog-api-key"] = api_key
        if token:
            headers["authorization"] = f"Bearer {token}"
        self._http = httpx.Client(base_url=self.endpoint, headers=headers, timeout=timeout)

    # ------------------------------------------------------------------ plumbing
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> TrainworksClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _path(name: str) -> str:
        # Keep "/" and ":" so that `name:cancel` style verbs stay readable; names never hold other specials.
        return quote(name.strip("/"), safe="/:@")

    def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | httpx.Timeout | None = None,
    ) -> Any:
        kwargs: dict[str, Any] = {}
        if json_body is not None:
            kwargs["json"] = json_body
        if params:
            kwargs["params"] = {k: v for k, v in params.items() if v not in (None, "")}
        if timeout is not None:
            kwargs["timeout"] = timeout
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise TrainworksConnectionError(self.endpoint, exc) from exc
        if response.status_code >= 400:
            raise ApiError.from_response(response)
        if not response.content:
            return {}
        try:
            return response.json()
        except ValueError as exc:
            raise ApiError(
                response.status_code, "UNKNOWN", f"the server answered with a body that is not JSON: {exc}"
            ) from None

    def _pages(self, path: str, key: str, params: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """Every item under `key` of the List answers at `path`, fetching pages lazily (following
        nextPageToken). Empty or None `params` values are not sent."""
        token = ""
        while True:
            page = self._request("GET", path, params={**params, "pageToken": token})
            yield from page.get(key) or []
            token = page.get("nextPageToken") or ""
            if not token:
                return

    # ------------------------------------------------------------------ customJobs
    def create_custom_job(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = self._request("POST", f"/v1/{self._path(parent)}/customJobs", json_body=body)
        return result

    def get_custom_job(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1/{self._path(name)}")
        return result

    def list_custom_jobs(self, parent: str, filter: str = "", page_size: int = 0) -> Iterator[dict[str, Any]]:
        """Every job matching `filter`, fetching pages lazily (following nextPageToken)."""
        params = {"filter": filter, "pageSize": page_size or None}
        return self._pages(f"/v1/{self._path(parent)}/customJobs", "customJobs", params)

    def cancel_custom_job(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("POST", f"/v1/{self._path(name)}:cancel", json_body={})
        return result

    def delete_custom_job(self, name: str) -> dict[str, Any]:
        """Starts the deletion; returns the long-running Operation."""
        result: dict[str, Any] = self._request("DELETE", f"/v1/{self._path(name)}")
        return result

    def get_custom_job_status(self, name: str) -> dict[str, Any]:
        """Trainworks' status of a job: attempt, restart history, zone, waiting reason, replicas."""
        result: dict[str, Any] = self._request("GET", f"/trainworks/v1/{self._path(name)}/status")
        return result

    def get_custom_job_tensorboard(self, name: str) -> dict[str, Any]:
        """The job's AIP_TENSORBOARD_LOG_DIR (logDir) and, with local buckets, its folder (localPath)."""
        result: dict[str, Any] = self._request("GET", f"/trainworks/v1/{self._path(name)}/tensorboard")
        return result

    def preempt_custom_job(self, name: str, replica: str | None = None) -> dict[str, Any]:
        """Preempts a running SPOT job's replica (all of them when `replica` is None), for chaos tests."""
        body = {"replica": replica} if replica else {}
        result: dict[str, Any] = self._request(
            "POST", f"/trainworks/v1/{self._path(name)}:preempt", json_body=body
        )
        return result

    def get_costs(self, parent: str, by: str = "job", filter: str = "") -> dict[str, Any]:
        """Machine-hours and approximate cost of `parent`'s jobs (`by="job"`) or persistent resources
        (`by="resource"`): `{by, currency, asOf, rows: [...], totals: {...}}`."""
        result: dict[str, Any] = self._request(
            "GET", f"/trainworks/v1/{self._path(parent)}/costs", params={"by": by, "filter": filter}
        )
        return result

    def get_capacity(
        self,
        parent: str,
        machine_type: str | None = None,
        accelerator_type: str | None = None,
        accelerator_count: int = 0,
    ) -> dict[str, Any]:
        """Capacity preflight of `parent`: region, stock-out, the project's quota, free machines per zone and,
        with `machine_type`, `shape` holding that shape's `quotaReplicas`, `capacityReplicas` and
        `maxReplicas` (null: unlimited)."""
        params: dict[str, Any] = {}
        if machine_type:
            params["machineType"] = machine_type
        if accelerator_type:
            params["acceleratorType"] = accelerator_type
        if accelerator_count:
            params["acceleratorCount"] = accelerator_count
        result: dict[str, Any] = self._request(
            "GET", f"/trainworks/v1/{self._path(parent)}/capacity", params=params
        )
        return result

    # ------------------------------------------------------------------ persistentResources
    def create_persistent_resource(
        self, parent: str, resource_id: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        """Starts creating `parent`/persistentResources/`resource_id`; returns the long-running Operation."""
        result: dict[str, Any] = self._request(
            "POST",
            f"/v1/{self._path(parent)}/persistentResources",
            json_body=body,
            params={"persistentResourceId": resource_id},
        )
        return result

    def get_persistent_resource(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1/{self._path(name)}")
        return result

    def list_persistent_resources(self, parent: str, page_size: int = 0) -> Iterator[dict[str, Any]]:
        """Every persistent resource of `parent` in ID order, fetching pages lazily (no filter, as in v1)."""
        params = {"pageSize": page_size or None}
        return self._pages(f"/v1/{self._path(parent)}/persistentResources", "persistentResources", params)

    def update_persistent_resource(
        self, name: str, body: dict[str, Any], update_mask: list[str]
    ) -> dict[str, Any]:
        """PATCH the fields named by `update_mask` (snake_case paths); returns the long-running Operation."""
        result: dict[str, Any] = self._request(
            "PATCH",
            f"/v1/{self._path(name)}",
            json_body=body,
            params={"updateMask": ",".join(update_mask)},
        )
        return result

    def reboot_persistent_resource(self, name: str) -> dict[str, Any]:
        """Starts a reboot (from RUNNING or ERROR); returns the long-running Operation."""
        result: dict[str, Any] = self._request("POST", f"/v1/{self._path(name)}:reboot", json_body={})
        return result

    def delete_persistent_resource(self, name: str) -> dict[str, Any]:
        """Starts the deletion (from any state); returns the long-running Operation."""
        result: dict[str, Any] = self._request("DELETE", f"/v1/{self._path(name)}")
        return result

    # ------------------------------------------------------------------ operations
    def get_operation(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1/{self._path(name)}")
        return result

    def wait_operation(self, name: str, timeout_s: float = 60.0) -> dict[str, Any]:
        """Waits (server side, with `:wait`) until the operation is done or `timeout_s` has passed.

        Returns the latest Operation; check `done` to tell the two apart.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            op: dict[str, Any] = self._request(
                "POST",
                f"/v1/{self._path(name)}:wait",
                json_body={"timeout": _duration(remaining)},
                timeout=max(remaining, 0.0) + self.timeout,
            )
            if op.get("done") or deadline - time.monotonic() <= 0:
                return op
            # The server may answer before the deadline without being done (it caps long waits).
            time.sleep(min(0.2, max(deadline - time.monotonic(), 0.0)))

    # ------------------------------------------------------------------ logs
    def stream_logs(
        self, name: str, task: str | None = None, follow: bool = True
    ) -> Iterator[dict[str, Any]]:
        """Log entries `{task, severity, stream?, text, time?}` of a job as they come.

        With `follow`, the stream stays open until the job ends, so there is no read timeout.
        """
        params: dict[str, str] = {"follow": "true" if follow else "false"}
        if task:
            params["task"] = task
        timeout = httpx.Timeout(self.timeout, read=None) if follow else httpx.Timeout(self.timeout)
        path = f"/trainworks/v1/{self._path(name)}/logs"
        try:
            with self._http.stream("GET", path, params=params, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    raise ApiError.from_response(response)
                for line in response.iter_lines():
                    if not line.strip():
                        continue
                    try:
                        entry = json.loads(line)
                    except ValueError:
                        entry = {"task": "", "severity": "DEFAULT", "text": line}
                    if isinstance(entry, dict):
                        yield entry
        except httpx.TransportError as exc:
            raise TrainworksConnectionError(self.endpoint, exc) from exc

    # ------------------------------------------------------------------ hyperparameterTuningJobs
    def create_hyperparameter_tuning_job(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        """Creates a tuning job (synchronous, like customJobs); returns the HyperparameterTuningJob."""
        result: dict[str, Any] = self._request(
            "POST", f"/v1/{self._path(parent)}/hyperparameterTuningJobs", json_body=body
        )
        return result

    def get_hyperparameter_tuning_job(self, name: str) -> dict[str, Any]:
        """The tuning job with its `trials` (only Get returns them)."""
        result: dict[str, Any] = self._request("GET", f"/v1/{self._path(name)}")
        return result

    def list_hyperparameter_tuning_jobs(
        self, parent: str, filter: str = "", page_size: int = 0, read_mask: str = ""
    ) -> Iterator[dict[str, Any]]:
        """Every tuning job matching `filter`, newest first, fetching pages lazily; List omits `trials`."""
        params = {"filter": filter, "readMask": read_mask, "pageSize": page_size or None}
        path = f"/v1/{self._path(parent)}/hyperparameterTuningJobs"
        return self._pages(path, "hyperparameterTuningJobs", params)

    def cancel_hyperparameter_tuning_job(self, name: str) -> dict[str, Any]:
        """Asks the job to stop (asynchronous); it ends JOB_STATE_CANCELLED with its trials cancelled."""
        result: dict[str, Any] = self._request("POST", f"/v1/{self._path(name)}:cancel", json_body={})
        return result

    def delete_hyperparameter_tuning_job(self, name: str) -> dict[str, Any]:
        """Starts the deletion of a finished job; returns the long-running Operation."""
        result: dict[str, Any] = self._request("DELETE", f"/v1/{self._path(name)}")
        return result

    # ------------------------------------------------------------------ trainingPipelines
    def create_training_pipeline(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        """Creates a pipeline (synchronous, like customJobs); returns the TrainingPipeline."""
        result: dict[str, Any] = self._request(
            "POST", f"/v1/{self._path(parent)}/trainingPipelines", json_body=body
        )
        return result

    def get_training_pipeline(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1/{self._path(name)}")
        return result

    def list_training_pipelines(
        self, parent: str, filter: str = "", page_size: int = 0
    ) -> Iterator[dict[str, Any]]:
        """Every pipeline matching `filter`, newest first, fetching pages lazily."""
        params = {"filter": filter, "pageSize": page_size or None}
        return self._pages(f"/v1/{self._path(parent)}/trainingPipelines", "trainingPipelines", params)

    def cancel_training_pipeline(self, name: str) -> dict[str, Any]:
        """Asks the pipeline to stop (asynchronous); it cancels its training job and ends CANCELLED."""
        result: dict[str, Any] = self._request("POST", f"/v1/{self._path(name)}:cancel", json_body={})
        return result

    def delete_training_pipeline(self, name: str) -> dict[str, Any]:
        """Starts the deletion of a finished pipeline; returns the long-running Operation."""
        result: dict[str, Any] = self._request("DELETE", f"/v1/{self._path(name)}")
        return result

    # ------------------------------------------------------------------ datasets
    def create_dataset(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        """Starts creating a Dataset; returns the long-running Operation (its response is the Dataset)."""
        result: dict[str, Any] = self._request("POST", f"/v1/{self._path(parent)}/datasets", json_body=body)
        return result

    def import_data(self, name: str, import_configs: list[dict[str, Any]]) -> dict[str, Any]:
        """Starts importing items (`[{"gcsSource": {"uris": [...]}}, ...]`); returns the Operation."""
        result: dict[str, Any] = self._request(
            "POST", f"/v1/{self._path(name)}:import", json_body={"importConfigs": import_configs}
        )
        return result

    def get_dataset(self, name: str, read_mask: str = "") -> dict[str, Any]:
        result: dict[str, Any] = self._request(
            "GET", f"/v1/{self._path(name)}", params={"readMask": read_mask}
        )
        return result

    def list_datasets(
        self, parent: str, filter: str = "", page_size: int = 0, order_by: str = ""
    ) -> Iterator[dict[str, Any]]:
        """Every dataset matching `filter`, newest first unless `order_by` says otherwise, fetching pages
        lazily."""
        params = {"filter": filter, "orderBy": order_by, "pageSize": page_size or None}
        return self._pages(f"/v1/{self._path(parent)}/datasets", "datasets", params)

    def update_dataset(self, name: str, body: dict[str, Any], update_mask: list[str]) -> dict[str, Any]:
        """PATCH the fields named by `update_mask`; returns the updated Dataset."""
        result: dict[str, Any] = self._request(
            "PATCH",
            f"/v1/{self._path(name)}",
            json_body=body,
            params={"updateMask": ",".join(update_mask)},
        )
        return result

    def delete_dataset(self, name: str) -> dict[str, Any]:
        """Starts the deletion of the dataset and its data; returns the long-running Operation."""
        result: dict[str, Any] = self._request("DELETE", f"/v1/{self._path(name)}")
        return result

    # ------------------------------------------------------------------ models
    # A model name may end in `@VERSION_ID` or `@ALIAS` to address one version; without it, the default.
    def upload_model(self, parent: str, body: dict[str, Any]) -> dict[str, Any]:
        """Uploads a model, or a new version with `parentModel` in `body`; returns the Operation (its
        response holds `model` and `modelVersionId`)."""
        result: dict[str, Any] = self._request(
            "POST", f"/v1/{self._path(parent)}/models:upload", json_body=body
        )
        return result

    def get_model(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1/{self._path(name)}")
        return result

    def list_models(
        self, parent: str, filter: str = "", order_by: str = "", page_size: int = 0
    ) -> Iterator[dict[str, Any]]:
        """Every model matching `filter` (each as its default version), fetching pages lazily."""
        params = {"filter": filter, "orderBy": order_by, "pageSize": page_size or None}
        return self._pages(f"/v1/{self._path(parent)}/models", "models", params)

    def list_model_versions(
        self, name: str, filter: str = "", order_by: str = "", page_size: int = 0
    ) -> Iterator[dict[str, Any]]:
        """Every version of the model `name` matching `filter`, fetching pages lazily."""
        params = {"filter": filter, "orderBy": order_by, "pageSize": page_size or None}
        return self._pages(f"/v1/{self._path(name)}:listVersions", "models", params)

    def update_model(self, name: str, body: dict[str, Any], update_mask: list[str]) -> dict[str, Any]:
        """PATCH the fields named by `update_mask` of the version `name` addresses; returns the Model."""
        result: dict[str, Any] = self._request(
            "PATCH",
            f"/v1/{self._path(name)}",
            json_body=body,
            params={"updateMask": ",".join(update_mask)},
        )
        return result

    def delete_model(self, name: str) -> dict[str, Any]:
        """Starts deleting the model with all its versions; returns the long-running Operation."""
        result: dict[str, Any] = self._request("DELETE", f"/v1/{self._path(name)}")
        return result

    def delete_model_version(self, name: str) -> dict[str, Any]:
        """Starts deleting the version `name` (`MODEL@VERSION_ID` or `MODEL@ALIAS`) addresses; returns the
        long-running Operation."""
        result: dict[str, Any] = self._request("DELETE", f"/v1/{self._path(name)}:deleteVersion")
        return result

    # ------------------------------------------------------------------ modelDevelopmentClusters (v1beta1)
    # The resource exists only in v1beta1; its operations are location-level and poll under /v1.
    def create_cluster(self, parent: str, cluster_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Starts creating `parent`/modelDevelopmentClusters/`cluster_id`; returns the Operation."""
        result: dict[str, Any] = self._request(
            "POST",
            f"/v1beta1/{self._path(parent)}/modelDevelopmentClusters",
            json_body=body,
            params={"modelDevelopmentClusterId": cluster_id},
        )
        return result

    def get_cluster(self, name: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("GET", f"/v1beta1/{self._path(name)}")
        return result

    def list_clusters(self, parent: str, page_size: int = 0) -> Iterator[dict[str, Any]]:
        """Every training cluster of `parent` in ID order, fetching pages lazily."""
        params = {"pageSize": page_size or None}
        path = f"/v1beta1/{self._path(parent)}/modelDevelopmentClusters"
        return self._pages(path, "modelDevelopmentClusters", params)

    def update_cluster(
        self, name: str, body: dict[str, Any], update_mask: list[str], update_mode: str = ""
    ) -> dict[str, Any]:
        """PATCH with the full resource as `body` (an empty mask diffs all of it); returns the Operation."""
        result: dict[str, Any] = self._request(
            "PATCH",
            f"/v1beta1/{self._path(name)}",
            json_body=body,
            params={"updateMask": ",".join(update_mask), "updateMode": update_mode},
        )
        return result

    def delete_cluster(self, name: str) -> dict[str, Any]:
        """Starts the deletion; returns the long-running Operation."""
        result: dict[str, Any] = self._request("DELETE", f"/v1beta1/{self._path(name)}")
        return result


__all__ = ["TERMINAL_STATES", "ApiError", "TrainworksClient", "TrainworksConnectionError"]
