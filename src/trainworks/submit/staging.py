"""Code staging without image rebuilds: the user's package as a deterministic zip named by its content.

The zip lands at ``gs://<code_bucket>/runs/<package>-<hash>.zip``; an object of that name already holds
exactly this code, so it is not uploaded again. The run configuration is staged beside it, per run.
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from trainworks.submit.storage import CodeStore, Progress

#: Names never shipped: caches, VCS metadata and editor droppings change without the code changing.
EXCLUDED_DIRS = frozenset(
    {"__pycache__", ".git", ".hg", ".svn", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
)
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".swp")
EXCLUDED_FILES = frozenset({".DS_Store"})

#: Every entry gets this timestamp, so the zip's bytes depend on the content only (zip's epoch is 1980).
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
HASH_LENGTH = 12


class PackageError(ValueError):
    """The package folder cannot be staged (missing, empty, not a directory)."""


@dataclass(frozen=True)
class PackageArchive:
    package: str  # the top-level package name (the folder's name)
    digest: str  # sha256 over the files' paths, executable bits and contents
    data: bytes  # the zip
    files: int

    @property
    def short_hash(self) -> str:
        return self.digest[:HASH_LENGTH]

    @property
    def object_name(self) -> str:
        return f"runs/{self.package}-{self.short_hash}.zip"


@dataclass(frozen=True)
class StagedCode:
    uri: str
    digest: str
    size: int
    files: int
    uploaded: bool  # False: an identical object was already there


def _package_files(root: Path) -> Iterator[Path]:
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in EXCLUDED_DIRS)
        for name in sorted(filenames):
            if name in EXCLUDED_FILES or name.endswith(EXCLUDED_SUFFIXES):
                continue
            path = Path(dirpath) / name
            if path.is_file():
                yield path


def build_package_zip(package_dir: Path) -> PackageArchive:
    """Zip `package_dir` under its own name (so `import <name>` works from the zip), deterministically."""
    root = Path(package_dir).resolve()
    if not root.is_dir():
        raise PackageError(f"the package directory {package_dir} does not exist or is not a directory")
    package = root.name
    entries = sorted((p.relative_to(root).as_posix(), p) for p in _package_files(root))
    if not entries:
        raise PackageError(f"the package directory {package_dir} has no files to stage")
    digest = hashlib.sha256()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
        for relative, path in entries:
            content = path.read_bytes()
            executable = bool(path.stat().st_mode & stat.S_IXUSR)
            arcname = f"{package}/{relative}"
            # Length-prefixed fields: no two different file sets hash alike.
            for part in (arcname.encode(), b"x" if executable else b"-", content):
                digest.update(len(part).to_bytes(8, "big"))
                digest.update(part)
            info = zipfile.ZipInfo(arcname, date_time=_FIXED_TIME)
            info.external_attr = ((0o755 if executable else 0o644) | stat.S_IFREG) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content)
    data = buffer.getvalue()
    return PackageArchive(package=package, digest=digest.hexdigest(), data=data, files=len(entries))


def stage_code(
    store: CodeStore,
    package_dir: Path,
    code_bucket: str,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
) -> StagedCode:
    """Upload the package zip unless an object with its content hash is already there."""
    archive = build_package_zip(package_dir)
    uri = f"gs://{code_bucket}/{archive.object_name}"
    if store.exists(uri):
        return StagedCode(uri, archive.digest, len(archive.data), archive.files, uploaded=False)
    store.ensure_bucket(code_bucket)
    if on_total is not None:
        on_total(len(archive.data))
    store.put_bytes(uri, archive.data, progress)
    return StagedCode(uri, archive.digest, len(archive.data), archive.files, uploaded=True)


def config_uri(code_bucket: str, run_id: str) -> str:
    return f"gs://{code_bucket}/runs/{run_id}/run.yaml"


def ledger_uri(code_bucket: str, run_id: str) -> str:
    return f"gs://{code_bucket}/runs/{run_id}/capacity.json"


def stage_text(store: CodeStore, uri: str, text: str) -> str:
    store.put_bytes(uri, text.encode())
    return uri
