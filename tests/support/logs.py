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


def runs_of(job_dir: Path) -> int:
    """How many times a job ran: once, and again for each whole-job restart its platform messages told."""
    return 1 + service_text(job_dir).count("The job will be restarted.")


def assert_ddp_replicas_agree(
    job_dir: Path, tasks: tuple[str, ...] = ("workerpool0-0", "workerpool1-0")
) -> None:
    """The DDP example's replicas (examples/ddp_train.py) each printed their final parameters once a run of
    the job, and the last run's are identical: the gradients were all-reduced. A whole-job restart (a replica
    that crashed with a transient status) runs every replica again; nothing else does. A failure shows the
    platform's messages and the replicas' output."""
    finals = {
        task: [
            json.loads(line.split("done: ", 1)[1])
            for line in replica_output(job_dir / task).splitlines()
            if "done: " in line
        ]
        for task in tasks
    }
    told = service_text(job_dir) + "".join(
        replica_output(job_dir / task, "stderr") + replica_output(job_dir / task) for task in tasks
    )
    runs = runs_of(job_dir)
    assert [len(ends) for ends in finals.values()] == [runs] * len(tasks), told
    assert len({json.dumps(ends[-1]["weight"]) for ends in finals.values()}) == 1, told
