"""The job's `service` log: platform messages such as "Job is running.", next to the replicas' logs.

It is a log like a replica's (backends/capture.py), in the job's folder under the task name `service`, so its
entries interleave with the replicas' by time."""

from __future__ import annotations

from pathlib import Path

from trainworks.backends.capture import log_dir, write_platform_message

#: The task name of the platform's messages, as Vertex AI names them.
SERVICE_TASK = "service"


def service_log_dir(job_dir: Path) -> Path:
    return Path(log_dir(str(job_dir / SERVICE_TASK)))


def log_service(job_dir: Path, message: str, severity: str = "INFO") -> None:
    write_platform_message(str(service_log_dir(job_dir)), message, severity)
