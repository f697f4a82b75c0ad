"""Buckets and objects of the Cloud Storage JSON API, kept as folders and files under the local bucket root.

Every object is the file `<bucket root>/<bucket>/<name>`, so what jobs write through /gcs is an object too.
What a file cannot carry (content type, custom metadata, generation, checksums) lives in a SQLite store
under `<home>/objects-meta`, outside the buckets, so it can never collide with an object name. A row
describes one state of its file (inode, size, mtime): a file changed behind the API's back no longer
matches its row, and its metadata is then derived from the file (generation = mtime in ns) and its
checksums computed and cached. A name ending in `/` is a folder marker: a directory with a row.

New objects are written to a temp file under `<home>/uploads` and renamed into place, so a partly
written object is never visible. Resumable upload sessions keep their state and bytes there too, so they
survive a server restart. No HTTP here: api/routers/storage.py speaks the wire protocol.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import errno
import fcntl
import hashlib
import json
import mimetypes
import os
import re
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO
from urllib.parse import quote

import google_crc32c

from trainworks.services.errors import ApiError
from trainworks.storage.gcs import ObjectStore, StoragePathError, parse_gcs_uri

MAX_NAME_BYTES = 1024
MAX_SEGMENT_BYTES = 255  # a file name on Linux file systems
MAX_PAGE = 1000
DEFAULT_CONTENT_TYPE = "application/octet-stream"
SESSION_TTL_SECONDS = 7 * 24 * 3600  # Cloud Storage expires resumable sessions after a week
_READ_BLOCK = 1 << 20
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")
# Object resource fields a client may set, kept as they are sent (strings).
FIXED_KEYS = ("cacheControl", "contentDisposition", "contentEncoding", "contentLanguage", "customTime")


# ---------------------------------------------------------------- errors
class StorageError(Exception):
    """A failed storage request: its HTTP status, the GCS error reason and a message."""

    def __init__(self, status: int, reason: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.message = message
        self.headers = headers or {}


def bad_request(message: str, reason: str = "invalid") -> StorageError:
    return StorageError(400, reason, message)


def no_such_bucket(bucket: str) -> StorageError:
    return StorageError(404, "notFound", f"The specified bucket does not exist: {bucket}")


def no_such_object(bucket: str, name: str) -> StorageError:
    return StorageError(404, "notFound", f"No such object: {bucket}/{name}")


def precondition_failed() -> StorageError:
    return StorageError(
        412, "conditionNotMet", "At least one of the pre-conditions you specified did not hold."
    )


def not_modified() -> StorageError:
    return StorageError(304, "notModified", "Not Modified")


def conflict(message: str) -> StorageError:
    return StorageError(409, "conflict", message)


# ---------------------------------------------------------------- values
def rfc3339(ns: int) -> str:
    """Millisecond precision with Z, as Cloud Storage writes its timestamps."""
    ms = ns // 1_000_000
    return datetime.fromtimestamp(ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


class Hasher:
    """crc32c (big-endian, base64) and MD5 of a byte stream, as Cloud Storage reports them."""

    def __init__(self) -> None:
        self._crc = google_crc32c.Checksum()
        self._md5 = hashlib.md5(usedforsecurity=False)
        self.size = 0

    def update(self, data: bytes | memoryview) -> None:
        self._crc.update(bytes(data) if isinstance(data, memoryview) else data)
        self._md5.update(data)
        self.size += len(data)

    def digests(self) -> tuple[str, str]:
        return _b64(self._crc.digest()), _b64(self._md5.digest())


def hash_file(handle: BinaryIO) -> tuple[str, str, int]:
    """crc32c, MD5 and size of an open file, read from its start without moving its offset."""
    hasher = Hasher()
    fd = handle.fileno()
    offset = 0
    while True:
        block = os.pread(fd, _READ_BLOCK, offset)
        if not block:
            break
        hasher.update(block)
        offset += len(block)
    crc, md5 = hasher.digests()
    return crc, md5, hasher.size


def check_bucket_name(bucket: str) -> str:
    try:
        parse_gcs_uri(f"gs://{bucket}/")
    except StoragePathError:
        raise bad_request(
            f"Invalid bucket name: {bucket[:300]!r}. Bucket names use 3-222 lowercase letters, digits, "
            "dots, dashes and underscores, and start and end with a letter or digit."
        ) from None
    return bucket


def check_object_name(bucket: str, name: str) -> str:
    """An object name the local bucket can store as a path: no empty, `.` or `..` segments."""
    if not isinstance(name, str) or not name:
        raise bad_request("The object name is empty: set `name`.", reason="required")
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME_BYTES:
        raise bad_request(f"The object name is longer than {MAX_NAME_BYTES} bytes.")
    if any(c in name for c in "\r\n\x00"):
        raise bad_request(f"Invalid object name {name[:200]!r}: it contains a line break or NUL.")
    try:
        key = parse_gcs_uri(f"gs://{bucket}/{name}").key
    except StoragePathError as exc:
        raise bad_request(f"Invalid object name {name[:200]!r}: {exc}") from None
    if any(len(part.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES for part in name.split("/")):
        raise bad_request(
            f"Invalid object name {name[:200]!r}: a local bucket stores objects as files, so each "
            f"'/'-separated part of a name has at most {MAX_SEGMENT_BYTES} bytes."
        )
    if key != name:
        raise bad_request(
            f"Invalid object name {name[:200]!r}: a local bucket stores objects as files, so a name "
            "cannot start with '/' or hold empty or '.' segments ('//', '/./')."
        )
    return name


def _int64(field_name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise bad_request(f"Invalid value for {field_name}: {value!r} is not an integer.")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise bad_request(f"Invalid value for {field_name}: {value!r} is not an integer.") from None


@dataclass(frozen=True)
class Preconditions:
    """ifGenerationMatch and friends; generation 0 means "no live object"."""

    if_generation_match: int | None = None
    if_generation_not_match: int | None = None
    if_metageneration_match: int | None = None
    if_metageneration_not_match: int | None = None

    @classmethod
    def from_params(cls, params: Mapping[str, str], prefix: str = "if") -> Preconditions:
        """From query parameters; prefix "ifSource" reads the source object's (rewrite, copy, move)."""
        values: dict[str, int | None] = {}
        for attr, key in (
            ("if_generation_match", "GenerationMatch"),
            ("if_generation_not_match", "GenerationNotMatch"),
            ("if_metageneration_match", "MetagenerationMatch"),
            ("if_metageneration_not_match", "MetagenerationNotMatch"),
        ):
            raw = params.get(prefix + key)
            values[attr] = _int64(prefix + key, raw) if raw not in (None, "") else None
        return cls(**values)

    def check(self, current: ObjectInfo | None, read: bool = False) -> None:
        """412 when a condition fails; 304 for a read whose *NotMatch condition fails, as GCS answers."""
        generation = current.generation if current else 0
        if self.if_generation_match is not None and generation != self.if_generation_match:
            raise precondition_failed()
        if self.if_metageneration_match is not None and (
            current is None or current.metageneration != self.if_metageneration_match
        ):
            raise precondition_failed()
        if self.if_generation_not_match is not None and generation == self.if_generation_not_match:
            raise not_modified() if read else precondition_failed()
        if (
            self.if_metageneration_not_match is not None
            and current is not None
            and current.metageneration == self.if_metageneration_not_match
        ):
            raise not_modified() if read else precondition_failed()


@dataclass(frozen=True)
class NewObject:
    """The writable metadata of an object being written."""

    content_type: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    fixed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Expected:
    """Checksums the client sent with an upload (base64, as in the object resource)."""

    crc32c: str | None = None
    md5: str | None = None

    def verify(self, crc32c: str, md5: str) -> None:
        if self.crc32c is not None and self.crc32c != crc32c:
            raise bad_request(f"Provided CRC32C {self.crc32c!r} doesn't match calculated CRC32C {crc32c!r}.")
        if self.md5 is not None and self.md5 != md5:
            raise bad_request(f"Provided MD5 hash {self.md5!r} doesn't match calculated MD5 hash {md5!r}.")

    def merged(self, other: Expected) -> Expected:
        return Expected(other.crc32c or self.crc32c, other.md5 or self.md5)


def _checksum(field_name: str, value: Any, size: int) -> str:
    if not isinstance(value, str):
        raise bad_request(f"Invalid value for {field_name}: expected a base64 string.")
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise bad_request(f"Invalid value for {field_name}: {value!r} is not a base64 {size}-byte checksum.")
    return value


def parse_object_body(body: Any, what: str = "object metadata") -> tuple[str | None, NewObject, Expected]:
    """The name, writable metadata and checksums of an object resource sent by a client."""
    if not isinstance(body, dict):
        raise bad_request(f"Invalid {what}: expected a JSON object.")
    name = body.get("name")
    if name is not None and not isinstance(name, str):
        raise bad_request("Invalid value for name: expected a string.")
    content_type = body.get("contentType")
    if content_type is not None and not isinstance(content_type, str):
        raise bad_request("Invalid value for contentType: expected a string.")
    metadata = body.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise bad_request("Invalid value for metadata: expected a map of strings.")
    for key, value in metadata.items():
        if value is not None and not isinstance(value, str | int | float | bool):
            raise bad_request(f"Invalid value for metadata.{key}: expected a string.")
    fixed: dict[str, str] = {}
    for key in FIXED_KEYS:
        if body.get(key) is not None:
            if not isinstance(body[key], str):
                raise bad_request(f"Invalid value for {key}: expected a string.")
            fixed[key] = body[key]
    expected = Expected(
        _checksum("crc32c", body["crc32c"], 4) if body.get("crc32c") is not None else None,
        _checksum("md5Hash", body["md5Hash"], 16) if body.get("md5Hash") is not None else None,
    )
    values = {str(k): str(v) for k, v in metadata.items() if v is not None}
    return name, NewObject(content_type, values, fixed), expected


@dataclass(frozen=True)
class ObjectInfo:
    bucket: str
    name: str
    size: int
    generation: int
    metageneration: int
    content_type: str
    created_ns: int
    updated_ns: int
    crc32c: str | None = None
    md5: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    fixed: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class BucketInfo:
    name: str
    created_ns: int
    updated_ns: int
    location: str
    storage_class: str
    metageneration: int
    project_number: str | None
    labels: dict[str, str]


def object_resource(info: ObjectInfo, base_url: str) -> dict[str, Any]:
    """The JSON API's object resource; base_url (scheme://host:port) makes selfLink and mediaLink."""
    quoted = quote(info.name, safe="")
    resource: dict[str, Any] = {
        "kind": "storage#object",
        "id": f"{info.bucket}/{info.name}/{info.generation}",
        "selfLink": f"{base_url}/storage/v1/b/{info.bucket}/o/{quoted}",
        "mediaLink": f"{base_url}/download/storage/v1/b/{info.bucket}/o/{quoted}"
        f"?generation={info.generation}&alt=media",
        "name": info.name,
        "bucket": info.bucket,
        "generation": str(info.generation),
        "metageneration": str(info.metageneration),
        "contentType": info.content_type,
        "storageClass": "STANDARD",
        "size": str(info.size),
        "etag": _b64(f"{info.generation}/{info.metageneration}".encode()),
        "timeCreated": rfc3339(info.created_ns),
        "updated": rfc3339(info.updated_ns),
        "timeStorageClassUpdated": rfc3339(info.created_ns),
        "timeFinalized": rfc3339(info.created_ns),
    }
    if info.md5 is not None:
        resource["md5Hash"] = info.md5
    if info.crc32c is not None:
        resource["crc32c"] = info.crc32c
    resource.update(info.fixed)
    if info.metadata:
        resource["metadata"] = dict(info.metadata)
    return resource


def bucket_resource(info: BucketInfo, base_url: str) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "kind": "storage#bucket",
        "id": info.name,
        "selfLink": f"{base_url}/storage/v1/b/{info.name}",
        "name": info.name,
        "metageneration": str(info.metageneration),
        "location": info.location,
        "locationType": "region",
        "storageClass": info.storage_class,
        "etag": _b64(f"bucket/{info.metageneration}".encode()),
        "timeCreated": rfc3339(info.created_ns),
        "updated": rfc3339(info.updated_ns),
        "iamConfiguration": {
            "uniformBucketLevelAccess": {"enabled": True},
            "publicAccessPrevention": "inherited",
        },
        "rpo": "DEFAULT",
    }
    if info.project_number:
        resource["projectNumber"] = info.project_number
    if info.labels:
        resource["labels"] = dict(info.labels)
    return resource


@dataclass(frozen=True)
class ObjectPage:
    items: list[ObjectInfo]
    prefixes: list[str]
    next_page_token: str | None


# ---------------------------------------------------------------- the metadata store
_SCHEMA = """
CREATE TABLE IF NOT EXISTS objects (
    bucket TEXT NOT NULL,
    name TEXT NOT NULL,
    ino INTEGER NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    generation INTEGER NOT NULL,
    metageneration INTEGER NOT NULL,
    content_type TEXT NOT NULL,
    crc32c TEXT,
    md5 TEXT,
    created_ns INTEGER NOT NULL,
    updated_ns INTEGER NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    fixed TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (bucket, name)
);
CREATE TABLE IF NOT EXISTS buckets (
    name TEXT PRIMARY KEY,
    created_ns INTEGER NOT NULL,
    updated_ns INTEGER NOT NULL,
    location TEXT NOT NULL,
    storage_class TEXT NOT NULL,
    metageneration INTEGER NOT NULL,
    project_number TEXT,
    labels TEXT NOT NULL DEFAULT '{}'
);
"""

_OBJECT_COLUMNS = (
    "bucket",
    "name",
    "ino",
    "size",
    "mtime_ns",
    "generation",
    "metageneration",
    "content_type",
    "crc32c",
    "md5",
    "created_ns",
    "updated_ns",
    "metadata",
    "fixed",
)


class MetaStore:
    """Per-object and per-bucket metadata in one SQLite file; one connection shared under a lock."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(str(path), check_same_thread=False, isolation_level=None)
        self._conn.row_factory = sqlite3.Row
        with self._lock:
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.executescript(_SCHEMA)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def object_row(self, bucket: str, name: str) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = self._conn.execute(
                "SELECT * FROM objects WHERE bucket = ? AND name = ?", (bucket, name)
            ).fetchone()
            return row

    def object_rows(self, bucket: str, names: list[str]) -> dict[str, sqlite3.Row]:
        found: dict[str, sqlite3.Row] = {}
        with self._lock:
            for start in range(0, len(names), 500):
                chunk = names[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for row in self._conn.execute(
                    f"SELECT * FROM objects WHERE bucket = ? AND name IN ({marks})", (bucket, *chunk)
                ):
                    found[row["name"]] = row
        return found

    def markers(self, bucket: str) -> set[str]:
        with self._lock:
            return {
                row[0]
                for row in self._conn.execute(
                    "SELECT name FROM objects WHERE bucket = ? AND name LIKE '%/'", (bucket,)
                )
            }

    def put_object(self, values: Mapping[str, Any]) -> None:
        columns = ",".join(_OBJECT_COLUMNS)
        marks = ",".join("?" * len(_OBJECT_COLUMNS))
        with self._lock:
            self._conn.execute(
                f"INSERT OR REPLACE INTO objects ({columns}) VALUES ({marks})",
                tuple(values[c] for c in _OBJECT_COLUMNS),
            )

    def delete_object(self, bucket: str, name: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM objects WHERE bucket = ? AND name = ?", (bucket, name))

    def bucket_row(self, name: str) -> sqlite3.Row | None:
        with self._lock:
            row: sqlite3.Row | None = self._conn.execute(
                "SELECT * FROM buckets WHERE name = ?", (name,)
            ).fetchone()
            return row

    def put_bucket(self, info: BucketInfo, replace_existing: bool = True) -> None:
        verb = "INSERT OR REPLACE" if replace_existing else "INSERT OR IGNORE"
        with self._lock:
            self._conn.execute(
                f"{verb} INTO buckets (name, created_ns, updated_ns, location, storage_class, metageneration,"
                " project_number, labels) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    info.name,
                    info.created_ns,
                    info.updated_ns,
                    info.location,
                    info.storage_class,
                    info.metageneration,
                    info.project_number,
                    json.dumps(info.labels),
                ),
            )

    def delete_bucket(self, name: str) -> None:
        with self._lock:
            self._conn.execute("DELETE FROM objects WHERE bucket = ?", (name,))
            self._conn.execute("DELETE FROM buckets WHERE name = ?", (name,))


def _signature(st: os.stat_result) -> tuple[int, int, int]:
    return st.st_ino, st.st_size, st.st_mtime_ns


def _row_info(row: sqlite3.Row, size: int | None = None) -> ObjectInfo:
    return ObjectInfo(
        bucket=row["bucket"],
        name=row["name"],
        size=row["size"] if size is None else size,
        generation=row["generation"],
        metageneration=row["metageneration"],
        content_type=row["content_type"],
        created_ns=row["created_ns"],
        updated_ns=row["updated_ns"],
        crc32c=row["crc32c"],
        md5=row["md5"],
        metadata=json.loads(row["metadata"]),
        fixed=json.loads(row["fixed"]),
    )


def _info_values(info: ObjectInfo, st: os.stat_result) -> dict[str, Any]:
    values = asdict(info)
    values.update(
        ino=st.st_ino,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        metadata=json.dumps(info.metadata),
        fixed=json.dumps(info.fixed),
    )
    return values


# ---------------------------------------------------------------- new bytes
class ObjectWriter:
    """A new object's bytes, written to a temp file and hashed as they arrive."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file: BinaryIO | None = open(path, "wb")  # noqa: SIM115 - closed by finish() or discard()
        self.hasher = Hasher()

    @property
    def size(self) -> int:
        return self.hasher.size

    def write(self, data: bytes) -> None:
        assert self._file is not None, "the writer is finished"
        self._file.write(data)
        self.hasher.update(data)

    def finish(self) -> None:
        """Make the bytes durable before anyone can see them."""
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None

    def discard(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self.path.unlink(missing_ok=True)


@dataclass
class OpenObject:
    """An object opened for reading: its file (the bytes of `info` even if it is replaced meanwhile)."""

    info: ObjectInfo
    handle: BinaryIO

    def close(self) -> None:
        self.handle.close()


# ---------------------------------------------------------------- the service
class ObjectService:
    """Buckets and objects over a local bucket root, with the metadata store and upload sessions."""

    def __init__(
        self,
        bucket_root: Path,
        home: Path,
        default_location: str = "us-central1",
        project_number: Callable[[str], str] | None = None,
    ) -> None:
        self.root = Path(bucket_root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.uploads = Path(home) / "uploads"
        self.uploads.mkdir(parents=True, exist_ok=True)
        self.store = MetaStore(Path(home) / "objects-meta" / "objects.db")
        self.paths = ObjectStore(self.root)
        self.default_location = default_location.upper()
        self.project_number = project_number
        # Checks and renames of one write are atomic with respect to other writes through the API.
        self._commit = threading.RLock()

    def close(self) -> None:
        self.store.close()

    # ------------------------------------------------------------ buckets
    def _bucket_dir(self, bucket: str) -> Path:
        check_bucket_name(bucket)
        path = self.root / bucket
        if not path.is_dir():
            raise no_such_bucket(bucket)
        return path

    def get_bucket(self, bucket: str) -> BucketInfo:
        path = self._bucket_dir(bucket)
        row = self.store.bucket_row(bucket)
        if row is None:
            # A bucket folder made outside the API (a job, ensure_bucket): recorded on first sight.
            mtime = path.stat().st_mtime_ns
            info = BucketInfo(bucket, mtime, mtime, self.default_location, "STANDARD", 1, None, {})
            self.store.put_bucket(info, replace_existing=False)
            row = self.store.bucket_row(bucket)
            assert row is not None
        return BucketInfo(
            name=row["name"],
            created_ns=row["created_ns"],
            updated_ns=row["updated_ns"],
            location=row["location"],
            storage_class=row["storage_class"],
            metageneration=row["metageneration"],
            project_number=row["project_number"],
            labels=json.loads(row["labels"]),
        )

    def list_buckets(
        self, prefix: str = "", page_token: str | None = None, max_results: int = MAX_PAGE
    ) -> tuple[list[BucketInfo], str | None]:
        after = _decode_token(page_token)["a"] if page_token else ""
        names = sorted(
            entry.name
            for entry in os.scandir(self.root)
            if entry.is_dir(follow_symlinks=False)
            and entry.name.startswith(prefix)
            and entry.name > after
            and _valid_bucket(entry.name)
        )
        page = names[:max_results]
        token = _encode_token(page[-1], False) if len(names) > max_results else None
        return [self.get_bucket(name) for name in page], token

    def insert_bucket(self, body: Any, project: str | None) -> BucketInfo:
        if not isinstance(body, dict):
            raise bad_request("Invalid bucket resource: expected a JSON object.")
        name = body.get("name")
        if not isinstance(name, str) or not name:
            raise bad_request("Required field: name (the bucket name).", reason="required")
        check_bucket_name(name)
        location = body.get("location") or self.default_location
        storage_class = body.get("storageClass") or "STANDARD"
        labels = body.get("labels") or {}
        if not isinstance(location, str) or not isinstance(storage_class, str):
            raise bad_request("Invalid value for location or storageClass: expected a string.")
        if not isinstance(labels, dict) or not all(isinstance(v, str) for v in labels.values()):
            raise bad_request("Invalid value for labels: expected a map of strings.")
        path = self.root / name
        with self._commit:
            try:
                path.mkdir()
            except FileExistsError:
                raise conflict(
                    "Your previous request to create the named bucket succeeded and you already own it."
                ) from None
            now = time.time_ns()
            info = BucketInfo(
                name,
                now,
                now,
                location.upper(),
                storage_class.upper(),
                1,
                self._project_number(project),
                {str(k): v for k, v in labels.items()},
            )
            self.store.delete_bucket(name)  # rows of an earlier bucket of that name
            self.store.put_bucket(info)
        return info

    def _project_number(self, project: str | None) -> str | None:
        if not project or self.project_number is None:
            return None
        try:
            return self.project_number(project)
        except (ApiError, ValueError):
            return None  # e.g. "<none>", which google-cloud-storage sends to an emulator

    def delete_bucket(self, bucket: str) -> None:
        path = self._bucket_dir(bucket)
        with self._commit:
            if self._has_object(path, "", self.store.markers(bucket)):
                raise conflict("The bucket you tried to delete is not empty.")
            shutil.rmtree(path)
            self.store.delete_bucket(bucket)

    # ------------------------------------------------------------ reading objects
    def _path(self, bucket: str, name: str) -> Path:
        check_object_name(bucket, name)
        try:
            return self.paths.local_path(f"gs://{bucket}/{name}")
        except StoragePathError as exc:
            raise bad_request(f"Invalid object name {name[:200]!r}: {exc}") from None

    def _describe(
        self,
        bucket: str,
        name: str,
        st: os.stat_result,
        row: sqlite3.Row | None,
        handle: BinaryIO | None = None,
    ) -> ObjectInfo:
        """The object behind a file, from its row when the row describes this very file."""
        if name.endswith("/"):
            assert row is not None, "a folder marker always has a row"
            return _row_info(row, size=0)
        if row is not None and (row["ino"], row["size"], row["mtime_ns"]) == _signature(st):
            return _row_info(row)
        # Written outside the API: metadata derived from the file, checksums computed once and cached.
        generation = st.st_mtime_ns
        if row is not None:
            generation = max(generation, row["generation"] + 1)  # never reuse a generation seen before
        guessed = mimetypes.guess_type(name)[0] or DEFAULT_CONTENT_TYPE
        path = self._path(bucket, name)
        try:
            if handle is not None:
                crc, md5, size = hash_file(handle)
                after = os.fstat(handle.fileno())
            else:
                with open(path, "rb") as reading:
                    if _signature(os.fstat(reading.fileno())) != _signature(st):
                        raise FileNotFoundError(path)  # replaced meanwhile: describe the new one
                    crc, md5, size = hash_file(reading)
                    after = os.fstat(reading.fileno())
        except FileNotFoundError:
            current = self._stat(bucket, name)
            if current is None:
                raise no_such_object(bucket, name) from None
            return self._describe(bucket, name, current, self.store.object_row(bucket, name))
        info = ObjectInfo(
            bucket, name, size, generation, 1, guessed, st.st_mtime_ns, st.st_mtime_ns, crc, md5
        )
        if _signature(after) == _signature(st) and size == st.st_size:
            with self._commit:
                # Only while the file is still this one: a write may have just put its own row in place.
                if self._stat(bucket, name) is not None and _signature(path.stat()) == _signature(st):
                    self.store.put_object(_info_values(info, st))
        return info

    def _stat(self, bucket: str, name: str) -> os.stat_result | None:
        """The file (or marker folder) of a live object, or None."""
        path = self._path(bucket, name)
        try:
            st = path.stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        if name.endswith("/"):
            is_dir = path.is_dir()
            return st if is_dir and self.store.object_row(bucket, name) is not None else None
        return st if path.is_file() else None

    def _current(self, bucket: str, name: str) -> ObjectInfo | None:
        """Generation and metageneration of a live object, for preconditions (checksums not computed)."""
        st = self._stat(bucket, name)
        if st is None:
            return None
        row = self.store.object_row(bucket, name)
        if name.endswith("/") or (
            row is not None and (row["ino"], row["size"], row["mtime_ns"]) == _signature(st)
        ):
            assert row is not None
            return _row_info(row, size=0 if name.endswith("/") else None)
        generation = st.st_mtime_ns if row is None else max(st.st_mtime_ns, row["generation"] + 1)
        return ObjectInfo(bucket, name, st.st_size, generation, 1, DEFAULT_CONTENT_TYPE, 0, 0)

    def get_object(
        self, bucket: str, name: str, generation: int | None = None, cond: Preconditions | None = None
    ) -> ObjectInfo:
        self._bucket_dir(bucket)
        st = self._stat(bucket, name)
        if st is None:
            raise no_such_object(bucket, name)
        info = self._describe(bucket, name, st, self.store.object_row(bucket, name))
        if generation is not None and generation != info.generation:
            raise no_such_object(bucket, name)
        (cond or Preconditions()).check(info, read=True)
        return info

    def open_object(
        self, bucket: str, name: str, generation: int | None = None, cond: Preconditions | None = None
    ) -> OpenObject:
        """The object's file, open, with metadata (checksums included) for exactly those bytes."""
        self._bucket_dir(bucket)
        path = self._path(bucket, name)
        if name.endswith("/"):
            info = self.get_object(bucket, name, generation, cond)
            return OpenObject(info, open(os.devnull, "rb"))  # noqa: SIM115 - a marker has no bytes
        try:
            handle = open(path, "rb")  # noqa: SIM115 - the caller closes it once it has streamed it
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            raise no_such_object(bucket, name) from None
        try:
            st = os.fstat(handle.fileno())
            info = self._describe(bucket, name, st, self.store.object_row(bucket, name), handle)
            if generation is not None and generation != info.generation:
                raise no_such_object(bucket, name)
            (cond or Preconditions()).check(info, read=True)
        except BaseException:
            handle.close()
            raise
        return OpenObject(info, handle)

    # ------------------------------------------------------------ listing
    def list_objects(
        self,
        bucket: str,
        prefix: str = "",
        delimiter: str = "",
        start_offset: str = "",
        end_offset: str = "",
        page_token: str | None = None,
        max_results: int = MAX_PAGE,
    ) -> ObjectPage:
        """One page in lexicographic (UTF-8 byte) order; with a delimiter, names past it fold into
        prefixes."""
        bucket_dir = self._bucket_dir(bucket)
        if max_results < 1:
            raise bad_request("Invalid value for maxResults: it must be at least 1.")
        max_results = min(max_results, MAX_PAGE)
        token = _decode_token(page_token) if page_token else {"a": "", "p": False}
        after: str = token["a"]
        skip = after if token["p"] else None
        markers = self.store.markers(bucket)
        names: list[str] = []
        prefixes: list[str] = []
        last: tuple[str, bool] | None = None  # the last entry of the page, where the next one resumes
        next_token = None
        # Folders fold into prefixes without being walked, unless offsets must look at every name.
        collapse = delimiter == "/" and not start_offset and not end_offset
        for name, is_prefix in self._walk(bucket_dir, "", markers, prefix, after, skip, collapse):
            if start_offset and name < start_offset:
                continue
            if end_offset and name >= end_offset:
                break
            folded: str | None = name if is_prefix else None
            if folded is None and delimiter:
                cut = name.find(delimiter, len(prefix))
                if cut >= 0:
                    folded = name[: cut + len(delimiter)]
            if folded is not None and last == (folded, True):
                continue
            if len(names) + len(prefixes) == max_results:
                assert last is not None
                next_token = _encode_token(*last)
                break
            if folded is not None:
                prefixes.append(folded)
                last = (folded, True)
            else:
                names.append(name)
                last = (name, False)
        rows = self.store.object_rows(bucket, names)
        items = []
        for name in names:
            st = self._stat(bucket, name)
            if st is not None:  # deleted while listing
                items.append(self._describe(bucket, name, st, rows.get(name)))
        return ObjectPage(items, prefixes, next_token)

    def _walk(
        self,
        bucket_dir: Path,
        rel: str,
        markers: set[str],
        prefix: str,
        after: str,
        skip: str | None,
        collapse: bool,
    ) -> Iterator[tuple[str, bool]]:
        """(name, is_prefix) in lexicographic order: a folder sorts as "name/", so a depth-first walk with
        each folder's entries sorted that way is in global order. With collapse (delimiter "/"), a folder
        past the prefix is one prefix entry when it holds any object, and is not walked."""
        try:
            entries = list(os.scandir(bucket_dir / rel if rel else bucket_dir))
        except (FileNotFoundError, NotADirectoryError):
            return
        keyed: list[tuple[str, os.DirEntry[str]]] = []
        for entry in entries:
            try:
                entry.name.encode("utf-8")
            except UnicodeEncodeError:
                continue  # not a name the JSON API can carry
            if entry.is_dir(follow_symlinks=False):
                keyed.append((f"{rel}{entry.name}/", entry))
            elif entry.is_file(follow_symlinks=False):
                keyed.append((rel + entry.name, entry))
        keyed.sort(key=lambda pair: pair[0])
        for key, _entry in keyed:
            if key.endswith("/"):
                if not (key.startswith(prefix) or prefix.startswith(key)):
                    continue
                if skip is not None and key.startswith(skip):
                    continue
                if after and key < after and not after.startswith(key):
                    continue  # every name in this folder sorts before `after`
                if collapse and key.startswith(prefix) and len(key) > len(prefix):
                    if key > after and self._has_object(bucket_dir, key, markers):
                        yield key, True
                    continue
                if key in markers and key.startswith(prefix) and key > after:
                    yield key, False
                yield from self._walk(bucket_dir, key, markers, prefix, after, skip, collapse)
            elif key.startswith(prefix) and key > after and not (skip is not None and key.startswith(skip)):
                yield key, False

    def _has_object(self, bucket_dir: Path, rel: str, markers: set[str]) -> bool:
        """Whether a folder holds an object: a file or a folder marker anywhere below it."""
        if rel in markers:
            return True
        stack = [rel]
        while stack:
            current = stack.pop()
            try:
                entries = list(os.scandir(bucket_dir / current if current else bucket_dir))
            except (FileNotFoundError, NotADirectoryError):
                continue
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    return True
                if entry.is_dir(follow_symlinks=False):
                    key = f"{current}{entry.name}/"
                    if key in markers:
                        return True
                    stack.append(key)
        return False

    # ------------------------------------------------------------ writing objects
    def new_writer(self) -> ObjectWriter:
        return ObjectWriter(self.uploads / f"put-{secrets.token_hex(12)}.tmp")

    def check_writable(self, bucket: str, name: str, cond: Preconditions | None = None) -> None:
        """Fail early (bad name, no bucket, failed precondition) before a client sends its bytes."""
        self._bucket_dir(bucket)
        self._path(bucket, name)
        if cond is not None:
            cond.check(self._current(bucket, name))

    def commit(
        self,
        bucket: str,
        name: str,
        writer: ObjectWriter,
        meta: NewObject,
        cond: Preconditions | None = None,
        expected: Expected | None = None,
    ) -> ObjectInfo:
        """Put a finished writer's bytes in place as the object's new generation."""
        try:
            writer.finish()
            crc, md5 = writer.hasher.digests()
            (expected or Expected()).verify(crc, md5)
            return self._install(bucket, name, writer.path, meta, cond or Preconditions(), crc, md5)
        finally:
            writer.discard()  # gone already when it was installed

    def _install(
        self,
        bucket: str,
        name: str,
        source: Path,
        meta: NewObject,
        cond: Preconditions,
        crc: str,
        md5: str,
        keep: ObjectInfo | None = None,
    ) -> ObjectInfo:
        """Rename `source` into place (or make the folder of a marker) and record the new generation.
        `keep`: the metadata to carry over (a copy or a move), else a fresh object."""
        bucket_dir = self._bucket_dir(bucket)
        target = self._path(bucket, name)
        size = source.stat().st_size
        if name.endswith("/") and size:
            raise bad_request(
                f"Invalid object name {name[:200]!r}: a name ending in '/' is a folder in a local bucket, "
                "so only an empty folder marker can have it."
            )
        with self._commit:
            current = self._current(bucket, name)
            cond.check(current)
            self._make_parents(bucket_dir, target, name)
            if name.endswith("/"):
                if target.exists() and not target.is_dir():
                    raise conflict(f"An object {name[:-1]!r} exists, so {name!r} cannot be a folder marker.")
                target.mkdir(exist_ok=True)
                source.unlink(missing_ok=True)
            else:
                if target.is_dir():
                    self._remove_empty_folder(bucket, target, name)
                _rename(source, target, self.root / ".trainworks-staging")
            st = target.stat()
            now = time.time_ns()
            generation = max(
                st.st_mtime_ns if not name.endswith("/") else now, (current.generation + 1) if current else 0
            )
            base = keep or ObjectInfo(bucket, name, 0, 0, 1, DEFAULT_CONTENT_TYPE, now, now)
            info = replace(
                base,
                bucket=bucket,
                name=name,
                size=0 if name.endswith("/") else st.st_size,
                generation=generation,
                metageneration=1,
                content_type=meta.content_type or base.content_type or DEFAULT_CONTENT_TYPE,
                created_ns=now,
                updated_ns=now,
                crc32c=crc,
                md5=md5,
                metadata=meta.metadata if meta.metadata or keep is None else base.metadata,
                fixed=meta.fixed if meta.fixed or keep is None else base.fixed,
            )
            self.store.put_object(_info_values(info, st))
        return info

    def _make_parents(self, bucket_dir: Path, target: Path, name: str) -> None:
        parent = target.parent
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            walk = bucket_dir
            for part in name.split("/")[:-1]:
                walk = walk / part
                if walk.is_file():
                    blocker = walk.relative_to(bucket_dir).as_posix()
                    raise conflict(
                        f"An object {blocker!r} exists, and a local bucket keeps objects as files, so it "
                        f"cannot also be the folder of {name[:200]!r}."
                    ) from None
            raise

    def _remove_empty_folder(self, bucket: str, target: Path, name: str) -> None:
        """A folder with no object below it (left by deletes) gives way to a file of its name."""
        key = name + "/"
        markers = self.store.markers(bucket)
        if self._has_object(self.root / bucket, key, markers):
            raise conflict(
                f"Objects named {key!r}... exist, and a local bucket keeps them in a folder, so {name!r} "
                "cannot also be an object."
            )
        for dirpath, _dirs, _files in sorted(os.walk(target), key=lambda t: -len(t[0])):
            try:
                os.rmdir(dirpath)
            except OSError as exc:
                raise conflict(f"The folder of {key!r} is in use: {exc.strerror}.") from None

    def delete_object(
        self, bucket: str, name: str, generation: int | None = None, cond: Preconditions | None = None
    ) -> None:
        self._bucket_dir(bucket)
        path = self._path(bucket, name)
        with self._commit:
            current = self._current(bucket, name)
            if current is None or (generation is not None and generation != current.generation):
                raise no_such_object(bucket, name)
            (cond or Preconditions()).check(current)
            if name.endswith("/"):
                self.store.delete_object(bucket, name)
                with contextlib.suppress(OSError):
                    path.rmdir()  # the folder stays while it holds objects
            else:
                path.unlink(missing_ok=True)
                self.store.delete_object(bucket, name)

    def patch_object(
        self,
        bucket: str,
        name: str,
        body: Any,
        generation: int | None = None,
        cond: Preconditions | None = None,
    ) -> ObjectInfo:
        """contentType, custom metadata (a null value deletes a key) and the fixed keys: a new
        metageneration."""
        if not isinstance(body, dict):
            raise bad_request("Invalid object resource: expected a JSON object.")
        metadata_patch = body.get("metadata")
        if metadata_patch is not None and not isinstance(metadata_patch, dict):
            raise bad_request("Invalid value for metadata: expected a map of strings.")
        _, new, _ = parse_object_body(
            {k: v for k, v in body.items() if k not in ("metadata", "crc32c", "md5Hash")}
        )
        with self._commit:
            info = self.get_object(bucket, name, generation)
            (cond or Preconditions()).check(info)
            st = self._stat(bucket, name)
            if st is None:
                raise no_such_object(bucket, name)
            metadata = dict(info.metadata)
            for key, value in (metadata_patch or {}).items():
                if value is None:
                    metadata.pop(str(key), None)
                else:
                    metadata[str(key)] = str(value)
            fixed = dict(info.fixed)
            for key in FIXED_KEYS:
                if key in body and body[key] is None:
                    fixed.pop(key, None)
            fixed.update(new.fixed)
            patched = replace(
                info,
                metageneration=info.metageneration + 1,
                content_type=new.content_type or info.content_type,
                updated_ns=time.time_ns(),
                metadata=metadata,
                fixed=fixed,
            )
            self.store.put_object(_info_values(patched, st))
        return patched

    def copy_object(
        self,
        src_bucket: str,
        src_name: str,
        dst_bucket: str,
        dst_name: str,
        body: Any = None,
        src_generation: int | None = None,
        cond: Preconditions | None = None,
        src_cond: Preconditions | None = None,
    ) -> ObjectInfo:
        """rewriteTo / copyTo: the source's bytes (and metadata, unless the body sets some) as a new
        object."""
        _, meta, _ = parse_object_body(body or {}, "destination object")
        self._bucket_dir(dst_bucket)
        self._path(dst_bucket, dst_name)
        opened = self.open_object(src_bucket, src_name, src_generation, None)
        try:
            (src_cond or Preconditions()).check(opened.info)
            writer = self.new_writer()
            try:
                while block := opened.handle.read(_READ_BLOCK):
                    writer.write(block)
                writer.finish()
                crc, md5 = writer.hasher.digests()
                return self._install(
                    dst_bucket,
                    dst_name,
                    writer.path,
                    meta,
                    cond or Preconditions(),
                    crc,
                    md5,
                    keep=opened.info,
                )
            finally:
                writer.discard()
        finally:
            opened.close()

    def move_object(
        self,
        bucket: str,
        src_name: str,
        dst_name: str,
        cond: Preconditions | None = None,
        src_cond: Preconditions | None = None,
    ) -> ObjectInfo:
        """moveTo within a bucket: a rename, so the bytes are never copied."""
        if src_name.endswith("/") or dst_name.endswith("/"):
            raise bad_request("Folder markers cannot be moved; move the objects under them instead.")
        if src_name == dst_name:
            raise bad_request("The source and destination of a move are the same object.")
        with self._commit:
            info = self.get_object(bucket, src_name)
            (src_cond or Preconditions()).check(info)
            source = self._path(bucket, src_name)
            self._path(bucket, dst_name)
            # _install renames the file itself; its row moves with it.
            moved = self._install(
                bucket,
                dst_name,
                source,
                NewObject(),
                cond or Preconditions(),
                info.crc32c or "",
                info.md5 or "",
                keep=info,
            )
            self.store.delete_object(bucket, src_name)
        return moved

    # ------------------------------------------------------------ resumable sessions
    def start_session(
        self,
        bucket: str,
        name: str,
        meta: NewObject,
        cond: Preconditions,
        expected: Expected,
        total: int | None,
    ) -> str:
        self.check_writable(bucket, name, cond)
        self._prune_sessions()
        upload_id = secrets.token_urlsafe(24)
        state = {
            "bucket": bucket,
            "name": name,
            "meta": asdict(meta),
            "cond": asdict(cond),
            "expected": asdict(expected),
            "total": total,
            "created": time.time(),
        }
        (self.uploads / f"{upload_id}.data").touch()
        _write_json(self.uploads / f"{upload_id}.json", state)
        return upload_id

    def session(self, upload_id: str) -> UploadSession:
        if not _SESSION_ID.match(upload_id or ""):
            raise bad_request("Invalid upload_id.")
        path = self.uploads / f"{upload_id}.json"
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise StorageError(404, "notFound", f"No such upload session: {upload_id}") from None
        return UploadSession(self, upload_id, state)

    def _prune_sessions(self) -> None:
        """Sessions past Cloud Storage's week, and temp files of uploads a crash left behind."""
        now = time.time()
        for path in self.uploads.iterdir():
            with contextlib.suppress(FileNotFoundError):
                age = now - path.stat().st_mtime
                if path.suffix == ".json" and age > SESSION_TTL_SECONDS:
                    path.with_suffix(".data").unlink(missing_ok=True)
                    path.unlink(missing_ok=True)
                elif path.name.startswith("put-") and age > 24 * 3600:
                    path.unlink(missing_ok=True)


class UploadSession:
    """One resumable upload: state in <id>.json, bytes so far in <id>.data; held under a file lock."""

    def __init__(self, service: ObjectService, upload_id: str, state: dict[str, Any]) -> None:
        self.service = service
        self.id = upload_id
        self.state = state
        self.data_path = service.uploads / f"{upload_id}.data"
        self._lock_fd: int | None = None

    def __enter__(self) -> UploadSession:
        fd = os.open(self.service.uploads / f"{self.id}.json", os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise StorageError(
                503, "backendError", "Another request is writing to this upload session; retry it."
            ) from None
        self._lock_fd = fd
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    @property
    def bucket(self) -> str:
        return str(self.state["bucket"])

    @property
    def name(self) -> str:
        return str(self.state["name"])

    @property
    def done(self) -> bool:
        return "done" in self.state

    @property
    def total(self) -> int | None:
        total = self.state.get("total")
        return int(total) if total is not None else None

    def size(self) -> int:
        try:
            return self.data_path.stat().st_size
        except FileNotFoundError:
            return 0

    def result(self) -> ObjectInfo:
        """The object a finished session wrote (as it is now)."""
        return self.service.get_object(self.bucket, self.name)

    def chunk_writer(self, start: int, length: int | None = None) -> ChunkWriter:
        """A writer for the chunk at `start` of `length` bytes (None: up to the end of the body)."""
        size = self.size()
        if start > size:
            raise bad_request(
                f"Invalid Content-Range: the chunk starts at byte {start} but the session has {size} bytes; "
                "query it (Content-Range: bytes */*) and resend from there."
            )
        return ChunkWriter(self.data_path, size - start, length)

    def finish(self, total: int, sent: Expected) -> ObjectInfo:
        """Check the bytes against the total and every checksum sent, then install the object."""
        size = self.size()
        if self.total is not None and total != self.total:
            raise bad_request(
                f"Invalid Content-Range: the total {total} differs from X-Upload-Content-Length {self.total}."
            )
        if size != total:
            raise bad_request(f"Invalid Content-Range: the upload has {size} bytes, not {total}.")
        with open(self.data_path, "rb") as handle:
            crc, md5, _ = hash_file(handle)
        try:
            Expected(**self.state["expected"]).merged(sent).verify(crc, md5)
        except StorageError:
            self.cancel()  # GCS ends a session whose checksum fails
            raise
        meta = self.state["meta"]
        info = self.service._install(
            self.bucket,
            self.name,
            self.data_path,
            NewObject(meta["content_type"], dict(meta["metadata"]), dict(meta["fixed"])),
            Preconditions(**self.state["cond"]),
            crc,
            md5,
        )
        self.state["done"] = {"generation": info.generation}
        _write_json(self.service.uploads / f"{self.id}.json", self.state)
        return info

    def cancel(self) -> None:
        self.data_path.unlink(missing_ok=True)
        (self.service.uploads / f"{self.id}.json").unlink(missing_ok=True)


class ChunkWriter:
    """Appends a chunk to a session's bytes, skipping the bytes it already holds (a resent chunk)."""

    def __init__(self, path: Path, skip: int, length: int | None) -> None:
        self._file: BinaryIO | None = open(path, "ab")  # noqa: SIM115 - closed by close()
        self._skip = skip
        self._room = length  # bytes past the chunk's declared end are never stored
        self.received = 0

    def write(self, data: bytes) -> None:
        assert self._file is not None
        self.received += len(data)
        if self._room is not None:
            data = data[: max(0, self._room)]
            self._room -= len(data)
        if self._skip >= len(data):
            self._skip -= len(data)
            return
        self._file.write(data[self._skip :])
        self._skip = 0

    def close(self) -> None:
        if self._file is not None:
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            self._file = None


# ---------------------------------------------------------------- helpers
def _valid_bucket(name: str) -> bool:
    try:
        check_bucket_name(name)
    except StorageError:
        return False
    return True


def _encode_token(last: str, is_prefix: bool) -> str:
    raw = json.dumps({"a": last, "p": is_prefix}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_token(token: str) -> dict[str, Any]:
    try:
        data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        if isinstance(data, dict) and isinstance(data.get("a"), str) and isinstance(data.get("p"), bool):
            return data
    except (ValueError, binascii.Error):
        pass
    raise bad_request("Invalid value for pageToken: pass the nextPageToken of the previous page.")


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)


def _rename(source: Path, target: Path, staging: Path) -> None:
    """Atomically replace target by source; across filesystems, by way of a staging copy next to it."""
    try:
        os.replace(source, target)
        return
    except OSError as exc:
        if exc.errno != errno.EXDEV:
            raise
    staging.mkdir(parents=True, exist_ok=True)
    staged = staging / f"{secrets.token_hex(12)}.tmp"
    try:
        shutil.copyfile(source, staged)
        os.replace(staged, target)
    finally:
        staged.unlink(missing_ok=True)
    source.unlink(missing_ok=True)
