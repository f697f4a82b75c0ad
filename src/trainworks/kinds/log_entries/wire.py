"""A log entry as Cloud Logging's LogEntry (canonical proto3 JSON), from a record of a job's log.

What Vertex AI's logging agent makes of a replica's output: a stdout line is INFO, a stderr line ERROR; a
line that is a JSON object is structured logging: it becomes `jsonPayload`, its `severity` sets the entry's
(and leaves the payload), its `message` stays in the payload, where gcloud reads it. The platform's messages
(task `service`) carry their own severity. Resource: `ml_job` with job_id, task_name and project_id; the job's
labels, and a trial's ID, are the entry's labels.
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from typing import Any

from trainworks.kernel.wire import fraction_digits
from trainworks.kinds.log_entries.store import Entry

#: LogSeverity names in order (google.logging.type.LogSeverity), with their numbers.
SEVERITIES = {
    "DEFAULT": 0,
    "DEBUG": 100,
    "INFO": 200,
    "NOTICE": 300,
    "WARNING": 400,
    "ERROR": 500,
    "CRITICAL": 600,
    "ALERT": 700,
    "EMERGENCY": 800,
}
# What structured-logging libraries write for the same levels (Python's logging, Go's slog, ...).
_ALIASES = {"WARN": "WARNING", "FATAL": "CRITICAL", "TRACE": "DEBUG", "ERR": "ERROR", "INFORMATION": "INFO"}
_STREAM_SEVERITY = {"o": "INFO", "e": "ERROR"}
TRIAL_LABEL = "ml.googleapis.com/trial_id"


def severity_name(value: object) -> str | None:
    """A severity as LogSeverity names it: its name in any case, an alias, or its number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return next((name for name, number in SEVERITIES.items() if number == value), None)
    if isinstance(value, str):
        name = value.strip().upper()
        name = _ALIASES.get(name, name)
        if name in SEVERITIES:
            return name
        if name.isascii() and name.isdigit() and len(name) <= 18:  # int() refuses "²" and 5,000 digits
            return severity_name(int(name))
    return None


def format_second(seconds: int) -> str:
    """RFC 3339 up to the seconds, without the zone: the fraction follows it."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def format_ns(ns: int) -> str:
    """A timestamp in canonical proto3 JSON: 0, 3, 6 or 9 fractional digits, as Cloud Logging's answers."""
    seconds, fraction = divmod(ns, 1_000_000_000)
    return f"{format_second(seconds)}{fraction_digits(fraction)}Z"


def _text(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def payload(entry: Entry) -> tuple[str, dict[str, Any] | str]:
    """(severity, payload): the payload a dict for jsonPayload, else the text for textPayload."""
    record = entry.record
    if entry.dropped is not None:
        return "WARNING", _dropped_text(entry)
    if record.kind == "p":
        try:
            message = json.loads(record.data)
        except ValueError:
            return "INFO", _text(record.data)
        if isinstance(message, dict):
            return severity_name(message.get("severity")) or "INFO", str(message.get("message", ""))
        return "INFO", _text(record.data)
    severity = _STREAM_SEVERITY.get(record.kind, "DEFAULT")
    data = record.data
    if not record.piece and data[:1] == b"{" and data.rstrip()[-1:] == b"}":
        structured = _json_object(data)
        if structured is not None:
            named = severity_name(structured.pop("severity", None))
            return named or severity, structured
    return severity, _text(data)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"{text} is out of range")
    return value


def _json_object(data: bytes) -> dict[str, Any] | None:
    """A line that is a JSON object, or None: Python's parser also takes NaN, Infinity, numbers beyond a
    double and escapes of lone surrogates, which no JSON answer can carry; such a line stays text."""
    try:
        structured = json.loads(data, parse_constant=_no_constant, parse_float=_finite)
    except (ValueError, RecursionError):
        return None
    if not isinstance(structured, dict):
        return None
    if b"\\ud" in data.lower():
        try:
            json.dumps(structured, ensure_ascii=False).encode()
        except UnicodeEncodeError:
            return None
    return structured


def _dropped_text(entry: Entry) -> str:
    dropped = entry.dropped or {}
    lines, size = int(dropped.get("lines", 0)), int(dropped.get("bytes", 0))
    limit = int(dropped.get("max_bytes", 0))
    return (
        f"[trainworks] {lines} lines ({_size(size)}) of {entry.source.task}'s earliest log were dropped: "
        f"a replica keeps its newest {_size(limit)} (serve --log-limit-replica, --log-limit-job)."
    )


def _size(value: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value} {unit}" if unit == "bytes" else f"{value:.1f} {unit}"
        value /= 1024  # type: ignore[assignment]
    return f"{value} bytes"


def log_name(entry: Entry) -> str:
    """Vertex AI's log names: the task's (`logs/workerpool0-0`), the platform's per job."""
    project = entry.job.project_id
    if entry.source.task == "service":
        return f"projects/{project}/logs/ml.googleapis.com%2F{entry.job.job_id}"
    return f"projects/{project}/logs/{entry.source.task}"


def entry_labels(entry: Entry) -> dict[str, str]:
    labels = dict(entry.job.labels)
    if entry.source.trial_id:
        labels[TRIAL_LABEL] = entry.source.trial_id
    return labels


def to_log_entry(
    entry: Entry, severity: str | None = None, body: dict[str, Any] | str | None = None
) -> dict[str, Any]:
    """The LogEntry JSON of `entry` (severity and payload as `payload` gives them, when already known)."""
    if severity is None or body is None:
        severity, body = payload(entry)
    stamp = format_ns(entry.ns)
    out: dict[str, Any] = {"insertId": entry.insert_id}
    if isinstance(body, dict):
        out["jsonPayload"] = body
    else:
        out["textPayload"] = body
    out["resource"] = {
        "type": "ml_job",
        "labels": {
            "job_id": entry.job.job_id,
            "task_name": entry.source.task,
            "project_id": entry.job.project_id,
        },
    }
    out["timestamp"] = stamp
    if severity != "DEFAULT":
        out["severity"] = severity
    labels = entry_labels(entry)
    if labels:
        out["labels"] = labels
    out["logName"] = log_name(entry)
    record = entry.record
    if record.piece:
        out["split"] = {"uid": f"{entry.source.key}.{record.first:012x}", "index": record.index}
        if record.index == 0:
            del out["split"]["index"]  # proto3 JSON leaves out a zero
    out["receiveTimestamp"] = stamp
    return out
