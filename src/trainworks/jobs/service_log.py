"""The job's `service` log: platform messages such as "Job is running.", next to the replicas' logs.

It is a log like a replica's (backends/capture.py), in the job's folder under the task name `service`, so its
entries interleave with the replicas' by time. Only the server writes it: it keeps the writers of the jobs it
logged for last open (opening one reads the log's folder, its limits and its last record: ~1 ms a message on
a busy job start otherwise)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from trainworks.backends.capture import LogWriter, log_dir, platform_record

#: The task name of the platform's messages, as Vertex AI names them.
SERVICE_TASK = "service"
_KEEP_OPEN = 128  # writers (one open file each) of the jobs logged for last

_lock = threading.Lock()
_writers: OrderedDict[str, LogWriter] = OrderedDict()


def service_log_dir(job_dir: Path) -> Path:
    return Path(log_dir(str(job_dir / SERVICE_TASK)))


def log_service(job_dir: Path, message: str, severity: str = "INFO") -> None:
    directory = str(service_log_dir(job_dir))
    with _lock:
        writer = _writers.pop(directory, None) or LogWriter(directory)
        try:
            writer.write(platform_record(writer.now(), message, severity))
        except BaseException:
            writer.close()
            raise
        _writers[directory] = writer
        while len(_writers) > _KEEP_OPEN:
            _writers.popitem(last=False)[1].close()


def forget_service_log(job_dir: Path) -> None:
    """The job's folder is going: close its writer, if open."""
    with _lock:
        writer = _writers.pop(str(service_log_dir(job_dir)), None)
    if writer is not None:
        writer.close()
