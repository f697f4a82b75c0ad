"""gs:// objects for staged code (the submitter's zips, autopackaged sdists), through gcsfs: real Cloud
Storage, or a Trainworks server's GCS JSON API.

One code path for both: a Trainworks server speaks the same JSON API at its own URL, so only the endpoint and
the credentials differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # fsspec itself comes with gcsfs, when a store is made: the CLI starts without it
    import fsspec

from trainworks.storage.gcs import parse_gcs_uri

#: Bytes handed to the filesystem per write (and per progress report).
CHUNK = 4 * 1024 * 1024

Progress = Callable[[int], None]  # called with the number of bytes just written


class StagingError(Exception):
    """A gs:// object could not be read or written; the message names the URI."""


class CodeStore:
    """Reads and writes gs:// URIs on one fsspec filesystem (gcsfs)."""

    def __init__(self, fs: fsspec.AbstractFileSystem) -> None:
        self.fs = fs

    @classmethod
    def for_endpoint(cls, endpoint: str, api_key: str | None = None) -> CodeStore:
        """A Trainworks server (or any GCS JSON API emulator) at `endpoint`; the key, when given, is sent as a
        bearer token, which the server accepts like an API key."""
        token: Any = "anon"
        if api_key:
            from google.oauth2.credentials import Credentials

            token = Credentials(token=api_key)
        return cls(_gcsfs(endpoint_url=endpoint.rstrip("/"), token=token))

    @classmethod
    def for_cloud(cls, project: str | None = None) -> CodeStore:
        """Real Cloud Storage with the application-default credentials."""
        return cls(_gcsfs(project=project) if project else _gcsfs())

    @staticmethod
    def _path(uri: str) -> str:
        path = parse_gcs_uri(uri)
        if not path.key:
            raise StagingError(f"{uri!r} names a bucket, not an object")
        return f"{path.bucket}/{path.key}"

    def exists(self, uri: str) -> bool:
        try:
            return bool(self.fs.exists(self._path(uri)))
        except OSError as exc:
            raise StagingError(f"could not check {uri}: {exc}") from exc

    def put_bytes(self, uri: str, data: bytes, progress: Progress | None = None) -> None:
        """Write the object in chunks (a resumable upload when it is large), reporting progress."""
        try:
            with self.fs.open(self._path(uri), "wb", block_size=CHUNK) as handle:
                for start in range(0, len(data), CHUNK):
                    chunk = data[start : start + CHUNK]
                    handle.write(chunk)
                    if progress is not None:
                        progress(len(chunk))
        except OSError as exc:
            raise StagingError(f"could not upload {uri}: {exc}") from exc
        finally:
            self.fs.invalidate_cache()

    def get_bytes(self, uri: str) -> bytes:
        try:
            data: bytes = self.fs.cat_file(self._path(uri))
            return data
        except FileNotFoundError:
            raise StagingError(f"{uri} does not exist") from None
        except OSError as exc:
            raise StagingError(f"could not read {uri}: {exc}") from exc

    def ensure_bucket(self, bucket: str) -> None:
        """Create the bucket when it does not exist (a Trainworks server's buckets are created on demand)."""
        parse_gcs_uri(f"gs://{bucket}/")
        try:
            if not self.fs.exists(bucket):
                self.fs.mkdir(bucket)
        except FileExistsError:
            pass
        except OSError as exc:
            raise StagingError(f"could not create the bucket gs://{bucket}: {exc}") from exc
        finally:
            self.fs.invalidate_cache()


def _gcsfs(**options: Any) -> fsspec.AbstractFileSystem:
    # A fresh instance per store: fsspec caches instances by their options, and listings are not cached so
    # "does this hash exist" is always asked of the server. The core class: gcsfs's default (extended) one
    # first asks a gRPC control plane for each bucket's layout, which a JSON API endpoint lacks (60 s stall).
    from gcsfs.core import GCSFileSystem

    return GCSFileSystem(skip_instance_cache=True, use_listings_cache=False, **options)
