"""Uploads in progress: resumable upload sessions, and the temp files of one-request uploads.

Both live in `<home>/uploads`. A resumable session keeps its state in `<id>.json` and the bytes received so
far in `<id>.data`, so it survives a server restart; a request works on it under a lock on its state file.
Its last chunk hands the bytes to the object service (ObjectService.install), which checks the preconditions
and renames them into place. Sessions expire after a week, as Cloud Storage's do.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import secrets
import time
from dataclasses import asdict
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, BinaryIO

from trainworks.storage.object_model import (
    Expected,
    NewObject,
    ObjectInfo,
    Preconditions,
    StorageError,
    bad_request,
    close_durably,
    hash_file,
)

if TYPE_CHECKING:  # objects.py builds the Uploads at run time: the type only, against the cycle
    from trainworks.storage.objects import ObjectService

SESSION_TTL_SECONDS = 7 * 24 * 3600  # Cloud Storage expires resumable sessions after a week
TEMP_TTL_SECONDS = 24 * 3600  # a one-request upload's temp file this old was left by a crash
_SESSION_ID = re.compile(r"^[A-Za-z0-9_-]{16,64}$")


class Uploads:
    """The uploads directory: starts and finds resumable sessions, names temp files, prunes the stale."""

    def __init__(self, directory: Path, objects: ObjectService) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.objects = objects

    def temp_path(self) -> Path:
        """A fresh file name for the bytes of a one-request upload (or a copy) until they are installed."""
        return self.directory / f"put-{secrets.token_hex(12)}.tmp"

    def start(
        self,
        bucket: str,
        name: str,
        meta: NewObject,
        cond: Preconditions,
        expected: Expected,
        total: int | None,
    ) -> str:
        """A new session for an object the caller may write (checked first); its upload id."""
        self.objects.check_writable(bucket, name, cond)
        self.prune()
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
        (self.directory / f"{upload_id}.data").touch()
        _write_json(self.directory / f"{upload_id}.json", state)
        return upload_id

    def session(self, upload_id: str) -> UploadSession:
        if not _SESSION_ID.match(upload_id or ""):
            raise bad_request("Invalid upload_id.")
        path = self.directory / f"{upload_id}.json"
        try:
            state = json.loads(path.read_text())
        except FileNotFoundError:
            raise StorageError(404, "notFound", f"No such upload session: {upload_id}") from None
        return UploadSession(self.objects, self.directory, upload_id, state)

    def prune(self) -> None:
        """Sessions past Cloud Storage's week, and temp files of uploads a crash left behind."""
        now = time.time()
        for path in self.directory.iterdir():
            with contextlib.suppress(FileNotFoundError):
                age = now - path.stat().st_mtime
                if path.suffix == ".json" and age > SESSION_TTL_SECONDS:
                    path.with_suffix(".data").unlink(missing_ok=True)
                    path.unlink(missing_ok=True)
                elif path.name.startswith("put-") and age > TEMP_TTL_SECONDS:
                    path.unlink(missing_ok=True)


class UploadSession:
    """One resumable upload: state in <id>.json, bytes so far in <id>.data; held under a file lock."""

    def __init__(
        self, objects: ObjectService, directory: Path, upload_id: str, state: dict[str, Any]
    ) -> None:
        self.objects = objects
        self.id = upload_id
        self.state = state
        self.state_path = directory / f"{upload_id}.json"
        self.data_path = directory / f"{upload_id}.data"
        self._lock_fd: int | None = None

    def __enter__(self) -> UploadSession:
        fd = os.open(self.state_path, os.O_RDONLY)
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
        return self.objects.get_object(self.bucket, self.name)

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
        info = self.objects.install(
            self.bucket,
            self.name,
            self.data_path,
            NewObject(meta["content_type"], dict(meta["metadata"]), dict(meta["fixed"])),
            Preconditions(**self.state["cond"]),
            crc,
            md5,
        )
        self.state["done"] = {"generation": info.generation}
        _write_json(self.state_path, self.state)
        return info

    def cancel(self) -> None:
        self.data_path.unlink(missing_ok=True)
        self.state_path.unlink(missing_ok=True)


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
            close_durably(self._file)
            self._file = None


def _write_json(path: Path, value: Any) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(value))
    os.replace(tmp, path)
