"""The job's `service` log: platform messages such as "Job is running.", next to the replicas' logs."""

from __future__ import annotations

import json
from pathlib import Path

from trainworks.kernel.wire import format_timestamp, now_utc


def service_log_path(job_dir: Path) -> Path:
    return job_dir / "service.log"


def log_service(job_dir: Path, message: str, severity: str = "INFO") -> None:
    job_dir.mkdir(parents=True, exist_ok=True)
    entry = {"time": format_timestamp(now_utc()), "severity": severity, "message": message}
    line = json.dumps(entry, ensure_ascii=False)
    with open(service_log_path(job_dir), "a", encoding="utf-8") as handle:
        handle.write(line + "\n")
