"""Bucket ownership (storage/bucket_projects.py): claims, visibility, concurrency and existing store files."""

from __future__ import annotations

import multiprocessing
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from trainworks.storage.bucket_projects import (
    Owner,
    bucket_owner,
    bucket_project,
    claim_bucket,
    claim_owner,
    meta_path,
    register_meta_path,
    release_bucket,
    visible_buckets,
)
from trainworks.storage.gcs import StoragePathError
from trainworks.storage.objects import ObjectService

_OLD_SCHEMA = """
CREATE TABLE buckets (
    name TEXT PRIMARY KEY, created_ns INTEGER NOT NULL, updated_ns INTEGER NOT NULL, location TEXT NOT NULL,
    storage_class TEXT NOT NULL, metageneration INTEGER NOT NULL, project_number TEXT,
    labels TEXT NOT NULL DEFAULT '{}'
);
INSERT INTO buckets VALUES ('old-bucket', 1, 1, 'US-CENTRAL1', 'STANDARD', 1, '123', '{}');
"""


@pytest.fixture
def root(tmp_path: Path) -> Path:
    buckets = tmp_path / "home" / "buckets"
    buckets.mkdir(parents=True)
    return buckets


def test_unowned_until_claimed_and_the_first_claim_wins(root: Path) -> None:
    (root / "shared").mkdir()
    assert bucket_project(root, "shared") is None
    assert claim_bucket(root, "shared", "alpha") == "alpha"
    assert claim_bucket(root, "shared", "beta") == "alpha"  # idempotent: the owner stays
    assert claim_bucket(root, "shared", "alpha") == "alpha"
    assert bucket_project(root, "shared") == "alpha"


def test_a_bucket_may_be_claimed_before_its_folder_exists(root: Path) -> None:
    assert claim_bucket(root, "later", "alpha") == "alpha"
    assert bucket_project(root, "later") == "alpha"
    assert visible_buckets(root, "alpha") == []  # no folder yet
    (root / "later").mkdir()
    assert visible_buckets(root, "alpha") == ["later"]
    assert visible_buckets(root, "beta") == []


def test_visible_buckets_are_own_and_unowned(root: Path) -> None:
    for name in ("a-out", "b-out", "by-hand", ".hidden", "UPPER"):
        (root / name).mkdir()
    (root / "a-file").write_text("not a bucket")
    claim_bucket(root, "a-out", "alpha")
    claim_bucket(root, "b-out", "beta")
    assert visible_buckets(root, "alpha") == ["a-out", "by-hand"]
    assert visible_buckets(root, "beta") == ["b-out", "by-hand"]
    assert visible_buckets(root, "gamma") == ["by-hand"]


def test_owner_known_by_id_and_number(root: Path) -> None:
    (root / "numbered").mkdir()
    owner = claim_owner(root, "numbered", "alpha", "123456789012")
    assert owner.includes("alpha") and owner.includes("123456789012") and not owner.includes("beta")
    assert visible_buckets(root, "123456789012") == ["numbered"]
    # A claim first recorded by ID learns the number from a later claim by the same project.
    claim_bucket(root, "by-id", "beta")
    assert bucket_owner(root, "by-id") == Owner("beta", None)
    assert claim_owner(root, "by-id", "beta", "222") == Owner("beta", "222")
    owner = bucket_owner(root, "by-id")
    assert owner is not None and owner.project_number == "222"
    # Another project's number does not overwrite it.
    claim_owner(root, "by-id", "gamma", "333")
    assert bucket_owner(root, "by-id") == owner


def test_release_frees_the_name(root: Path) -> None:
    claim_bucket(root, "gone", "alpha")
    release_bucket(root, "gone")
    assert bucket_project(root, "gone") is None
    assert claim_bucket(root, "gone", "beta") == "beta"


def test_invalid_names_are_refused(root: Path) -> None:
    for name in ("../escape", "a/b", "x", "Upper-Case", "bkt\n"):
        with pytest.raises(StoragePathError):
            claim_bucket(root, name, "alpha")


def test_no_store_yet_means_everything_is_unowned(tmp_path: Path) -> None:
    root = tmp_path / "empty" / "buckets"
    root.mkdir(parents=True)
    (root / "plain").mkdir()
    assert bucket_project(root, "plain") is None
    assert visible_buckets(root, "alpha") == ["plain"]
    assert not meta_path(root).exists()  # reads create nothing
    assert visible_buckets(tmp_path / "missing", "alpha") == []


def test_concurrent_claims_from_threads_agree_on_one_owner(root: Path) -> None:
    projects = [f"p{i}" for i in range(16)]
    with ThreadPoolExecutor(8) as pool:
        owners = list(pool.map(lambda p: claim_bucket(root, "contested", p), projects))
    assert len(set(owners)) == 1 and owners[0] in projects


def _claim_in_child(root: str, project: str, queue: multiprocessing.Queue[str]) -> None:
    queue.put(claim_bucket(Path(root), "raced", project))


def test_concurrent_claims_from_processes_agree_on_one_owner(root: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[str] = ctx.Queue()
    procs = [ctx.Process(target=_claim_in_child, args=(str(root), f"p{i}", queue)) for i in range(4)]
    for proc in procs:
        proc.start()
    owners = [queue.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(timeout=120)
        assert proc.exitcode == 0
    assert len(set(owners)) == 1
    assert bucket_project(root, "raced") == owners[0]


def test_the_object_service_registers_its_store_for_a_bucket_root_elsewhere(tmp_path: Path) -> None:
    home = tmp_path / "home"
    root = tmp_path / "elsewhere"
    service = ObjectService(root, home)
    try:
        service.insert_bucket({"name": "made-by-api"}, "alpha")
        claim_bucket(root, "made-by-api", "alpha")
        assert meta_path(root) == (home / "objects-meta" / "objects.db").resolve()
        assert service.store.bucket_row("made-by-api") is not None  # same file as the bucket rows
        conn = sqlite3.connect(home / "objects-meta" / "objects.db")
        assert conn.execute("SELECT project FROM bucket_owners").fetchall() == [("alpha",)]
        conn.close()
    finally:
        service.close()


def test_a_process_without_the_service_finds_the_default_layout(root: Path) -> None:
    (root / "seen").mkdir()
    claim_bucket(root, "seen", "alpha")
    code = (
        "import sys; from pathlib import Path; from trainworks.storage.bucket_projects import *; "
        "r = Path(sys.argv[1]); print(bucket_project(r, 'seen'), visible_buckets(r, 'beta'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True, timeout=120
    )
    assert out.stdout.strip() == "alpha []"


def test_an_existing_store_file_keeps_working(tmp_path: Path) -> None:
    home = tmp_path / "home"
    db = home / "objects-meta" / "objects.db"
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.executescript(_OLD_SCHEMA)
    conn.close()
    root = home / "buckets"
    (root / "old-bucket").mkdir(parents=True)
    register_meta_path(root, db)
    assert bucket_project(root, "old-bucket") is None  # the owners table is made on first use
    assert claim_bucket(root, "old-bucket", "alpha") == "alpha"
    service = ObjectService(root, home)
    try:
        assert service.get_bucket("old-bucket").project_number == "123"
    finally:
        service.close()
