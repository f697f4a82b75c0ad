"""Code staging without image rebuilds: the user's package as a deterministic zip named by its content.

The zip lands at ``gs://<code_bucket>/runs/<package>-<hash>.zip``; an object of that name already holds
exactly this code, so it is not uploaded again. The run configuration is staged beside it, per run.
"""

from __future__ import annotations

import io
import stat
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from trainworks.code_staging.sources import SourceFile, content_digest, read_sources
from trainworks.code_staging.store import CodeStore, Progress

#: Every entry gets this timestamp, so the zip's bytes depend on the content only (zip's epoch is 1980).
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)
HASH_LENGTH = 12


class PackageError(ValueError):
    """The package folder cannot be staged (missing, empty, not a directory)."""


@dataclass(frozen=True)
class PackageSources:
    """A package folder read and hashed, not yet zipped: enough to know whether it is staged already."""

    package: str  # the top-level package name (the folder's name)
    files: tuple[SourceFile, ...]
    digest: str

    @property
    def short_hash(self) -> str:
        return self.digest[:HASH_LENGTH]

    @property
    def object_name(self) -> str:
        return f"runs/{self.package}-{self.short_hash}.zip"

    def zip(self) -> bytes:
        """The files under the package's name (so `import <name>` works from the zip), deterministically."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=6) as archive:
            for source in self.files:
                info = zipfile.ZipInfo(f"{self.package}/{source.path}", date_time=_FIXED_TIME)
                info.external_attr = ((0o755 if source.executable else 0o644) | stat.S_IFREG) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, source.content)
        return buffer.getvalue()


@dataclass(frozen=True)
class StagedCode:
    uri: str
    digest: str
    size: int  # bytes uploaded; 0 when the object was already there
    files: int
    uploaded: bool  # False: an identical object was already there


def read_package(package_dir: Path) -> PackageSources:
    root = Path(package_dir).resolve()
    if not root.is_dir():
        raise PackageError(f"the package directory {package_dir} does not exist or is not a directory")
    files = read_sources(root)
    if not files:
        raise PackageError(f"the package directory {package_dir} has no files to stage")
    return PackageSources(root.name, files, content_digest(files))


def stage_code(
    store: CodeStore,
    package_dir: Path,
    code_bucket: str,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
) -> StagedCode:
    """Upload the package zip unless an object with its content hash is already there (then nothing is
    zipped either: unchanged code costs a read, a hash and one metadata request)."""
    sources = read_package(package_dir)
    uri = f"gs://{code_bucket}/{sources.object_name}"
    if store.exists(uri):
        return StagedCode(uri, sources.digest, 0, len(sources.files), uploaded=False)
    data = sources.zip()
    store.ensure_bucket(code_bucket)
    if on_total is not None:
        on_total(len(data))
    store.put_bytes(uri, data, progress)
    return StagedCode(uri, sources.digest, len(data), len(sources.files), uploaded=True)


def config_uri(code_bucket: str, run_id: str) -> str:
    return f"gs://{code_bucket}/runs/{run_id}/run.yaml"


def ledger_uri(code_bucket: str, run_id: str) -> str:
    return f"gs://{code_bucket}/runs/{run_id}/capacity.json"


def stage_text(store: CodeStore, uri: str, text: str) -> str:
    store.put_bytes(uri, text.encode())
    return uri
