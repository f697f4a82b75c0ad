"""The object service of the Cloud Storage JSON API: buckets and objects as folders and files under the
local bucket root.

Every object is the file `<bucket root>/<bucket>/<name>`, so what jobs write through /gcs is an object too.
What a file cannot carry (content type, custom metadata, generation, checksums) lives in the SQLite store of
object_meta.py. A row describes one state of its file (inode, size, mtime): a file changed behind the API's
back no longer matches its row, and its metadata is then derived from the file (generation = mtime in ns)
and its checksums computed and cached. A name ending in `/` is a folder marker: a directory with a row.

New objects are written to a temp file under `<home>/uploads` and renamed into place, so a partly written
object is never visible; uploads.py keeps the resumable sessions there. The values (errors, preconditions,
resources) are in object_model.py, the listing order and page tokens in object_listing.py. No HTTP here:
kinds/storage_objects/routes.py speaks the wire protocol.
"""

from __future__ import annotations

import contextlib
import errno
import mimetypes
import os
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, BinaryIO

from trainworks.kernel.errors import ApiError
from trainworks.storage.bucket_projects import register_meta_path
from trainworks.storage.gcs import ObjectStore, StoragePathError
from trainworks.storage.object_listing import decode_page_token, encode_page_token, has_object, walk_names
from trainworks.storage.object_meta import (
    MetaStore,
    bucket_info,
    file_signature,
    row_info,
    row_matches_file,
    row_values,
)
from trainworks.storage.object_model import (
    DEFAULT_CONTENT_TYPE,
    FIXED_KEYS,
    MAX_PAGE,
    READ_BLOCK,
    BucketInfo,
    Expected,
    Hasher,
    NewObject,
    ObjectInfo,
    ObjectPage,
    Preconditions,
    StorageError,
    bad_request,
    check_bucket_name,
    check_object_name,
    close_durably,
    conflict,
    hash_file,
    no_such_bucket,
    no_such_object,
    parse_object_body,
)
from trainworks.storage.uploads import Uploads, UploadSession


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
            close_durably(self._file)
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
        self.uploads = Uploads(Path(home) / "uploads", self)
        self.store = MetaStore(Path(home) / "objects-meta" / "objects.db")
        register_meta_path(self.root, Path(home) / "objects-meta" / "objects.db")  # bucket owners live there
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
        return bucket_info(row)

    def list_buckets(
        self, prefix: str = "", page_token: str | None = None, max_results: int = MAX_PAGE
    ) -> tuple[list[BucketInfo], str | None]:
        after = decode_page_token(page_token)["a"] if page_token else ""
        names = sorted(
            entry.name
            for entry in os.scandir(self.root)
            if entry.is_dir(follow_symlinks=False)
            and entry.name.startswith(prefix)
            and entry.name > after
            and _valid_bucket(entry.name)
        )
        page = names[:max_results]
        token = encode_page_token(page[-1], False) if len(names) > max_results else None
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
            if has_object(path, "", self.store.markers(bucket)):
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
            return row_info(row, size=0)
        if row is not None and row_matches_file(row, st):
            return row_info(row)
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
                    if file_signature(os.fstat(reading.fileno())) != file_signature(st):
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
        if file_signature(after) == file_signature(st) and size == st.st_size:
            with self._commit:
                # Only while the file is still this one: a write may have just put its own row in place.
                if self._stat(bucket, name) is not None and file_signature(path.stat()) == file_signature(st):
                    self.store.put_object(row_values(info, st))
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
        if name.endswith("/") or (row is not None and row_matches_file(row, st)):
            assert row is not None
            return row_info(row, size=0 if name.endswith("/") else None)
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
        token: dict[str, Any] = decode_page_token(page_token) if page_token else {"a": "", "p": False}
        after: str = token["a"]
        skip = after if token["p"] else None
        markers = self.store.markers(bucket)
        names: list[str] = []
        prefixes: list[str] = []
        last: tuple[str, bool] | None = None  # the last entry of the page, where the next one resumes
        next_token = None
        # Folders fold into prefixes without being walked, unless offsets must look at every name.
        collapse = delimiter == "/" and not start_offset and not end_offset
        for name, is_prefix in walk_names(bucket_dir, "", markers, prefix, after, skip, collapse):
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
                next_token = encode_page_token(*last)
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

    # ------------------------------------------------------------ writing objects
    def new_writer(self) -> ObjectWriter:
        return ObjectWriter(self.uploads.temp_path())

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
            return self.install(bucket, name, writer.path, meta, cond or Preconditions(), crc, md5)
        finally:
            writer.discard()  # gone already when it was installed

    def install(
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
            self.store.put_object(row_values(info, st))
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
        if has_object(self.root / bucket, key, markers):
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
            self.store.put_object(row_values(patched, st))
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
                while block := opened.handle.read(READ_BLOCK):
                    writer.write(block)
                writer.finish()
                crc, md5 = writer.hasher.digests()
                return self.install(
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
            # install renames the file itself; its row moves with it.
            moved = self.install(
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
    def session(self, upload_id: str) -> UploadSession:
        return self.uploads.session(upload_id)


def _valid_bucket(name: str) -> bool:
    try:
        check_bucket_name(name)
    except StorageError:
        return False
    return True


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
