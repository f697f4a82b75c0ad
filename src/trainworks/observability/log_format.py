"""The server's own log records: plain text (the default) or one JSON object per line (`--log-format json`).

A JSON line holds time (RFC 3339, UTC), level, logger and message, then the record's extra fields (the
access log's method, route, path, status, duration_ms and job) and, for errors, the exception. The
standard logging module with a small formatter is enough; no library is needed for that.

Credentials never reach the log, in either format and in uvicorn's own lines (its WebSocket lines carry the
query string, where the console's shell puts its `key=`): a filter on every handler (`Redactor`) replaces
the server's own tokens, anything shaped like a stored token (`tw_...`), and whatever follows `key=`,
`token=`, `Bearer ` or an API-key header name, in messages, their arguments and exception texts.
"""

from __future__ import annotations

import copy
import json
import logging
import re
import sys
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from types import TracebackType
from typing import Any

FORMATS = ("text", "json")
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REDACTED = "[REDACTED]"
# Attributes every LogRecord has: what is left over in a record's __dict__ came from `extra=`.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}
_SKIPPED = {"color_message"}  # uvicorn's ANSI-coloured copy of the message


# What follows these is a credential whatever it is; stored tokens are recognisable by their prefix. A value
# stops at a backslash too: in a JSON line a quote after it is escaped (`\"`), and the escape must stay.
_VALUE = r"[^&\s\"'#,;\\]+"
_QUOTE = r"(?:\\?[\"'])?"
_CREDENTIAL_PATTERNS = (
    re.compile(r"(?i)([?&;](?:key|api_?key|access_token|token|upload_id)=)" + _VALUE),
    re.compile(r"(?i)(\bbearer\s+)" + _VALUE),
    re.compile(
        r"(?i)((?:x-goog-api-key|authorization)"
        + _QUOTE
        + r"\s*[:=,]\s*"
        + _QUOTE
        + r"(?:bearer\s+|basic\s+)?)"
        + _VALUE
    ),
    re.compile(r"()\btw_[A-Za-z0-9_-]{16,}"),
)


class Redactor(logging.Filter):
    """A handler filter that removes credentials from a record before any formatter sees it."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        super().__init__()
        # Longest first, so a token that contains another is replaced whole.
        self.secrets = sorted({s for s in secrets if s}, key=len, reverse=True)

    def clean(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, REDACTED)
        for pattern in _CREDENTIAL_PATTERNS:
            text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
        return text

    def _value(self, value: Any) -> Any:
        return self.clean(value) if isinstance(value, str) else value

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = self.clean(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(self._value(a) for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: self._value(v) for k, v in record.args.items()}
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.clean(record.exc_text)
        for key, value in list(vars(record).items()):
            if key not in _STANDARD and isinstance(value, str):
                setattr(record, key, self.clean(value))  # `extra=` fields (the access log's path)
        return True


def rfc3339(created: float) -> str:
    stamp = datetime.fromtimestamp(created, tz=UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    def __init__(self, redact: Iterable[str] = ()) -> None:
        super().__init__()
        self.redactor = Redactor(redact)  # again over the whole line: extra fields may be any type

    def format(self, record: logging.LogRecord) -> str:
        body: dict[str, Any] = {
            "time": rfc3339(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in _SKIPPED and not key.startswith("_"):
                body.setdefault(key, value)
        if record.exc_info:
            body["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            body["stack"] = self.formatStack(record.stack_info)
        return self.redactor.clean(json.dumps(body, default=str, ensure_ascii=False))


def configure_logging(log_format: str, level: str, access_log: bool, redact: Iterable[str] = ()) -> None:
    """Set up the root logger of the server process; `access_log`: a line per request (trainworks.access)."""
    if log_format not in FORMATS:
        raise ValueError(f"the log format must be one of {', '.join(FORMATS)}, not {log_format!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(Redactor(redact))
    if log_format == "json":
        handler.setFormatter(JsonFormatter(redact))
    else:
        handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("trainworks.access").setLevel(logging.INFO if access_log else logging.WARNING)
    if log_format == "json":
        _route_everything_through_logging()


def uvicorn_log_config(base: dict[str, Any], redact: Iterable[str] = ()) -> dict[str, Any]:
    """uvicorn's text logging config (`base`) with the Redactor on each of its handlers."""
    config = copy.deepcopy(base)
    config.setdefault("filters", {})["redact"] = {"()": Redactor, "secrets": sorted(set(redact))}
    for handler in config.get("handlers", {}).values():
        handler["filters"] = [*handler.get("filters", []), "redact"]
    return config


def _route_everything_through_logging() -> None:
    """In JSON mode every line on stderr must be JSON: warnings, uncaught exceptions and Optuna's own
    handler go through the root logger too."""
    logging.captureWarnings(True)
    crash = logging.getLogger("trainworks.crash")

    def thread_hook(args: threading.ExceptHookArgs) -> None:
        if args.exc_type is not None and args.exc_value is not None:
            info = (args.exc_type, args.exc_value, args.exc_traceback)
            name = args.thread.name if args.thread is not None else "?"
            crash.error("uncaught exception in thread %s", name, exc_info=info)

    def process_hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        crash.critical("uncaught exception", exc_info=(kind, value, tb))

    threading.excepthook = thread_hook
    sys.excepthook = process_hook
    import optuna  # here: the text format never needs it

    optuna.logging.disable_default_handler()
    optuna.logging.enable_propagation()
