"""gs:// URI parsing and resolution.

By default every bucket is a folder under a local bucket root, so `gs://b/x` is `<root>/b/x`; when real Cloud
Storage is configured the same URIs go to gcsfs. Paths that would leave their bucket are rejected.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Matched with fullmatch: '$' would also accept a name ending in a line break ("bkt\n").
_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")


MAX_OBJECT_NAME = 1024  # bytes of UTF-8, as Cloud Storage allows
_NAME_MAX = 255  # bytes in one path component on local filesystems


class StoragePathError(ValueError):
    """A gs:// URI that is malformed or escapes its bucket."""


@dataclass(frozen=True)
class GcsPath:
    bucket: str
    key: str  # normalised object path inside the bucket, no leading slash; "" for the bucket itself

    @property
    def uri(self) -> str:
        return f"gs://{self.bucket}/{self.key}"


def parse_gcs_uri(uri: str) -> GcsPath:
    if not uri.startswith("gs://"):
        raise StoragePathError(f"{uri!r} is not a gs:// URI")
    rest = uri[len("gs://") :]
    bucket, _, key = rest.partition("/")
    if not _BUCKET_RE.fullmatch(bucket) or ".." in bucket:
        raise StoragePathError(f"invalid bucket name {bucket!r} in {uri!r}")
    if "\x00" in key or "\\" in key:
        raise StoragePathError(f"invalid object name in {uri!r}")
    if len(key.encode("utf-8", "surrogatepass")) > MAX_OBJECT_NAME:
        raise StoragePathError(f"the object name in {uri[:100]!r}... is longer than {MAX_OBJECT_NAME} bytes")
    parts = [p for p in key.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise StoragePathError(f"{uri!r} escapes its bucket: '..' is not allowed in object names")
    normalised = posixpath.join(*parts) if parts else ""
    if key.endswith("/") and normalised:
        normalised += "/"
    return GcsPath(bucket=bucket, key=normalised)


def is_bucket_name(name: str) -> bool:
    """Whether `name` is a whole bucket name ("bkt/x" parses as bucket "bkt" with a key, so it is not)."""
    try:
        return parse_gcs_uri(f"gs://{name}/").bucket == name
    except StoragePathError:
        return False


class ObjectStore:
    """Resolves gs:// URIs to an fsspec filesystem path."""

    def __init__(self, bucket_root: Path | None, protocol: str = "file", **storage_options: Any) -> None:
        self.bucket_root = bucket_root
        self.protocol = protocol
        import fsspec  # here, not at the top: the URI rules above are on the CLI's start path

        self.fs = fsspec.filesystem(protocol, **storage_options)

    @property
    def is_local(self) -> bool:
        return self.protocol == "file" and self.bucket_root is not None

    def local_path(self, uri: str) -> Path:
        """The local file behind a gs:// URI (local bucket root only)."""
        if not self.is_local or self.bucket_root is None:
            raise StoragePathError("objects are not stored locally")
        path = parse_gcs_uri(uri)
        if any(len(part.encode("utf-8", "surrogatepass")) > _NAME_MAX for part in path.key.split("/")):
            # The filesystem would refuse it (ENAMETOOLONG): no such object can exist locally.
            raise StoragePathError(f"{uri[:100]!r}... has a path segment longer than {_NAME_MAX} bytes")
        resolved = (self.bucket_root / path.bucket / path.key).resolve()
        bucket_dir = (self.bucket_root / path.bucket).resolve()
        if resolved != bucket_dir and bucket_dir not in resolved.parents:
            raise StoragePathError(f"{uri!r} escapes its bucket")
        return resolved

    def fs_path(self, uri: str) -> str:
        if self.is_local:
            return str(self.local_path(uri))
        path = parse_gcs_uri(uri)
        return f"{path.bucket}/{path.key}"

    def read_bytes(self, uri: str) -> bytes:
        with self.fs.open(self.fs_path(uri), "rb") as handle:
            data: bytes = handle.read()
            return data

    def write_bytes(self, uri: str, data: bytes) -> None:
        target = self.fs_path(uri)
        if self.is_local:
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        with self.fs.open(target, "wb") as handle:
            handle.write(data)

    def exists(self, uri: str) -> bool:
        return bool(self.fs.exists(self.fs_path(uri)))

    def ensure_bucket(self, bucket: str) -> None:
        if self.is_local and self.bucket_root is not None:
            parse_gcs_uri(f"gs://{bucket}/")
            (self.bucket_root / bucket).mkdir(parents=True, exist_ok=True)
