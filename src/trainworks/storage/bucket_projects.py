"""Which project owns each local bucket.

A bucket belongs to the project that made it: through the storage API (bucket insert with `project=`) or by
naming it, while unowned, as an output of a job, tuning job, pipeline or persistent resource. A folder an
operator made by hand under the bucket root has no owner until then: every project may use it. The owners are
rows of the `bucket_owners` table in the metadata SQLite of object_meta.py (`<home>/objects-meta/objects.db`),
beside the buckets and outside what jobs see at /gcs.

The functions take the bucket root, not the store: the object service registers where its store is
(`register_meta_path`); a process that never built one (a helper started for a replica) finds it in the
default layout, `<home>/buckets` beside `<home>/objects-meta`. An owner is recorded with the project ID it
was claimed under and, when known, the project's number, since paths may name a project either way. Reads
are one indexed query on a connection kept per process, cheap enough to run for every replica start.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from trainworks.storage.gcs import StoragePathError, is_bucket_name
from trainworks.storage.object_meta import create_schema

_registered: dict[Path, Path] = {}
_connections: dict[tuple[int, Path], sqlite3.Connection] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Owner:
    """The project that owns a bucket, as an ID (or a number, when claimed under a number only)."""

    project: str
    project_number: str | None = None

    def includes(self, project: str) -> bool:
        """Whether `project` (an ID or a number) names the owning project."""
        return project == self.project or (self.project_number is not None and project == self.project_number)


def register_meta_path(bucket_root: Path, db_path: Path) -> None:
    """Where the metadata store of the buckets under `bucket_root` is (the object service says so)."""
    with _lock:
        _registered[Path(bucket_root).resolve()] = Path(db_path).resolve()


def meta_path(bucket_root: Path) -> Path:
    root = Path(bucket_root).resolve()
    with _lock:
        registered = _registered.get(root)
    return registered or root.parent / "objects-meta" / "objects.db"


def _connection(bucket_root: Path, create: bool) -> sqlite3.Connection | None:
    """This process's connection to the store, or None when there is no store yet and `create` is false."""
    path = meta_path(bucket_root)
    # Keyed by PID too: a connection must not be used across fork (the zygote forks replicas).
    key = (os.getpid(), path)
    with _lock:
        conn = _connections.get(key)
        if conn is not None:
            return conn
        if not create and not path.exists():
            return None
        path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(str(path), timeout=30.0, check_same_thread=False, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        create_schema(conn)
        _connections[key] = conn
        return conn


def _check_name(bucket: str) -> None:
    if not is_bucket_name(bucket):
        raise StoragePathError(f"invalid bucket name {bucket[:100]!r}")


def bucket_owner(bucket_root: Path, bucket: str) -> Owner | None:
    """The owner of `bucket`, or None when it has none (or does not exist)."""
    conn = _connection(bucket_root, create=False)
    if conn is None:
        return None
    with _lock:
        row = conn.execute(
            "SELECT project, project_number FROM bucket_owners WHERE name = ?", (bucket,)
        ).fetchone()
    return None if row is None else Owner(row[0], row[1])


def bucket_project(bucket_root: Path, bucket: str) -> str | None:
    """The ID of the project owning `bucket`; None when it is unowned."""
    owner = bucket_owner(bucket_root, bucket)
    return None if owner is None else owner.project


def bucket_owners(bucket_root: Path) -> dict[str, Owner]:
    """Every recorded owner, by bucket name."""
    conn = _connection(bucket_root, create=False)
    if conn is None:
        return {}
    with _lock:
        rows = conn.execute("SELECT name, project, project_number FROM bucket_owners").fetchall()
    return {name: Owner(project, number) for name, project, number in rows}


def visible_buckets(bucket_root: Path, project: str) -> list[str]:
    """The buckets a job of `project` may see: those it owns and the unowned ones, sorted by name."""
    root = Path(bucket_root)
    owners = bucket_owners(root)
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    names: list[str] = []
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        owner = owners.get(entry.name)
        if owner is not None and not owner.includes(project):
            continue
        if is_bucket_name(entry.name):  # else not a bucket (e.g. a hidden folder)
            names.append(entry.name)
    return sorted(names)


def claim_owner(bucket_root: Path, bucket: str, project: str, project_number: str | None = None) -> Owner:
    """Record `project` as the owner of `bucket` unless it has one; the owner either way.

    Atomic across threads and processes (one INSERT OR IGNORE); the bucket folder need not exist yet (a job
    that names it as its output makes it later)."""
    _check_name(bucket)
    conn = _connection(bucket_root, create=True)
    assert conn is not None
    with _lock:
        conn.execute(
            "INSERT OR IGNORE INTO bucket_owners (name, project, project_number, claimed_ns)"
            " VALUES (?, ?, ?, ?)",
            (bucket, project, project_number, time.time_ns()),
        )
        if project_number is not None:
            # An owner first recorded without its number learns it.
            conn.execute(
                "UPDATE bucket_owners SET project_number = ? "
                "WHERE name = ? AND project = ? AND project_number IS NULL",
                (project_number, bucket, project),
            )
        row = conn.execute(
            "SELECT project, project_number FROM bucket_owners WHERE name = ?", (bucket,)
        ).fetchone()
    return Owner(row[0], row[1])


def claim_bucket(bucket_root: Path, bucket: str, project: str) -> str:
    """Record `project` as the owner of `bucket` if it is unowned, and return the owner's project ID."""
    return claim_owner(bucket_root, bucket, project).project


def release_bucket(bucket_root: Path, bucket: str) -> None:
    """Forget the owner of a deleted bucket: its name is free for any project again, as in Cloud Storage."""
    conn = _connection(bucket_root, create=False)
    if conn is None:
        return
    with _lock:
        conn.execute("DELETE FROM bucket_owners WHERE name = ?", (bucket,))
