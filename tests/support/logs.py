"""What replicas and the platform wrote, read from a job's folder as the server keeps it.

A replica's output is its log (backends/capture.py: `<run dir>/.trainworks-log/`), not a file per stream;
the job's platform messages are the `service` log (jobs/service_log.py). These read them back as text, for
tests that used to read `stdout.log`, `stderr.log` and `service.log`.
"""

from __future__ import annotations

import json
from pathlib import Path

from trainworks.backends.capture import LogReader, read_output
from trainworks.jobs.service_log import service_log_dir


def replica_output(run_dir: Path, stream: str = "stdout") -> str:
    """What a replica wrote on `stream` ("stdout" or "stderr"), every line ended; "" before it started."""
    return read_output(str(run_dir), stream)


def service_messages(job_dir: Path) -> list[dict[str, str]]:
    """The job's platform messages in order, each {"severity", "message"}."""
    return [
        json.loads(record.data)
        for record in LogReader(str(service_log_dir(job_dir))).forward()
        if record.kind == "p"
    ]


def service_text(job_dir: Path) -> str:
    """The job's platform messages, one a line."""
    return "".join(f"{message['message']}\n" for message in service_messages(job_dir))
