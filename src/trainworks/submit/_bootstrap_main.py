"""Trainworks in-job bootstrap: fetch the staged code zip, put it on sys.path and run the entry module.

Run as ``python -c <this file's text> --package-uri gs://BUCKET/KEY.zip --module MODULE -- ARGS...``. It uses
the standard library only (the training image has no Trainworks) and keeps to Python 3.8 syntax.

The zip is read from the Cloud Storage FUSE view first (``/gcs/BUCKET/KEY``; ``TRAINWORKS_GCS_ROOT`` says
where that view is, default ``/gcs``), else downloaded through the GCS JSON API: from
``STORAGE_EMULATOR_HOST`` without auth when that is set, otherwise from storage.googleapis.com with a token
from the GCE metadata server. Errors are one ``trainworks-bootstrap:`` line on stderr and exit code 2 (bad
arguments) or 1 (fetching); the module's own exit code and exceptions pass through unchanged.
"""

from __future__ import annotations

import atexit
import base64
import contextlib
import hashlib
import http.client
import importlib
import importlib.util
import json
import os
import re
import runpy
import shutil
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Callable
from typing import TypeVar

PREFIX = "trainworks-bootstrap:"
USAGE = "usage: python -c BOOTSTRAP --package-uri gs://BUCKET/OBJECT.zip --module MODULE [-- ARGS...]"
GCS_API = "https://storage.googleapis.com"
METADATA_HOST = "metadata.google.internal"
TOKEN_PATH = "/computeMetadata/v1/instance/service-accounts/default/token"
ATTEMPTS = 4  # tries per request; waits between them double from FIRST_WAIT
FIRST_WAIT = 1.0
TIMEOUT = 60.0  # seconds per request (connect and each read)
CHUNK = 1 << 20
GCS_ROOT_ENV = "TRAINWORKS_GCS_ROOT"  # where the /gcs view is (default /gcs); tests point it elsewhere
_T = TypeVar("_T")
_MODULE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


class BootstrapError(Exception):
    """A failure the bootstrap reports in one line; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


class _Transient(Exception):
    """A failure worth another try (connection trouble, 408, 429, 5xx)."""


def parse_args(argv: list[str]) -> tuple[str, str, str, list[str]]:
    """(bucket, key, module, module args) from the bootstrap's own command line."""
    values = {"--package-uri": "", "--module": ""}
    rest: list[str] = []
    i = 0
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            rest = argv[i + 1 :]
            break
        name, eq, value = arg.partition("=")
        if name not in values:
            raise BootstrapError(f"unknown argument {arg!r}; {USAGE}", 2)
        if not eq:
            if i + 1 >= len(argv):
                raise BootstrapError(f"{name} needs a value; {USAGE}", 2)
            i += 1
            value = argv[i]
        values[name] = value
        i += 1
    uri, module = values["--package-uri"], values["--module"]
    if not uri:
        raise BootstrapError(f"--package-uri is required; {USAGE}", 2)
    if not module:
        raise BootstrapError(f"--module is required; {USAGE}", 2)
    if not _MODULE.match(module):
        raise BootstrapError(f"--module {module!r} is not a Python module name", 2)
    bucket, _, key = uri[len("gs://") :].partition("/") if uri.startswith("gs://") else ("", "", "")
    if not bucket or not key or key.endswith("/") or ".." in key.split("/"):
        raise BootstrapError(f"--package-uri {uri!r} is not a gs://BUCKET/OBJECT URI", 2)
    return bucket, key, module, rest


def _retrying(what: str, call: Callable[[], _T]) -> _T:
    """call() with a few tries on transient failures, waiting 1 s, 2 s, 4 s between them."""
    wait = FIRST_WAIT
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return call()
        except _Transient as exc:
            if attempt == ATTEMPTS:
                raise BootstrapError(f"{what} failed after {ATTEMPTS} tries: {exc}") from None
            sys.stderr.write(f"{PREFIX} {what}: {exc}; trying again in {wait:g}s\n")
            sys.stderr.flush()
            time.sleep(wait)
            wait *= 2
    raise AssertionError("unreachable")


def _open(request: urllib.request.Request, what: str) -> http.client.HTTPResponse:
    """urlopen that sorts failures into transient ones and final ones."""
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT)
    except urllib.error.HTTPError as exc:
        detail = _error_text(exc)
        if exc.code in (408, 429) or exc.code >= 500:
            raise _Transient(f"HTTP {exc.code}{detail}") from None
        if exc.code == 404:
            raise BootstrapError(f"{what}: not found (HTTP 404){detail}") from None
        raise BootstrapError(f"{what}: HTTP {exc.code}{detail}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _Transient(f"cannot connect: {reason}") from None


def _error_text(exc: urllib.error.HTTPError) -> str:
    """The message of a google.rpc-style error body, if there is one."""
    try:
        body = json.loads(exc.read(65536).decode("utf-8", "replace"))
        message = body.get("error", {}).get("message", "")
    except (ValueError, AttributeError, OSError):
        return ""
    return f": {message}" if message else ""


def _metadata_token() -> str:
    """An access token for the job's service account, from the GCE metadata server."""
    host = os.environ.get("GCE_METADATA_HOST") or METADATA_HOST  # the override google-auth honours too
    request = urllib.request.Request(f"http://{host}{TOKEN_PATH}", headers={"Metadata-Flavor": "Google"})

    def fetch() -> str:
        with _open(request, "metadata server token") as response:
            body = json.loads(response.read().decode("utf-8"))
        token = body.get("access_token")
        if not token:
            raise BootstrapError("the metadata server answered without an access_token")
        return str(token)

    try:
        return _retrying("getting a token from the metadata server", fetch)
    except BootstrapError as exc:
        # Off Google Cloud there is no metadata server: say what would have worked instead.
        raise BootstrapError(
            f"{exc} (outside Google Cloud, set STORAGE_EMULATOR_HOST or mount the bucket under /gcs)"
        ) from None


def _download_url(bucket: str, key: str) -> tuple[str, dict[str, str]]:
    emulator = os.environ.get("STORAGE_EMULATOR_HOST", "").strip()
    path = "/download/storage/v1/b/{}/o/{}?alt=media".format(
        urllib.parse.quote(bucket, safe=""), urllib.parse.quote(key, safe="")
    )
    if emulator:
        base = emulator if "://" in emulator else "http://" + emulator
        return base.rstrip("/") + path, {}
    return GCS_API + path, {"Authorization": "Bearer " + _metadata_token()}


def _md5_of(header: str) -> str | None:
    """The base64 MD5 in an ``x-goog-hash: crc32c=...,md5=...`` header, if any."""
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        if name == "md5":
            return value
    return None


def download(bucket: str, key: str, dest: str) -> None:
    """The object gs://bucket/key into the local file `dest`, through the GCS JSON API."""
    url, headers = _download_url(bucket, key)
    uri = f"gs://{bucket}/{key}"

    def fetch() -> None:
        request = urllib.request.Request(url, headers=headers)
        digest = hashlib.md5()  # an integrity check against x-goog-hash, not security
        with _open(request, f"downloading {uri}") as response, open(dest, "wb") as out:
            try:
                while True:
                    chunk = response.read(CHUNK)
                    if not chunk:
                        break
                    digest.update(chunk)
                    out.write(chunk)
            except (OSError, http.client.HTTPException) as exc:  # resets, timeouts, IncompleteRead
                raise _Transient(f"download cut short: {exc}") from None
            expected = _md5_of(response.headers.get("x-goog-hash", ""))
        if expected and base64.b64encode(digest.digest()).decode("ascii") != expected:
            raise _Transient("the downloaded bytes do not match the object's MD5")

    _retrying(f"downloading {uri}", fetch)


def fetch_package(bucket: str, key: str) -> str:
    """A local copy of the package zip; zipimport wants a stable local file, so never the FUSE path."""
    fd, local = tempfile.mkstemp(prefix="trainworks-package-", suffix=".zip")
    os.close(fd)
    atexit.register(_remove, local)
    mounted = os.path.join(os.environ.get(GCS_ROOT_ENV) or "/gcs", bucket, *key.split("/"))
    if os.path.isfile(mounted):
        try:
            shutil.copyfile(mounted, local)
        except OSError as exc:
            raise BootstrapError(f"cannot copy {mounted}: {exc}") from None
        source = mounted
    else:
        download(bucket, key, local)
        source = f"gs://{bucket}/{key}"
    if not zipfile.is_zipfile(local):
        raise BootstrapError(f"{source} is not a zip archive")
    with zipfile.ZipFile(local) as archive:
        broken = archive.testzip()
    if broken is not None:
        raise BootstrapError(f"{source} is damaged: {broken} fails its CRC check")
    return local


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _check_module(module: str, package_uri: str) -> None:
    """A clear error when the entry module is not in the package (its own import errors pass through)."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module == exc.name or module.startswith(exc.name + ".")):
            raise
        spec = None
    if spec is None:
        raise BootstrapError(f"module {module} is not in {package_uri}")


def main(argv: list[str]) -> int:
    try:
        bucket, key, module, args = parse_args(argv)
        package_uri = f"gs://{bucket}/{key}"
        local = fetch_package(bucket, key)
        sys.path.insert(0, local)
        importlib.invalidate_caches()
        _check_module(module, package_uri)
    except BootstrapError as exc:
        sys.stderr.write(f"{PREFIX} {exc}\n")
        sys.stderr.flush()
        return exc.code
    sys.argv = [module, *args]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
