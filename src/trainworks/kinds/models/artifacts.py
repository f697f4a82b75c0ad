"""The registry's own copy of a model version's artifacts, and which framework saved them.

`ArtifactRegistry.register` copies an `artifactUri` directory (gs:// through the object store) under
`<home>/registry`: first into a staging folder, then renamed into place in one step, so a partial copy is
never registered. Later changes to the bucket do not change a registered version. `duplicate` copies a
registered version's copy the same way, for models:copy.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from trainworks.kernel.errors import ApiError, FieldViolation, invalid_argument
from trainworks.storage.gcs import ObjectStore, StoragePathError, parse_gcs_uri

TENSORFLOW = "tensorflow"
SKLEARN_JOBLIB = "sklearn-joblib"
SKLEARN_PICKLE = "sklearn-pickle"
XGBOOST = "xgboost"
PYTORCH = "pytorch"
CUSTOM = "custom"


def detect_format(files: Iterable[str]) -> str:
    """The framework of a model directory, from its file names (paths relative to the directory).

    The order settles mixed directories: a SavedModel may carry assets of any kind, and an XGBoost or
    scikit-learn model saved with joblib/pickle is served the same way as a scikit-learn one."""
    names = [PurePosixPath(f).name.lower() for f in files]
    suffixes = {PurePosixPath(n).suffix for n in names}
    if "saved_model.pb" in names or "saved_model.pbtxt" in names:
        return TENSORFLOW
    if ".joblib" in suffixes:
        return SKLEARN_JOBLIB
    if ".pkl" in suffixes or ".pickle" in suffixes:
        return SKLEARN_PICKLE
    if ".bst" in suffixes or ".ubj" in suffixes or "model.json" in names:
        return XGBOOST
    if (
        ".pt" in suffixes
        or ".pth" in suffixes
        or "model.mar" in names
        or any("torchscript" in n for n in names)
    ):
        return PYTORCH
    return CUSTOM


@dataclass(frozen=True)
class RegisteredArtifacts:
    path: Path  # the registry copy
    format: str
    files: int
    size: int  # bytes


def _bad_uri(description: str, path: str) -> ApiError:
    return invalid_argument([FieldViolation(path, description)])


class ArtifactRegistry:
    """Copies artifact directories into `root` and removes them again."""

    def __init__(self, objects: ObjectStore, root: Path) -> None:
        self.objects = objects
        self.root = root

    def register(
        self, uri: str, project_number: str, location: str, model_id: str, path: str = "model.artifact_uri"
    ) -> RegisteredArtifacts:
        """Copy the directory `uri` into the registry; INVALID_ARGUMENT naming `path` when it is not a
        gs:// directory holding at least one file."""
        try:
            parsed = parse_gcs_uri(uri)
            source = self.objects.fs_path(f"gs://{parsed.bucket}/{parsed.key.rstrip('/')}").rstrip("/")
        except StoragePathError as exc:
            raise _bad_uri(str(exc), path) from None
        fs = self.objects.fs
        if not fs.exists(source):
            raise _bad_uri(f"{uri} does not exist: upload the model files there first", path)
        if not fs.isdir(source):
            raise _bad_uri(f"{uri} is a file: give the directory that holds the model files", path)
        files = sorted(f for f in fs.find(source) if not fs.isdir(f))
        if not files:
            raise _bad_uri(f"{uri} is empty: the model directory holds no files", path)
        buckets = self.objects.bucket_root  # set whenever the store is local
        bucket_dir = (
            (buckets / parsed.bucket).resolve() if self.objects.is_local and buckets is not None else None
        )
        relative: list[str] = []
        sizes: list[int] = []

        def fill(staging: Path) -> None:
            staging.mkdir()
            for file in files:
                rel = posixpath.relpath(file, source)
                if bucket_dir is not None and bucket_dir not in Path(file).resolve().parents:
                    # A link inside a local bucket must not pull host files into the registry.
                    raise _bad_uri(f"{uri}: {rel} points outside its bucket", path)
                target = staging / rel
                target.parent.mkdir(parents=True, exist_ok=True)
                fs.get_file(file, str(target))
                sizes.append(target.stat().st_size)
                relative.append(rel)

        final = self._new_copy(project_number, location, model_id, fill)
        return RegisteredArtifacts(final, detect_format(relative), len(relative), sum(sizes))

    def duplicate(self, path: str, project_number: str, location: str, model_id: str) -> Path:
        """A new registry copy of the registry copy at `path` (a copied model's), for another model."""
        return self._new_copy(
            project_number, location, model_id, lambda staging: shutil.copytree(path, staging, symlinks=True)
        )

    def _new_copy(
        self, project_number: str, location: str, model_id: str, fill: Callable[[Path], object]
    ) -> Path:
        """A registry copy that `fill` writes into a new staging folder (which it creates), then renamed into
        place in one step; the staging folder goes when anything fails."""
        staging = self.root / ".staging" / uuid.uuid4().hex
        staging.parent.mkdir(parents=True, exist_ok=True)
        try:
            fill(staging)
            final = self.root / project_number / location / model_id / uuid.uuid4().hex
            final.parent.mkdir(parents=True, exist_ok=True)
            os.rename(staging, final)  # same filesystem: atomic
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return final

    def remove(self, path: str | Path | None) -> None:
        """Delete a registry copy (only ever one under `root`)."""
        if not path:
            return
        target = Path(path).resolve()
        if self.root.resolve() in target.parents:
            shutil.rmtree(target, ignore_errors=True)
            with contextlib.suppress(OSError):  # other versions remain
                target.parent.rmdir()  # the model's folder, once its last version is gone


__all__ = [
    "CUSTOM",
    "PYTORCH",
    "SKLEARN_JOBLIB",
    "SKLEARN_PICKLE",
    "TENSORFLOW",
    "XGBOOST",
    "ArtifactRegistry",
    "RegisteredArtifacts",
    "detect_format",
]
