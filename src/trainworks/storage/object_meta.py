"""The SQLite store of what an object's file cannot carry, and the conversions between its rows and values.

One row per object (content type, custom metadata, generations, checksums) and per bucket, in
`<home>/objects-meta/objects.db`, outside the buckets so it never collides with an object name (and no job
sees it through /gcs). The project that owns a bucket is a row of its own (`bucket_owners`, read and written
by bucket_projects.py): a folder made by hand has an owner without ever getting a bucket row. An object
row also records the state of the file it describes (inode, size, mtime: `file_signature`), so the service
can tell a row that still describes its file from one that a change behind the API's back left stale.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from collections.abc import Mapping
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from trainworks.storage.object_model import BucketInfo, ObjectInfo

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
CREATE TABLE IF NOT EXISTS bucket_owners (
    name TEXT PRIMARY KEY,
    project TEXT NOT NULL,
    project_number TEXT,
    claimed_ns INTEGER NOT NULL
);
"""


def create_schema(conn: sqlite3.Connection) -> None:
    """Make the tables of a metadata store (idempotent; files from older versions gain the new tables)."""
    conn.executescript(_SCHEMA)


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
            create_schema(self._conn)

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


def file_signature(st: os.stat_result) -> tuple[int, int, int]:
    """What identifies one state of a file: a row describes the file only while this matches."""
    return st.st_ino, st.st_size, st.st_mtime_ns


def row_matches_file(row: sqlite3.Row, st: os.stat_result) -> bool:
    """Whether an object row still describes the file: false once it changed behind the API's back."""
    return (row["ino"], row["size"], row["mtime_ns"]) == file_signature(st)


# The columns that hold JSON text; each other column is a field's value as it is.
_JSON_COLUMNS = frozenset({"metadata", "fixed", "labels"})
_OBJECT_FIELDS = tuple(f.name for f in fields(ObjectInfo))
_BUCKET_FIELDS = tuple(f.name for f in fields(BucketInfo))


def _row_fields(row: sqlite3.Row, names: tuple[str, ...], **given: Any) -> dict[str, Any]:
    """The dataclass fields `names` read from the columns of the same names (`given` ones are not read)."""
    return {
        name: given[name] if name in given else json.loads(row[name]) if name in _JSON_COLUMNS else row[name]
        for name in names
    }


def row_info(row: sqlite3.Row, size: int | None = None) -> ObjectInfo:
    """The object a row describes; `size` stands in for the row's (0 for a folder marker)."""
    return ObjectInfo(**_row_fields(row, _OBJECT_FIELDS, **({} if size is None else {"size": size})))


def row_values(info: ObjectInfo, st: os.stat_result) -> dict[str, Any]:
    """The object row of `info`, describing the file `st`."""
    values = asdict(info)
    values.update(
        ino=st.st_ino,
        size=st.st_size,
        mtime_ns=st.st_mtime_ns,
        metadata=json.dumps(info.metadata),
        fixed=json.dumps(info.fixed),
    )
    return values


def bucket_info(row: sqlite3.Row) -> BucketInfo:
    return BucketInfo(**_row_fields(row, _BUCKET_FIELDS))
