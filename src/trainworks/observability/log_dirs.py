"""Where a custom job's TensorBoard logs are: its AIP_TENSORBOARD_LOG_DIR, and that folder on this host."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from trainworks.config import Settings
from trainworks.contract.environment import output_directories
from trainworks.kernel.errors import failed_precondition


def tensorboard_log_dir(job: dict[str, Any], settings: Settings) -> dict[str, str]:
    """`{"logDir": gs://.../logs/, "localPath": ...}` for a CustomJob as the API returns it.

    localPath is present when the server keeps buckets locally (the folder may not exist until the job
    writes to it); the job's name is kept so clients can say which job it is."""
    spec = job.get("jobSpec") or {}
    base = (spec.get("baseOutputDirectory") or {}).get("outputUriPrefix")
    if not base:
        raise failed_precondition(
            f"The CustomJob {job.get('name', '')} has no jobSpec.baseOutputDirectory, so it has no "
            "AIP_TENSORBOARD_LOG_DIR."
        )
    log_dir = output_directories(base)["AIP_TENSORBOARD_LOG_DIR"]
    body = {"name": str(job.get("name", "")), "logDir": log_dir}
    local = local_path(log_dir, settings)
    if local is not None:
        body["localPath"] = str(local)
    return body


def local_path(uri: str, settings: Settings) -> Path | None:
    """The local folder of a gs:// URI under the bucket root; None for real Cloud Storage or a path that
    would leave the bucket root (`..`)."""
    if settings.gcs_protocol != "file" or not uri.startswith("gs://"):
        return None
    bucket, _, key = uri[len("gs://") :].partition("/")
    if not bucket:
        return None
    root = settings.buckets
    path = (root / bucket / key).resolve()
    return path if path.is_relative_to(root) and path != root else None
