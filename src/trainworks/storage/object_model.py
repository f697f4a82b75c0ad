"""The values of the Cloud Storage JSON API object service: errors, names, preconditions and resources.

StorageError and its constructors, checksums (Hasher, hash_file) and the durable close of new bytes
(close_durably), bucket and object name checks, Preconditions, what a client sends for a new object
(NewObject, Expected, parse_object_body), and what the service answers (ObjectInfo, BucketInfo, their JSON
resources, ObjectPage). No file paths and no HTTP here: open files only.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, BinaryIO
from urllib.parse import quote

import google_crc32c

from trainworks.storage.gcs import StoragePathError, is_bucket_name, parse_gcs_uri

MAX_NAME_BYTES = 1024
MAX_SEGMENT_BYTES = 255  # a file name on Linux file systems
MAX_PAGE = 1000
DEFAULT_CONTENT_TYPE = "application/octet-stream"
READ_BLOCK = 1 << 20
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
        block = os.pread(fd, READ_BLOCK, offset)
        if not block:
            break
        hasher.update(block)
        offset += len(block)
    crc, md5 = hasher.digests()
    return crc, md5, hasher.size


def close_durably(handle: BinaryIO) -> None:
    """Close a file of new bytes once they are on disk, so that no one sees bytes a crash could lose."""
    handle.flush()
    os.fsync(handle.fileno())
    handle.close()


def check_bucket_name(bucket: str) -> str:
    if not is_bucket_name(bucket):
        raise bad_request(
            f"Invalid bucket name: {bucket[:300]!r}. Bucket names use 3-222 lowercase letters, digits, "
            "dots, dashes and underscores, and start and end with a letter or digit."
        )
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
