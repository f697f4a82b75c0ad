"""The kind-agnostic base of the REST client: the HTTP session, the API key, google.rpc errors decoded into
`ApiError`, connection errors, the standard method helpers (get, list every page, create, patch with an
updateMask, delete, cancel, custom verbs) and waiting for a long-running operation.

Each kind adds its methods on `Client` in `kinds/<kind>/client.py`; `trainworks.client.TrainworksClient`
composes them. Methods return typed models: a Vertex resource as its kind's wire model
(`kinds/<kind>/wire.py`), a long-running change as `kernel.longrunning.Operation`, read leniently (`_typed`:
fields a newer server adds are dropped, and `to_wire()` gives back the JSON as it came); Trainworks'
extensions, which have no proto, as TypedDicts next to their methods.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Self, TypeVar, cast
from urllib.parse import quote

import httpx

from trainworks.kernel.longrunning import Operation
from trainworks.kernel.wire import WireModel

#: A JSON object as the server answers it (canonical proto3 JSON).
JsonObject = dict[str, Any]
#: A query parameter's value; None and "" are not sent.
QueryValue = str | int | float | bool | None
QueryParams = Mapping[str, QueryValue]
M = TypeVar("M", bound=WireModel)

#: The API surfaces under the endpoint: Vertex v1, v1beta1 (clusters) and Trainworks' own extensions.
V1 = "v1"
V1BETA1 = "v1beta1"
EXTENSIONS = "trainworks/v1"

#: Job states after which a job (custom, tuning, pipeline) never changes again: the CLI's default wait.
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


class NotTrainworksError(ApiError):
    """The endpoint answered with something no Trainworks server sends (an HTML page): the wrong URL."""

    @classmethod
    def check(cls, endpoint: str, response: httpx.Response) -> None:
        """Raise when `response` is an HTML page (a web server, a proxy's login page...) instead of JSON."""
        content_type = response.headers.get("content-type", "").lower()
        head = response.content[:200].lstrip().lower()
        if "text/html" in content_type or head.startswith((b"<!doctype html", b"<html")):
            code = response.status_code
            raise cls(
                code,
                _HTTP_STATUS_NAMES.get(code, "UNKNOWN"),
                f"{endpoint} answered {code} with an HTML page: is it a Trainworks server? "
                "(--endpoint / TRAINWORKS_ENDPOINT)",
            )


class TrainworksConnectionError(Exception):
    """The server could not be reached (refused, DNS, TLS, timed out...)."""

    def __init__(self, endpoint: str, cause: Exception) -> None:
        super().__init__(f"cannot reach the Trainworks server at {endpoint}: {cause or type(cause).__name__}")
        self.endpoint = endpoint
        self.cause = cause


def _duration(seconds: float) -> str:
    text = f"{max(seconds, 0.0):.3f}".rstrip("0").rstrip(".")
    return f"{text}s"


class Client:
    """A session with a Trainworks server: the plumbing every kind's client methods are built on.

    Resource names are full names (`projects/P/locations/L/...`); `parent` is `projects/P/locations/L`.
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

    # ------------------------------------------------------------------ session
    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ requests
    @staticmethod
    def _path(name: str) -> str:
        # Keep "/" and ":" so that `name:cancel` style verbs stay readable; names never hold other specials.
        return quote(name.strip("/"), safe="/:@")

    def _url(self, name: str, suffix: str = "", api: str = V1) -> str:
        """`/{api}/{name}{suffix}`, the name quoted; `suffix` is a collection (`/customJobs`) or a verb."""
        return f"/{api}/{self._path(name)}{suffix}"

    def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: object = None,
        params: QueryParams | None = None,
        timeout: float | httpx.Timeout | None = None,
    ) -> JsonObject:
        """One call; an error answer raises `ApiError`, an unreachable server `TrainworksConnectionError`.
        An empty body is `{}`."""
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
        NotTrainworksError.check(self.endpoint, response)
        if response.status_code >= 400:
            raise ApiError.from_response(response)
        if not response.content:
            return {}
        try:
            return cast(JsonObject, response.json())
        except ValueError as exc:
            raise ApiError(
                response.status_code, "UNKNOWN", f"the server answered with a body that is not JSON: {exc}"
            ) from None

    def _pages(self, path: str, key: str, params: QueryParams) -> Iterator[JsonObject]:
        """Every item under `key` of the List answers at `path`, fetching pages lazily (following
        nextPageToken). Empty or None `params` values are not sent."""
        token = ""
        while True:
            page = self._request("GET", path, params={**params, "pageToken": token})
            yield from page.get(key) or []
            token = page.get("nextPageToken") or ""
            if not token:
                return

    def _lines(self, path: str, params: QueryParams, timeout: httpx.Timeout) -> Iterator[str]:
        """The non-blank lines of a streamed answer as they come (NDJSON extensions), with the errors of
        `_request`."""
        try:
            sent = {k: v for k, v in params.items() if v not in (None, "")}
            with self._http.stream("GET", path, params=sent, timeout=timeout) as response:
                if response.status_code >= 400:
                    response.read()
                    NotTrainworksError.check(self.endpoint, response)
                    raise ApiError.from_response(response)
                for line in response.iter_lines():
                    if line.strip():
                        yield line
        except httpx.TransportError as exc:
            raise TrainworksConnectionError(self.endpoint, exc) from exc

    # ------------------------------------------------------------------ standard methods
    @staticmethod
    def _typed(model: type[M], data: JsonObject) -> M:
        """`data`, as the server answered it, read as `model`: leniently (fields this client does not know
        are dropped, at every depth) and exactly (its `to_wire()` gives `data` back)."""
        return model.from_server(data)

    def _get_json(
        self, name: str, suffix: str = "", *, api: str = V1, params: QueryParams | None = None
    ) -> JsonObject:
        """GET `name` (or `name` + `suffix`, an extension's path) as JSON."""
        return self._request("GET", self._url(name, suffix, api), params=params)

    def _get(self, model: type[M], name: str, *, api: str = V1, params: QueryParams | None = None) -> M:
        return self._typed(model, self._get_json(name, api=api, params=params))

    def _list(
        self,
        model: type[M],
        parent: str,
        collection: str,
        page_size: int,
        params: QueryParams | None = None,
        *,
        api: str = V1,
        key: str = "",
    ) -> Iterator[M]:
        """Every item of `parent`'s `collection` (a `/name` or a `:verb`) as `model`, listed under `key` (by
        default the collection's name), fetching pages of `page_size` (0: the server's default) lazily."""
        query = {**(params or {}), "pageSize": page_size or None}
        items = self._pages(self._url(parent, collection, api), key or collection.lstrip("/:"), query)
        return (self._typed(model, item) for item in items)

    def _create(
        self,
        model: type[M],
        parent: str,
        collection: str,
        body: JsonObject,
        *,
        api: str = V1,
        params: QueryParams | None = None,
    ) -> M:
        """POST `body` to `parent`'s `collection`: `model` is the resource, or the Operation of an LRO."""
        path = self._url(parent, collection, api)
        return self._typed(model, self._request("POST", path, json_body=body, params=params))

    def _patch(
        self,
        model: type[M],
        name: str,
        body: JsonObject,
        update_mask: Sequence[str],
        *,
        api: str = V1,
        params: QueryParams | None = None,
    ) -> M:
        """PATCH `name` with the fields `update_mask` names (sent as `updateMask`, comma-separated):
        `model` is the resource, or the Operation of an LRO."""
        query = {"updateMask": ",".join(update_mask), **(params or {})}
        answer = self._request("PATCH", self._url(name, api=api), json_body=body, params=query)
        return self._typed(model, answer)

    def _delete(self, name: str, suffix: str = "", *, api: str = V1) -> Operation:
        """DELETE `name` (or `name` + `suffix`, e.g. `:deleteVersion`): every deletion is an LRO."""
        return self._typed(Operation, self._request("DELETE", self._url(name, suffix, api)))

    def _verb(self, name: str, verb: str, body: JsonObject | None = None, *, api: str = V1) -> JsonObject:
        """POST `name:verb` with `body` (`{}` by default), as AIP-136 custom methods are called."""
        return self._request("POST", self._url(name, f":{verb}", api), json_body={} if body is None else body)

    def _operation_verb(self, name: str, verb: str, body: JsonObject | None = None) -> Operation:
        """A custom method that starts a long-running change (reboot, import...): its Operation."""
        return self._typed(Operation, self._verb(name, verb, body))

    def _cancel(self, name: str) -> None:
        """`name:cancel`, which answers google.protobuf.Empty."""
        self._verb(name, "cancel")

    # ------------------------------------------------------------------ long-running operations
    def wait_operation(self, name: str, timeout_s: float = 60.0) -> Operation:
        """Waits (server side, with `:wait`) until the operation is done or `timeout_s` has passed.

        Returns the latest Operation; check `done` to tell the two apart.
        """
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            answer = self._request(
                "POST",
                self._url(name, ":wait"),
                json_body={"timeout": _duration(remaining)},
                timeout=max(remaining, 0.0) + self.timeout,
            )
            op = self._typed(Operation, answer)
            if op.done or deadline - time.monotonic() <= 0:
                return op
            # The server may answer before the deadline without being done (it caps long waits).
            time.sleep(min(0.2, max(deadline - time.monotonic(), 0.0)))


__all__ = [
    "EXTENSIONS",
    "TERMINAL_STATES",
    "V1",
    "V1BETA1",
    "ApiError",
    "Client",
    "JsonObject",
    "NotTrainworksError",
    "QueryParams",
    "QueryValue",
    "TrainworksConnectionError",
]
