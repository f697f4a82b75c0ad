"""How the CLI shows what every kind of job shares: the colours of job states, the `Label: value` rows a
job's summary starts with, and the lines of a job's log."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Protocol

from trainworks.jobs.capacity_label import LEDGER_LABEL, parse_capacity_label
from trainworks.kernel.render import OutputFormat, Resource, header_rows

JOB_STATE_STYLE = {
    "JOB_STATE_SUCCEEDED": "green",
    "JOB_STATE_FAILED": "red",
    "JOB_STATE_CANCELLED": "yellow",
    "JOB_STATE_CANCELLING": "yellow",
    "JOB_STATE_RUNNING": "cyan",
}


class Job(Resource, Protocol):
    """What every kind of job's summary reads of it (CustomJob, HyperparameterTuningJob...)."""

    end_time: datetime | None


def print_log_entry(entry: Mapping[str, Any], fmt: OutputFormat, timestamps: bool = True) -> None:
    """One log entry: `TIME SEVERITY [task] text` for humans (`[task] text` without timestamps; the time to
    the millisecond, UTC), a JSON line for json and yaml."""
    out = sys.stdout
    if fmt == OutputFormat.human:
        prefix = ""
        stamp = str(entry.get("time") or "")
        if timestamps:
            shown = stamp[:23] + "Z" if len(stamp) > 23 else stamp
            prefix = f"{shown} {entry.get('severity', 'DEFAULT'):<7} "
        out.write(f"{prefix}[{entry.get('task', '')}] {entry.get('text', '')}\n")
    else:
        out.write(json.dumps(entry) + "\n")
    out.flush()


def job_rows(job: Job, after_created: list[tuple[str, str]] | None = None) -> list[tuple[str, str]]:
    """The `Label: value` rows every kind of job starts with: name, state, times, error, labels, capacity."""
    from rich.markup import escape

    rows = header_rows(job, JOB_STATE_STYLE, after_created, end_time=job.end_time)
    capacity = job.labels.get(LEDGER_LABEL)
    if capacity:
        steps = [f"{region} {outcome}" for region, outcome in parse_capacity_label(capacity)]
        earlier = ["(earlier attempts)"] if capacity.startswith("more__") else []
        rows.append(("Capacity", escape(" -> ".join(earlier + steps))))
    return rows


__all__ = ["JOB_STATE_STYLE", "Job", "job_rows", "print_log_entry"]
