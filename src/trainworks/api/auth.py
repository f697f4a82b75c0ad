"""Who may call what: API tokens scoped to projects, checked for every request and shell WebSocket.

Tokens are the server's `--api-token` values (admin tokens: every project, /metrics, unowned buckets) and the
stored tokens of tokens/ (`trainworks admin tokens create --project A [--admin]`). Auth is on while
there is any token: a flag token, or any stored record (revoked ones too, so revoking the last one does not
open the server; a first stored token turns auth on within a second). A stored token is looked up by its
hash on every request, so a revoked one is refused at once. A token comes as a bearer header, an
`x-goog-api-key` header or a `?key=` parameter (browsers cannot set WebSocket headers).

What a request may touch follows from its path alone: the `projects/{p}` segment of the REST API, the
/trainworks/v1 extensions (job logs, the shell) and the console's calls (by project ID or number: either
names the project); the bucket of a Cloud Storage path, through the project that owns it
(storage/bucket_projects.py; a bucket no project owns needs an admin token); /metrics needs an admin token.
Anything else (the OpenAPI description, unknown paths) needs only a valid token. Failures are 403
PERMISSION_DENIED, never 401 (the official client mishandles 401), and name the project or bucket refused,
never a presented credential.

Replicas call as their own project (peer_identity.py): a request without credentials from a local process
of a replica is judged as made by its job's project, which may also use the buckets no project owns (its
/gcs shows them). With tokens off that still holds for project and storage paths, whatever the request
presents; a request of any other local or remote caller goes through as before.
"""

from __future__ import annotations

import hmac
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool
from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Receive, Scope, Send

from trainworks.api.errors import error_body
from trainworks.api.peer_identity import Caller, PeerIdentity, Replica, peer_identity_for
from trainworks.kernel.errors import ApiError
from trainworks.kernel.status import Code
from trainworks.storage.bucket_projects import Owner, bucket_owner
from trainworks.tokens.rules import ALL_PROJECTS
from trainworks.tokens.service import TokenService

OPEN_PATHS = frozenset({"/healthz", "/console"})
# The console's static pages carry no data: the API calls they make present the token themselves.
OPEN_PREFIXES = ("/console/",)
METRICS_PATH = "/metrics"
STORAGE_PREFIXES = (
    "/storage/v1/",
    "/upload/storage/v1/",
    "/download/storage/v1/",
    "/resumable/upload/storage/v1/",  # gcloud starts its resumable uploads there
)

_PROJECT_PATH = re.compile(r"^/(?:v1|v1beta1|ui|trainworks/v1)/projects/([^/]+)")
_BUCKET_PATH = re.compile(r"^/(?:upload/|download/|resumable/upload/)?storage/v1/b/([^/]+)")
# The second bucket of a copy or rewrite. Matched anywhere after the first bucket: an object name that
# happens to contain it only adds a check, never skips one.
_DEST_BUCKET = re.compile(r"/(?:copyTo|rewriteTo)/b/([^/]+)/o/")
_ENABLED_CACHE_SECONDS = 1.0

MISSING = "The request is missing a valid API key or bearer token."
UNIDENTIFIED = "The connection was closed before the server could tell which process made the request."
INVALID = "The API key or bearer token is not valid."


@dataclass(frozen=True)
class Principal:
    """Whom a request's credentials stand for: the projects they may use, and whether they are admin."""

    admin: bool
    projects: frozenset[str]
    label: str  # "flag token", the stored token's ID or "replica <job>/<task>": never the secret
    unowned: bool = False  # may use buckets no project owns: a replica, whose /gcs shows them

    def may_use(self, names: set[str]) -> bool:
        """Whether any of `names` (one project's ID and number) is a project of these credentials."""
        return ALL_PROJECTS in self.projects or bool(self.projects & names)

    def may_use_bucket(self, owner: Owner | None) -> bool:
        if owner is None:
            # A folder an operator made: nothing says which project may see it; every replica sees it.
            return self.admin or self.unowned
        if ALL_PROJECTS in self.projects:
            return True
        return any(owner.includes(project) for project in self.projects)


ADMIN = Principal(True, frozenset({ALL_PROJECTS}), "flag token")


class Authority:
    """The tokens of one server: the flag tokens and the stored ones."""

    def __init__(
        self, flag_tokens: frozenset[str], tokens: TokenService | None, bucket_root: Path | None
    ) -> None:
        self.flag_tokens = flag_tokens
        self.tokens = tokens
        self.bucket_root = bucket_root
        self._lock = threading.Lock()
        self._enabled_at = -1.0
        self._enabled = bool(flag_tokens)
        self.peers: PeerIdentity | None = None

    def enabled(self) -> bool:
        """Whether auth is on. Once on it stays on (tokens are revoked, never deleted); off is re-read
        at most once a second, so a first stored token takes effect within a second."""
        if self._enabled or self.tokens is None:
            return self._enabled
        now = time.monotonic()
        if now - self._enabled_at >= _ENABLED_CACHE_SECONDS:
            with self._lock:
                if now - self._enabled_at >= _ENABLED_CACHE_SECONDS:
                    self._enabled = self.tokens.any_exist()
                    self._enabled_at = now
        return self._enabled

    def identify(self, presented: list[str]) -> Principal | None:
        """The principal of the first valid credential (bearer, then header, then `key`), or None."""
        for token in presented:
            raw = token.encode("utf-8", "surrogatepass")
            if any(hmac.compare_digest(raw, t.encode("utf-8", "surrogatepass")) for t in self.flag_tokens):
                return ADMIN
            record = self.tokens.find(token) if self.tokens is not None else None
            if record is not None:
                return Principal(record.admin, frozenset(record.projects), record.id)
        return None

    def project_names(self, project: str) -> set[str]:
        return self.tokens.project_names(project) if self.tokens is not None else {project}

    def peer(self, conn: HTTPConnection) -> Principal | Caller:
        """The principal of a replica at the other end of the connection, or what other caller it is."""
        if self.peers is None:
            return Caller.LOCAL
        found = self.peers.of(conn.scope.get("client"), conn.scope.get("server"))
        if not isinstance(found, Replica):
            return found
        if found.project is None:  # a replica of a job that is gone: no project at all
            return Principal(False, frozenset(), found.label)
        return Principal(False, frozenset(self.project_names(found.project)), found.label, unowned=True)


def presented(conn: HTTPConnection) -> list[str]:
    """The credentials a request carries: bearer token, `x-goog-api-key` header, `key` query parameter."""
    found: list[str] = []
    header = conn.headers.get("authorization", "")
    if header.lower().startswith("bearer "):
        found.append(header[7:].strip())
    for key in (conn.headers.get("x-goog-api-key"), conn.query_params.get("key")):
        if key:
            found.append(key)
    return [token for token in found if token]


def authority(conn: HTTPConnection) -> Authority:
    """The app's Authority, made on first use (the services, and so the database, exist from start-up)."""
    state = conn.app.state
    found: Authority | None = getattr(state, "authority", None)
    if found is None:
        services = state.services
        storage = getattr(services, "storage", None)
        found = Authority(
            services.settings.api_tokens, services.tokens, storage.root if storage is not None else None
        )
        found.peers = peer_identity_for(services)
        state.authority = found
    return found


def _short(value: str) -> str:
    return value[:100]


def _denied(message: str) -> ApiError:
    return ApiError(Code.PERMISSION_DENIED, message, reason="PERMISSION_DENIED")


def _storage_refusal(auth: Authority, who: Principal, conn: HTTPConnection) -> ApiError | None:
    path = conn.scope["path"]
    match = _BUCKET_PATH.match(path)
    if match is None:
        if path.rstrip("/") == "/storage/v1/b":  # list or insert: scoped by the `project` parameter
            project = conn.query_params.get("project", "")
            if who.admin or (project and who.may_use(auth.project_names(project))):
                return None
            if not project or project == "<none>":
                return _denied("Listing or creating buckets needs a project parameter naming your project.")
            return _denied(f"Permission denied on project {_short(project)!r} for these credentials.")
        return None  # no such route: the router answers 404
    buckets = [match.group(1), *_DEST_BUCKET.findall(path[match.end() :])]
    for bucket in dict.fromkeys(buckets):
        owner = bucket_owner(auth.bucket_root, bucket) if auth.bucket_root is not None else None
        if not who.may_use_bucket(owner):
            if owner is None:
                return _denied(f"Permission denied on bucket {_short(bucket)!r}: it belongs to no project.")
            return _denied(f"Permission denied on bucket {_short(bucket)!r}: it belongs to another project.")
    return None


def peer_applies(path: str) -> bool:
    """Whether a path's answer depends on the caller's project: with tokens off, only these are checked
    (for replicas)."""
    return path.startswith(STORAGE_PREFIXES) or _PROJECT_PATH.match(path) is not None


def _checked(auth: Authority, conn: HTTPConnection, path: str) -> Principal | ApiError | None:
    """Whom the request is judged as; an error when it is refused before that; None when it goes on
    unchecked (no tokens, and not a replica)."""
    enabled = auth.enabled()
    credentials = presented(conn) if enabled else []  # with tokens off, no credential means anything
    if credentials:
        who = auth.identify(credentials)
        return who if who is not None else _denied(INVALID)
    if not enabled and not peer_applies(path):
        return None
    peer = auth.peer(conn)
    if isinstance(peer, Principal):
        return peer
    if enabled:
        return _denied(MISSING)
    # No tokens: local and remote callers go on as before, but a connection whose maker is gone might have
    # been a replica's.
    return _denied(UNIDENTIFIED) if peer is Caller.UNKNOWN else None


def refusal(conn: HTTPConnection) -> ApiError | None:
    """Why a request or WebSocket is refused (a 403 error), or None when it may go on (or auth is off).

    The one check of the API, the storage API, the shell and the console: it may read the database and
    the kernel's socket table, so async callers run it in the thread pool."""
    path = conn.scope["path"]  # decoded, as the router matches it (url.path would stop at a '%3F')
    if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
        return None
    auth = authority(conn)
    who = _checked(auth, conn, path)
    if who is None or isinstance(who, ApiError):
        return who
    project = _PROJECT_PATH.match(path)
    if project is not None:
        name = project.group(1)
        if not who.may_use(auth.project_names(name)):
            return _denied(f"Permission denied on project {_short(name)!r} for these credentials.")
        return None
    if path == METRICS_PATH:
        return None if who.admin else _denied("The /metrics endpoint needs an admin token.")
    if path.startswith(STORAGE_PREFIXES):
        return _storage_refusal(auth, who, conn)
    return None


def refusal_response(path: str, error: ApiError) -> JSONResponse:
    """The 403 body: google.rpc form, and for storage paths Cloud Storage's `errors` list as well."""
    body: dict[str, Any] = error_body(403, error.code, error.message, error.details())
    if path.startswith(STORAGE_PREFIXES):
        body["error"]["errors"] = [{"message": error.message, "domain": "global", "reason": "forbidden"}]
    return JSONResponse(body, status_code=403)


def _needs_check(conn: HTTPConnection, path: str) -> bool:
    """Whether the middleware must run `refusal` (in the thread pool) for this request."""
    if path in OPEN_PATHS or path.startswith(OPEN_PREFIXES):
        return False
    auth = authority(conn)
    if auth.enabled():
        return True
    if auth.peers is None or not peer_applies(path):
        return False
    # Tokens off: only a replica's requests are limited, so a caller already known to be none goes on
    # here, without a trip through the thread pool (the answer `refusal` would give: allowed).
    known = auth.peers.known(conn.scope.get("client"), conn.scope.get("server"))
    return known not in (Caller.LOCAL, Caller.REMOTE)


class AuthMiddleware:
    """Refuses a request its credentials do not allow (403, `refusal_response`) before any route runs.

    Pure ASGI: Starlette's BaseHTTPMiddleware runs every request through a task group and memory streams.
    WebSockets pass: the shell route runs `refusal` itself."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path = scope["path"]
            conn = HTTPConnection(scope, receive)
            if _needs_check(conn, path):
                error = await run_in_threadpool(refusal, conn)
                if error is not None:
                    await refusal_response(path, error)(scope, receive, send)
                    return
        await self.app(scope, receive, send)
