"""Property-based tests of gs:// path resolution and the storage API's bucket and object name checks.

No generated URI resolves outside its bucket's directory under the local bucket root: URIs that would are
refused with StoragePathError, and nothing else is ever raised. Names the storage API accepts map to
exactly one file inside their bucket; the rest are 400s.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from trainworks.storage.gcs import ObjectStore, StoragePathError, parse_gcs_uri
from trainworks.storage.object_model import StorageError, check_bucket_name, check_object_name

SETTINGS = settings(
    max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
BUCKET = re.compile(r"[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]")
# Object-name pieces chosen to hit the edge cases: dot segments, separators, odd and control characters.
NAME_PIECES = st.sampled_from(
    [
        "/",
        ".",
        "..",
        "a",
        "b.txt",
        "\\",
        "\x00",
        "\n",
        "\r",
        " ",
        "%2e%2e",
        "~",
        "ü",
        "\u202e",
        "*",
        "?",
        "x" * 300,
    ]
)
NAMES = st.one_of(st.text(max_size=30), st.lists(NAME_PIECES, max_size=8).map("".join))
BUCKETS = st.one_of(
    st.sampled_from(
        ["bkt", "my-bucket", "a.b", "a..b", "Upper", "ab", "-ab", "ab-", "bkt\n", "b\x00k", "bkt/x"]
    ),
    st.text(alphabet="abz09.-_\n", min_size=1, max_size=8),
)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> ObjectStore:
    root = tmp_path_factory.mktemp("buckets")
    (root / "bkt").mkdir()
    return ObjectStore(root)


def _inside(path: Path, directory: Path) -> bool:
    return path == directory or directory in path.parents


@SETTINGS
@given(bucket=BUCKETS, name=NAMES)
@example(bucket="bkt", name="../other/x")
@example(bucket="bkt", name="a/../../x")
@example(bucket="bkt\n", name="x")  # found by this test: a bucket name ending in a line break was accepted
def test_parse_never_leaves_the_bucket(bucket: str, name: str) -> None:
    try:
        path = parse_gcs_uri(f"gs://{bucket}/{name}")
    except StoragePathError:
        return
    assert BUCKET.fullmatch(path.bucket) and ".." not in path.bucket
    assert ".." not in path.key.split("/") and not path.key.startswith("/")
    assert "\x00" not in path.key and "\\" not in path.key


@SETTINGS
@given(bucket=BUCKETS, name=NAMES)
def test_local_path_stays_inside_its_bucket_directory(store: ObjectStore, bucket: str, name: str) -> None:
    assert store.bucket_root is not None
    try:
        resolved = store.local_path(f"gs://{bucket}/{name}")
    except StoragePathError:
        return
    assert _inside(resolved, (store.bucket_root / bucket).resolve())
    assert _inside(resolved, store.bucket_root.resolve()) and resolved != store.bucket_root.resolve()


def test_symlink_out_of_a_bucket_is_refused(tmp_path: Path) -> None:
    (tmp_path / "root" / "bkt").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    (tmp_path / "root" / "bkt" / "link").symlink_to(tmp_path / "outside")
    store = ObjectStore(tmp_path / "root")
    with pytest.raises(StoragePathError, match="escapes its bucket"):
        store.local_path("gs://bkt/link/secret")


@SETTINGS
@given(bucket=BUCKETS)
# Found by this test: both were accepted, "bkt\n" through '$' and "bkt/x" as bucket "bkt" plus a key (an
# insert_bucket of "bkt/x" made a folder inside bucket bkt).
@example(bucket="bkt\n")
@example(bucket="bkt/x")
def test_bucket_names_are_checked_whole(bucket: str) -> None:
    try:
        assert check_bucket_name(bucket) == bucket
    except StorageError as exc:
        assert exc.status == 400
        return
    assert BUCKET.fullmatch(bucket) and ".." not in bucket


@SETTINGS
@given(name=NAMES)
def test_accepted_object_names_are_one_file_in_the_bucket(store: ObjectStore, name: str) -> None:
    try:
        assert check_object_name("bkt", name) == name
    except StorageError as exc:
        assert exc.status == 400 and exc.reason in ("invalid", "required")
        return
    assert name and len(name.encode("utf-8", "surrogatepass")) <= 1024
    assert not set(name) & {"\r", "\n", "\x00"}
    segments = name.split("/")
    assert not {"", ".", ".."} & set(segments[:-1]) and segments[-1] not in (".", "..")
    assert store.bucket_root is not None
    bucket_dir = (store.bucket_root / "bkt").resolve()
    resolved = store.local_path(f"gs://bkt/{name}")
    assert resolved.parent == bucket_dir.joinpath(*segments[:-1]) or resolved == bucket_dir.joinpath(
        *segments
    )
