"""Code staging: a deterministic zip named by its content, uploaded once, importable from sys.path."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from io import BytesIO
from pathlib import Path

import fsspec
import pytest

from trainworks.code_staging.store import CodeStore, StagingError
from trainworks.submit.staging import PackageError, read_package, stage_code


def make_package(root: Path, body: str = "VALUE = 1\n") -> Path:
    pkg = root / "forecast"
    (pkg / "models").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "train.py").write_text("from forecast.models.core import VALUE\nprint('value', VALUE)\n")
    (pkg / "models" / "__init__.py").write_text("")
    (pkg / "models" / "core.py").write_text(body)
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "train.cpython-311.pyc").write_bytes(b"\x00junk")
    (pkg / ".DS_Store").write_bytes(b"junk")
    return pkg


def memory_store() -> CodeStore:
    # fsspec's in-memory filesystem: the same interface gcsfs has, without a network.
    return CodeStore(fsspec.filesystem("memory", skip_instance_cache=True))


def test_zip_is_deterministic_and_skips_caches(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    first = read_package(pkg)
    os.utime(pkg / "train.py", (1, 1))  # timestamps do not matter
    (pkg / "__pycache__" / "other.pyc").write_bytes(b"more junk")
    second = read_package(pkg)
    assert first.zip() == second.zip() and first.digest == second.digest
    names = zipfile.ZipFile(BytesIO(first.zip())).namelist()
    assert names == [
        "forecast/__init__.py",
        "forecast/models/__init__.py",
        "forecast/models/core.py",
        "forecast/train.py",
    ]
    assert first.object_name == f"runs/forecast-{first.digest[:12]}.zip"
    assert len(first.files) == 4


def test_one_changed_line_changes_the_hash(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    before = read_package(pkg)
    (pkg / "models" / "core.py").write_text("VALUE = 2\n")
    after = read_package(pkg)
    assert before.digest != after.digest and before.object_name != after.object_name


def test_executable_bit_is_part_of_the_content(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    before = read_package(pkg)
    (pkg / "train.py").chmod(0o755)
    assert read_package(pkg).digest != before.digest


def test_staging_uploads_once(tmp_path: Path) -> None:
    pkg = make_package(tmp_path)
    store = memory_store()
    sizes: list[int] = []
    first = stage_code(store, pkg, "code-bucket", progress=sizes.append)
    assert first.uploaded and sum(sizes) == first.size
    assert first.uri.startswith("gs://code-bucket/runs/forecast-")
    again = stage_code(store, pkg, "code-bucket", progress=sizes.append)
    assert not again.uploaded and again.uri == first.uri and again.size == 0 and sum(sizes) == first.size
    (pkg / "models" / "core.py").write_text("VALUE = 3\n")
    changed = stage_code(store, pkg, "code-bucket")
    assert changed.uploaded and changed.uri != first.uri


def test_the_zip_imports_from_sys_path(tmp_path: Path) -> None:
    archive = read_package(make_package(tmp_path / "src", body="VALUE = 42\n"))
    zipped = tmp_path / "code.zip"
    zipped.write_bytes(archive.zip())
    run = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys, runpy; sys.path.insert(0, {str(zipped)!r}); "
            "runpy.run_module('forecast.train', run_name='__main__')",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=True,
    )
    assert run.stdout.strip() == "value 42"


def test_bad_package_directories(tmp_path: Path) -> None:
    with pytest.raises(PackageError, match="does not exist"):
        read_package(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(PackageError, match="no files"):
        read_package(tmp_path / "empty")


def test_bucket_uris_are_checked() -> None:
    store = memory_store()
    with pytest.raises(StagingError, match="names a bucket"):
        store.exists("gs://code-bucket/")
    with pytest.raises(StagingError, match="does not exist"):
        store.get_bytes("gs://code-bucket/missing.zip")
